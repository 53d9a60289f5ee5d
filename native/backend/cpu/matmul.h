// Matrix multiply of quantized weights by f32 activations, and row dequantization, on the CPU.
// Invariant (batch invariance): y[t, o] is bitwise the same whatever n_tokens, the other rows of x, or the
// number of threads: each output is one dot product with a fixed reduction order.
// Activations are converted as llama.cpp's CPU backend does (with the AVX2 kernels the results are then
// bit-identical to its batched matmuls, see vec_dot.h):
//   F32 weights: f32 dot;  F16: x rounded to f16;  BF16: x rounded to bf16;
//   Q8_0 / Q4_0 / Q5_0 / IQ4_NL: x quantized to q8_0 (32-element blocks);  Q4_1 / Q5_1: to q8_1 (q8_0 plus the
//   block's scaled sum);  Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS: to q8_K (256-element blocks).
#pragma once
#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"

namespace spindle {

class packed_weight;  // repack.h

// True for the weight types the CPU backend computes with: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.
bool cpu_supports_type(ggml_type type);

// W: n_out rows of n_in elements, each row ggml_row_size(wtype, n_in) bytes, rows contiguous.
// x: [n_tokens, n_in] f32 row-major.  y: [n_tokens, n_out] f32 row-major.
// y[t, o] = sum_i W[o, i] * x[t, i]
// packed: optional packed copy of W (repack.h, cpu_pack_weight at cpu_active_level()); the result is the same
// bits with or without it, only faster.
void cpu_matmul(thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out, int64_t n_in,
                const float* x, int64_t n_tokens, float* y, const packed_weight* packed = nullptr);

// dst[0..n) = the n elements of one row of type `type` starting at src (n a multiple of the block size).
void cpu_dequantize_row(ggml_type type, const void* src, float* dst, int64_t n);

}  // namespace spindle
