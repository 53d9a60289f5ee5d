// cpu_matmul_expert: llama.cpp's ggml_mul_mat_id per-output arithmetic (see matmul_expert.h). Activations are
// converted once per call into the weight type's vec_dot format; threads take contiguous ranges of output rows.
// Invariant: every y[t, o] comes from one call of a per-output function below (or of cpu_matmul's tile
// kernels, which have the same property), so no split of rows or tokens changes its bits.
#include "backend/cpu/matmul_expert.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/vec_dot.h"
#include "backend/cpu/vec_dot_avx2.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

namespace {

// ((s0 + s2) + (s1 + s3)) lane-wise, then lanes (0..3) + (4..7), then two horizontal adds (GGML_F32x8_REDUCE).
float reduce_4x8_ref(const float s[4][8]) {
  float v[8], t[4];
  for (int l = 0; l < 8; ++l) v[l] = (s[0][l] + s[2][l]) + (s[1][l] + s[3][l]);
  for (int l = 0; l < 4; ++l) t[l] = v[l] + v[l + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

// The integer parts of one q4_K x q8_K super-block: isum = sum_j sc_j (q . x)_j, msum = sum_j m_j xsum_j.
void q4_K_block_ints_ref(const block_q4_K& w, const block_q8_K& x, int32_t* isum, int32_t* msum) {
  int32_t is = 0, ms = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q4_K_scale_min(j, w.scales, &sc, &m);
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      const uint8_t byte = w.qs[32 * (j / 2) + l];
      const int q = (j % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      dot += q * x.qs[32 * j + l];
    }
    is += (int32_t)sc * dot;
    ms += (int32_t)m * (x.bsums[2 * j] + x.bsums[2 * j + 1]);
  }
  *isum = is;
  *msum = ms;
}

}  // namespace

float expert_dot_f32_ref(int64_t n, const float* w, const float* x) {
  const int64_t np = n & ~(int64_t)31;
  float s[4][8] = {};
  for (int64_t i = 0; i < np; i += 32)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 8; ++l) s[j][l] = std::fma(w[i + 8 * j + l], x[i + 8 * j + l], s[j][l]);
  float sum = np > 0 ? reduce_4x8_ref(s) : 0.0f;
  // as ggml's compiled tail: 8-element chunks (and one 4-element chunk) of rounded products, then fma
  const int64_t n_unfused = np + (n - np) / 8 * 8 + ((n - np) % 8 >= 4 ? 4 : 0);
  int64_t i = np;
  for (; i < n_unfused; ++i) {
    volatile float p = w[i] * x[i];  // volatile: keep the product rounded (no contraction into an fma)
    sum = sum + p;
  }
  for (; i < n; ++i) sum = std::fma(w[i], x[i], sum);
  return sum;
}

float expert_dot_f16_ref(int64_t n, const uint16_t* w, const uint16_t* x) {
  const int64_t np = n & ~(int64_t)31;
  float s[4][8] = {};
  for (int64_t i = 0; i < np; i += 32)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 8; ++l) {
        const int64_t k = i + 8 * j + l;
        s[j][l] = std::fma(fp16_to_f32(w[k]), fp16_to_f32(x[k]), s[j][l]);
      }
  double sum = np > 0 ? (double)reduce_4x8_ref(s) : 0.0;
  for (int64_t i = np; i < n; ++i) sum += (double)(fp16_to_f32(w[i]) * fp16_to_f32(x[i]));  // exact products
  return (float)sum;
}

float expert_dot_q4_K_gemv_ref(int64_t n, const void* wv, const void* xv) {
  const block_q4_K* w = (const block_q4_K*)wv;
  const block_q8_K* x = (const block_q8_K*)xv;
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    int32_t isum, msum;
    q4_K_block_ints_ref(w[b], x[b], &isum, &msum);
    const float d = fp16_to_f32(w[b].d) * x[b].d;
    const float dmin = fp16_to_f32(w[b].dmin) * x[b].d;
    acc = std::fma((float)isum, d, acc);
    accm = std::fma((float)msum, dmin, accm);
  }
  return acc - accm;
}

