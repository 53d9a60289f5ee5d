// The AVX-512 level's packed kernels: the AVX2 ones (vec_dot_avx2_packed*.cpp) for one group of 8 rows, plus
// two-group forms (packed_kernel.fn16) for tiles of 2+ tokens that run the same lane operations on 512-bit
// vectors holding two adjacent groups, with VNNI where it fuses integer steps: for q4_K each sub-block's
// 8 maddubs + 7 int16 adds + madd by the scales become 8 vpdpbusd and one int32 multiply by the scales.
// Invariant: the same exact integers (for q4_K, sc * (q . x) per sub-block and row, |.| < 2^22) enter the same
// f32 operations in the same lanes and order, so every output has the bits of the AVX2 tile kernel, which is
// this level's tile kernel for every quantized type (vec_dot_avx512.cpp).
#include "backend/cpu/vec_dot_avx512.h"

#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_AVX512_KERNELS && SPINDLE_HAVE_X86_KERNELS && !defined(SPINDLE_EMULATE_AVX512)
#include "backend/cpu/packed_iq4_xs_avx2_inl.h"
#include "backend/cpu/packed_q4_K_avx2_inl.h"
#include "backend/cpu/packed_q6_K_avx2_inl.h"
#include "backend/cpu/packed_q8_0_avx2_inl.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

using packed_iq4_xs::iq4_xsx8_scales;
using packed_q4_K::q4_Kx8_scales;
using packed_q4_K::q4_Kx8_token_factors;
using packed_q6_K::q6_Kx8_scales;
using packed_q6_K::q6_Kx8_weights;
using packed_q8_0::q5_0x8_lanes;
using packed_q8_0::q8_0x8_lanes;

SPINDLE_AVX512 inline int32_t load32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

SPINDLE_AVX512 inline __m512i join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 16 fp16 values, 8 at lo then 8 at hi, as f32 lanes 0..15.
SPINDLE_AVX512 inline __m512 cvtph_join(const uint16_t* lo, const uint16_t* hi) {
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i*)lo)),
                                                 _mm_loadu_si128((const __m128i*)hi), 1));
}

// y[t * ys + r] for the 16 rows r: the lane sum of acc[0..8][t] in hsum_avx2's order
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as the 8-lane kernels finish.
template <int NT>
SPINDLE_AVX512 inline void store_lane_sums(const __m512 acc[8][NT], float* y, int64_t ys) {
  for (int t = 0; t < NT; ++t) {
    const __m512 s04 = _mm512_add_ps(acc[0][t], acc[4][t]), s15 = _mm512_add_ps(acc[1][t], acc[5][t]);
    const __m512 s26 = _mm512_add_ps(acc[2][t], acc[6][t]), s37 = _mm512_add_ps(acc[3][t], acc[7][t]);
    _mm512_storeu_ps(y + t * ys, _mm512_add_ps(_mm512_add_ps(s04, s26), _mm512_add_ps(s15, s37)));
  }
}

