// Launchers of moe_ops.cu that the grouped expert matmul (matmul.cu: cuda_backend::matmul_experts) uses.
#pragma once
#include <cstdint>

namespace spindle {

class cuda_backend;

// sort_entries_block (moe_ops.cuh) in one block: n_entries (<= 1024) expert ids of n_expert (<= 1024) experts ->
// order [n_entries], tiles (tile_expert / tile_first / tile_count [moe_max_tiles]) and *n_tiles, device memory.
void launch_moe_sort(cuda_backend& be, const int32_t* ids, int32_t n_entries, int32_t n_expert, int32_t* order,
                     int32_t* tile_expert, int32_t* tile_first, int32_t* tile_count, int32_t* n_tiles);
// Gather (out[i] = x[order[i] % x_rows]) or scatter (out[order[i]] = x[i]) of n rows of width floats.
void launch_permute_rows(cuda_backend& be, const float* x, const int32_t* order, int64_t n, int64_t x_rows,
                         int64_t width, bool scatter, float* out);

}  // namespace spindle
