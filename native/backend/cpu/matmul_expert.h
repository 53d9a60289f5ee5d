// Matrix multiply of one expert's weights by f32 activations with the arithmetic of llama.cpp's CPU
// ggml_mul_mat_id (the op behind MoE FFNs), which differs from its plain mul_mat for some weight types:
//   F32 / F16: ggml_vec_dot_f32 / _f16 per output (4 x 8-lane accumulators), not tinyBLAS (one accumulator);
//   Q4_K with n_out % 8 == 0: the repacked q4_K_8x8 gemv for every token (one f32 fma chain per super-block),
//     not the gemm (per 64 values) that llama.cpp's batched mul_mat and cpu_matmul use;
//   every other type: the same per-output arithmetic as cpu_matmul (vec_dot / repacked gemv = gemm there).
// Invariant (batch invariance): y[t, o] is one dot product of weight row o and activation row t with a fixed
// operation sequence, whatever n_tokens, the other rows of x, or the number of threads.
// At cpu_level::scalar every type goes through cpu_matmul_at_level (plain reference sums).
// packed_x8 (optional): the same n_out rows as 8-row groups in repack.h's x8 layout for wtype (n_out % 8 == 0),
// e.g. the expert's groups of the backend's packed copy of the stacked tensor. Same bits with or without it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"

namespace spindle {

// W: n_out rows of n_in elements of wtype (one expert's slice of a stacked tensor), rows contiguous.
// x: [n_tokens, n_in] f32.  y: [n_tokens, n_out] f32.  y[t, o] = sum_i W[o, i] * x[t, i]
void cpu_matmul_expert(thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out, int64_t n_in,
                       const float* x, int64_t n_tokens, float* y, const void* packed_x8 = nullptr);
void cpu_matmul_expert_at_level(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                                int64_t n_in, const float* x, int64_t n_tokens, float* y,
                                const void* packed_x8 = nullptr);

// Plain C++ references of the per-output sequences above (tests compare the SIMD kernels with them bit for bit).
// w: one weight row, x: one activation row in the weight type's activation format (f32, f16, q8_K), n elements.
float expert_dot_f32_ref(int64_t n, const float* w, const float* x);        // ggml_vec_dot_f32, AVX2 build
float expert_dot_f16_ref(int64_t n, const uint16_t* w, const uint16_t* x);  // ggml_vec_dot_f16, AVX2 build
float expert_dot_q4_K_gemv_ref(int64_t n, const void* w, const void* x);    // ggml_gemv_q4_K_8x8_q8_K, AVX2

// Internal (matmul_expert_packed.cpp, AVX2): one block_q4_Kx8 group (8 rows of n_in elements) times nt
// (1..k_expert_x8_tokens) q8_K activation rows xs bytes apart: y[t * ys + r] = expert_dot_q4_K_gemv_ref(row r, x_t).
constexpr int k_expert_x8_tokens = 8;
void expert_q4_K_x8_gemv_avx2(int64_t n_in, const uint8_t* group, const uint8_t* x, size_t xs, int nt, float* y,
                              int64_t ys);

}  // namespace spindle