// Two adjacent q4_K x8 groups (16 rows, group g's in lanes 0..7 and g + 1's in 8..15) . NT tokens (q8_K):
// q4_Kx8_kernel's steps (vec_dot_avx2_packed.cpp) for both groups at once, lane for lane, the sub-block sums
// from vpdpbusd. One activation broadcast and one (double-pumped) vpdpbusd serve 16 rows.
template <int NT>
struct q4_Kx16_vnni_kernel {
  SPINDLE_AVX512 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                 int64_t ys) {
    const int64_t nb = n / QK_K;
    const block_q4_Kx8* wa = (const block_q4_Kx8*)group;
    const block_q4_Kx8* wc = wa + nb;  // the next group
    __m512 acc[NT], accm[NT];
    for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int64_t b = 0; b < nb; ++b, ++wa, ++wc) {
      prefetch_stream(wa, sizeof(block_q4_Kx8));
      prefetch_stream(wc, sizeof(block_q4_Kx8));
      __m512i sc[8], mn[4];
      {
        __m256i sa[8], ma[4], scc[8], mc[4];
        q4_Kx8_scales(wa, sa, ma);
        q4_Kx8_scales(wc, scc, mc);
        for (int j = 0; j < 8; ++j) sc[j] = join(_mm256_srli_epi32(sa[j], 16), _mm256_srli_epi32(scc[j], 16));
        for (int s = 0; s < 4; ++s) mn[s] = join(ma[s], mc[s]);
      }
      const __m512 d = cvtph_join(wa->d, wc->d), dmin = cvtph_join(wa->dmin, wc->dmin);
      q4_Kx8_token_factors<NT> f;  // xb and xsum; the 16-row sd / sm follow
      f.load_tokens(x, xs, b);
      __m512 sd[NT], sm[NT];
      for (int t = 0; t < NT; ++t) {
        const __m512 dx = _mm512_set1_ps(f.xb[t]->d);
        sd[t] = _mm512_mul_ps(d, dx);
        sm[t] = _mm512_mul_ps(dmin, dx);
      }
      for (int s = 0; s < 4; ++s) {
        __m512i isum[NT];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {  // sub-block 2s + h: low (h 0) or high (h 1) nibbles of words 8s..8s+7
          __m512i w[8];
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) {
            const __m512i v = join(_mm256_loadu_si256((const __m256i*)wa->qs[8 * s + c]),
                                   _mm256_loadu_si256((const __m256i*)wc->qs[8 * s + c]));
            w[c] = _mm512_and_si512(h == 0 ? v : _mm512_srli_epi16(v, 4), low4);
          }
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const int8_t* xq = f.xb[t]->qs + 64 * s + 32 * h;
            __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[0], _mm512_set1_epi32(load32(xq)));
            __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], _mm512_set1_epi32(load32(xq + 4)));
            p0 = _mm512_dpbusd_epi32(p0, w[2], _mm512_set1_epi32(load32(xq + 8)));
            p1 = _mm512_dpbusd_epi32(p1, w[3], _mm512_set1_epi32(load32(xq + 12)));
            p0 = _mm512_dpbusd_epi32(p0, w[4], _mm512_set1_epi32(load32(xq + 16)));
            p1 = _mm512_dpbusd_epi32(p1, w[5], _mm512_set1_epi32(load32(xq + 20)));
            p0 = _mm512_dpbusd_epi32(p0, w[6], _mm512_set1_epi32(load32(xq + 24)));
            p1 = _mm512_dpbusd_epi32(p1, w[7], _mm512_set1_epi32(load32(xq + 28)));
            const __m512i v = _mm512_mullo_epi32(_mm512_add_epi32(p0, p1), sc[2 * s + h]);
            isum[t] = h == 0 ? v : _mm512_add_epi32(isum[t], v);
          }
        }
        for (int t = 0; t < NT; ++t) {  // q4_Kx8_token_factors::accumulate on 16 lanes
          const __m512i msum = _mm512_madd_epi16(mn[s], _mm512_set1_epi32(f.xsum[t][s]));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sd[t], acc[t]);
          accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), sm[t], accm[t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ys, _mm512_sub_ps(acc[t], accm[t]));
  }
};

// Two adjacent q8_0 / q5_0 x8 groups (16 rows in 512-bit lanes; W: the AVX2 kernels' lane loader) . NT tokens
// (q8_0) with q8_0x8_kernel's arithmetic
// (vec_dot_avx2_packed.cpp): lane l of output (r, t) = fma((float)(int sum of elements 4l .. 4l + 4 of block b),
// dw * dx, lane l) over the blocks in order, then hsum_avx2's lane order. The exact 4-element sums come from
// one vpdpbusd of |w| and x negated where w < 0 (for w = -128, |w| is the byte 128 read unsigned).
constexpr int k_q8_chunk = 16;  // blocks whose scales and accumulators stay near while l sweeps them

