// ggml tensor types as numbered in GGUF files, with their block geometry.
// Invariant: ggml_type_info(t) is non-null exactly for the types this reader knows the layout of; a tensor
// of any other type id is rejected at load, naming the id.
#pragma once
#include <cstdint>

namespace spindle {

enum class ggml_type : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct ggml_type_traits {
  const char* name;     // "q4_K", as llama.cpp prints it
  uint32_t block_size;  // elements per block (1 for plain types)
  uint32_t type_size;   // bytes per block
};

// nullptr when the id is not a known ggml type.
const ggml_type_traits* ggml_type_info(uint32_t type_id);

// Bytes of a row of n elements; throws spindle::error if n is not a multiple of the block size or overflows.
uint64_t ggml_row_size(ggml_type type, uint64_t n);

}  // namespace spindle
