// Shared pieces of the CUDA kernels: error checks that throw spindle::error (never abort), warp reductions
// with a fixed butterfly order (the same bits whatever the launch shape), and launch helpers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/error.h"

namespace spindle {

// Throws spindle::error naming the call and CUDA's message when a runtime call fails.
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw error(std::string("cuda: ") + what + ": " + cudaGetErrorString(e));
}
#define SPINDLE_CUDA_CHECK(call) ::spindle::cuda_check((call), #call)
// After a kernel launch: a bad launch configuration shows here.
#define SPINDLE_CUDA_LAUNCHED(name) ::spindle::cuda_check(cudaGetLastError(), name)

constexpr int k_warp = 32;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024): warp sums, then warp 0 sums the
// warp results. Every thread gets the result. `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp, n_warps = blockDim.x / k_warp;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < n_warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x % k_warp, warp = threadIdx.x / k_warp, n_warps = blockDim.x / k_warp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < n_warps ? shared[lane] : -INFINITY;
  return warp_max(v);
}

// The first statement of every kernel (launch.cuh launches them with programmatic stream serialization on
// sm_90+): wait until the kernels before it completed and their writes are visible (so reading their results,
// or overwriting what they read, is safe), then allow the next kernel to begin launching, so its blocks are
// scheduled while this one runs instead of after it. A no-op before sm_90 and without the launch attribute.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline unsigned grid_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace spindle
