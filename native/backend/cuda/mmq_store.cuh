// The outputs of a block of the tensor-core matmuls (matmul_mma_tile.cuh, matmul_mmq_k_tile.cuh; both share the
// fragment layout: the thread with lane = 4g + t4 of warp w holds rows r0 = 16w + g (e < 2) and r1 = r0 + 8 (e >= 2)
// of the tile, tokens 8nt + 2t4 + (e & 1)). Device code; the host emulation runs it too.
#pragma once
#include <cstdint>

#include "backend/cuda/block_done.cuh"
#include "backend/cuda/x32_types.cuh"

namespace spindle {

// K segments in separate blocks (blockIdx.z = segment): part [splits][n_tok][n_out] takes each segment's sums,
// done one counter per (tile x, tile y), 0 between launches.
struct mmq_split {
  float* part;
  int32_t* done;
};

// Writes the tile (rows rel0 + r, tokens t0 + t) of `total` (this thread's sums of the block's K segments) to y,
// or with split.part, the segment's sums to part; then the tile's last segment block adds the segments in order,
// y = ((p0 + p1) + p2) + ... (mmv_x32's order: the bits of the one-block path). *last: an int of shared memory.
template <int NT>
__device__ __forceinline__ void mmq_store_tile(const mmv_shape& sh, const mmv_act& a, int64_t rel0, int t0, int r0,
                                               int t4, const float (&total)[NT][4], mmq_split split, int* last) {
  // f(nt, e, token, row) for this thread's outputs inside the call
  const auto each_output = [&](auto f) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t rel = rel0 + r0 + (e < 2 ? 0 : 8);
        const int64_t tok = t0 + 8 * nt + 2 * t4 + (e & 1);
        if (rel < sh.n_out && tok < a.n_tok) f(nt, e, tok, rel);
      }
  };
  const int64_t seg_n = (int64_t)a.n_tok * sh.n_out;
  if (!split.part) {
    each_output([&](int nt, int e, int64_t tok, int64_t rel) { sh.y[tok * sh.ldy + rel] = total[nt][e]; });
    return;
  }
  float* mine = split.part + (int64_t)blockIdx.z * seg_n;
  each_output([&](int nt, int e, int64_t tok, int64_t rel) { mine[tok * sh.n_out + rel] = total[nt][e]; });
  if (!last_block_done(split.done + (int64_t)blockIdx.y * gridDim.x + blockIdx.x, sh.splits, last)) return;
  // segment by segment, this thread's outputs at once: their loads are independent (one L2 round trip a segment;
  // an output's segments one after another took a round trip each: 57 us for 8 segments of a 64-token q / o)
  float sum[NT][4];
  for (int k = 0; k < sh.splits; ++k) {
    const float* pk = split.part + k * seg_n;
    each_output([&](int nt, int e, int64_t tok, int64_t rel) {
      const float v = __ldcg(pk + tok * sh.n_out + rel);
      sum[nt][e] = k == 0 ? v : __fadd_rn(sum[nt][e], v);
    });
  }
  each_output([&](int nt, int e, int64_t tok, int64_t rel) { sh.y[tok * sh.ldy + rel] = sum[nt][e]; });
}

}  // namespace spindle
