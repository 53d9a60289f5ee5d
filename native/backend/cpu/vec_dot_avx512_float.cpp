// AVX-512 tile kernels for F32, F16 and BF16 weights (activations in the same format); BF16 uses
// vdpbf16ps (AVX512_BF16) when the CPU has it.
// Invariant: each output (r, t) has one 16-lane f32 accumulator; the last partial step uses masked loads
// (missing elements read as zero), so no scalar tail and the same sequence for every tile shape.
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// 16 elements from i (fewer when mask says so) widened to f32.
struct f32_elems512 {
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, (const float*)row + i);
  }
};

struct f16_elems512 {
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t*)row + i));
  }
};

struct bf16_elems512 {
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* row, int64_t i, __mmask16 m) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t*)row + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

template <class E>
struct float_tiles512 {
  template <int NR, int NT>
  struct kernel {
    SPINDLE_AVX512 static void run(const tile_args& a) {
      __m512 acc[NR][NT];
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
      for (int64_t i = 0; i < a.n; i += 16) {
        const __mmask16 m = a.n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (a.n - i)) - 1);
        __m512 wv[NR];
        for (int r = 0; r < NR; ++r) wv[r] = E::load16(a.w + r * a.ws, i, m);
        for (int t = 0; t < NT; ++t) {
          const __m512 xv = E::load16(a.x + t * a.xs, i, m);
          for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
        }
      }
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx512(acc[r][t]);
    }
  };
};

// BF16 with vdpbf16ps: 32 elements per step, pairs of products added into 16 f32 lanes.
template <int NR, int NT>
struct bf16_dp_kernel {
  SPINDLE_AVX512BF16 static void run(const tile_args& a) {
    __m512 acc[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < a.n; i += 32) {
      const __mmask32 m = a.n - i >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << (a.n - i)) - 1);
      __m512bh wv[NR];
      for (int r = 0; r < NR; ++r)
        wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, (const uint16_t*)(a.w + r * a.ws) + i);
      for (int t = 0; t < NT; ++t) {
        const __m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, (const uint16_t*)(a.x + t * a.xs) + i);
        for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv);
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx512(acc[r][t]);
  }
};

}  // namespace

tile_kernel tile_kernel_avx512_float(ggml_type wtype, bool has_bf16) {
  switch (wtype) {
    case ggml_type::F32: return make_tile_kernel<float_tiles512<f32_elems512>::kernel, 4, 4>();
    case ggml_type::F16: return make_tile_kernel<float_tiles512<f16_elems512>::kernel, 4, 4>();
    case ggml_type::BF16:
      if (has_bf16) return make_tile_kernel<bf16_dp_kernel, 4, 4>();
      return make_tile_kernel<float_tiles512<bf16_elems512>::kernel, 4, 4>();
    default: return {};
  }
}

}  // namespace spindle

#else

namespace spindle {
tile_kernel tile_kernel_avx512_float(ggml_type, bool) { return {}; }
}  // namespace spindle

#endif
