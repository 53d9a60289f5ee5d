// Activation quantization on the device, in the two formats of x32_types.cuh (act_format): every kernel that
// feeds a quantized matmul quantizes through these, so the bits are the same wherever it happens (the matmul's
// own quantize kernels, swiglu + quantize, add + rms_norm + quantize).
#pragma once
#include <cstdint>

namespace spindle {

// The largest |v| of a warp's 32 values (fmaxf, which no order changes), in every lane.
__device__ __forceinline__ float warp_amax(float v) {
  float a = fabsf(v);
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, m));
  return a;
}

// Quantizes value v of lane l of a warp holding 32 consecutive activations (a q8_32 sub-block): q = round(v / d)
// with d = amax / 127, stored at *q_at; lane 0 stores d and d * sum(q) of the sub-block. Every kernel that feeds
// the q8_32 matmuls quantizes through here (the same bits wherever it happens). Needs all 32 lanes.
__device__ __forceinline__ void quantize32(float v, int8_t* q_at, float* d_at, float* s_at) {
  const float amax = warp_amax(v);
  const float d = amax / 127.0f;
  const int q = amax == 0.0f ? 0 : (int)rintf(v / d);
  *q_at = (int8_t)q;
  const int sum = __reduce_add_sync(0xffffffffu, q);
  if (threadIdx.x % 32 == 0) {
    *d_at = d;
    *s_at = d * (float)sum;
  }
}

// The q8_256 quantization of a 256-value group: d = amax / 127 (amax: the fmaxf of the
// |values|, which no order changes), q = round(v / d). The kernels that feed the q8_256 matmuls all quantize
// through these two (the same bits wherever it happens).
__device__ __forceinline__ float q8_scale(float amax) { return amax / 127.0f; }
__device__ __forceinline__ int q8_value(float v, float amax, float d) { return amax == 0.0f ? 0 : (int)rintf(v / d); }

// A group's amax from the warp_amax of its 8 pieces of 32 values.
__device__ __forceinline__ float group_amax(const float* piece_amax) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) amax = fmaxf(amax, piece_amax[k]);
  return amax;
}

// Lane l of a warp holding one 32-value piece of a group (value v) stores q8_value at *q_at; lane 0 stores the
// piece's sum(q) at *bs_at. Needs all 32 lanes.
__device__ __forceinline__ void quantize_piece(float v, float amax, float d, int8_t* q_at, int32_t* bs_at) {
  const int q = q8_value(v, amax, d);
  *q_at = (int8_t)q;
  const int sum = __reduce_add_sync(0xffffffffu, q);
  if (threadIdx.x % 32 == 0) *bs_at = sum;
}

// One block of 256 threads quantizes a group, thread i holding value i: writes q_grp[0..256), the group's d at
// *d_at and each 32 values' sum(q) at bs_grp[0..8). sh_amax: 8 floats of shared memory. Needs the whole block.
__device__ __forceinline__ void quantize256_block(float v, int8_t* q_grp, float* d_at, int32_t* bs_grp, float* sh_amax) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float a = warp_amax(v);
  if (lane == 0) sh_amax[warp] = a;
  __syncthreads();
  const float amax = group_amax(sh_amax), d = q8_scale(amax);
  quantize_piece(v, amax, d, q_grp + threadIdx.x, bs_grp + warp);
  if (threadIdx.x == 0) *d_at = d;
}

// The same quantization of a group grp[0..256) by a block of W warps (any W, 1..8; warp w takes the 32-value pieces
// w, w + W, ..): the bits of quantize256_block (amax is order-free, each 32 values' sum(q) an integer). The values
// are read with __ldcg (they may come from other blocks of the launch). Needs the whole block.
template <int W>
__device__ __forceinline__ void quantize256_warps(const float* grp, int8_t* q_grp, float* d_at, int32_t* bs_grp,
                                                  float* sh_amax) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int p = warp; p < 8; p += W) {
    const float a = warp_amax(__ldcg(grp + 32 * p + lane));
    if (lane == 0) sh_amax[p] = a;
  }
  __syncthreads();
  const float amax = group_amax(sh_amax), d = q8_scale(amax);
  for (int p = warp; p < 8; p += W) quantize_piece(__ldcg(grp + 32 * p + lane), amax, d, q_grp + 32 * p + lane, bs_grp + p);
  if (threadIdx.x == 0) *d_at = d;
}

}  // namespace spindle