template <class W>
struct q8_0x16_vnni {
template <int NT>
struct kernel {
  SPINDLE_AVX512 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                 int64_t ys) {
    const int64_t nb = n / QK8_0;
    const typename W::block* wa = (const typename W::block*)group;
    const typename W::block* wc = wa + nb;  // the next group
    __m512 acc[8][NT];
    for (int l = 0; l < 8; ++l)
      for (int t = 0; t < NT; ++t) acc[l][t] = _mm512_setzero_ps();
    __m512 scale[k_q8_chunk][NT];  // dw * dx per block of the chunk and token
    for (int64_t b0 = 0; b0 < nb; b0 += k_q8_chunk) {
      const int kb = (int)(nb - b0 < k_q8_chunk ? nb - b0 : k_q8_chunk);
      for (int i = 0; i < kb; ++i) {
        const __m512 dw = cvtph_join(wa[b0 + i].d, wc[b0 + i].d);
        for (int t = 0; t < NT; ++t)
          scale[i][t] = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(((const block_q8_0*)(x + t * xs))[b0 + i].d)));
      }
#pragma GCC unroll 1
      for (int l = 0; l < 8; ++l) {
        __m512 a[NT];
        for (int t = 0; t < NT; ++t) a[t] = acc[l][t];
        for (int i = 0; i < kb; ++i) {
          prefetch_stream(W::line(wa[b0 + i], l), 32);  // l sweeps the chunk 8 times: a stream per l, prefetched
          prefetch_stream(W::line(wc[b0 + i], l), 32);
          const __m512i w = join(W::at(wa[b0 + i], l), W::at(wc[b0 + i], l));
          const __m512i aw = _mm512_abs_epi8(w);
          const __mmask64 neg = _mm512_movepi8_mask(w);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const block_q8_0* xb = (const block_q8_0*)(x + t * xs) + b0 + i;
            const __m512i xv = _mm512_set1_epi32(load32(xb->qs + 4 * l));
            const __m512i sx = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
            const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx);
            a[t] = _mm512_fmadd_ps(scale[i][t], _mm512_cvtepi32_ps(p), a[t]);
          }
        }
        for (int t = 0; t < NT; ++t) acc[l][t] = a[t];
      }
    }
    store_lane_sums<NT>(acc, y, ys);
  }
};
};

template <int NT>
using q8_0x16_vnni_kernel = q8_0x16_vnni<q8_0x8_lanes>::kernel<NT>;
template <int NT>
using q5_0x16_vnni_kernel = q8_0x16_vnni<q5_0x8_lanes>::kernel<NT>;

// Two adjacent q6_K x8 groups (16 rows in 512-bit lanes) . NT tokens (paired q8_K): q6_Kx8_kernel's operations
// (vec_dot_avx2_packed_q6.cpp) lane for lane, with vpdpwssd for its madd-by-scales + int32 add (the same exact
// integers): per super-block and lane position l, isum = -32 (sc . bsums) + sum_k scales * (chunk-pair sums),
// then acc[l] = fma(d * dx, (float)isum, acc[l]); output the hsum_avx2 lane order over l.
template <int NT>
struct q6_Kx16_vnni_kernel {
  SPINDLE_AVX512 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                 int64_t ys) {
    const int64_t nb = n / QK_K;
    const block_q6_Kx8* wa = (const block_q6_Kx8*)group;
    const block_q6_Kx8* wc = wa + nb;  // the next group
    __m512 acc[8][NT];
    for (int l = 0; l < 8; ++l)
      for (int t = 0; t < NT; ++t) acc[l][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, ++wa, ++wc) {
      prefetch_stream(wa, sizeof(block_q6_Kx8));
      prefetch_stream(wc, sizeof(block_q6_Kx8));
      __m512i scp[8], sp[8];
      {
        __m256i scp_a[8], sp_a[8], scp_c[8], sp_c[8];
        q6_Kx8_scales(wa, scp_a, sp_a);
        q6_Kx8_scales(wc, scp_c, sp_c);
        for (int j = 0; j < 8; ++j) scp[j] = join(scp_a[j], scp_c[j]), sp[j] = join(sp_a[j], sp_c[j]);
      }
      const __m512 d = cvtph_join(wa->d, wc->d);
      const block_q8_K* xb[NT];
      __m512 sd[NT];
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(x + t * xs) + b;
        sd[t] = _mm512_mul_ps(d, _mm512_set1_ps(xb[t]->d));
      }
#pragma GCC unroll 1
      for (int l = 0; l < 8; ++l) {
        __m512i q[8];
        {
          __m256i qa[8], qc[8];
          q6_Kx8_weights(wa, l, qa);
          q6_Kx8_weights(wc, l, qc);
          for (int j = 0; j < 8; ++j) q[j] = join(qa[j], qc[j]);
        }
        const int hi = l >= 4;
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const int8_t* bs = (const int8_t*)(xb[t]->bsums + 2 * l);
          __m512i isum = _mm512_madd_epi16(sp[l], _mm512_set1_epi32(load32(bs)));
          const int8_t* xq = xb[t]->qs + 8 * l;
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const __m512i a = _mm512_maddubs_epi16(q[2 * k], _mm512_set1_epi32(load32(xq + 64 * k)));
            const __m512i s16 =
                _mm512_add_epi16(a, _mm512_maddubs_epi16(q[2 * k + 1], _mm512_set1_epi32(load32(xq + 64 * k + 4))));
            isum = _mm512_dpwssd_epi32(isum, s16, scp[2 * k + hi]);
          }
          acc[l][t] = _mm512_fmadd_ps(sd[t], _mm512_cvtepi32_ps(isum), acc[l][t]);
        }
      }
    }
    store_lane_sums<NT>(acc, y, ys);
  }
};

