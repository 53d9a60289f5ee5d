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

// Weight bytes of one launch up to which its blocks ask L2 for their weight rows before pdl_begin() (the launch's
// whole weights fit in L2 beside the rest of the step; the output matrix does not).
constexpr int64_t k_prefetch_weight_max = 32 << 20;

// Asks L2 for rows [r0, r1) of an x32-packed weight (groups of 32 rows, each group's n_units units of
// 32 * unit_bytes bytes in a row: whole groups are fetched), 128-byte lines spread over the block's threads;
// nothing waits for it. Weights never change after upload, so a kernel may call this before pdl_begin(): the
// fetch then overlaps the kernel before it.
__device__ __forceinline__ void prefetch_weight_rows(const uint8_t* w, int64_t n_units, int unit_bytes, int64_t r0,
                                                     int64_t r1) {
  const int64_t group_bytes = n_units * 32 * unit_bytes;
  const uintptr_t first = (uintptr_t)(w + (r0 / 32) * group_bytes) & ~uintptr_t(127);
  const uintptr_t end = (uintptr_t)(w + ((r1 - 1) / 32 + 1) * group_bytes);
  for (uintptr_t at = first + 128 * (uintptr_t)threadIdx.x; at < end; at += 128 * (uintptr_t)blockDim.x) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
  }
}

inline unsigned grid_for(int64_t n, int threads) { return (unsigned)((n + threads - 1) / threads); }

}  // namespace spindle
