// AVX2 + FMA float kernels that reproduce, bit for bit, what llama.cpp's x86 CPU backend (its AVX2 "haswell"
// build, ggml-cpu) computes for rope, the non-flash attention path and SwiGLU (see ops.h for the contract); the
// ViT encoder's layer_norm and GELU kernels at the end keep a fixed order of their own (not llama.cpp's bits).
// Invariant: every output is a fixed sequence of IEEE operations of its own inputs (groups of 8 are aligned
// to element 0 of a row), so results never depend on threads or batch size; compiled per function with
// __attribute__((target)), so the baseline binary still runs on CPUs without AVX2 (they never call these).
#include "backend/cpu/ops.h"

#include <cmath>
#include <vector>

#include "backend/cpu/attention_avx2_inl.h"
#include "backend/cpu/expf_avx2_inl.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {

int64_t ops_attention_scratch(int64_t n_kv, int32_t head_dim_v) {
  return ((n_kv + 7) / 8) * 8 + 8 * (int64_t)head_dim_v;
}

#if SPINDLE_HAVE_X86_KERNELS

namespace {

// Sum of 8 lanes: (v0 + v4) + (v2 + v6) + ((v1 + v5) + (v3 + v7)), as ggml's AVX hsum.
SPINDLE_AVX2 inline float hsum8(__m256 v) { return hsum_avx2(v); }

}  // namespace

// sum_i a[i] * b[i] as ggml_vec_dot_f32 (AVX2 build): 4 accumulators of 8 lanes over whole 32-element steps,
// reduced ((s0 + s2) + (s1 + s3)) then across lanes with two hadds; the rest as compiled there: 8-element
// chunks of rounded products added one by one, then one 4-element chunk likewise, then fused multiply-adds.
SPINDLE_AVX2 float ops_dot_f32_avx2(const float* a, const float* b, int64_t n) {
  const int64_t np = n & ~(int64_t)31;
  float sum = 0.0f;
  if (np > 0) {
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < np; i += 32)
      for (int j = 0; j < 4; ++j)
        s[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), s[j]);
    const __m256 v = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3]));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h = _mm_hadd_ps(t, t);
    sum = _mm_cvtss_f32(_mm_hadd_ps(h, h));
  }
  // explicit mul / add intrinsics: plain `s += a * b` would be contracted into an fma in this target
  __m128 s = _mm_set_ss(sum);
  int64_t i = np;
  const int64_t n_unfused = np + (n - np) / 8 * 8 + ((n - np) % 8 >= 4 ? 4 : 0);
  for (; i < n_unfused; ++i) s = _mm_add_ss(s, _mm_mul_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i])));
  for (; i < n; ++i) s = _mm_fmadd_ss(_mm_set_ss(a[i]), _mm_set_ss(b[i]), s);
  return _mm_cvtss_f32(s);
}

// ggml_compute_forward_soft_max_f32 for one row without mask (AVX2 build): x * scale, the max, ggml_v_expf
// over groups of 8 from element 0 and libm expf for the n % 8 rest, the groups' f32 lane sums and the rest
// added in double, then every element times (float)(1 / sum).
SPINDLE_AVX2 void ops_softmax_row_avx2(float* x, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= scale;
    max = x[i] > max ? x[i] : max;
  }
  double sum = 0.0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = expf8(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_set1_ps(max)));
    _mm256_storeu_ps(x + i, e);
    sum += (double)hsum8(e);
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += (double)x[i];
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) x[j] *= inv;
}

// Pairs as ggml's rotate_pairs compiled with FMA contraction (x0 c - x1 s, x0 s + x1 c, the left product
// fused): x0' = fma(x0, c, -(x1 s)), x1' = fma(x0, s, x1 c), for adjacent (normal) and neox pairs alike.
SPINDLE_AVX2 void ops_rope_head_avx2(float* x, const float* cache, int32_t n_rot, bool neox) {
  const int32_t half = n_rot / 2;
  for (int32_t j = 0; j < half; ++j) {
    const __m128 c = _mm_set_ss(cache[2 * j + 0]), s = _mm_set_ss(cache[2 * j + 1]);
    float* pa = neox ? x + j : x + 2 * j;
    float* pb = neox ? x + j + half : x + 2 * j + 1;
    const __m128 x0 = _mm_set_ss(*pa), x1 = _mm_set_ss(*pb);
    const __m128 a = _mm_fmsub_ss(x0, c, _mm_mul_ss(x1, s));
    const __m128 b = _mm_fmadd_ss(x0, s, _mm_mul_ss(x1, c));
    *pa = _mm_cvtss_f32(a);
    *pb = _mm_cvtss_f32(b);
  }
}

