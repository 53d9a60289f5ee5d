// AVX2 kernels over the packed x8 layouts (repack.h): one packed group (8 rows, one per int32 lane) times up to
// max_tokens tokens. One pass over a token's activations serves 8 rows, 8 maddubs of a sub-block add up in
// int16 before one scale multiply, and the scales of 8 rows unpack with a few vector ops.
// Invariant: the float arithmetic per output (r, t) is the row kernel's (vec_dot_avx2.cpp) operation for
// operation: the integer sums are exact (so their grouping cannot matter) and every f32 operation is lane-wise,
// lane r = row r, in the same order. So a packed output has the bits of the row kernel's, whatever nt is.
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/packed_iq4_xs_avx2_inl.h"
#include "backend/cpu/packed_q4_K_avx2_inl.h"
#include "backend/cpu/packed_q8_0_avx2_inl.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

using packed_iq4_xs::iq4_xsx8_scales;
using packed_q4_K::q4_Kx8_nibbles;
using packed_q4_K::q4_Kx8_scales;
using packed_q4_K::q4_Kx8_sub_block;
using packed_q4_K::q4_Kx8_token_factors;
using packed_q8_0::q5_0x8_lanes;
using packed_q8_0::q8_0x8_lanes;

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
      q4_Kx8_token_factors<NT> f;
      f.load(wb, x, xs, b);
      for (int s = 0; s < 4; ++s) {
        __m256i isum[NT], w[8];
        const int8_t* xq[NT];
        for (int t = 0; t < NT; ++t) xq[t] = f.xb[t]->qs + 64 * s;
        q4_Kx8_nibbles<0>(wb, s, w);
        q4_Kx8_sub_block<NT, true>(w, xq, sc[2 * s], isum);
        for (int t = 0; t < NT; ++t) xq[t] += 32;
        q4_Kx8_nibbles<1>(wb, s, w);
        q4_Kx8_sub_block<NT, false>(w, xq, sc[2 * s + 1], isum);
        f.accumulate(s, mn[s], isum, acc, accm);
      }
    }
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ys, _mm256_sub_ps(acc[t], accm[t]));
  }
};

// y[t * ys + r] for the 8 rows r: the lane sum of acc[0..8][t] in hsum_avx2's order
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as the row kernels finish their 8 f32 lanes.
template <int NT>
SPINDLE_AVX2 inline void store_lane_sums(const __m256 acc[8][NT], float* y, int64_t ys) {
  for (int t = 0; t < NT; ++t) {
    const __m256 s04 = _mm256_add_ps(acc[0][t], acc[4][t]), s15 = _mm256_add_ps(acc[1][t], acc[5][t]);
    const __m256 s26 = _mm256_add_ps(acc[2][t], acc[6][t]), s37 = _mm256_add_ps(acc[3][t], acc[7][t]);
    _mm256_storeu_ps(y + t * ys, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
  }
}

// Group (q8_0 / q5_0 x8) . NT tokens (q8_0) with the arithmetic of the q8_0 / q5_0 row kernel (llama.cpp's vec_dot /
// tinyBLAS): output (r, t) keeps 8 f32 lanes, lane l = fma((float)(int sum of elements 4l .. 4l + 4 of block b),
// dw * dx, lane l) over the blocks in order, then hsum_avx2's lane sum. Here the vector holding lane l of the 8 rows
// (one row per int32 lane) is acc[l], so each 4-element integer dot feeds one lane-wise fma.
// Blocks are walked in chunks of k_q8_chunk with l outermost: acc[l] of every token stays in registers over a
// chunk, and each weight word and activation word is loaded once per chunk.
constexpr int k_q8_chunk = 16;

template <class W>
struct q8_0x8 {
  template <int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
      const typename W::block* wb = (const typename W::block*)group;
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
            prefetch_stream(W::line(wb[b0 + i], l), 32);  // l sweeps the chunk 8 times: a stream per l, prefetched
            const __m256i w = W::at(wb[b0 + i], l);
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
      store_lane_sums<NT>(acc, y, ys);
    }
  };
};

