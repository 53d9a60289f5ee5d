// AVX2 kernels over the packed x8 layouts (repack.h): one packed group (8 rows, one per int32 lane) times up to
// max_tokens tokens. One pass over a token's activations serves 8 rows, 8 maddubs of a sub-block add up in
// int16 before one scale multiply, and the scales of 8 rows unpack with a few vector ops.
// Invariant: the float arithmetic per output (r, t) is the row kernel's (vec_dot_avx2.cpp) operation for
// operation: the integer sums are exact (so their grouping cannot matter) and every f32 operation is lane-wise,
// lane r = row r, in the same order. So a packed output has the bits of the row kernel's, whatever nt is.
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// The int16 scale vectors of a q4_K x8 super-block: sc[j] has sc(row r, sub-block j) in int16 lanes 2r, 2r + 1;
// mn[s] has (m(r, 2s), m(r, 2s + 1)) in int16 lanes 2r, 2r + 1. Unpacks ggml's 6-bit packing for the 8 rows at
// once (the bit operations of q4_K_unpack_scales on each row's words).
SPINDLE_AVX2 static inline void q4_Kx8_scales(const block_q4_Kx8* blk, __m256i sc[8], __m256i mn[4]) {
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
SPINDLE_AVX2 static inline void q4_Kx8_nibbles(const block_q4_Kx8* wb, int s, __m256i w[8]) {
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
SPINDLE_AVX2 static inline void q4_Kx8_sub_block(const __m256i w[8], const int8_t* const xq[NT], __m256i sc,
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

// Group (q4_K x8) . NT tokens (q8_K) with the arithmetic of q4_K_kernel: per pair of sub-blocks s, exact
// isum = sc[2s] (q.x)_2s + sc[2s+1] (q.x)_2s+1 and msum = m[2s] xsum_2s + m[2s+1] xsum_2s+1, then
// acc = fma(isum, d*dx, acc), accm = fma(msum, dmin*dx, accm); output acc - accm.
template <int NT>
struct q4_Kx8_kernel {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const block_q4_Kx8* wb = (const block_q4_Kx8*)group;
    __m256 acc[NT], accm[NT];
    for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; ++b, ++wb) {
      __m256i sc[8], mn[4];
      prefetch_stream(wb, sizeof(block_q4_Kx8));
      q4_Kx8_scales(wb, sc, mn);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->dmin));
      const block_q8_K* xb[NT];
      __m256 sd[NT], sm[NT];
      alignas(16) int32_t xsum[NT][4];  // per token: int16 pairs (xsum_2s, xsum_2s+1) of the 32-element sums
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(x + t * xs) + b;
        const __m256 dx = _mm256_set1_ps(xb[t]->d);
        sd[t] = _mm256_mul_ps(d, dx);
        sm[t] = _mm256_mul_ps(dmin, dx);
        const __m256i bs = _mm256_loadu_si256((const __m256i*)xb[t]->bsums);
        _mm_store_si128((__m128i*)xsum[t], _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
      }
      for (int s = 0; s < 4; ++s) {
        __m256i isum[NT], w[8];
        const int8_t* xq[NT];
        for (int t = 0; t < NT; ++t) xq[t] = xb[t]->qs + 64 * s;
        q4_Kx8_nibbles<0>(wb, s, w);
        q4_Kx8_sub_block<NT, true>(w, xq, sc[2 * s], isum);
        for (int t = 0; t < NT; ++t) xq[t] += 32;
        q4_Kx8_nibbles<1>(wb, s, w);
        q4_Kx8_sub_block<NT, false>(w, xq, sc[2 * s + 1], isum);
        for (int t = 0; t < NT; ++t) {
          const __m256i msum = _mm256_madd_epi16(mn[s], _mm256_set1_epi32(xsum[t][s]));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sd[t], acc[t]);
          accm[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), sm[t], accm[t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ys, _mm256_sub_ps(acc[t], accm[t]));
  }
};

// Group (q8_0 x8) . NT tokens (q8_0) with the arithmetic of the q8_0 row kernel (llama.cpp's vec_dot / tinyBLAS):
// output (r, t) keeps 8 f32 lanes, lane l = fma((float)(int sum of elements 4l .. 4l + 4 of block b), dw * dx,
// lane l) over the blocks in order, then hsum_avx2's lane sum. Here the vector holding lane l of the 8 rows
// (one row per int32 lane) is acc[l], so each 4-element integer dot feeds one lane-wise fma.
// Blocks are walked in chunks of k_q8_chunk with l outermost: acc[l] of every token stays in registers over a
// chunk, and each weight word and activation word is loaded once per chunk.
constexpr int k_q8_chunk = 16;

template <int NT>
struct q8_0x8_kernel {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const block_q8_0x8* wb = (const block_q8_0x8*)group;
    const int64_t nb = n / QK8_0;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8][NT];
    for (int l = 0; l < 8; ++l)
      for (int t = 0; t < NT; ++t) acc[l][t] = _mm256_setzero_ps();
    __m256 scale[k_q8_chunk][NT];  // dw * dx per block of the chunk and token
    for (int64_t b0 = 0; b0 < nb; b0 += k_q8_chunk) {
      const int kb = (int)(nb - b0 < k_q8_chunk ? nb - b0 : k_q8_chunk);
      for (int i = 0; i < kb; ++i) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb[b0 + i].d));
        for (int t = 0; t < NT; ++t)
          scale[i][t] = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(((const block_q8_0*)(x + t * xs))[b0 + i].d)));
      }
