// The greedy token of logits rows on the device, argmax_first's answer (common/argmax.h) for every row: the block
// code of ops.cu's argmax kernels, over a few CUDA intrinsics so a host test (test/native/argmax_host_test.cpp) runs
// it with emulated threads, shuffles, barriers and atomics.
//   - argmax_row_block: one block per row (short rows);
//   - argmax_slice_block: a block per slice of a long row; each leaves its best (value, index) in `part`, and the
//     last block of the row to finish (a counter per row, which it sets back to 0) takes the best of them.
// Invariant: the answer is exact whatever the block or thread order (argmax_better is a total order on the
// candidates: larger value, then smaller index), so both shapes give argmax_first's index bit for bit.
#pragma once
#include <cstdint>

#include "backend/cuda/block_done.cuh"

namespace spindle {

// (value, index) candidates of argmax_first: NaNs never take part (a scan never moves to one), so the largest
// value wins and ties go to the smaller index; a NaN at index 0 is argmax_answer's special case (the scan starts on
// it and nothing is `>` it).
__device__ __forceinline__ bool argmax_better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

// The block's best (value, index), in thread 0. sv, si: 32 entries of shared memory each.
__device__ __forceinline__ void block_argmax(float& bv, int32_t& bi, float* sv, int32_t* si) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, m);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, m);
    if (argmax_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  __syncthreads();  // sv / si may still be read by a previous call
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (warp != 0) return;
  bv = lane < (int)(blockDim.x / 32) ? sv[lane] : -INFINITY;
  bi = lane < (int)(blockDim.x / 32) ? si[lane] : INT32_MAX;
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, m);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, m);
    if (argmax_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
}

// This thread's best of row[i0 .. i1) (INT32_MAX: none but NaNs).
__device__ __forceinline__ void thread_argmax(const float* row, int64_t i0, int64_t i1, float& bv, int32_t& bi) {
  bv = -INFINITY;
  bi = INT32_MAX;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const float v = row[i];
    if (!isnan(v) && argmax_better(v, (int32_t)i, bv, bi)) bv = v, bi = (int32_t)i;
  }
}

// argmax_first's answer from the row's best non-NaN pair: index 0 when row[0] is NaN or every value is.
__device__ __forceinline__ int32_t argmax_answer(const float* row, int32_t bi) {
  return isnan(row[0]) || bi == INT32_MAX ? 0 : bi;
}

// Block blockIdx.x: out[blockIdx.x] = argmax_first(x + blockIdx.x * stride, n).
__device__ __forceinline__ void argmax_row_block(const float* x, int64_t stride, int64_t n, int32_t* out, float* sv,
                                                 int32_t* si) {
  const float* row = x + (int64_t)blockIdx.x * stride;
  float bv;
  int32_t bi;
  thread_argmax(row, 0, n, bv, bi);
  block_argmax(bv, bi, sv, si);
  if (threadIdx.x == 0) out[blockIdx.x] = argmax_answer(row, bi);
}

// Block (blockIdx.x, blockIdx.y): slice blockIdx.x (values [x slice, (x + 1) slice)) of row blockIdx.y, gridDim.x
// slices a row. part: [rows, slices] values, then as many indices; done: a counter per row, 0 before the launch
// and after it. *last: an int of shared memory.
__device__ __forceinline__ void argmax_slice_block(const float* x, int64_t stride, int64_t n, int64_t slice, float* part,
                                                   int32_t* done, int32_t* out, float* sv, int32_t* si, int* last) {
  const int64_t r = blockIdx.y, slices = gridDim.x, at = r * slices + blockIdx.x;
  int32_t* part_i = (int32_t*)(part + (int64_t)gridDim.y * slices);
  const float* row = x + r * stride;
  float bv;
  int32_t bi;
  thread_argmax(row, blockIdx.x * slice, min(n, (int64_t)(blockIdx.x + 1) * slice), bv, bi);
  block_argmax(bv, bi, sv, si);
  if (threadIdx.x == 0) {
    part[at] = bv;
    part_i[at] = bi;
  }
  if (!last_block_done(done + r, (int)slices, last)) return;
  bv = -INFINITY;
  bi = INT32_MAX;
  for (int64_t k = threadIdx.x; k < slices; k += blockDim.x) {
    const float v = __ldcg(part + r * slices + k);
    const int32_t i = __ldcg(part_i + r * slices + k);
    if (argmax_better(v, i, bv, bi)) bv = v, bi = i;
  }
  block_argmax(bv, bi, sv, si);
  if (threadIdx.x == 0) out[r] = argmax_answer(row, bi);
}

}  // namespace spindle
