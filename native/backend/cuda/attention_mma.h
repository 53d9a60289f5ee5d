// The tensor-core attention kernels (attention_mma.cu): every query row of heads up to 128 dims, one arithmetic
// whatever the launch shape.
#pragma once
#include <cstdint>

namespace spindle {

class cuda_backend;
struct attn_args;

constexpr int k_mma_split = 32;   // positions per split (one softmax block of a warp tile)
constexpr int k_mma_chunk = 256;  // positions per chunk (splits folded in one block; chunks merged after)

// How a KV head's query heads fill a warp tile's 16 rows: gh heads per query row (group heads, at most 16), rq
// query rows per tile, hgroups tiles side by side when a KV head has more than 16 query heads.
struct mma_layout {
  int gh = 1, rq = 16, hgroups = 1;
};
mma_layout attention_mma_layout(int32_t n_head, int32_t n_head_kv);

// Whether the tensor-core kernels take these head dims (up to 128).
bool attention_mma_takes(int32_t hd_k, int32_t hd_v);

// Warps per block of the decode shape for head dims hd, a launch of `blocks` blocks (tiles x KV head groups) whose
// tiles reach max_kv positions at most (a sliding window's, or the longest row's), on a GPU of sm_count SMs: with at least two blocks per SM, one warp per split of
// a chunk (8 at most; 4 for heads over 64 dims, and at least 2 there), a power of two, so a short context leaves no
// warp idle holding an SM (64 sequences of ~16 positions: 25 us a layer instead of 32.5 under ncu on an H100);
// fewer blocks (one sequence): 8 (4), each block's fold and output quantization spread over all of them (with one
// warp, single-sequence decode was ~0.1 ms a token slower). The outputs' bits do not depend on it.
int attention_mma_decode_warps(int32_t hd, int64_t max_kv, int64_t blocks, int sm_count);

// Launches over n_tiles tiles, d_tiles (device) = [first query row, rows] per tile: with rows_shape, tiles of up
// to 4 rq query rows (prompts), else of up to rq (decode; decode_warps warps a block, from
// attention_mma_decode_warps). args.n_split_max = chunks (grid z, counted from the chunk holding a tile's first
// window start: at least the chunks any tile's positions touch), args.part as attention_merge_kernel reads it
// (args.part_span = k_mma_chunk). Without rows_shape and with args.done, the kernel merges the chunks itself (the
// caller launches no attention_merge_kernel).
void launch_attention_mma(cuda_backend& be, const attn_args& args, const int32_t* d_tiles, int64_t n_tiles,
                          bool rows_shape, const mma_layout& lay, int decode_warps);

}  // namespace spindle