// out[d] = sum_j p[j] v[j, d] as tinyBLAS sums it: lane accumulators acc_{j % 8}[d] = fma(v[j, d], p[j], acc)
// with j ascending, then ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)). For each 8 output
// dimensions the 8 accumulators live in registers over all j (the same fmas in the same order per lane).
// tail: scratch of 8 * head_dim_v floats for the head_dim_v % 8 last dimensions.
template <class Rows>
SPINDLE_AVX2 static void kqv_rows_avx2(const float* p, Rows v, int64_t n_kv, int32_t head_dim_v, float* tail,
                                       float* out) {
  const int32_t d8 = head_dim_v - head_dim_v % 8;
  const int64_t j8 = n_kv - n_kv % 8;
  for (int32_t d = 0; d < d8; d += 8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t j = 0; j < j8; j += 8) {
      a0 = _mm256_fmadd_ps(load8(v(j + 0) + d), _mm256_broadcast_ss(p + j + 0), a0);
      a1 = _mm256_fmadd_ps(load8(v(j + 1) + d), _mm256_broadcast_ss(p + j + 1), a1);
      a2 = _mm256_fmadd_ps(load8(v(j + 2) + d), _mm256_broadcast_ss(p + j + 2), a2);
      a3 = _mm256_fmadd_ps(load8(v(j + 3) + d), _mm256_broadcast_ss(p + j + 3), a3);
      a4 = _mm256_fmadd_ps(load8(v(j + 4) + d), _mm256_broadcast_ss(p + j + 4), a4);
      a5 = _mm256_fmadd_ps(load8(v(j + 5) + d), _mm256_broadcast_ss(p + j + 5), a5);
      a6 = _mm256_fmadd_ps(load8(v(j + 6) + d), _mm256_broadcast_ss(p + j + 6), a6);
      a7 = _mm256_fmadd_ps(load8(v(j + 7) + d), _mm256_broadcast_ss(p + j + 7), a7);
    }
    __m256 a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    for (int64_t j = j8; j < n_kv; ++j)
      a[j % 8] = _mm256_fmadd_ps(load8(v(j) + d), _mm256_broadcast_ss(p + j), a[j % 8]);
    const __m256 s04 = _mm256_add_ps(a[0], a[4]), s15 = _mm256_add_ps(a[1], a[5]);
    const __m256 s26 = _mm256_add_ps(a[2], a[6]), s37 = _mm256_add_ps(a[3], a[7]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
  }
  if (d8 == head_dim_v) return;
  const int32_t nt = head_dim_v - d8;  // tail dimensions, scalar fmas
  for (int64_t i = 0; i < 8 * (int64_t)nt; ++i) tail[i] = 0.0f;
  for (int64_t j = 0; j < n_kv; ++j) {
    float* a = tail + (j % 8) * nt;
    const auto vj = v(j) + d8;
    for (int32_t d = 0; d < nt; ++d)
      a[d] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(kv_to_f32(vj[d])), _mm_set_ss(p[j]), _mm_set_ss(a[d])));
  }
  for (int32_t d = 0; d < nt; ++d) {
    const float s04 = tail[0 * nt + d] + tail[4 * nt + d], s15 = tail[1 * nt + d] + tail[5 * nt + d];
    const float s26 = tail[2 * nt + d] + tail[6 * nt + d], s37 = tail[3 * nt + d] + tail[7 * nt + d];
    out[d8 + d] = (s04 + s26) + (s15 + s37);
  }
}

SPINDLE_AVX2 static void kqv_avx2(const float* p, const kv_rows& v, int64_t n_kv, int32_t head_dim_v, float* tail,
                                  float* out) {
  with_kv_elem(v.type, [&](auto e) {
    using E = decltype(e);
    if (v.table) kqv_rows_avx2(p, table_of<E>(v), n_kv, head_dim_v, tail, out);
    else kqv_rows_avx2(p, strided_of<E>(v), n_kv, head_dim_v, tail, out);
  });
}

