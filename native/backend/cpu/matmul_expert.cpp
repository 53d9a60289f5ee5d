// cpu_matmul_expert: llama.cpp's ggml_mul_mat_id per-output arithmetic (see matmul_expert.h). Activations are
// converted once per call into the weight type's vec_dot format. Threads take chunks of 16 tokens (many tokens:
// each converts and computes its chunks) or contiguous ranges of output rows (of 8-row groups with a packed x8
// copy: q4_K through matmul_expert_packed.cpp, other types through cpu_matmul's packed kernels).
// Invariant: every y[t, o] comes from one call of a per-output function below (or of cpu_matmul's tile /
// packed kernels, which have the same property), so no split of rows or tokens changes its bits.
#include "backend/cpu/matmul_expert.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/repack.h"
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

constexpr int64_t k_tokens_per_chunk = 16;  // tokens a thread takes at a time in token-split matmuls

struct expert_plan {
  ggml_type wtype;
  const uint8_t* w;     // [n_out, w_row] bytes
  size_t w_row;
  const uint8_t* wp;    // [n_out / 8] packed x8 groups of wp_group bytes, or null
  size_t wp_group;
  packed_kernel pk;     // with wp and a type other than Q4_K: cpu_matmul's packed kernel
  const uint8_t* act;   // [n_tokens, act_row] bytes in the activation format
  size_t act_row;
  int64_t n_out, n_in, n_tokens;
  float* y;             // [n_tokens, n_out]
};

// Outputs of packed groups [g0, g1) for tokens [t0, t1), in token tiles (a group's weights stay in L1 meanwhile).
void expert_groups(const expert_plan& p, int64_t g0, int64_t g1, int64_t t0, int64_t t1) {
  const bool q4 = p.wtype == ggml_type::Q4_K;
  const int mt = q4 ? k_expert_x8_tokens : p.pk.max_tokens;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* group = p.wp + (size_t)g * p.wp_group;
    for (int64_t t = t0; t < t1; t += mt) {
      const int nt = (int)std::min<int64_t>(mt, t1 - t);
      float* y = p.y + t * p.n_out + g * k_pack_rows;
      if (q4) expert_q4_K_x8_gemv_avx2(p.n_in, group, p.act + t * p.act_row, p.act_row, nt, y, p.n_out);
      else p.pk.fn(p.n_in, group, p.act + t * p.act_row, p.act_row, nt, y, p.n_out);
    }
  }
}

// Outputs of rows [r0, r1) for tokens [t0, t1).
void expert_rows(const expert_plan& p, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
#if SPINDLE_HAVE_X86_KERNELS
  for (int64_t o = r0; o < r1; ++o) {
    const uint8_t* wr = p.w + o * p.w_row;
    if (p.wtype == ggml_type::Q4_K) {
      for (int64_t tb = t0; tb < t1; tb += 4) {
        const int nt = (int)std::min<int64_t>(4, t1 - tb);
        const block_q8_K* xs[4];
        float out[4];
        for (int t = 0; t < nt; ++t) xs[t] = (const block_q8_K*)(p.act + (tb + t) * p.act_row);
        q4_K_gemv_row_avx2(p.n_in / QK_K, (const block_q4_K*)wr, xs, nt, out);
        for (int t = 0; t < nt; ++t) p.y[(tb + t) * p.n_out + o] = out[t];
      }
    } else if (p.wtype == ggml_type::F16) {
      for (int64_t t = t0; t < t1; ++t)
        p.y[t * p.n_out + o] = dot_f16_avx2(p.n_in, (const uint16_t*)wr, (const uint16_t*)(p.act + t * p.act_row));
    } else {  // F32
      for (int64_t t = t0; t < t1; ++t)
        p.y[t * p.n_out + o] = ops_dot_f32_avx2((const float*)wr, (const float*)(p.act + t * p.act_row), p.n_in);
    }
  }
#else
  (void)p; (void)r0; (void)r1; (void)t0; (void)t1;
#endif
}

// Converts the activations of tokens [t0, t1) into act (null: f32 activations are used in place).
void convert_tokens(const expert_plan& p, const float* x, uint8_t* act, int64_t t0, int64_t t1) {
  if (act == nullptr) return;
  const ggml_type act_type = cpu_activation_type(p.wtype);
  const bool paired = p.wp != nullptr && p.pk.paired_q8_K;  // only the packed kernel reads act then
  for (int64_t t = t0; t < t1; ++t) {
    cpu_convert_activation(act_type, x + t * p.n_in, act + t * p.act_row, p.n_in);
    if (paired) pair_q8_K_row_in_place((block_q8_K*)(act + t * p.act_row), p.n_in / QK_K);
  }
}

// All outputs of tokens [t0, t1) (their activations converted first), row units [0, units).
void expert_tokens(const expert_plan& p, const float* x, uint8_t* act, int64_t t0, int64_t t1) {
  convert_tokens(p, x, act, t0, t1);
  if (p.wp) expert_groups(p, 0, p.n_out / k_pack_rows, t0, t1);
  else expert_rows(p, 0, p.n_out, t0, t1);
}

