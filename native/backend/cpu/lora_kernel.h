// The CPU side of backend::lora_add (y += scale * (b . (a . x))): b [n_out rows of rank r] has rows too short for
// matmul's per-row dot kernels (r is 8..64, n_out thousands), so the product with it runs as r rank-one updates of a
// block of 32 outputs held in registers, over a copy of b widened to f32 and laid out block by block
// ([n_out / 32 blocks][r][32], the last block zero-padded), read once, in order, per pass.
// Invariant: the products are those b's matmul forms (the low-rank activations rounded to b's vec_dot type, exact
// f16 / bf16 values widened); only their summation order differs (j = 0..r-1, one f32 sum per output); then, as
// llama.cpp's build_lora_mm, each sum is scaled (rounded) and added to y (rounded), never fused.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"

namespace spindle {

// b's types the kernel takes (F32, F16, BF16); others go through matmul.
bool cpu_lora_kernel_type(ggml_type t);

constexpr int64_t k_lora_block = 32;  // outputs per block of the copy

// The blocked copy of b [n_out rows of r values of type t]: [ceil(n_out / 32)][r][32] f32, zero-padded.
std::vector<float> cpu_lora_transpose(ggml_type t, const void* b, int64_t n_out, int64_t r);

// low [r] in place: each value rounded as b's matmul rounds its activations (f16 / bf16; F32: unchanged).
void cpu_lora_round_low(ggml_type t, float* low, int64_t r);

// For each of n_rows rows t: y[t][o] = y[t][o] + scale * sum_j low[t][j] * b[o][j] (j in order), o in [o0, o1), o0 a
// multiple of 32: up to 4 rows per pass over the blocks (prefill reads each block once per 4 rows).
// low: [n_rows][r] (rounded), bt: the blocked copy, y: [n_rows][n_out]. The AVX2 build when the CPU level allows it.
void cpu_lora_add_rows(const float* low, int64_t n_rows, int64_t r, const float* bt, int64_t n_out, int64_t o0,
                       int64_t o1, float scale, float* y);

}  // namespace spindle