// ops_dot_f32_avx2(a, b, n) for n % 32 == 0 with a's values widened from their type (P: kv_elem<E>::ptr; the
// same fmas and reduction).
template <class P>
SPINDLE_AVX2 static float dot32_avx2(P a, const float* b, int32_t n) {
  __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int32_t i = 0; i < n; i += 32)
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) s[m] = _mm256_fmadd_ps(load8(a + i + 8 * m), _mm256_loadu_ps(b + i + 8 * m), s[m]);
  return dot32_reduce(s[0], s[1], s[2], s[3]);
}

// p[j] = ops_dot_f32_avx2(k_j, q, n) * scale for every position, n % 32 == 0: two positions per step (two
// independent chains) with q's loads shared; each dot's operations are ops_dot_f32_avx2's.
template <class Rows>
SPINDLE_AVX2 static void qk_dots32_rows_avx2(const float* q, Rows k, int64_t n_kv, int32_t n, float scale, float* p) {
  int64_t j = 0;
  for (; j + 2 <= n_kv; j += 2) {
    const auto a = k(j), b = k(j + 1);
    __m256 s[4], t[4];
    for (int m = 0; m < 4; ++m) s[m] = t[m] = _mm256_setzero_ps();
    for (int32_t i = 0; i < n; i += 32) {
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        const __m256 qv = _mm256_loadu_ps(q + i + 8 * m);
        s[m] = _mm256_fmadd_ps(load8(a + i + 8 * m), qv, s[m]);
        t[m] = _mm256_fmadd_ps(load8(b + i + 8 * m), qv, t[m]);
      }
    }
    p[j] = dot32_reduce(s[0], s[1], s[2], s[3]) * scale;
    p[j + 1] = dot32_reduce(t[0], t[1], t[2], t[3]) * scale;
  }
  for (; j < n_kv; ++j) p[j] = dot32_avx2(k(j), q, n) * scale;
}

SPINDLE_AVX2 static void qk_dots32_avx2(const float* q, const kv_rows& k, int64_t n_kv, int32_t n, float scale,
                                        float* p) {
  with_kv_elem(k.type, [&](auto e) {
    using E = decltype(e);
    if (k.table) qk_dots32_rows_avx2(q, table_of<E>(k), n_kv, n, scale, p);
    else qk_dots32_rows_avx2(q, strided_of<E>(k), n_kv, n, scale, p);
  });
}

// One K row as f32 for the dims the 32-wide kernels do not cover: f32 rows in place, the others widened into wide
// (8 at a time with load8, the rest one by one: the same exact values). P: kv_elem<E>::ptr.
template <class P>
SPINDLE_AVX2 static void widen_row(P x, int32_t n, float* out) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load8(x + i));
  for (; i < n; ++i) out[i] = kv_to_f32(x[i]);
}

SPINDLE_AVX2 static const float* k_row_f32(const kv_rows& k, int64_t j, int32_t n, std::vector<float>& wide) {
  if (k.type == kv_type::f32) return k.row_as<float>(j);
  if (wide.size() < (size_t)n) wide.resize((size_t)n);
  with_kv_elem(k.type, [&](auto e) { widen_row(k.row_as<decltype(e)>(j), n, wide.data()); });
  return wide.data();
}

// soft_max_ext of one row of scaled scores as llama.cpp's AVX2 build: the max, ggml_v_expf over 8-groups aligned
// at position 0 with masked lanes exactly 0, the groups' f32 lane sums added in double, times (float)(1 / sum).
SPINDLE_AVX2 void ops_attention_softmax_avx2(float* p, int64_t n_kv) {
  const int64_t n_pad = ((n_kv + 7) / 8) * 8;
  float max = -INFINITY;
  for (int64_t j = 0; j < n_kv; ++j) max = p[j] > max ? p[j] : max;
  double sum = 0.0;
  const __m256 vmax = _mm256_set1_ps(max);
  for (int64_t g = 0; g < n_pad; g += 8) {
    const int valid = (int)(n_kv - g < 8 ? n_kv - g : 8);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane));
    const __m256 s = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_loadu_ps(p + g), keep);
    const __m256 e = _mm256_and_ps(expf8(_mm256_sub_ps(s, vmax)), keep);  // masked lanes: exactly 0
    _mm256_storeu_ps(p + g, e);
    sum += (double)hsum8(e);
  }
  const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
  for (int64_t g = 0; g < n_pad; g += 8) _mm256_storeu_ps(p + g, _mm256_mul_ps(_mm256_loadu_ps(p + g), inv));
}