// True when this file has its own kernel for (level, type, shape); otherwise cpu_matmul computes the same
// per-output arithmetic as ggml_mul_mat_id (or, at the scalar level, the plain reference sums).
bool has_expert_kernel(cpu_level level, ggml_type wtype, int64_t n_out) {
  if (!SPINDLE_HAVE_X86_KERNELS || (int)level < (int)cpu_level::avx2) return false;
  if (wtype == ggml_type::F32 || wtype == ggml_type::F16) return true;
  return wtype == ggml_type::Q4_K && n_out % 8 == 0;  // llama.cpp repacks only then
}

// True when packed x8 groups of wtype can be used at level: Q4_K with this file's gemv kernel; the quantized
// types without an expert kernel with cpu_matmul's packed kernel *pk (the same bits as its rows).
bool expert_packed_usable(cpu_level level, ggml_type wtype, int64_t n_out, packed_kernel* pk) {
  if (!SPINDLE_HAVE_X86_KERNELS || (int)level < (int)cpu_level::avx2 || n_out % k_pack_rows != 0) return false;
  if (wtype == ggml_type::F32 || wtype == ggml_type::F16 || wtype == ggml_type::BF16) return false;
  if (wtype == ggml_type::Q4_K) return true;
  *pk = cpu_packed_kernel(level, wtype);
  return pk->fn != nullptr;
}

// A per-thread buffer for [n_tokens, act_row] converted activations, grown and never shrunk.
uint8_t* activation_scratch(size_t act_row, int64_t n_tokens) {
  thread_local std::vector<uint8_t> scratch;
  const size_t bytes = (size_t)checked_mul(act_row, (uint64_t)n_tokens, "cpu_matmul_expert activations");
  if (scratch.size() < bytes) scratch.resize(bytes);
  return scratch.data();
}

// Runs a plan on the pool: one thread for small work, token chunks for many tokens, else row (group) ranges.
// act: the scratch the activations are converted into (null: f32 activations used in place).
void run_plan(thread_pool& pool, const expert_plan& p, const float* x, uint8_t* act) {
  const int64_t n_tokens = p.n_tokens;
  const uint64_t work = (uint64_t)p.n_out * (uint64_t)n_tokens * (uint64_t)p.n_in;
  const int nth = pool.size();
  if (nth == 1 || work < (1u << 16)) {
    expert_tokens(p, x, act, 0, n_tokens);
    return;
  }
  if (n_tokens >= k_tokens_per_chunk * nth) {
    // Chunks of tokens from a shared counter: each thread converts its chunk's activations and computes all of
    // their outputs (one pool run per matmul; a thread that the OS delays leaves its chunks to the others).
    std::atomic<int64_t> next{0};
    pool.run([&](int, int) {
      for (;;) {
        const int64_t t0 = next.fetch_add(k_tokens_per_chunk, std::memory_order_relaxed);
        if (t0 >= n_tokens) return;
        expert_tokens(p, x, act, t0, std::min(n_tokens, t0 + k_tokens_per_chunk));
      }
    });
    return;
  }
  convert_tokens(p, x, act, 0, n_tokens);  // few tokens: convert them, then split the rows (groups) between threads
  const int64_t units = p.wp ? p.n_out / k_pack_rows : p.n_out;  // groups or rows
  pool.run([&](int ith, int nth_) {
    int64_t u0, u1;
    thread_pool::split(units, ith, nth_, &u0, &u1);
    if (u0 >= u1) return;
    if (p.wp) expert_groups(p, u0, u1, 0, n_tokens);
    else expert_rows(p, u0, u1, 0, n_tokens);
  });
}

}  // namespace

void cpu_matmul_expert_at_level(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                                int64_t n_in, const float* x, int64_t n_tokens, float* y, const void* packed_x8) {
  packed_kernel pk;
  const bool packed = packed_x8 != nullptr && expert_packed_usable(level, wtype, n_out, &pk);
  if (!packed && !has_expert_kernel(level, wtype, n_out)) {
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
  if (n_in == 0) {
    std::fill(y, y + n_out * n_tokens, 0.0f);
    return;
  }
  p.w = (const uint8_t*)W;
  p.wp = packed ? (const uint8_t*)packed_x8 : nullptr;
  p.wp_group = p.w_row * k_pack_rows;
  p.pk = pk;
  p.n_out = n_out;
  p.n_in = n_in;
  p.n_tokens = n_tokens;
  p.y = y;
  uint8_t* act = act_type == ggml_type::F32 ? nullptr : activation_scratch(p.act_row, n_tokens);
  p.act = act ? act : (const uint8_t*)x;
  run_plan(pool, p, x, act);
}

void cpu_matmul_expert(thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out, int64_t n_in,
                       const float* x, int64_t n_tokens, float* y, const void* packed_x8) {
  cpu_matmul_expert_at_level(cpu_active_level(), pool, wtype, W, n_out, n_in, x, n_tokens, y, packed_x8);
}

}  // namespace spindle
