// Scalar half (IEEE binary16) and bfloat16 conversions, bit-identical to ggml's.
// Invariant: f32 -> f16 and f32 -> bf16 round to nearest, ties to even (what F16C's vcvtps2ph and ggml's
// GGML_FP32_TO_BF16 do); f16/bf16 -> f32 is exact. NaN stays NaN (quieted); only the NaN payload may differ
// from F16C, which llama.cpp's CPU path also tolerates.
#pragma once
#include <cstdint>
#include <cstring>

namespace spindle {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// binary16 -> f32 (exact, subnormals included).
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000 | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);  // +-0
  // subnormal: value = mant * 2^-24, renormalize
  int e = 113;  // 127 - 15 + 1
  while ((mant & 0x400) == 0) {
    mant <<= 1;
    --e;
  }
  return f32_from_bits(sign | ((uint32_t)e << 23) | ((mant & 0x3ff) << 13));
}

// f32 -> binary16, round to nearest even; overflow gives inf, NaN gives a quiet NaN.
inline uint16_t f32_to_fp16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00;                // NaN
  if (a >= 0x477ff000) return sign | 0x7c00;               // rounds to >= 65536: inf
  if (a >= 0x38800000) {                                   // normal half (>= 2^-14)
    const uint32_t r = a + 0x0fff + ((a >> 13) & 1);       // ties to even on bit 13
    return sign | (uint16_t)((r - 0x38000000) >> 13);
  }
  if (a < 0x33000000) return sign;                         // < 2^-25: rounds to 0
  // subnormal half: shift the full mantissa so that the half ulp is 2^-24
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - e;                          // 14..24
  const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  const uint32_t rounded = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
  return sign | (uint16_t)rounded;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

// f32 -> bfloat16, round to nearest even; NaN is quieted (as ggml_compute_fp32_to_bf16).
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

}  // namespace spindle