// llama.cpp's non-flash attention for one query head: kq = ggml_vec_dot_f32(k_j, q); soft_max_ext
// (kq * scale, max, ggml_v_expf over 8-groups aligned at position 0 with masked lanes 0, sum of the groups'
// f32 lane sums in double, times (float)(1 / sum)); kqv as llamafile's tinyBLAS F32 gemm: per output
// dimension 8 lane accumulators (position j in lane j % 8) of fma(v, p, acc), then the 8-lane sum.
SPINDLE_AVX2 void ops_attention_head_kv_avx2(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv,
                                             int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch,
                                             float* out) {
  const int64_t n_pad = ((n_kv + 7) / 8) * 8;
  float* p = scratch;           // [n_pad]
  float* acc = scratch + n_pad;  // [8, head_dim_v]
  if (head_dim_k % 32 == 0) {
    qk_dots32_avx2(q, k, n_kv, head_dim_k, scale, p);
  } else {
    thread_local std::vector<float> wide;
    for (int64_t j = 0; j < n_kv; ++j) p[j] = ops_dot_f32_avx2(k_row_f32(k, j, head_dim_k, wide), q, head_dim_k) * scale;
  }
  ops_attention_softmax_avx2(p, n_kv);
  kqv_avx2(p, v, n_kv, head_dim_v, acc, out);
}

void ops_attention_head_avx2(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                             int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch,
                             float* out) {
  ops_attention_head_kv_avx2(q, kv_rows{k, k_stride}, kv_rows{v, v_stride}, n_kv, head_dim_k, head_dim_v, scale,
                             scratch, out);
}

// ggml_vec_swiglu_f32 (AVX2 build): groups of 8 from element 0 use x / (1 + ggml_v_expf(0 - x)) * up, the
// remaining n % 8 elements x / (1 + expf(-x)) * up.
SPINDLE_AVX2 void ops_swiglu_avx2(const float* gate, const float* up, float* y, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, expf8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) y[i] = ops_silu(gate[i]) * up[i];
}

namespace {

// Lanes [0, m) set, for the masked loads and stores of a row's last m < 8 elements.
SPINDLE_AVX2 inline __m256i first_lanes(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// 8 floats at p + i, or (past n8, the row's rest) the lanes of `rest` with the others 0; stored likewise.
SPINDLE_AVX2 inline __m256 load_rest(const float* p, int64_t i, int64_t n8, __m256i rest) {
  return i < n8 ? _mm256_loadu_ps(p + i) : _mm256_maskload_ps(p + i, rest);
}
SPINDLE_AVX2 inline void store_rest(float* p, int64_t i, int64_t n8, __m256i rest, __m256 v) {
  if (i < n8) _mm256_storeu_ps(p + i, v);
  else _mm256_maskstore_ps(p + i, rest, v);
}

// Sum of 4 + 4 double lanes: ((a0 + b0) + (a2 + b2)) + ((a1 + b1) + (a3 + b3)).
SPINDLE_AVX2 inline double hsum_pd2(__m256d a, __m256d b) {
  const __m256d s = _mm256_add_pd(a, b);
  const __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}

// acc += the 8 floats of v as doubles (lanes 0..3 into lo, 4..7 into hi).
SPINDLE_AVX2 inline void add_pd8(__m256 v, __m256d& lo, __m256d& hi) {
  lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

// gelu(x) = x / (1 + exp(-2u)), -2u = x * (-2 sqrt(2/pi)) * (1 + 0.044715 x^2) (see ops_gelu).
struct gelu_lanes {
  SPINDLE_AVX2 __m256 operator()(__m256 v) const {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 t = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v), v, one);
    const __m256 e = expf8(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f * 0.79788456080286535588f), v), t));
    return _mm256_div_ps(v, _mm256_add_ps(one, e));
  }
};

