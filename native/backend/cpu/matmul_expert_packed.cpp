// AVX2 kernel of the q4_K expert matmul over the packed x8 layout (repack.h, block_q4_Kx8): one group of 8 rows
// (one row per int32 lane) times up to 8 tokens, with llama.cpp's ggml_gemv_q4_K_8x8_q8_K arithmetic per output
// (expert_dot_q4_K_gemv_ref): per super-block, exact integers isum = sum_j sc_j (q . x)_j and
// msum = sum_j m_j xsum_j, then acc = fma((float)isum, d * dx, acc), accm = fma((float)msum, dmin * dx, accm)
// in block order; output acc - accm. The weight nibbles and scales of 8 rows unpack once per super-block for all
// the tokens of the tile.
// Invariant: integer sums are exact (so their grouping cannot matter) and every f32 operation is lane-wise
// (lane r = row r) in the reference order, so an output's bits do not depend on nt or on the other tokens.
#include "backend/cpu/matmul_expert.h"

#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/packed_q4_K_avx2_inl.h"
#include "backend/cpu/repack.h"

namespace spindle {
namespace {

using packed_q4_K::q4_Kx8_nibbles;
using packed_q4_K::q4_Kx8_scales;
using packed_q4_K::q4_Kx8_sub_block;

template <int NT>
SPINDLE_AVX2 void gemv_q4_Kx8(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
  const block_q4_Kx8* wb = (const block_q4_Kx8*)group;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / QK_K; ++b, ++wb) {
    __m256i sc[8], mn[4];
    q4_Kx8_scales(wb, sc, mn);
    const block_q8_K* xb[NT];
    __m256i isum[NT], msum[NT];
    for (int t = 0; t < NT; ++t) {
      xb[t] = (const block_q8_K*)(x + t * xs) + b;
      isum[t] = _mm256_setzero_si256();
      // int16 xsum_j = bsums[2j] + bsums[2j + 1] (|.| <= 4096), pairs (xsum_2s, xsum_2s+1) in dword s
      const __m256i bs = _mm256_loadu_si256((const __m256i*)xb[t]->bsums);
      const __m128i xsum = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
      __m256i ms = _mm256_madd_epi16(mn[0], _mm256_set1_epi32(_mm_extract_epi32(xsum, 0)));
      ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn[1], _mm256_set1_epi32(_mm_extract_epi32(xsum, 1))));
      ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn[2], _mm256_set1_epi32(_mm_extract_epi32(xsum, 2))));
      msum[t] = _mm256_add_epi32(ms, _mm256_madd_epi16(mn[3], _mm256_set1_epi32(_mm_extract_epi32(xsum, 3))));
    }
    for (int s = 0; s < 4; ++s) {  // sub-blocks 2s (low nibbles of words 8s..8s+7) and 2s + 1 (high nibbles)
      __m256i w[8];
      const int8_t* xq[NT];
      for (int t = 0; t < NT; ++t) xq[t] = xb[t]->qs + 64 * s;
      q4_Kx8_nibbles<0>(wb, s, w);
      q4_Kx8_sub_block<NT, false>(w, xq, sc[2 * s], isum);
      for (int t = 0; t < NT; ++t) xq[t] += 32;
      q4_Kx8_nibbles<1>(wb, s, w);
      q4_Kx8_sub_block<NT, false>(w, xq, sc[2 * s + 1], isum);
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->dmin));
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(xb[t]->d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, dx), acc[t]);
      accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]), _mm256_mul_ps(dmin, dx), accm[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ys, _mm256_sub_ps(acc[t], accm[t]));
}

template <int NT>
SPINDLE_AVX2 void gemv_q4_Kx8_upto(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, int nt, float* y,
                                   int64_t ys) {
  if constexpr (NT > 1) {
    if (nt < NT) return gemv_q4_Kx8_upto<NT - 1>(n, group, x, xs, nt, y, ys);
  }
  gemv_q4_Kx8<NT>(n, group, x, xs, y, ys);
}

}  // namespace

void expert_q4_K_x8_gemv_avx2(int64_t n_in, const uint8_t* group, const uint8_t* x, size_t xs, int nt, float* y,
                              int64_t ys) {
  gemv_q4_Kx8_upto<k_expert_x8_tokens>(n_in, group, x, xs, nt, y, ys);
}

}  // namespace spindle

#else  // not x86 with GCC/clang: never called (has_expert_kernel is false there)

namespace spindle {
void expert_q4_K_x8_gemv_avx2(int64_t, const uint8_t*, const uint8_t*, size_t, int, float*, int64_t) {}
}  // namespace spindle

#endif