#pragma GCC unroll 1
      for (int l = 0; l < 8; ++l) {
        __m256 a[NT];
        for (int t = 0; t < NT; ++t) a[t] = acc[l][t];
        for (int i = 0; i < kb; ++i) {
          const __m256i w = _mm256_loadu_si256((const __m256i*)wb[b0 + i].qs[l]);
          const __m256i aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const block_q8_0* xb = (const block_q8_0*)(x + t * xs) + b0 + i;
            const __m256i sx = _mm256_sign_epi8(bcast32(xb->qs + 4 * l), w);
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ones);
            a[t] = _mm256_fmadd_ps(scale[i][t], _mm256_cvtepi32_ps(p), a[t]);
          }
        }
        for (int t = 0; t < NT; ++t) acc[l][t] = a[t];
      }
    }
    for (int t = 0; t < NT; ++t) {  // hsum_avx2 per row: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
      const __m256 s04 = _mm256_add_ps(acc[0][t], acc[4][t]), s15 = _mm256_add_ps(acc[1][t], acc[5][t]);
      const __m256 s26 = _mm256_add_ps(acc[2][t], acc[6][t]), s37 = _mm256_add_ps(acc[3][t], acc[7][t]);
      _mm256_storeu_ps(y + t * ys, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
    }
  }
};

// One token: blocks outermost with the 8 lane vectors in registers (the same fmas per lane, in block order).
template <>
struct q8_0x8_kernel<1> {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t, float* y, int64_t) {
    const block_q8_0x8* wb = (const block_q8_0x8*)group;
    const block_q8_0* xb = (const block_q8_0*)x;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int l = 0; l < 8; ++l) acc[l] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK8_0; ++b) {
      prefetch_stream(wb + b, sizeof(block_q8_0x8));
      const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb[b].d)),
                                         _mm256_set1_ps(_cvtsh_ss(xb[b].d)));
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m256i w = _mm256_loadu_si256((const __m256i*)wb[b].qs[l]);
        const __m256i sx = _mm256_sign_epi8(bcast32(xb[b].qs + 4 * l), w);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), sx), ones);
        acc[l] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[l]);
      }
    }
    const __m256 s04 = _mm256_add_ps(acc[0], acc[4]), s15 = _mm256_add_ps(acc[1], acc[5]);
    const __m256 s26 = _mm256_add_ps(acc[2], acc[6]), s37 = _mm256_add_ps(acc[3], acc[7]);
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
  }
};

}  // namespace

packed_kernel packed_kernel_avx2(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::Q4_K: return packed_kernel{&packed_entry<q4_Kx8_kernel, 8>, 8};
    case ggml_type::Q8_0: return packed_kernel{&packed_entry<q8_0x8_kernel, 8>, 8};
    default: return {};
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX2 kernels

namespace spindle {
packed_kernel packed_kernel_avx2(ggml_type) { return {}; }
}  // namespace spindle

#endif
