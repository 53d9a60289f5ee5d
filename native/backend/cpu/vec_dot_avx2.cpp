// AVX2 (+FMA, F16C) tile kernels for the quantized weight types; compiled per function with
// __attribute__((target)) so the binary still runs on CPUs without AVX2 (they never call these).
// Invariant: every output (r, t) owns its accumulator and sees the same instruction sequence in every tile
// shape; integer block sums are exact (maddubs pairs stay below 2^15, sums in int32).
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include <cstring>

#include "backend/cpu/quants.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// q8_0 / q4_0 weight block b of a row, as 32 signed bytes, and its scale.
struct q8_0_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_q8_0* blk = (const block_q8_0*)row + b;
    *d = _cvtsh_ss(blk->d);
    return _mm256_loadu_si256((const __m256i*)blk->qs);
  }
};

struct q4_0_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_q4_0* blk = (const block_q4_0*)row + b;
    *d = _cvtsh_ss(blk->d);
    const __m128i packed = _mm_loadu_si128((const __m128i*)blk->qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                       _mm256_set1_epi8(0x0f));  // elements 0..15 low nibbles, 16..31 high
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
};

// W (q8_0 or q4_0) . x (q8_0): per 32-block, (dw * dx) * sum(w * x), accumulated in 8 f32 lanes.
template <class L>
struct q8_0_tiles {
  template <int NR, int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(const tile_args& a) {
      __m256 acc[NR][NT];
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < a.n / QK8_0; ++b) {
        __m256i xq[NT];
        float dx[NT];
        for (int t = 0; t < NT; ++t) {
          const block_q8_0* xb = (const block_q8_0*)(a.x + t * a.xs) + b;
          xq[t] = _mm256_loadu_si256((const __m256i*)xb->qs);
          dx[t] = _cvtsh_ss(xb->d);
        }
        for (int r = 0; r < NR; ++r) {
          float dw;
          const __m256i sw = L::load(a.w + r * a.ws, b, &dw);
          const __m256i aw = _mm256_sign_epi8(sw, sw);
          for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_i8_avx2(aw, sw, xq[t]);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[t]), _mm256_cvtepi32_ps(p), acc[r][t]);
          }
        }
      }
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx2(acc[r][t]);
    }
  };
};

// The 8 six-bit scales and mins of a q4_K block (ggml's packing, unpacked 4 at a time).
SPINDLE_AVX2 static inline void q4_K_unpack_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
  uint32_t u[3], s[2], mm[2];
  std::memcpy(u, packed, 12);
  s[0] = u[0] & 0x3f3f3f3f;
  mm[0] = u[1] & 0x3f3f3f3f;
  s[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
  mm[1] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
  std::memcpy(sc, s, 8);
  std::memcpy(m, mm, 8);
}

// W (q4_K) . x (q8_K): per super-block, d*dx * sum_j sc[j] (q.x)_j  -  dmin*dx * sum_j m[j] * xsum_j.
template <int NR, int NT>
struct q4_K_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      for (int r = 0; r < NR; ++r) {
        const block_q4_K* wb = (const block_q4_K*)(a.w + r * a.ws) + b;
        __m256i q[8], scale[8];
        uint8_t sc[8], m[8];
        q4_K_unpack_scales(wb->scales, sc, m);
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_loadu_si256((const __m256i*)(wb->qs + 32 * c));
          q[2 * c] = _mm256_and_si256(v, low4);
          q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
        for (int j = 0; j < 8; ++j) scale[j] = _mm256_set1_epi16(sc[j]);
        const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)m));
        const __m256i mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
        const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
        for (int t = 0; t < NT; ++t) {
          const block_q8_K* xb = (const block_q8_K*)(a.x + t * a.xs) + b;
          __m256i isum = _mm256_setzero_si256();
          for (int j = 0; j < 8; ++j) {
            const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb->qs + 32 * j));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], xq), scale[j]));
          }
          const __m256i bs = _mm256_loadu_si256((const __m256i*)xb->bsums);
          const __m256i msum = _mm256_madd_epi16(mins, bs);  // lane j: m[j] * (bsums[2j] + bsums[2j+1])
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * xb->d), _mm256_cvtepi32_ps(msum), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx2(acc[r][t]);
  }
};

// The 8 vectors of 32 unsigned 6-bit values (elements 32j .. 32j + 32) of a q6_K block.
SPINDLE_AVX2 static inline void q6_K_unpack(const block_q6_K* wb, __m256i q[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = _mm256_loadu_si256((const __m256i*)(wb->ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i*)(wb->ql + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256((const __m256i*)(wb->qh + 32 * h));
    for (int c = 0; c < 4; ++c) {
      const __m256i lo = (c % 2 == 0) ? l0 : l1;
      const __m256i nib = (c < 2) ? _mm256_and_si256(lo, low4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), low4);
      const __m256i top = _mm256_and_si256(_mm256_srl_epi16(hb, _mm_cvtsi32_si128(2 * c)), two);
      q[4 * h + c] = _mm256_or_si256(nib, _mm256_slli_epi16(top, 4));
    }
  }
}

// W (q6_K) . x (q8_K): per super-block, d*dx * (sum_g scales[g] (q.x)_g - 32 * sum_g scales[g] * bsums[g]).
template <int NR, int NT>
struct q6_K_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      for (int r = 0; r < NR; ++r) {
        const block_q6_K* wb = (const block_q6_K*)(a.w + r * a.ws) + b;
        __m256i q[8], scale[8];
        q6_K_unpack(wb, q);
        for (int j = 0; j < 8; ++j)
          scale[j] = _mm256_set_m128i(_mm_set1_epi16(wb->scales[2 * j + 1]), _mm_set1_epi16(wb->scales[2 * j]));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)wb->scales));
        const float d = _cvtsh_ss(wb->d);
        for (int t = 0; t < NT; ++t) {
          const block_q8_K* xb = (const block_q8_K*)(a.x + t * a.xs) + b;
          __m256i isum = _mm256_setzero_si256();
          for (int j = 0; j < 8; ++j) {
            const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb->qs + 32 * j));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], xq), scale[j]));
          }
          const __m256i bs = _mm256_loadu_si256((const __m256i*)xb->bsums);
          const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);  // 32 * scales . bsums
          isum = _mm256_sub_epi32(isum, offset);
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb->d), _mm256_cvtepi32_ps(isum), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx2(acc[r][t]);
  }
};

}  // namespace

tile_kernel tile_kernel_avx2(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::Q8_0: return make_tile_kernel<q8_0_tiles<q8_0_weights>::kernel, 4, 4>();
    case ggml_type::Q4_0: return make_tile_kernel<q8_0_tiles<q4_0_weights>::kernel, 4, 4>();
    case ggml_type::Q4_K: return make_tile_kernel<q4_K_kernel, 4, 4>();
    case ggml_type::Q6_K: return make_tile_kernel<q6_K_kernel, 4, 4>();
    default: return tile_kernel_avx2_float(wtype);
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX2 kernels

namespace spindle {
tile_kernel tile_kernel_avx2(ggml_type) { return {}; }
}  // namespace spindle

#endif
