// Shared pieces of the AVX-512 kernel files (internal to native/backend/cpu).
// Invariant: every helper carries the AVX-512 target attribute (F/BW/VL/DQ + VNNI), so baseline code never
// depends on AVX-512. With -DSPINDLE_EMULATE_AVX512 (a hand-built test binary only) the same kernels are
// compiled against SIMDe's portable intrinsics, which lets a machine without AVX-512 check their logic.
#pragma once
#include <cstdint>

#include "backend/cpu/fp16.h"
#include "backend/cpu/vec_dot.h"

#if defined(SPINDLE_EMULATE_AVX512)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <cstring>
#define SPINDLE_HAVE_AVX512_KERNELS 1
#define SPINDLE_AVX512
#define SPINDLE_AVX512BF16
// SIMDe 0.7.4's alias for _mm512_madd_epi16 has the masked form's arity, and it lacks masked loads.
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
template <class V, class E>
inline V spindle_emu_maskz_load(uint64_t mask, const void* p) {
  E lanes[sizeof(V) / sizeof(E)] = {};
  for (size_t i = 0; i < sizeof(V) / sizeof(E); ++i)
    if (mask >> i & 1) std::memcpy(&lanes[i], (const E*)p + i, sizeof(E));
  V v;
  std::memcpy(&v, lanes, sizeof v);
  return v;
}
// ... nor a few widening conversions: lane i of the result is lane i of the input, converted.
template <class VO, class EO, class EI, class VI>
inline VO spindle_emu_widen(VI in) {
  constexpr size_t n = sizeof(VO) / sizeof(EO);
  EI a[n];
  EO b[n];
  std::memcpy(a, &in, sizeof a);
  for (size_t i = 0; i < n; ++i) b[i] = (EO)a[i];
  VO v;
  std::memcpy(&v, b, sizeof v);
  return v;
}
struct spindle_emu_half {
  uint16_t bits;
  operator float() const { return spindle::fp16_to_f32(bits); }
};
#define _mm512_cvtepi32_ps(a) spindle_emu_widen<simde__m512, float, int32_t>(a)
#define _mm512_cvtepu8_epi16(a) spindle_emu_widen<simde__m512i, uint16_t, uint8_t>(a)
#define _mm512_cvtepu16_epi32(a) spindle_emu_widen<simde__m512i, uint32_t, uint16_t>(a)
#define _mm512_cvtph_ps(a) spindle_emu_widen<simde__m512, float, spindle_emu_half>(a)
#define _mm512_maskz_loadu_ps(m, p) spindle_emu_maskz_load<simde__m512, float>(m, p)
#define _mm256_maskz_loadu_epi16(m, p) spindle_emu_maskz_load<simde__m256i, uint16_t>(m, p)
#define _mm512_maskz_loadu_epi16(m, p) spindle_emu_maskz_load<simde__m512i, uint16_t>(m, p)
#elif (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own `__Y = __Y` idiom (GCC PR105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define SPINDLE_HAVE_AVX512_KERNELS 1
#define SPINDLE_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define SPINDLE_AVX512BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512bf16,avx2,fma,f16c")))
#else
#define SPINDLE_HAVE_AVX512_KERNELS 0
#endif

namespace spindle {

// The AVX-512 kernels for F32 / F16 / BF16 weights (vec_dot_avx512_float.cpp).
tile_kernel tile_kernel_avx512_float(ggml_type wtype, bool has_bf16);

#if SPINDLE_HAVE_AVX512_KERNELS
// Sum of the 16 lanes in a fixed order.
SPINDLE_AVX512 inline float hsum_avx512(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// A 256-bit vector in the low half of a 512-bit one, the high half zero.
SPINDLE_AVX512 inline __m512i zext_512(__m256i v) { return _mm512_inserti64x4(_mm512_setzero_si512(), v, 0); }

#if defined(SPINDLE_EMULATE_AVX512)
inline float half_to_f32(uint16_t h) { return fp16_to_f32(h); }
#else
SPINDLE_AVX512 inline float half_to_f32(uint16_t h) { return _cvtsh_ss(h); }
#endif
#endif

}  // namespace spindle
