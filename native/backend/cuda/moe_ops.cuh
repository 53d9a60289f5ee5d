// The MoE routing and combine kernels' block code (moe_ops.cu), over a few CUDA intrinsics so a host test
// (test/native/moe_ops_host_test.cpp) runs it with emulated threads:
//   - route_block: one block per token, route_experts (backend/moe_route.h) bit for bit: k rounds of a block
//     argmax over the experts not yet taken (NaN scores as -inf, the lower id on ties), the unbiased
//     probabilities as weights, their double sum in slot order, the clamp, the division and the scale by thread 0;
//   - combine_value: one output value of moe_combine: each slot's product rounded, added in slot order;
//   - sort_entries_block: a grouped expert matmul's entries ordered by expert (stable), cut into tiles of up to
//     k_moe_tile entries of one expert, so each tile reads its expert's weights once for all of its entries.
// Invariant: a token's ids, weights and outputs depend only on its own rows.
#pragma once
#include <cstdint>

#include "backend/cuda/argmax_rows.cuh"
#include "backend/moe_route.h"

namespace spindle {

constexpr int k_route_max_experts = 1024;  // route_block's taken flags
constexpr int k_route_max_k = 64;

// Token blockIdx.x of n: probs [n, p.n_expert], bias [p.n_expert] or null; ids / weights [k, n] slot-major.
// taken: shared [k_route_max_experts]; wt: shared [k_route_max_k]; sv, si: shared [32] each.
__device__ __forceinline__ void route_block(const float* probs, const float* bias, int64_t n, const moe_route_params& p,
                                            int32_t* ids, float* weights, char* taken, float* wt, float* sv,
                                            int32_t* si) {
  const int64_t t = blockIdx.x;
  const float* pr = probs + t * p.n_expert;
  for (int e = threadIdx.x; e < p.n_expert; e += blockDim.x) taken[e] = 0;
  __syncthreads();
  for (int j = 0; j < p.k; ++j) {
    float bv = -INFINITY;
    int32_t bi = INT32_MAX;
    for (int e = threadIdx.x; e < p.n_expert; e += blockDim.x) {
      if (taken[e]) continue;
      float s = bias ? __fadd_rn(pr[e], bias[e]) : pr[e];
      if (isnan(s)) s = -INFINITY;
      if (argmax_better(s, e, bv, bi)) bv = s, bi = e;
    }
    block_argmax(bv, bi, sv, si);  // the block's best in thread 0 (warp 0)
    if (threadIdx.x == 0) {
      taken[bi] = 1;
      ids[j * n + t] = bi;
      wt[j] = pr[bi];  // the unbiased probability
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (p.norm_weights) {
    double s = 0.0;
    for (int j = 0; j < p.k; ++j) s += (double)wt[j];
    float sum = (float)s;
    sum = sum < INFINITY ? sum : INFINITY;
    sum = sum > k_moe_min_weight_sum ? sum : k_moe_min_weight_sum;
    for (int j = 0; j < p.k; ++j) wt[j] = __fdiv_rn(wt[j], sum);
  }
  const bool scale = p.weights_scale != 0.0f && p.weights_scale != 1.0f;
  for (int j = 0; j < p.k; ++j) weights[j * n + t] = scale ? __fmul_rn(wt[j], p.weights_scale) : wt[j];
}

// out[t, c] of moe_combine: y [k n, n_embd] slot-major, weights [k n].
__device__ __forceinline__ float combine_value(const float* y, const float* weights, int64_t n, int64_t k,
                                               int64_t n_embd, int64_t t, int64_t c) {
  float acc = __fmul_rn(y[t * n_embd + c], weights[t]);
  for (int64_t j = 1; j < k; ++j) acc = __fadd_rn(acc, __fmul_rn(y[(j * n + t) * n_embd + c], weights[j * n + t]));
  return acc;
}

// ---- entries by expert ----

constexpr int k_moe_tile = 8;              // entries per tile (the eight-lane matmul's tokens per block)
constexpr int k_moe_sort_threads = 1024;   // sort_entries_block's block (>= n_expert and >= n_entries)

// Tiles a sort of n_entries entries over n_expert experts can make (the launch's grid).
__host__ __device__ __forceinline__ int32_t moe_max_tiles(int32_t n_entries, int32_t n_expert) {
  const int32_t by_entries = (n_entries + k_moe_tile - 1) / k_moe_tile + (n_expert < n_entries ? n_expert : n_entries);
  return by_entries < n_entries ? by_entries : n_entries;
}

// Exclusive prefix sum of v[i] for i < n (<= blockDim.x) in place; returns the total (every thread). sh: shared
// [32]. Integers: exact in any order.
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t* v, int32_t n, int32_t* sh) {
  const int i = threadIdx.x, lane = i % 32, warp = i / 32, n_warps = (blockDim.x + 31) / 32;
  const int32_t x = i < n ? v[i] : 0;
  int32_t inc = x;  // inclusive scan within the warp
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int32_t y = __shfl_up_sync(0xffffffffu, inc, d);
    if (lane >= d) inc += y;
  }
  if (lane == 31) sh[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < n_warps ? sh[lane] : 0;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int32_t y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    sh[lane] = w;  // inclusive totals of warps 0..lane
  }
  __syncthreads();
  const int32_t before = (warp > 0 ? sh[warp - 1] : 0) + inc - x;
  const int32_t total = sh[n_warps - 1];
  __syncthreads();  // every thread read sh
  if (i < n) v[i] = before;
  __syncthreads();
  return total;
}

// One block (blockDim.x >= n_expert, >= n_entries): order[i] = the i-th entry when sorted by expert ids[entry]
// (entries of one expert in entry order); tiles t < *n_tiles: tile_expert[t], tile_first[t] (a position in order),
// tile_count[t] (1 .. k_moe_tile), experts ascending. count, tiles: shared [n_expert]; ids_s: shared [n_entries];
// sh: shared [32].
__device__ __forceinline__ void sort_entries_block(const int32_t* ids, int32_t n_entries, int32_t n_expert,
                                                   int32_t* order, int32_t* tile_expert, int32_t* tile_first,
                                                   int32_t* tile_count, int32_t* n_tiles, int32_t* count,
                                                   int32_t* tiles, int32_t* ids_s, int32_t* sh) {
  const int i = threadIdx.x;
  if (i < n_expert) count[i] = 0;
  if (i < n_entries) ids_s[i] = ids[i];
  __syncthreads();
  if (i < n_entries) atomicAdd(&count[ids_s[i]], 1);
  __syncthreads();
  if (i < n_expert) tiles[i] = (count[i] + k_moe_tile - 1) / k_moe_tile;
  __syncthreads();
  const int32_t c = i < n_expert ? count[i] : 0;  // this expert's entries (read before the scan overwrites them)
  block_exclusive_scan(count, n_expert, sh);      // count[x]: the first position of expert x
  const int32_t total_tiles = block_exclusive_scan(tiles, n_expert, sh);  // tiles[x]: expert x's first tile
  if (i < n_entries) {  // rank among the earlier entries of the same expert: a stable sort
    const int32_t x = ids_s[i];
    int32_t rank = 0;
    for (int j = 0; j < i; ++j) rank += ids_s[j] == x;
    order[count[x] + rank] = i;
  }
  if (i < n_expert) {
    for (int32_t k = 0; k * k_moe_tile < c; ++k) {
      tile_expert[tiles[i] + k] = i;
      tile_first[tiles[i] + k] = count[i] + k * k_moe_tile;
      tile_count[tiles[i] + k] = c - k * k_moe_tile < k_moe_tile ? c - k * k_moe_tile : k_moe_tile;
    }
  }
  if (i == 0) *n_tiles = total_tiles;
}

}  // namespace spindle
