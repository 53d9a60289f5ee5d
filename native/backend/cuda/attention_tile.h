// The tiled attention kernel for prompts (attention_tile.cu): the bits of attention_kernel, K / V read once per
// tile of query rows.
#pragma once
#include <cstdint>

namespace spindle {

class cuda_backend;
struct attn_args;

constexpr int k_tile_q = 16;  // query rows per tile (consecutive rows of one sequence)

// Whether the tiled kernel repeats attention_kernel for these shapes (head dims up to 64).
bool attention_tiles_take(int32_t hd_k, int32_t hd_v, int32_t n_head, int32_t n_head_kv);
// Launches it over n_tiles tiles, d_tiles (device) = [first query row, rows] per tile; args.part as for
// attention_kernel (attention_merge_kernel then merges the splits).
void launch_attention_tiles(cuda_backend& be, const attn_args& args, const int32_t* d_tiles, int64_t n_tiles);

}  // namespace spindle
