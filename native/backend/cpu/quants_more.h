// ggml block layouts of the weight types added after the first five quantized ones
// (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS), the q8_1 activation format, and their scalar
// conversions. Invariant: each struct is byte-identical to ggml's (ggml-common.h), so GGUF tensor data is read
// in place; element i of a row always means the i-th weight of the row as ggml's dequantize_row_* writes it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/quants.h"

namespace spindle {

constexpr int QK4_1 = 32;   // elements per q4_1 block
constexpr int QK5_0 = 32;   // elements per q5_0 block
constexpr int QK5_1 = 32;   // elements per q5_1 block
constexpr int QK8_1 = 32;   // elements per q8_1 block
constexpr int QK4_NL = 32;  // elements per iq4_nl block

// The 16 signed levels of the non-linear 4-bit types (iq4_nl, iq4_xs), indexed by the nibble.
extern const int8_t k_iq4nl_values[16];

// 32 weights: w = d * q + m, q 4-bit; qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct block_q4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset (the block minimum)
  uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 must match ggml");

// 32 weights: w = d * (q - 16), q 5-bit: low 4 bits as in q4_0, bit 4 of element j is bit j of qh (little endian).
struct block_q5_0 {
  uint16_t d;     // fp16 scale
  uint8_t qh[4];  // 32 high bits
  uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 must match ggml");

// 32 weights: w = d * q + m, q 5-bit laid out as in q5_0.
struct block_q5_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 offset
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 must match ggml");

// 32 activations: v = d * qs[i]; s = fp16(d * sum of qs) (the term q4_1 / q5_1 offsets multiply).
struct block_q8_1 {
  uint16_t d;  // fp16 scale
  uint16_t s;  // fp16 d * sum(qs)
  int8_t qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 must match ggml");

// 256 weights in 16 groups of 16: w = d * (sc & 15) * q - dmin * (sc >> 4), q 2-bit, sc = scales[group].
// Element 128h + 32c + l (h < 2, c < 4, l < 32) is bits 2c..2c+1 of qs[32h + l]; its group is (128h+32c+l) / 16.
struct block_q2_K {
  uint8_t scales[QK_K / 16];  // 4-bit scale (low) and 4-bit min (high) per group
  uint8_t qs[QK_K / 4];
  uint16_t d;                 // fp16 super-block scale for the scales
  uint16_t dmin;              // fp16 super-block scale for the mins
};
static_assert(sizeof(block_q2_K) == 84, "block_q2_K must match ggml");

// 256 weights in 16 groups of 16: w = d * (sc[group] - 32) * (q - 4 * !hbit), q 2-bit laid out as in q2_K,
// hbit = bit (4h + c) of hmask[l] for element 128h + 32c + l; sc 6-bit packed (q3_K_scale).
struct block_q3_K {
  uint8_t hmask[QK_K / 8];  // high bits
  uint8_t qs[QK_K / 4];     // low 2 bits
  uint8_t scales[12];       // 16 scales of 6 bits
  uint16_t d;               // fp16 super-block scale
};
static_assert(sizeof(block_q3_K) == 110, "block_q3_K must match ggml");

// 256 weights in 8 sub-blocks of 32: w = d * sc[j] * q - dmin * m[j] (sc / m packed as in q4_K), q 5-bit:
// low 4 bits as in q4_K's qs, bit 4 of element 32j + l is bit j of qh[l].
struct block_q5_K {
  uint16_t d;                    // fp16 super-block scale for the scales
  uint16_t dmin;                 // fp16 super-block scale for the mins
  uint8_t scales[K_SCALE_SIZE];  // 8 scales + 8 mins, 6 bits each
  uint8_t qh[QK_K / 8];          // high bits
  uint8_t qs[QK_K / 2];          // low 4 bits
};
static_assert(sizeof(block_q5_K) == 176, "block_q5_K must match ggml");

// 32 weights: w = d * k_iq4nl_values[nibble]; nibbles laid out as in q4_0.
struct block_iq4_nl {
  uint16_t d;  // fp16 scale
  uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl must match ggml");

// 256 weights in 8 sub-blocks of 32: w = d * (ls[j] - 32) * k_iq4nl_values[nibble], ls 6-bit (iq4_xs_scale);
// sub-block j's nibbles are qs[16j .. 16j + 16) laid out as in q4_0.
struct block_iq4_xs {
  uint16_t d;            // fp16 super-block scale
  uint16_t scales_h;     // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[4];   // low 4 bits of the 8 sub-block scales
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs must match ggml");

// The 6-bit scale (0..63, before the -32) of group g (0..15) of a q3_K block.
inline int q3_K_scale(int g, const uint8_t* scales) {
  const int low = g < 8 ? (scales[g] & 0x0f) : (scales[g - 8] >> 4);
  const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
  return low | (high << 4);
}

// The 6-bit scale (0..63, before the -32) of sub-block j (0..7) of an iq4_xs block.
inline int iq4_xs_scale(int j, const block_iq4_xs& b) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

// Reference dequantizers: y[0..n) from one row; n a multiple of the block size.
void dequantize_row_q4_1(const block_q4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const block_q5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const block_q5_1* x, float* y, int64_t n);
void dequantize_row_q2_K(const block_q2_K* x, float* y, int64_t n);
void dequantize_row_q3_K(const block_q3_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const block_q5_K* x, float* y, int64_t n);
void dequantize_row_iq4_nl(const block_iq4_nl* x, float* y, int64_t n);
void dequantize_row_iq4_xs(const block_iq4_xs* x, float* y, int64_t n);

// As llama.cpp's x86 quantize_row_q8_1 (AVX2 builds): q8_0's rounding, plus s = fp16(d * sum(q)) with d = amax / 127
// in f32.  n % 32 == 0.
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);

}  // namespace spindle