namespace {

#if SPINDLE_HAVE_X86_KERNELS
SPINDLE_AVX2 float dot_f16_avx2(int64_t n, const uint16_t* w, const uint16_t* x) {
  const int64_t np = n & ~(int64_t)31;
  double sum = 0.0;
  if (np > 0) {
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < np; i += 32)
      for (int j = 0; j < 4; ++j) {
        const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(w + i + 8 * j)));
        const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(x + i + 8 * j)));
        s[j] = _mm256_fmadd_ps(a, b, s[j]);
      }
    const __m256 v = _mm256_add_ps(_mm256_add_ps(s[0], s[2]), _mm256_add_ps(s[1], s[3]));
    const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h = _mm_hadd_ps(t, t);
    sum = (double)_mm_cvtss_f32(_mm_hadd_ps(h, h));
  }
  for (int64_t i = np; i < n; ++i) sum += (double)(fp16_to_f32(w[i]) * fp16_to_f32(x[i]));  // exact products
  return (float)sum;
}

// Sum of 8 int32 lanes (exact).
SPINDLE_AVX2 inline int32_t hsum_i32_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// One q4_K weight row against nt (<= 4) q8_K activation rows: y[t] = expert_dot_q4_K_gemv_ref(row, x_t).
// Integer sums are exact (maddubs pairs |15 * 128 * 2| < 2^15), so only the two f32 fma chains carry rounding.
SPINDLE_AVX2 void q4_K_gemv_row_avx2(int64_t nb, const block_q4_K* w, const block_q8_K* const* x, int nt,
                                     float* y) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m128 acc[4], accm[4];
  for (int t = 0; t < nt; ++t) acc[t] = accm[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) q4_K_scale_min(j, w[b].scales, &sc[j], &m[j]);
    __m256i q[8];  // sub-block j's 32 nibbles as bytes
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = _mm256_loadu_si256((const __m256i*)(w[b].qs + 32 * c));
      q[2 * c] = _mm256_and_si256(raw, m4);
      q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
    }
    const float wd = fp16_to_f32(w[b].d), wdmin = fp16_to_f32(w[b].dmin);
    for (int t = 0; t < nt; ++t) {
      const block_q8_K& xb = x[t][b];
      __m256i isum = _mm256_setzero_si256();
      int32_t msum = 0;
      for (int j = 0; j < 8; ++j) {
        const __m256i xv = _mm256_loadu_si256((const __m256i*)(xb.qs + 32 * j));
        const __m256i p = _mm256_maddubs_epi16(q[j], xv);
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16((int16_t)sc[j])));
        msum += (int32_t)m[j] * (xb.bsums[2 * j] + xb.bsums[2 * j + 1]);
      }
      const __m128 d = _mm_set_ss(wd * xb.d), dmin = _mm_set_ss(wdmin * xb.d);
      acc[t] = _mm_fmadd_ss(_mm_set_ss((float)hsum_i32_avx2(isum)), d, acc[t]);
      accm[t] = _mm_fmadd_ss(_mm_set_ss((float)msum), dmin, accm[t]);
    }
  }
  for (int t = 0; t < nt; ++t) y[t] = _mm_cvtss_f32(_mm_sub_ss(acc[t], accm[t]));
}
#endif

struct expert_plan {
  ggml_type wtype;
  const uint8_t* w;     // [n_out, w_row] bytes
  size_t w_row;
  const uint8_t* act;   // [n_tokens, act_row] bytes in the activation format
  size_t act_row;
  int64_t n_out, n_in, n_tokens;
  float* y;             // [n_tokens, n_out]
};

