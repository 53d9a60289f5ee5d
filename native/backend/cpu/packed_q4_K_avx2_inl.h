// Building blocks of the AVX2 kernels over q4_K x8 packed groups (repack.h, block_q4_Kx8), shared by the dense
// matmul kernel (vec_dot_avx2_packed.cpp) and the expert gemv (matmul_expert_packed.cpp): scale / min unpacking of
// 8 rows at once, the nibble vectors of a sub-block, and the exact integer sub-block dot product.
// Invariant: everything here is integer arithmetic and exact, so callers choose their float order freely.
// Include only from files compiled for x86 (SPINDLE_HAVE_X86_KERNELS).
#pragma once
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {
namespace packed_q4_K {

// The int16 scale vectors of a q4_K x8 super-block: sc[j] has sc(row r, sub-block j) in int16 lanes 2r, 2r + 1;
// mn[s] has (m(r, 2s), m(r, 2s + 1)) in int16 lanes 2r, 2r + 1. Unpacks ggml's 6-bit packing for the 8 rows at
// once (the bit operations of q4_K_unpack_scales on each row's words).
SPINDLE_AVX2 inline void q4_Kx8_scales(const block_q4_Kx8* blk, __m256i sc[8], __m256i mn[4]) {
  const __m256i u0 = _mm256_loadu_si256((const __m256i*)blk->scales[0]);
  const __m256i u1 = _mm256_loadu_si256((const __m256i*)blk->scales[1]);
  const __m256i u2 = _mm256_loadu_si256((const __m256i*)blk->scales[2]);
  const __m256i m3f = _mm256_set1_epi32(0x3f3f3f3f), m0f = _mm256_set1_epi32(0x0f0f0f0f);
  const __m256i m03 = _mm256_set1_epi32(0x03030303);
  const __m256i s_lo = _mm256_and_si256(u0, m3f);  // bytes: sc 0..3
  const __m256i m_lo = _mm256_and_si256(u1, m3f);  // bytes: m 0..3
  const __m256i s_hi = _mm256_or_si256(_mm256_and_si256(u2, m0f),
                                       _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), m03), 4));
  const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m0f),
                                       _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), m03), 4));
  for (int j = 0; j < 4; ++j) {
    const char z = (char)0x80;  // pshufb: zero byte
    const __m256i pick = _mm256_setr_epi8((char)j, z, (char)j, z, (char)(4 + j), z, (char)(4 + j), z,
                                          (char)(8 + j), z, (char)(8 + j), z, (char)(12 + j), z, (char)(12 + j), z,
                                          (char)j, z, (char)j, z, (char)(4 + j), z, (char)(4 + j), z,
                                          (char)(8 + j), z, (char)(8 + j), z, (char)(12 + j), z, (char)(12 + j), z);
    sc[j] = _mm256_shuffle_epi8(s_lo, pick);
    sc[4 + j] = _mm256_shuffle_epi8(s_hi, pick);
  }
  for (int p = 0; p < 2; ++p) {
    const char z = (char)0x80, a = (char)(2 * p), b = (char)(2 * p + 1);
    const __m256i pick = _mm256_setr_epi8(a, z, b, z, (char)(4 + a), z, (char)(4 + b), z,
                                          (char)(8 + a), z, (char)(8 + b), z, (char)(12 + a), z, (char)(12 + b), z,
                                          a, z, b, z, (char)(4 + a), z, (char)(4 + b), z,
                                          (char)(8 + a), z, (char)(8 + b), z, (char)(12 + a), z, (char)(12 + b), z);
    mn[p] = _mm256_shuffle_epi8(m_lo, pick);
    mn[2 + p] = _mm256_shuffle_epi8(m_hi, pick);
  }
}

// The 8 unsigned nibble vectors of sub-block 2s + H of a q4_K x8 super-block (lane r: 4 elements of row r).
template <int H>
SPINDLE_AVX2 inline void q4_Kx8_nibbles(const block_q4_Kx8* wb, int s, __m256i w[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i v = _mm256_loadu_si256((const __m256i*)wb->qs[8 * s + c]);
    w[c] = H == 0 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
}

// isum[t] (+)= sc * (w . x_t) over one sub-block: 8 maddubs summed in int16 (|sum| <= 8 * 2 * 15 * 128 < 2^15),
// then one multiply by the int16 scales. xq[t]: the sub-block's 32 activations of token t.
template <int NT, bool FIRST>
SPINDLE_AVX2 inline void q4_Kx8_sub_block(const __m256i w[8], const int8_t* const xq[NT], __m256i sc,
                                                 __m256i isum[NT]) {
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t) {
    __m256i p0 = _mm256_maddubs_epi16(w[0], bcast32(xq[t]));
    __m256i p1 = _mm256_maddubs_epi16(w[1], bcast32(xq[t] + 4));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[2], bcast32(xq[t] + 8)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[3], bcast32(xq[t] + 12)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[4], bcast32(xq[t] + 16)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[5], bcast32(xq[t] + 20)));
    p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(w[6], bcast32(xq[t] + 24)));
    p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(w[7], bcast32(xq[t] + 28)));
    const __m256i v = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), sc);
    isum[t] = FIRST ? v : _mm256_add_epi32(isum[t], v);
  }
}

// The per-token factors of one super-block for the dense kernels: xb[t] (token t's q8_K block), sd[t] = d * dx_t,
// sm[t] = dmin * dx_t (rows in lanes), xsum[t][s] = int16 pair (xsum_2s, xsum_2s+1) of the 32-element sums.
template <int NT>
struct q4_Kx8_token_factors {
  const block_q8_K* xb[NT];
  __m256 sd[NT], sm[NT];
  alignas(16) int32_t xsum[NT][4];

  // xb and xsum only (for kernels that scale more than 8 rows themselves).
  SPINDLE_AVX2 inline void load_tokens(const uint8_t* x, size_t xs, int64_t b) {
    for (int t = 0; t < NT; ++t) {
      xb[t] = (const block_q8_K*)(x + t * xs) + b;
      const __m256i bs = _mm256_loadu_si256((const __m256i*)xb[t]->bsums);
      _mm_store_si128((__m128i*)xsum[t], _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
    }
  }

  SPINDLE_AVX2 inline void load(const block_q4_Kx8* wb, const uint8_t* x, size_t xs, int64_t b) {
    load_tokens(x, xs, b);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->dmin));
    for (int t = 0; t < NT; ++t) {
      const __m256 dx = _mm256_set1_ps(xb[t]->d);
      sd[t] = _mm256_mul_ps(d, dx);
      sm[t] = _mm256_mul_ps(dmin, dx);
    }
  }

  // acc[t] = fma(isum[t], sd[t], acc[t]) and accm[t] = fma(msum, sm[t], accm[t]) for sub-block pair s, with
  // msum = m(2s) xsum_2s + m(2s+1) xsum_2s+1 (exact): the dense kernels' float steps, in this order.
  SPINDLE_AVX2 inline void accumulate(int s, __m256i mn_s, const __m256i isum[NT], __m256 acc[NT],
                                      __m256 accm[NT]) const {
    for (int t = 0; t < NT; ++t) {
      const __m256i msum = _mm256_madd_epi16(mn_s, _mm256_set1_epi32(xsum[t][s]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sd[t], acc[t]);
      accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), sm[t], accm[t]);
    }
  }
};

}  // namespace packed_q4_K
}  // namespace spindle
