// Scalar 8-bit float conversions for fp8 K / V stores (vLLM's / SGLang's --kv-cache-dtype fp8_e4m3 / fp8_e5m2, with
// vLLM's default scale of 1: the values are stored as they are).
// Invariant: f32 -> fp8 rounds to nearest, ties to even, and saturates: a finite value (or an infinity) beyond the
// largest finite one becomes it (448 for e4m3, 57344 for e5m2), as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE,
// ...) which vLLM's stores use; NaN gives the canonical NaN 0x7f (sign dropped, as CUDA's). fp8 -> f32 is exact.
//   e4m3 ("fn": no infinities): sign, 4 exponent bits (bias 7), 3 mantissa bits; 0x7f / 0xff are NaN.
//   e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits: the high byte of an IEEE half.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/cpu/fp16.h"

namespace spindle {

namespace fp8_detail {

// |f| (bits a, finite, not NaN) rounded to an 8-bit float with m mantissa bits and exponent bias b, as the
// magnitude byte: subnormals (below 2^(1-b)) are multiples of 2^(1-b-m), whose codes count on into the normals;
// normals keep m mantissa bits, ties to even (a carry moves into the exponent). max: the largest finite code.
inline uint8_t round_magnitude(uint32_t a, int m, int b, uint8_t max) {
  const uint32_t min_normal = (uint32_t)(127 + 1 - b) << 23;  // f32 bits of 2^(1-b)
  uint32_t code;
  if (a < min_normal) {
    // v = a / 2^(1-b-m) is exact (a power-of-two scale), in [0, 2^m]; rounded to nearest, ties to even, whatever
    // the floating-point environment's mode; 2^m is the first normal code
    const float v = f32_from_bits(a) * std::ldexp(1.0f, b - 1 + m);
    code = (uint32_t)v;
    const float frac = v - (float)code;  // exact
    if (frac > 0.5f || (frac == 0.5f && (code & 1))) ++code;
  } else {
    const uint32_t drop = 23 - (uint32_t)m;                      // f32 mantissa bits below the kept ones
    const uint32_t exp = (a >> 23) - 127 + (uint32_t)b;          // biased 8-bit-float exponent, >= 1
    code = (exp << m) | ((a >> drop) & ((1u << m) - 1));
    const uint32_t rem = a & ((1u << drop) - 1), half = 1u << (drop - 1);
    if (rem > half || (rem == half && (code & 1))) ++code;
  }
  return code > max ? max : (uint8_t)code;
}

// f32 -> an 8-bit float with m mantissa bits and exponent bias b: NaN the canonical 0x7f; |f| at or above the
// largest finite value (f32 bits sat, code max) or infinite, that value; else rounded (round_magnitude), signed.
inline uint8_t from_f32(float f, int m, int b, uint32_t sat, uint8_t max) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return 0x7f;
  if (a >= sat) return sign | max;
  return sign | round_magnitude(a, m, b, max);
}

}  // namespace fp8_detail

// f32 -> e4m3 (round to nearest even, saturating at +-448 = f32 bits 0x43e00000, NaN -> 0x7f).
inline uint8_t f32_to_fp8_e4m3(float f) { return fp8_detail::from_f32(f, 3, 7, 0x43e00000, 0x7e); }

// f32 -> e5m2 (round to nearest even, saturating at +-57344 = f32 bits 0x47600000, NaN -> 0x7f).
inline uint8_t f32_to_fp8_e5m2(float f) { return fp8_detail::from_f32(f, 2, 15, 0x47600000, 0x7b); }

// e4m3 as the binary16 bits whose value is the e4m3 value / 256: the magnitude shifted under the half's sign (its
// exponent field then reads with bias 15 instead of 7, subnormals included), NaN codes made a half NaN. The SIMD
// loaders build the same bits 8 or 16 at a time (attention_avx2_inl.h), so every reader gets the same f32.
inline uint16_t fp8_e4m3_as_fp16_div256(uint8_t x) {
  const uint16_t h = (uint16_t)(((x & 0x80) << 8) | ((x & 0x7f) << 7));
  return (x & 0x7f) == 0x7f ? (uint16_t)(h | 0x7e00) : h;
}

// e4m3 -> f32 (exact: the half's value times 256).
inline float fp8_e4m3_to_f32(uint8_t x) { return fp16_to_f32(fp8_e4m3_as_fp16_div256(x)) * 256.0f; }

// e5m2 -> f32 (exact: the high byte of a half).
inline float fp8_e5m2_to_f32(uint8_t x) { return fp16_to_f32((uint16_t)(x << 8)); }

}  // namespace spindle
