// Scalar reference conversions between ggml blocks and f32.
// Invariant: these are the definitions every SIMD path is tested against; activation quantization has a
// single implementation (this one), so every feature level feeds the kernels the same bytes.
#include "backend/cpu/quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/fp16.h"

namespace spindle {

// Round to nearest, ties to even, for |v| < 2^22 (the magic-number trick ggml's nearest_int uses;
// identical to _mm256_round_ps(v, _MM_ROUND_NEAREST) in the default rounding mode).
static inline int round_nearest_even(float v) {
  const float biased = v + 12582912.f;  // 1.5 * 2^23
  return (int)(f32_bits(biased) & 0x007fffff) - 0x00400000;
}

void dequantize_row_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_f32(x[i]);
}

void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(x[i]);
}

void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < QK8_0; ++j) y[b * QK8_0 + j] = x[b].qs[j] * d;
  }
}

void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      y[b * QK4_0 + j] = ((x[b].qs[j] & 0x0f) - 8) * d;
      y[b * QK4_0 + j + QK4_0 / 2] = ((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
    const uint8_t* q = x[b].qs;
    for (int c = 0; c < 4; ++c) {  // 64-element chunks: sub-blocks 2c (low nibbles) and 2c + 1 (high)
      uint8_t sc, m;
      q4_K_scale_min(2 * c, x[b].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_K_scale_min(2 * c + 1, x[b].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[32 * c + l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[32 * c + l] >> 4) - m2;
    }
  }
}

void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int h = 0; h < 2; ++h) {  // two halves of 128 elements
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      float* out = y + b * QK_K + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * sc[g] * q1;
        out[l + 32] = d * sc[g + 2] * q2;
        out[l + 64] = d * sc[g + 4] * q3;
        out[l + 96] = d * sc[g + 6] * q4;
      }
    }
  }
}

// As llama.cpp's x86 quantize_row_q8_0 (AVX/AVX2 builds): d = amax / 127 stored as fp16,
// q = round-half-even(x * (127 / amax)). (The portable ggml reference differs: x * (1 / d), ties away.)
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float* xb = x + b * QK8_0;
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[b].d = f32_to_fp16(amax / 127.f);
    for (int j = 0; j < QK8_0; ++j) {
      const int q = round_nearest_even(xb[j] * id);
      y[b].qs[j] = (int8_t)(q > 127 ? 127 : (q < -128 ? -128 : q));
    }
  }
}

// As ggml's quantize_row_q4_0_ref (which llama.cpp's CPU backend stores a q4_0 KV cache with): d = (the signed value
// of largest magnitude, first one wins) / -8 stored as fp16, q = min(15, trunc(x * (1 / d) + 8.5)) with the f32 d.
// A value whose x / d is not finite (NaN, infinities, a block so small that 1 / d overflows) is stored as 8 (zero)
// instead of ggml's undefined cast.
void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    const float* xb = x + b * QK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK4_0; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const float x0 = xb[j] * id + 8.5f, x1 = xb[j + QK4_0 / 2] * id + 8.5f;
      // with a finite 1 / d, x * id is in [-8, 8] (|x| <= |max|), so x + 8.5 is in [0.5, 16.5] and the cast truncates
      // to 0..16; a block whose 1 / d overflows (|max| below ~2.4e-38: d is 0 in f16) or holds NaN / inf is stored as 8
      const int q0 = std::isfinite(x0) ? std::min(15, (int)x0) : 8, q1 = std::isfinite(x1) ? std::min(15, (int)x1) : 8;
      y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
    }
  }
}

// As ggml's quantize_row_q8_K_ref (which llama.cpp's CPU backend uses): scale by -127 / (the signed value of
// largest magnitude, first one wins), round half to even, d = 1 / iscale, plus 16-element sums.
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float* xb = x + b * QK_K;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(block_q8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int q = round_nearest_even(iscale * xb[j]);
      y[b].qs[j] = (int8_t)(q > 127 ? 127 : q);
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * g + j];
      y[b].bsums[g] = (int16_t)sum;
    }
    y[b].d = 1 / iscale;
  }
}

void convert_row_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_fp16(x[i]);
}

void convert_row_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

}  // namespace spindle