// The signed weights of 64 nibble bytes (q4_0: q - 8; iq4_nl: the non-linear table).
struct q4_0_values512 {
  SPINDLE_AVX512 static inline __m512i of(__m512i nibbles) { return _mm512_sub_epi8(nibbles, _mm512_set1_epi8(8)); }
};
struct iq4_nl_values512 {
  SPINDLE_AVX512 static inline __m512i of(__m512i nibbles) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)k_iq4nl_values)), nibbles);
  }
};

// Two adjacent q4_0 / iq4_nl x8 groups (16 rows in 512-bit lanes) . NT tokens (q8_0): q4_0x8's arithmetic
// (vec_dot_avx2_packed.cpp) lane for lane, each block's exact dot summed in int32 by vpdpbusd of |w| and x negated
// where w < 0, then acc = fma((float)isum, dw * dx, acc) in block order.
template <class V>
struct q4_0x16 {
  template <int NT>
  struct kernel {
    SPINDLE_AVX512 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                   int64_t ys) {
      const int64_t nb = n / QK4_0;
      const block_q4_0x8* wa = (const block_q4_0x8*)group;
      const block_q4_0x8* wc = wa + nb;  // the next group
      const __m512i low4 = _mm512_set1_epi8(0x0f);
      __m512 acc[NT];
      for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b, ++wa, ++wc) {
        prefetch_stream(wa, sizeof(block_q4_0x8));
        prefetch_stream(wc, sizeof(block_q4_0x8));
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int w = 0; w < 4; ++w) {
          const __m512i v = join(_mm256_loadu_si256((const __m256i*)wa->qs[w]), _mm256_loadu_si256((const __m256i*)wc->qs[w]));
          const __m512i lo = V::of(_mm512_and_si512(v, low4)), hi = V::of(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
          const __m512i alo = _mm512_abs_epi8(lo), ahi = _mm512_abs_epi8(hi);
          const __mmask64 nlo = _mm512_movepi8_mask(lo), nhi = _mm512_movepi8_mask(hi);
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            const int8_t* xq = ((const block_q8_0*)(x + t * xs))[b].qs;
            const __m512i xl = _mm512_set1_epi32(load32(xq + 4 * w)), xh = _mm512_set1_epi32(load32(xq + 16 + 4 * w));
            isum[t] = _mm512_dpbusd_epi32(isum[t], alo, _mm512_mask_sub_epi8(xl, nlo, _mm512_setzero_si512(), xl));
            isum[t] = _mm512_dpbusd_epi32(isum[t], ahi, _mm512_mask_sub_epi8(xh, nhi, _mm512_setzero_si512(), xh));
          }
        }
        const __m512 dw = cvtph_join(wa->d, wc->d);
        for (int t = 0; t < NT; ++t) {
          const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(((const block_q8_0*)(x + t * xs))[b].d)));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, acc[t]);
        }
      }
      for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ys, acc[t]);
    }
  };
};

template <int NT>
using q4_0x16_kernel = q4_0x16<q4_0_values512>::kernel<NT>;
template <int NT>
using iq4_nlx16_kernel = q4_0x16<iq4_nl_values512>::kernel<NT>;