// One token: blocks outermost with the 8 lane vectors in registers (the same fmas per lane, in block order).
template <class W>
struct q8_0x8_one {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t, float* y, int64_t) {
    const typename W::block* wb = (const typename W::block*)group;
    const block_q8_0* xb = (const block_q8_0*)x;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8][1];
    for (int l = 0; l < 8; ++l) acc[l][0] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK8_0; ++b) {
      prefetch_stream(wb + b, sizeof(typename W::block));
      const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb[b].d)),
                                         _mm256_set1_ps(_cvtsh_ss(xb[b].d)));
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m256i w = W::at(wb[b], l);
        const __m256i sx = _mm256_sign_epi8(bcast32(xb[b].qs + 4 * l), w);
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), sx), ones);
        acc[l][0] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(p), acc[l][0]);
      }
    }
    store_lane_sums<1>(acc, y, 0);
  }
};

// NT tokens: the chunked kernel; one token: q8_0x8_one.
template <class W, int NT>
struct q8_0x8_entry {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    if constexpr (NT == 1) q8_0x8_one<W>::run(n, group, x, xs, y, ys);
    else q8_0x8<W>::template kernel<NT>::run(n, group, x, xs, y, ys);
  }
};
template <int NT>
using q8_0x8_kernel = q8_0x8_entry<q8_0x8_lanes, NT>;
template <int NT>
using q5_0x8_kernel = q8_0x8_entry<q5_0x8_lanes, NT>;

// The signed weights of 32 nibble bytes: q4_0 (q - 8, |w| <= 8: 8 maddubs of one block add up in int16) and
// iq4_nl (the non-linear table, |w| <= 127: each maddubs, up to 2 x 127 x 127, widened to int32 before adding).
struct q4_0_values {
  static constexpr bool int16_sums = true;
  SPINDLE_AVX2 static inline __m256i of(__m256i nibbles) { return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8)); }
};
struct iq4_nl_values {
  static constexpr bool int16_sums = false;
  SPINDLE_AVX2 static inline __m256i of(__m256i nibbles) {
    const __m128i t = _mm_loadu_si128((const __m128i*)k_iq4nl_values);
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), nibbles);
  }
};

// Group (q4_0 / iq4_nl x8) . NT tokens (q8_0) with q4_0_tiles' arithmetic (llama.cpp's repacked q4_0_8x8 /
// iq4_nl_8x8): per block, the exact int32 dot of each row's 32 weights with the token's 32 activations (rows in
// the 8 int32 lanes: no horizontal sums), then acc = fma((float)isum, dw * dx, acc) in block order.
// Word w of the block gives elements 4w .. 4w + 4 (low nibbles) and 16 + 4w .. (high nibbles) of all 8 rows.
template <class V>
struct q4_0x8 {
  template <int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                 int64_t ys) {
      const block_q4_0x8* wb = (const block_q4_0x8*)group;
      const __m256i low4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
      __m256 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < n / QK4_0; ++b, ++wb) {
        prefetch_stream(wb, sizeof(block_q4_0x8));
        __m256i sum[NT];  // int16 pair sums (q4_0) or int32 sums (iq4_nl) of each row's dot, per token
        for (int t = 0; t < NT; ++t) sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int w = 0; w < 4; ++w) {
          const __m256i v = _mm256_loadu_si256((const __m256i*)wb->qs[w]);
          const __m256i lo = V::of(_mm256_and_si256(v, low4));
          const __m256i hi = V::of(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
          const __m256i alo = _mm256_sign_epi8(lo, lo), ahi = _mm256_sign_epi8(hi, hi);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const int8_t* xq = ((const block_q8_0*)(x + t * xs))[b].qs;
            const __m256i p_lo = _mm256_maddubs_epi16(alo, _mm256_sign_epi8(bcast32(xq + 4 * w), lo));
            const __m256i p_hi = _mm256_maddubs_epi16(ahi, _mm256_sign_epi8(bcast32(xq + 16 + 4 * w), hi));
            if constexpr (V::int16_sums) {
              sum[t] = _mm256_add_epi16(sum[t], _mm256_add_epi16(p_lo, p_hi));
            } else {
              sum[t] = _mm256_add_epi32(sum[t], _mm256_add_epi32(_mm256_madd_epi16(p_lo, ones), _mm256_madd_epi16(p_hi, ones)));
            }
          }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
        for (int t = 0; t < NT; ++t) {
          const __m256i isum = V::int16_sums ? _mm256_madd_epi16(sum[t], ones) : sum[t];
          const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(((const block_q8_0*)(x + t * xs))[b].d)));
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + t * ys, acc[t]);
    }
  };
};

