// Tiled causal attention on the CPU (AVX2): a tile is a run of consecutive query tokens of one sequence times a
// run of query heads that share one KV head, so each K / V row is fetched once per tile instead of once per
// (token, head). Invariant: every score, probability and output element is computed by exactly the IEEE
// operations of ops_attention_head_kv_avx2 for that (token, head) (same dot lanes and reductions, same softmax
// function, same per-lane fma chains over positions in ascending order), so the result is bitwise the per-item
// kernel's whatever the tiling, the thread that runs a tile, or what else is in the batch.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/ops.h"

namespace spindle {

// Query tokens [t0, t0 + n_t) x query heads [h0, h0 + n_h) of one attention() call; all n_h heads must map to
// the same KV head (h0 / group == (h0 + n_h - 1) / group). Token t attends positions [0, n_past + t] (all
// n_past + n_tokens positions when p.causal is false: attention_bidir.h).
struct attention_tile {
  int64_t t0 = 0;
  int64_t n_t = 0;
  int32_t h0 = 0;
  int32_t n_h = 0;
};

// Most queries (n_t * n_h) a tile may hold.
constexpr int32_t k_attention_tile_max_queries = 64;

// How attention_rows cuts one call into tiles: heads per tile (a whole GQA group, or a part of one over
// k_attention_tile_max_queries) and tokens per tile (about 16 queries per causal tile, up to
// k_attention_tile_max_queries per non-causal one).
struct attention_tiling {
  int32_t n_h = 1;
  int64_t n_t = 1;
  int64_t n_head_chunks = 1;  // tiles per token block
  int64_t n_token_blocks = 0;
  int64_t n_tiles() const { return n_head_chunks * n_token_blocks; }
  // Tile i: token blocks from the last (costliest, longest rows) to the first, head chunks inner.
  attention_tile tile(const attention_params& p, int64_t i) const;
};
attention_tiling attention_make_tiling(const attention_params& p);

// Floats of per-thread scratch attention_tile_avx2 needs for any tile of this tiling.
int64_t attention_tile_scratch(const attention_params& p, const attention_tiling& tl);

// out rows of the tile's queries (q: [n_tokens, n_head * head_dim_k], out: [n_tokens, n_head * head_dim_v]),
// bitwise equal to ops_attention_head_kv_avx2 per (token, head). k / v: the tile's KV head rows (offset
// applied). Only call when cpu_level_supported(cpu_level::avx2). scratch: attention_tile_scratch floats.
void attention_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q, const kv_rows& k,
                         const kv_rows& v, float* scratch, float* out);

}  // namespace spindle
