// Non-causal (bidirectional) attention on the CPU (AVX2), a ViT encoder's: every query of a tile (attention_tiled.h)
// attends to all n_kv = n_past + n_tokens positions. The tile's queries sit side by side in SIMD lanes (16 per
// register pair), so K and V rows are read in place with broadcasts and nothing of K or V is copied:
//   scores^T [n_kv][queries] = K q^T,  softmax per lane,  out^T [dv][queries] = V^T p^T.
// Invariant: each (token, head) output is a fixed sequence of IEEE operations of its own query row and the K / V
// rows: s_j = (fma chain of q[d] k_j[d], d ascending, from 0) * scale; m = max_j s_j; e_j = ggml's vectorized expf
// of s_j - m; l = sum_j e_j in double, j ascending; out[d] = (fma chain of e_j v_j[d], j ascending, from 0) *
// (float)(1 / l). A lane never reads another lane, so the bits do not depend on the tile, the thread or the rest of
// the batch (rows of one call == the same rows in any other call over the same cache).
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/ops.h"

namespace spindle {

// Floats of per-thread scratch attention_bidir_tile_avx2 needs for any tile of this tiling.
int64_t attention_bidir_scratch(const attention_params& p, const attention_tiling& tl);

// out rows of the tile's queries (q: [n_tokens, n_head * head_dim_k], out: [n_tokens, n_head * head_dim_v]) against
// positions [0, n_past + n_tokens). k / v: the tile's KV head rows, float32 (an encoder's own K / V). Any head dims. The tile must
// come from attention_make_tiling(p) (p.causal false). Only call when cpu_level_supported(cpu_level::avx2).
void attention_bidir_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q,
                               const kv_rows& k, const kv_rows& v, float* scratch, float* out);

}  // namespace spindle
