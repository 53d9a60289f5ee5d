// AVX2 (+FMA, F16C) tile kernels for F32, F16 and BF16 weights (activations in the same format).
// Invariant: each output (r, t) has one 8-lane f32 accumulator over elements [0, n - n % 8), a fixed
// horizontal sum, then the n % 8 tail elements with scalar fma, whatever the tile shape.
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/fp16.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

struct f32_elems {
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps((const float*)row + i);
  }
  static inline float get(const uint8_t* row, int64_t i) { return ((const float*)row)[i]; }
};

struct f16_elems {
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)((const uint16_t*)row + i)));
  }
  static inline float get(const uint8_t* row, int64_t i) { return fp16_to_f32(((const uint16_t*)row)[i]); }
};

struct bf16_elems {
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* row, int64_t i) {
    const __m128i h = _mm_loadu_si128((const __m128i*)((const uint16_t*)row + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static inline float get(const uint8_t* row, int64_t i) { return bf16_to_f32(((const uint16_t*)row)[i]); }
};

// W . x with both rows of element type E.
template <class E>
struct float_tiles {
  template <int NR, int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(const tile_args& a) {
      __m256 acc[NR][NT];
      for (int r = 0; r < NR; ++r)
        for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
      const int64_t n8 = a.n - a.n % 8;
      for (int64_t i = 0; i < n8; i += 8) {
        __m256 wv[NR];
        for (int r = 0; r < NR; ++r) wv[r] = E::load8(a.w + r * a.ws, i);
        for (int t = 0; t < NT; ++t) {
          const __m256 xv = E::load8(a.x + t * a.xs, i);
          for (int r = 0; r < NR; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
        }
      }
      for (int r = 0; r < NR; ++r) {
        for (int t = 0; t < NT; ++t) {
          __m128 s = _mm_set_ss(hsum_avx2(acc[r][t]));
          for (int64_t i = n8; i < a.n; ++i)
            s = _mm_fmadd_ss(_mm_set_ss(E::get(a.w + r * a.ws, i)), _mm_set_ss(E::get(a.x + t * a.xs, i)), s);
          a.y[t * a.ys + r] = _mm_cvtss_f32(s);
        }
      }
    }
  };
};

}  // namespace

tile_kernel tile_kernel_avx2_float(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return make_tile_kernel<float_tiles<f32_elems>::kernel, 4, 2>();
    case ggml_type::F16: return make_tile_kernel<float_tiles<f16_elems>::kernel, 4, 2>();
    case ggml_type::BF16: return make_tile_kernel<float_tiles<bf16_elems>::kernel, 4, 2>();
    default: return {};
  }
}

}  // namespace spindle

#else

namespace spindle {
tile_kernel tile_kernel_avx2_float(ggml_type) { return {}; }
}  // namespace spindle

#endif
