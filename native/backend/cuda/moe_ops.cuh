// The MoE routing and combine kernels' block code (moe_ops.cu), over a few CUDA intrinsics so a host test
// (test/native/moe_ops_host_test.cpp) runs it with emulated threads:
//   - route_block: one block per token, route_experts (backend/moe_route.h) bit for bit: k rounds of a block
//     argmax over the experts not yet taken (NaN scores as -inf, the lower id on ties), the unbiased
//     probabilities as weights, their double sum in slot order, the clamp, the division and the scale by thread 0;
//   - combine_value: one output value of moe_combine: each slot's product rounded, added in slot order.
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

}  // namespace spindle