// gelu_quick(x) = x / (1 + exp(-1.702 x)).
struct gelu_quick_lanes {
  SPINDLE_AVX2 __m256 operator()(__m256 v) const {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(v, _mm256_add_ps(one, expf8(_mm256_mul_ps(_mm256_set1_ps(-1.702f), v))));
  }
};

// y = f(x) over groups of 8 from element 0; the last n % 8 elements through the same lanes, masked.
template <class F>
SPINDLE_AVX2 inline void map8(const float* x, float* y, int64_t n, F f) {
  const int64_t n8 = n - n % 8;
  const __m256i rest = first_lanes(n % 8);
  for (int64_t i = 0; i < n; i += 8) store_rest(y, i, n8, rest, f(load_rest(x, i, n8, rest)));
}

}  // namespace

// ops_layer_norm_row: the two sums over 8-groups in 4 + 4 double lanes (masked rest lanes add exactly 0), the
// products v * v rounded to f32 first; then y = v * scale [* w] [+ b] with separate roundings.
SPINDLE_AVX2 void ops_layer_norm_row_avx2(const float* x, const float* w, const float* b, float* y, int64_t n,
                                          float eps) {
  if (n <= 0) return;
  const int64_t n8 = n - n % 8;
  const __m256i rest = first_lanes(n % 8);
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  for (int64_t i = 0; i < n; i += 8) add_pd8(load_rest(x, i, n8, rest), lo, hi);
  const __m256 mean = _mm256_set1_ps((float)(hsum_pd2(lo, hi) / (double)n));
  lo = hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    __m256 v = _mm256_sub_ps(load_rest(x, i, n8, rest), mean);
    if (i >= n8) v = _mm256_and_ps(v, _mm256_castsi256_ps(rest));  // lanes past the row: exactly 0
    store_rest(y, i, n8, rest, v);
    add_pd8(_mm256_mul_ps(v, v), lo, hi);
  }
  const __m256 scale = _mm256_set1_ps(1.0f / std::sqrt((float)(hsum_pd2(lo, hi) / (double)n) + eps));
  for (int64_t i = 0; i < n; i += 8) {
    __m256 t = _mm256_mul_ps(load_rest(y, i, n8, rest), scale);
    if (w) t = _mm256_mul_ps(t, load_rest(w, i, n8, rest));
    if (b) t = _mm256_add_ps(t, load_rest(b, i, n8, rest));
    store_rest(y, i, n8, rest, t);
  }
}

SPINDLE_AVX2 void ops_gelu_avx2(const float* x, float* y, int64_t n) { map8(x, y, n, gelu_lanes{}); }
SPINDLE_AVX2 void ops_gelu_quick_avx2(const float* x, float* y, int64_t n) { map8(x, y, n, gelu_quick_lanes{}); }

#else  // no x86 kernels: never called (cpu_level_supported(avx2) is false)

void ops_rope_head_avx2(float* x, const float* cache, int32_t n_rot, bool neox) {
  ops_rope_head(x, cache, n_rot, neox);
}
void ops_attention_head_avx2(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                             int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch,
                             float* out) {
  ops_attention_head(q, k, k_stride, v, v_stride, n_kv, head_dim_k, head_dim_v, scale, scratch, out);
}
void ops_attention_head_kv_avx2(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv,
                                int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch, float* out) {
  ops_attention_head_kv(q, k, v, n_kv, head_dim_k, head_dim_v, scale, scratch, out);
}
void ops_swiglu_avx2(const float* gate, const float* up, float* y, int64_t n) { ops_swiglu(gate, up, y, n); }
void ops_layer_norm_row_avx2(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  ops_layer_norm_row(x, w, b, y, n, eps);
}
void ops_gelu_avx2(const float* x, float* y, int64_t n) { ops_gelu_vec(x, y, n); }
void ops_gelu_quick_avx2(const float* x, float* y, int64_t n) { ops_gelu_quick_vec(x, y, n); }
float ops_dot_f32_avx2(const float* a, const float* b, int64_t n) { return ops_dot_f32(a, b, n); }
void ops_softmax_row_avx2(float* x, int64_t n, float scale) { ops_softmax_row(x, n, scale); }
void ops_attention_softmax_avx2(float* p, int64_t n_kv) { ops_softmax_row(p, n_kv, 1.0f); }

#endif

}  // namespace spindle
