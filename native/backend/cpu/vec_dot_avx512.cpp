// AVX-512 (F/BW/VL/DQ + VNNI) tile kernels for the quantized weight types.
// Invariant: every output (r, t) owns its accumulator and sees the same instruction sequence in every tile
// shape. Integer sums are exact: vpdpbusd takes unsigned weights (q8_0 shifted by +128) and the shift is taken
// back exactly through the activation sums; q6_K goes through maddubs (< 2^15) and vpdpwssd into int32.
// Q4_0 / Q4_K use the AVX2 kernels (llama.cpp's repacked-gemm arithmetic, see vec_dot_avx2.cpp).
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS
#include "backend/cpu/quants.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// Two consecutive 32-blocks (or one, high half zero) of a q8_0 row as 64 unsigned bytes w + 128.
struct q8_0_weights512 {
  static constexpr int offset = 128;
  SPINDLE_AVX512 static inline __m512i load(const uint8_t* row, int64_t b, bool pair, __m512* d) {
    const block_q8_0* blk = (const block_q8_0*)row + b;
    const __m256i lo = _mm256_loadu_si256((const __m256i*)blk[0].qs);
    const __m256i hi = pair ? _mm256_loadu_si256((const __m256i*)blk[1].qs) : _mm256_set1_epi8(-128);
    const float d1 = pair ? half_to_f32(blk[1].d) : 0.0f;
    *d = _mm512_insertf32x8(_mm512_set1_ps(half_to_f32(blk[0].d)), _mm256_set1_ps(d1), 1);
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(-128));
  }
};

// W (q8_0) . x (q8_0), two blocks per step: lanes 0..7 block b, 8..15 block b + 1.
// int lanes: dpbusd(-offset * sum(x), w + offset, x) = sum(w * x); then f32 acc += (dw * dx) * int.
template <class L>
struct q8_0_tiles512 {
  template <int NR, int NT>
  struct kernel {
    SPINDLE_AVX512 static void run(const tile_args& a) {
      __m512 acc[NR][NT];
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
      const int64_t nb = a.n / QK8_0;
      const __m512i off = _mm512_set1_epi8((char)L::offset);
      for (int64_t b = 0; b < nb; b += 2) {
        const bool pair = b + 1 < nb;
        __m512i wq[NR];
        __m512 dw[NR];
        for (int r = 0; r < NR; ++r) wq[r] = L::load(a.w + r * a.ws, b, pair, &dw[r]);
        for (int t = 0; t < NT; ++t) {
          const block_q8_0* xb = (const block_q8_0*)(a.x + t * a.xs) + b;
          const __m256i lo = _mm256_loadu_si256((const __m256i*)xb[0].qs);
          const __m256i hi = pair ? _mm256_loadu_si256((const __m256i*)xb[1].qs) : _mm256_setzero_si256();
          const __m512i xq = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
          const float dx1 = pair ? half_to_f32(xb[1].d) : 0.0f;
          const __m512 dx = _mm512_insertf32x8(_mm512_set1_ps(half_to_f32(xb[0].d)), _mm256_set1_ps(dx1), 1);
          const __m512i neg = _mm512_sub_epi32(_mm512_setzero_si512(),
                                               _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xq));
          for (int r = 0; r < NR; ++r) {
            const __m512i p = _mm512_dpbusd_epi32(neg, wq[r], xq);
            acc[r][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], dx), _mm512_cvtepi32_ps(p), acc[r][t]);
          }
        }
      }
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx512(acc[r][t]);
    }
  };
};

// The 4 vectors of 64 unsigned 6-bit values (elements 64c .. 64c + 64) of a q6_K block.
SPINDLE_AVX512 static inline void q6_K_unpack512(const block_q6_K* wb, __m512i q[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), two = _mm512_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m512i l = _mm512_loadu_si512((const void*)(wb->ql + 64 * h));
    const __m256i hb = _mm256_loadu_si256((const __m256i*)(wb->qh + 32 * h));
    const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);
    const __m512i top0 = _mm512_slli_epi16(_mm512_and_si512(hz, two), 4);
    const __m512i top1 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hz, 4), two), 4);
    q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, low4), top0);
    q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), top1);
  }
}

// W (q6_K) . x (q8_K): per super-block, d*dx * (sum_g scales[g] (q.x)_g - 32 * sum_g scales[g] * bsums[g]).
template <int NR, int NT>
struct q6_K_kernel512 {
  SPINDLE_AVX512 static void run(const tile_args& a) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    // lane k of group selector: k / 8 (each 16-element scale group covers 8 int16 pair lanes)
    const __m512i group = _mm512_cvtepu8_epi16(_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      for (int r = 0; r < NR; ++r) {
        const block_q6_K* wb = (const block_q6_K*)(a.w + r * a.ws) + b;
        __m512i q[4], scale[4];
        q6_K_unpack512(wb, q);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)wb->scales));
        for (int c = 0; c < 4; ++c)
          scale[c] = _mm512_permutexvar_epi16(_mm512_add_epi16(group, _mm512_set1_epi16((short)(4 * c))),
                                              zext_512(sc16));
        const float d = half_to_f32(wb->d);
        for (int t = 0; t < NT; ++t) {
          const block_q8_K* xb = (const block_q8_K*)(a.x + t * a.xs) + b;
          __m512i isum = _mm512_setzero_si512();
          for (int c = 0; c < 4; ++c) {
            const __m512i xq = _mm512_loadu_si512((const void*)(xb->qs + 64 * c));
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(q[c], xq), scale[c]);
          }
          const __m256i bs = _mm256_loadu_si256((const __m256i*)xb->bsums);
          const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);  // 32 * scales . bsums
          isum = _mm512_sub_epi32(isum, zext_512(offset));
          acc[r][t] = _mm512_fmadd_ps(_mm512_set1_ps(d * xb->d), _mm512_cvtepi32_ps(isum), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx512(acc[r][t]);
  }
};

}  // namespace

tile_kernel tile_kernel_avx512(ggml_type wtype, bool has_bf16) {
  switch (wtype) {
    case ggml_type::Q8_0: return make_tile_kernel<q8_0_tiles512<q8_0_weights512>::kernel, 4, 4>();
    // one f32 fma chain per output over the blocks, as llama.cpp's repacked gemm at every x86 level: the
    // AVX2 kernels' arithmetic, which no wider vector changes
    case ggml_type::Q4_0: case ggml_type::Q4_K: return tile_kernel_avx2(wtype);
    case ggml_type::Q6_K: return make_tile_kernel<q6_K_kernel512, 4, 4>();
    default: return tile_kernel_avx512_float(wtype, has_bf16);
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX-512 kernels

namespace spindle {
tile_kernel tile_kernel_avx512(ggml_type, bool) { return {}; }
}  // namespace spindle

#endif
