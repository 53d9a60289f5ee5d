// Dot-product kernels between one weight row and one activation row, per weight type and SIMD level.
// Invariant (batch invariance): a tile kernel computes each output (r, t) with exactly the operation sequence
// it uses for a 1x1 tile, so y[t, o] never depends on which tile shape, token count or thread computed it.
// Results differ between levels only by float summation order (the integer parts are exact everywhere). The
// AVX2 (and AVX-512, for Q4_0 / Q4_K) kernels use llama.cpp's x86 per-output arithmetic (vec_dot_avx2.cpp), so
// on an AVX2 CPU they give the bits of llama.cpp's batched CPU matmuls (its tinyBLAS / vec_dot / repacked
// gemm paths, taken when row lengths and row counts are multiples of 8); the scalar level keeps the plain
// reference sums.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"

namespace spindle {

class packed_weight;  // repack.h

// Activation row format a weight type is multiplied with (as llama.cpp's vec_dot_type):
// F32 -> F32, F16 -> F16, BF16 -> BF16, Q8_0 / Q4_0 / Q5_0 / IQ4_NL -> Q8_0, Q4_1 / Q5_1 -> Q8_1,
// Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS -> Q8_K.
// Throws spindle::error for a type the CPU kernels do not handle.
ggml_type cpu_activation_type(ggml_type wtype);

// Elements per block and bytes of a row of n elements, for the types of this backend (incl. Q8_K, Q8_1);
// throws if n is not a multiple of the block size or the size overflows.
int64_t cpu_block_size(ggml_type type);
size_t cpu_row_bytes(ggml_type type, int64_t n);

// Converts one f32 row into `act_type` (quantize_row_q8_0 / _q8_1 / _q8_K, convert_row_f16 / _bf16, or a copy).
void cpu_convert_activation(ggml_type act_type, const float* x, void* dst, int64_t n);

// Reference dot products (plain C++): weight row w (n elements) . activation row x (n elements).
float vec_dot_f32_ref(int64_t n, const void* w, const void* x);
float vec_dot_f16_ref(int64_t n, const void* w, const void* x);   // w f16, x f16
float vec_dot_bf16_ref(int64_t n, const void* w, const void* x);  // w bf16, x bf16
float vec_dot_q8_0_ref(int64_t n, const void* w, const void* x);  // w q8_0, x q8_0
float vec_dot_q4_0_ref(int64_t n, const void* w, const void* x);  // w q4_0, x q8_0
float vec_dot_q4_K_ref(int64_t n, const void* w, const void* x);  // w q4_K, x q8_K
float vec_dot_q6_K_ref(int64_t n, const void* w, const void* x);  // w q6_K, x q8_K
// The reference dots of quants_more.h's types (vec_dot_ref_more.cpp; the scalar level's kernels):
float vec_dot_q4_1_ref(int64_t n, const void* w, const void* x);    // w q4_1, x q8_1
float vec_dot_q5_0_ref(int64_t n, const void* w, const void* x);    // w q5_0, x q8_0
float vec_dot_q5_1_ref(int64_t n, const void* w, const void* x);    // w q5_1, x q8_1
float vec_dot_q2_K_ref(int64_t n, const void* w, const void* x);    // w q2_K, x q8_K
float vec_dot_q3_K_ref(int64_t n, const void* w, const void* x);    // w q3_K, x q8_K
float vec_dot_q5_K_ref(int64_t n, const void* w, const void* x);    // w q5_K, x q8_K
float vec_dot_iq4_nl_ref(int64_t n, const void* w, const void* x);  // w iq4_nl, x q8_0
float vec_dot_iq4_xs_ref(int64_t n, const void* w, const void* x);  // w iq4_xs, x q8_K

using vec_dot_fn = float (*)(int64_t n, const void* w, const void* x);
vec_dot_fn vec_dot_ref_for(ggml_type wtype);

// One tile of outputs: y[t * y_stride + r] = dot(w row r, x row t) for r < nr, t < nt.
// Weight rows are w_stride bytes apart, activation rows x_stride bytes apart; 1 <= nr, nt <= tile limits.
using tile_fn = void (*)(int64_t n, const uint8_t* w, size_t w_stride, int nr,
                         const uint8_t* x, size_t x_stride, int nt, float* y, int64_t y_stride);

struct tile_kernel {
  tile_fn fn = nullptr;
  int max_rows = 1;    // nr limit
  int max_tokens = 1;  // nt limit
};

// The tile kernel of `level` for weight type `wtype` (null fn if the CPU cannot run that level, or that level
// lacks one for a type it has kernels for; the scalar level always has one for every supported type).
tile_kernel cpu_tile_kernel(cpu_level level, ggml_type wtype);

// One packed tile (repack.h): the 8 rows of a packed group x nt tokens, 1 <= nt <= max_tokens:
// y[t * y_stride + r] = dot(row r of the group, x row t) for r < 8; x rows x_stride bytes apart.
// A packed kernel gives each output the bits of the level's tile kernel for that row (vec_dot_avx2_packed.cpp).
using packed_tile_fn = void (*)(int64_t n, const uint8_t* group, const uint8_t* x, size_t x_stride, int nt,
                                float* y, int64_t y_stride);

struct packed_kernel {
  packed_tile_fn fn = nullptr;
  int max_tokens = 1;        // nt limit
  bool paired_q8_K = false;  // x rows in pair_q8_K_row's order (repack.h) instead of plain q8_K
  // Optional: two adjacent groups (16 rows; y rows 0..15) at once, with fn's bits; `group` the first of them.
  packed_tile_fn fn16 = nullptr;
};

// The packed kernel of `level` for `wtype` (null fn where the level has none or the CPU cannot run it).
packed_kernel cpu_packed_kernel(cpu_level level, ggml_type wtype);
packed_kernel packed_kernel_avx2(ggml_type wtype);    // vec_dot_avx2_packed.cpp
packed_kernel packed_kernel_avx512(ggml_type wtype);  // vec_dot_avx512_packed.cpp

// Per-level tables, defined in vec_dot_{ref,avx2,avx512}.cpp.
tile_kernel tile_kernel_scalar(ggml_type wtype);
tile_kernel tile_kernel_avx2(ggml_type wtype);
tile_kernel tile_kernel_avx512(ggml_type wtype, bool has_bf16);

// cpu_matmul (matmul.h) with the kernels of an explicit level (tests and benchmarks cover every level).
// packed: optional packed copy of W's whole row groups (cpu_pack_weight); used when the level has a packed
// kernel for wtype, else ignored (the outputs are the same bits either way).
void cpu_matmul_at_level(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                         int64_t n_in, const float* x, int64_t n_tokens, float* y,
                         const packed_weight* packed = nullptr);

}  // namespace spindle
