// Scalar reference conversions of quants_more.h's weight types and the q8_1 activation format.
// Invariant: each dequantizer computes every weight as ggml's dequantize_row_* does (the same f32 products, so
// the same bits); quantize_row_q8_1 gives the bytes of llama.cpp's x86 (AVX2) quantize_row_q8_1.
#include "backend/cpu/quants_more.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/fp16.h"

namespace spindle {

const int8_t k_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

namespace {

// Round to nearest, ties to even, for |v| < 2^22 (as quants.cpp; _mm256_round_ps in the default mode).
inline int round_nearest_even(float v) {
  const float biased = v + 12582912.f;  // 1.5 * 2^23
  return (int)(f32_bits(biased) & 0x007fffff) - 0x00400000;
}

// The 5-bit quant of element j (0..31) of a q5_0 / q5_1 block.
inline int q5_quant(const uint8_t* qs, const uint8_t* qh, int j) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const int low = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return low | (int)(((h >> j) & 1) << 4);
}

}  // namespace

void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_1; ++b, y += QK4_1) {
    const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = (x[b].qs[j] & 0x0f) * d + m;
      y[j + QK4_1 / 2] = (x[b].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_0; ++b, y += QK5_0) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < QK5_0; ++j) y[j] = (q5_quant(x[b].qs, x[b].qh, j) - 16) * d;
  }
}

void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_1; ++b, y += QK5_1) {
    const float d = fp16_to_f32(x[b].d), m = fp16_to_f32(x[b].m);
    for (int j = 0; j < QK5_1; ++j) y[j] = q5_quant(x[b].qs, x[b].qh, j) * d + m;
  }
}

void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
    for (int h = 0; h < 2; ++h) {      // 128-element halves
      for (int c = 0; c < 4; ++c) {    // 32-element quarters: bits 2c..2c+1 of qs[32h + l]
        for (int g = 0; g < 2; ++g) {  // the two groups of 16 in the quarter
          const uint8_t sc = x[b].scales[8 * h + 2 * c + g];
          const float dl = d * (sc & 0x0f), ml = dmin * (sc >> 4);
          const uint8_t* q = x[b].qs + 32 * h + 16 * g;
          for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> (2 * c)) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int h = 0; h < 2; ++h) {
      for (int c = 0; c < 4; ++c) {
        const uint8_t hbit = (uint8_t)(1u << (4 * h + c));
        for (int g = 0; g < 2; ++g) {
          const float dl = d * (q3_K_scale(8 * h + 2 * c + g, x[b].scales) - 32);
          for (int l = 16 * g; l < 16 * g + 16; ++l) {
            const int q = ((x[b].qs[32 * h + l] >> (2 * c)) & 3) - ((x[b].hmask[l] & hbit) ? 0 : 4);
            *y++ = dl * q;
          }
        }
      }
    }
  }
}

void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d), dmin = fp16_to_f32(x[b].dmin);
    for (int j = 0; j < 8; ++j) {  // sub-block j: nibbles of qs[32 * (j / 2) ..], high bit j of qh[l]
      uint8_t sc, m;
      q4_K_scale_min(j, x[b].scales, &sc, &m);
      const float dl = d * sc, ml = dmin * m;
      const uint8_t* q = x[b].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int l = 0; l < 32; ++l) {
        const int v = ((q[l] >> shift) & 0x0f) + ((x[b].qh[l] >> j) & 1) * 16;
        *y++ = dl * v - ml;
      }
    }
  }
}

void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_NL; ++b, y += QK4_NL) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < QK4_NL / 2; ++j) {
      y[j] = d * k_iq4nl_values[x[b].qs[j] & 0x0f];
      y[j + QK4_NL / 2] = d * k_iq4nl_values[x[b].qs[j] >> 4];
    }
  }
}

void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = fp16_to_f32(x[b].d);
    for (int j = 0; j < 8; ++j, y += 32) {
      const float dl = d * (iq4_xs_scale(j, x[b]) - 32);
      const uint8_t* q = x[b].qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * k_iq4nl_values[q[l] & 0x0f];
        y[l + 16] = dl * k_iq4nl_values[q[l] >> 4];
      }
    }
  }
}

void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK8_1; ++b) {
    const float* xb = x + b * QK8_1;
    float amax = 0.0f;
    for (int j = 0; j < QK8_1; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.f, id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      int q = round_nearest_even(xb[j] * id);
      q = q > 127 ? 127 : (q < -128 ? -128 : q);
      y[b].qs[j] = (int8_t)q;
      sum += q;
    }
    y[b].d = f32_to_fp16(d);
    y[b].s = f32_to_fp16(d * (float)sum);
  }
}

}  // namespace spindle