// Two adjacent iq4_xs x8 groups (16 rows in 512-bit lanes) . NT tokens (q8_K): iq4_xsx8_kernel's operations lane for
// lane, its madd-by-scales + int32 add as one vpdpwssd (the same exact integers), |w| against x negated where w < 0.
template <int NT>
struct iq4_xsx16_vnni_kernel {
  SPINDLE_AVX512 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y,
                                 int64_t ys) {
    const int64_t nb = n / QK_K;
    const block_iq4_xsx8* wa = (const block_iq4_xsx8*)group;
    const block_iq4_xsx8* wc = wa + nb;  // the next group
    const __m512i values = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)k_iq4nl_values));
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    __m512 acc[8][NT];
    for (int k = 0; k < 8; ++k)
      for (int t = 0; t < NT; ++t) acc[k][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, ++wa, ++wc) {
      prefetch_stream(wa, sizeof(block_iq4_xsx8));
      prefetch_stream(wc, sizeof(block_iq4_xsx8));
      __m512i ls16[8];
      {
        __m256i la[8], lc[8];
        iq4_xsx8_scales(*wa, la);
        iq4_xsx8_scales(*wc, lc);
        for (int j = 0; j < 8; ++j) ls16[j] = join(la[j], lc[j]);
      }
      const __m512 dw = cvtph_join(wa->d, wc->d);
      const block_q8_K* xb[NT];
      __m512 scale[NT];
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(x + t * xs) + b;
        scale[t] = _mm512_mul_ps(dw, _mm512_set1_ps(xb[t]->d));
      }
#pragma GCC unroll 1
      for (int k = 0; k < 8; ++k) {
        __m512i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const int wd = 4 * j + (k & 3);
          const __m512i v = join(_mm256_loadu_si256((const __m256i*)wa->qs[wd]), _mm256_loadu_si256((const __m256i*)wc->qs[wd]));
          const __m512i nib = k < 4 ? _mm512_and_si512(v, low4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          const __m512i w = _mm512_shuffle_epi8(values, nib), aw = _mm512_abs_epi8(w);
          const __mmask64 neg = _mm512_movepi8_mask(w);
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            const __m512i xv = _mm512_set1_epi32(load32(xb[t]->qs + 32 * j + 4 * k));
            const __m512i p16 = _mm512_maddubs_epi16(aw, _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv));
            isum[t] = _mm512_dpwssd_epi32(isum[t], p16, ls16[j]);
          }
        }
        for (int t = 0; t < NT; ++t) acc[k][t] = _mm512_fmadd_ps(scale[t], _mm512_cvtepi32_ps(isum[t]), acc[k][t]);
      }
    }
    store_lane_sums<NT>(acc, y, ys);
  }
};

}  // namespace

packed_kernel packed_kernel_avx512(ggml_type wtype) {
  if (wtype == ggml_type::Q6_K) {
    packed_kernel pk = packed_kernel_avx2(wtype);
    pk.fn16 = &packed_entry<q6_Kx16_vnni_kernel, 8>;
    return pk;
  }
  if (wtype == ggml_type::Q8_0 || wtype == ggml_type::Q5_0) {
    packed_kernel pk = packed_kernel_avx2(wtype);
    pk.fn16 = wtype == ggml_type::Q8_0 ? &packed_entry<q8_0x16_vnni_kernel, 8> : &packed_entry<q5_0x16_vnni_kernel, 8>;
    return pk;
  }
  if (wtype == ggml_type::Q4_K) {
    packed_kernel pk = packed_kernel_avx2(wtype);
    pk.fn16 = &packed_entry<q4_Kx16_vnni_kernel, 8>;
    return pk;
  }
  if (wtype == ggml_type::IQ4_XS) {
    packed_kernel pk = packed_kernel_avx2(wtype);  // max_tokens 4
    pk.fn16 = &packed_entry<iq4_xsx16_vnni_kernel, 4>;
    return pk;
  }
  if (wtype == ggml_type::Q4_0 || wtype == ggml_type::IQ4_NL) {
    packed_kernel pk = packed_kernel_avx2(wtype);  // max_tokens 4
    pk.fn16 = wtype == ggml_type::Q4_0 ? &packed_entry<q4_0x16_kernel, 4> : &packed_entry<iq4_nlx16_kernel, 4>;
    return pk;
  }
  return packed_kernel_avx2(wtype);
}

}  // namespace spindle

#else  // no AVX-512 kernels (or the SIMDe emulation build): the AVX2 ones

namespace spindle {
packed_kernel packed_kernel_avx512(ggml_type wtype) { return packed_kernel_avx2(wtype); }
}  // namespace spindle

#endif
