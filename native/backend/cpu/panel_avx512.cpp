// AVX-512 panel kernels for F32, F16 and BF16 weights with f32 fmas (panel_avx512_inl.h; BF16 on CPUs without
// AVX512_BF16: with it, panel_avx512_bf16.cpp).
// Invariant: lane j of an output is the chain fma(w[k], x[k], acc) over the slots of lane j in k order, from +0,
// padding included, as the masked tile kernel (vec_dot_avx512_float.cpp) runs it, so each output has its bits.
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS && !defined(SPINDLE_EMULATE_AVX512)
#define SPINDLE_PANEL_TARGET SPINDLE_AVX512
#include "backend/cpu/panel_avx512_inl.h"

namespace spindle {
namespace {

// 16 consecutive elements of a slot, as f32; madd: the tile kernel's _mm512_fmadd_ps(w, x, acc).
struct f32_slot {
  using vec = __m512;
  static constexpr size_t bytes = 4;
  static constexpr int group = 1;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) { return _mm512_loadu_ps((const float*)p); }
  SPINDLE_AVX512 static inline __m512 madd(__m512 acc, __m512 w, const float* x) {
    return _mm512_fmadd_ps(w, _mm512_set1_ps(*x), acc);
  }
};

struct f16_slot : f32_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
  }
};

struct bf16_slot : f32_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) {
    const __m256i h = _mm256_loadu_si256((const __m256i*)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

constexpr panel_shape k_shape{k_rows, k_lanes, true};

}  // namespace

panel_kernel panel_kernel_avx512(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return make_panel_kernel512<f32_slot>(pack_panel_avx512_f32, panel_round_f32, k_shape, 4);
    case ggml_type::F16:
      return make_panel_kernel512<f16_slot>(pack_panel_avx512_16bit, panel_round_f16_f16c, k_shape, 2);
    case ggml_type::BF16:
      if (cpu_detected_features().avx512_bf16) return panel_kernel_avx512_bf16();  // pairs, as its tile kernel
      return make_panel_kernel512<bf16_slot>(pack_panel_avx512_16bit, panel_round_bf16, k_shape, 2);
    default: return {};
  }
}

}  // namespace spindle

#else

namespace spindle {
panel_kernel panel_kernel_avx512(ggml_type) { return {}; }
}  // namespace spindle

#endif