template <int NT>
using q4_0x8_kernel = q4_0x8<q4_0_values>::kernel<NT>;
template <int NT>
using iq4_nlx8_kernel = q4_0x8<iq4_nl_values>::kernel<NT>;

// Group (iq4_xs x8) . NT tokens (q8_K) with iq4_xs_kernel's arithmetic (llama.cpp's vec_dot): output (r, t) keeps 8
// f32 lanes, lane k = fma(d * dx, (float)(sum over sub-blocks j of (ls_j - 32) x (elements 4k .. 4k + 4 of j . x)),
// lane k) per super-block, then hsum_avx2's lane sum. Here acc[k] holds lane k of the 8 rows (row r in lane r).
template <int NT>
struct iq4_xsx8_kernel {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const block_iq4_xsx8* wb = (const block_iq4_xsx8*)group;
    const __m128i table = _mm_loadu_si128((const __m128i*)k_iq4nl_values);
    const __m256i values = _mm256_set_m128i(table, table), low4 = _mm256_set1_epi8(0x0f);
    __m256 acc[8][NT];
    for (int k = 0; k < 8; ++k)
      for (int t = 0; t < NT; ++t) acc[k][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; ++b, ++wb) {
      prefetch_stream(wb, sizeof(block_iq4_xsx8));
      __m256i ls16[8];
      iq4_xsx8_scales(*wb, ls16);
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
      const block_q8_K* xb[NT];
      __m256 scale[NT];
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(x + t * xs) + b;
        scale[t] = _mm256_mul_ps(dw, _mm256_set1_ps(xb[t]->d));
      }
#pragma GCC unroll 1
      for (int k = 0; k < 8; ++k) {
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i v = _mm256_loadu_si256((const __m256i*)wb->qs[4 * j + (k & 3)]);
          const __m256i nib = k < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          const __m256i w = _mm256_shuffle_epi8(values, nib), aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            const __m256i sx = _mm256_sign_epi8(bcast32(xb[t]->qs + 32 * j + 4 * k), w);
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), ls16[j]));
          }
        }
        for (int t = 0; t < NT; ++t) acc[k][t] = _mm256_fmadd_ps(scale[t], _mm256_cvtepi32_ps(isum[t]), acc[k][t]);
      }
    }
    store_lane_sums<NT>(acc, y, ys);
  }
};

}  // namespace

packed_kernel packed_kernel_avx2(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::Q4_K: return packed_kernel{&packed_entry<q4_Kx8_kernel, 8>, 8};
    case ggml_type::Q8_0: return packed_kernel{&packed_entry<q8_0x8_kernel, 8>, 8};
    case ggml_type::Q5_0: return packed_kernel{&packed_entry<q5_0x8_kernel, 8>, 8};
    case ggml_type::Q4_0: return packed_kernel{&packed_entry<q4_0x8_kernel, 4>, 4};
    case ggml_type::IQ4_XS: return packed_kernel{&packed_entry<iq4_xsx8_kernel, 4>, 4};
    case ggml_type::IQ4_NL: return packed_kernel{&packed_entry<iq4_nlx8_kernel, 4>, 4};
    case ggml_type::Q6_K: return packed_kernel_q6_K_avx2();
    default: return {};
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX2 kernels

namespace spindle {
packed_kernel packed_kernel_avx2(ggml_type) { return {}; }
}  // namespace spindle

#endif
