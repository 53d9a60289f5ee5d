// The AVX-512 level's tile kernels: its own for F32 / F16 / BF16 weights (vec_dot_avx512_float.cpp), the AVX2
// ones for every quantized type.
// Invariant: a quantized output has the bits of llama.cpp's x86 CPU backend. llama.cpp computes Q8_0, Q4_0,
// Q4_K and Q6_K with 256-bit arithmetic (8 f32 lanes, hsum_avx2) at every x86 level, AVX-512 builds included
// (Q2_K it repacks on AVX-512 CPUs only, and then sums per super-block: tile_kernel_q2_K_repacked),
// so a wider vector here would change the float order and lose bit-equality: measured on an AVX-512 Zen 4
// against node-llama-cpp's prebuilt CPU binary, the AVX2 arithmetic reproduces llama.cpp's logits bit for bit
// at every position for Q8_0 (16/47 with the former 512-bit kernels) and at most positions for Q6_K (0/47).
#include "backend/cpu/vec_dot_avx512.h"

#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {

tile_kernel tile_kernel_avx512(ggml_type wtype, bool has_bf16) {
  switch (wtype) {
    case ggml_type::Q8_0: case ggml_type::Q4_0: case ggml_type::Q4_1: case ggml_type::Q5_0: case ggml_type::Q5_1:
    case ggml_type::Q3_K: case ggml_type::Q4_K: case ggml_type::Q5_K: case ggml_type::Q6_K: case ggml_type::IQ4_NL:
    case ggml_type::IQ4_XS:
      return tile_kernel_avx2(wtype);
    case ggml_type::Q2_K: return tile_kernel_q2_K_repacked();  // llama.cpp repacks Q2_K on AVX-512 CPUs only
    default: return tile_kernel_avx512_float(wtype, has_bf16);
  }
}

}  // namespace spindle