// Outputs of rows [r0, r1) for every token.
void expert_rows(const expert_plan& p, int64_t r0, int64_t r1) {
#if SPINDLE_HAVE_X86_KERNELS
  for (int64_t o = r0; o < r1; ++o) {
    const uint8_t* wr = p.w + o * p.w_row;
    if (p.wtype == ggml_type::Q4_K) {
      for (int64_t t0 = 0; t0 < p.n_tokens; t0 += 4) {
        const int nt = (int)std::min<int64_t>(4, p.n_tokens - t0);
        const block_q8_K* xs[4];
        float out[4];
        for (int t = 0; t < nt; ++t) xs[t] = (const block_q8_K*)(p.act + (t0 + t) * p.act_row);
        q4_K_gemv_row_avx2(p.n_in / QK_K, (const block_q4_K*)wr, xs, nt, out);
        for (int t = 0; t < nt; ++t) p.y[(t0 + t) * p.n_out + o] = out[t];
      }
    } else if (p.wtype == ggml_type::F16) {
      for (int64_t t = 0; t < p.n_tokens; ++t)
        p.y[t * p.n_out + o] = dot_f16_avx2(p.n_in, (const uint16_t*)wr, (const uint16_t*)(p.act + t * p.act_row));
    } else {  // F32
      for (int64_t t = 0; t < p.n_tokens; ++t)
        p.y[t * p.n_out + o] = ops_dot_f32_avx2((const float*)wr, (const float*)(p.act + t * p.act_row), p.n_in);
    }
  }
#else
  (void)p; (void)r0; (void)r1;
#endif
}

// True when this file has its own kernel for (level, type, shape); otherwise cpu_matmul computes the same
// per-output arithmetic as ggml_mul_mat_id (or, at the scalar level, the plain reference sums).
bool has_expert_kernel(cpu_level level, ggml_type wtype, int64_t n_out) {
  if (!SPINDLE_HAVE_X86_KERNELS || (int)level < (int)cpu_level::avx2) return false;
  if (wtype == ggml_type::F32 || wtype == ggml_type::F16) return true;
  return wtype == ggml_type::Q4_K && n_out % 8 == 0;  // llama.cpp repacks only then
}

}  // namespace

void cpu_matmul_expert_at_level(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                                int64_t n_in, const float* x, int64_t n_tokens, float* y) {
  if (!has_expert_kernel(level, wtype, n_out)) {
    cpu_matmul_at_level(level, pool, wtype, W, n_out, n_in, x, n_tokens, y);
    return;
  }
  if (n_out < 0 || n_in < 0 || n_tokens < 0) throw error("cpu_matmul_expert: negative dimension");
  const ggml_type act_type = cpu_activation_type(wtype);
  expert_plan p;
  p.wtype = wtype;
  p.w_row = cpu_row_bytes(wtype, n_in);  // throws if n_in is not a multiple of the block size
  p.act_row = cpu_row_bytes(act_type, n_in);
  checked_mul(checked_mul((uint64_t)n_out, (uint64_t)n_tokens, "cpu_matmul_expert output"), 4, "output");
  if (n_out == 0 || n_tokens == 0) return;
  if (W == nullptr || x == nullptr || y == nullptr) throw error("cpu_matmul_expert: null buffer");
  std::vector<uint8_t> scratch;
  if (act_type == ggml_type::F32) {
    p.act = (const uint8_t*)x;
  } else {
    scratch.resize((size_t)checked_mul(p.act_row, (uint64_t)n_tokens, "cpu_matmul_expert activations"));
    for (int64_t t = 0; t < n_tokens; ++t)
      cpu_convert_activation(act_type, x + t * n_in, scratch.data() + t * p.act_row, n_in);
    p.act = scratch.data();
  }
  p.w = (const uint8_t*)W;
  p.n_out = n_out;
  p.n_in = n_in;
  p.n_tokens = n_tokens;
  p.y = y;
  const uint64_t work = (uint64_t)n_out * (uint64_t)n_tokens * (uint64_t)n_in;
  if (pool.size() == 1 || work < (1u << 16) || n_out < 2) {
    expert_rows(p, 0, n_out);
    return;
  }
  pool.run([&](int ith, int nth) {
    int64_t r0, r1;
    thread_pool::split(n_out, ith, nth, &r0, &r1);
    if (r0 < r1) expert_rows(p, r0, r1);
  });
}

void cpu_matmul_expert(thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out, int64_t n_in,
                       const float* x, int64_t n_tokens, float* y) {
  cpu_matmul_expert_at_level(cpu_active_level(), pool, wtype, W, n_out, n_in, x, n_tokens, y);
}

}  // namespace spindle
