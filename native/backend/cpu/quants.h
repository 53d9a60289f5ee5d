// ggml block layouts and the plain scalar reference conversions (dequantize weights, quantize activations).
// Invariant: each block struct is byte-identical to ggml's (ggml-common.h), so GGUF tensor data is read in
// place; the activation quantizers round exactly as llama.cpp's x86 CPU backend does, so the same f32 input
// gives bit-identical q8_0 / q8_K blocks.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spindle {

constexpr int QK4_0 = 32;  // elements per q4_0 block
constexpr int QK8_0 = 32;  // elements per q8_0 block
constexpr int QK_K = 256;  // elements per k-quant super-block
constexpr int K_SCALE_SIZE = 12;

// 32 weights: w = d * (q - 8), q 4-bit; qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct block_q4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 must match ggml");

// 32 values: v = d * q, q int8.
struct block_q8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 must match ggml");

// 256 weights in 8 sub-blocks of 32: w = d * sc[j] * q - dmin * m[j], q 4-bit, sc/m 6-bit packed in scales.
struct block_q4_K {
  uint16_t d;                      // fp16 super-block scale for the quantized scales
  uint16_t dmin;                   // fp16 super-block scale for the quantized mins
  uint8_t scales[K_SCALE_SIZE];    // 8 scales + 8 mins, 6 bits each
  uint8_t qs[QK_K / 2];            // 64-element chunk c: qs[32c + l] low nibble = elt 64c + l, high = 64c + 32 + l
};
static_assert(sizeof(block_q4_K) == 144, "block_q4_K must match ggml");

// 256 weights in 16 groups of 16: w = d * scales[j] * (q - 32), q 6-bit (4 low bits in ql, 2 high in qh).
struct block_q6_K {
  uint8_t ql[QK_K / 2];      // low 4 bits
  uint8_t qh[QK_K / 4];      // high 2 bits
  int8_t scales[QK_K / 16];  // 8-bit group scales
  uint16_t d;                // fp16 super-block scale
};
static_assert(sizeof(block_q6_K) == 210, "block_q6_K must match ggml");

// 256 activations: v = d * qs[i]; bsums[j] = sum of qs[16j .. 16j + 16).
struct block_q8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "block_q8_K must match ggml");

// The 6-bit scale and min of sub-block j (0..7) of a q4_K block, as ggml packs them.
inline void q4_K_scale_min(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Reference dequantizers: y[0..n) from one row; n a multiple of the block size.
void dequantize_row_f16(const uint16_t* x, float* y, int64_t n);
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t n);
void dequantize_row_q8_0(const block_q8_0* x, float* y, int64_t n);
void dequantize_row_q4_0(const block_q4_0* x, float* y, int64_t n);
void dequantize_row_q4_K(const block_q4_K* x, float* y, int64_t n);
void dequantize_row_q6_K(const block_q6_K* x, float* y, int64_t n);

// Activation conversions (one token's row of n values).
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);  // n % 32 == 0
void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n);  // n % 32 == 0 (the KV cache's)
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n);  // n % 256 == 0
void convert_row_f16(const float* x, uint16_t* y, int64_t n);
void convert_row_bf16(const float* x, uint16_t* y, int64_t n);

}  // namespace spindle
