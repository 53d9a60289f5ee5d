// LFM2's gated short convolution on the CUDA backend (see backend::short_conv): one thread per channel walks
// the sequence's tokens in order; tap k of token t reads row t - d + k of (state ++ B * X), d = l_cache - 1.
// Invariant: channels are independent; the state is rewritten only after every output was computed, rows in
// ascending order, so each old row is read before it is overwritten (as the CPU kernel does).
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace spindle {

namespace {

__device__ __forceinline__ float conv_input(const float* bcx, const float* state, int64_t n_ch, int32_t d, int64_t j,
                                            int64_t c) {
  if (j < 0) return state[(d + j) * n_ch + c];
  const float* row = bcx + j * 3 * n_ch;
  return row[c] * row[2 * n_ch + c];
}

__global__ void short_conv_kernel(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                                  float* state, float* y) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_ch) return;
  const int32_t d = l_cache - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    float acc = 0.0f;
    for (int32_t k = 0; k < l_cache; ++k) acc = __fmaf_rn(conv_input(bcx, state, n_ch, d, t - d + k, c), w[k * n_ch + c], acc);
    y[t * n_ch + c] = bcx[t * 3 * n_ch + n_ch + c] * acc;
  }
  for (int32_t i = 0; i < d; ++i) state[i * n_ch + c] = conv_input(bcx, state, n_ch, d, n_tokens - d + i, c);
}

}  // namespace

void cuda_backend::short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                              float* state, float* y) {
  if (n_tokens < 0 || n_ch <= 0 || l_cache < 2) {
    throw error("short_conv: need n_tokens >= 0, n_ch > 0 and l_cache >= 2, got " + std::to_string(n_tokens) + ", " +
                std::to_string(n_ch) + ", " + std::to_string(l_cache));
  }
  if (n_tokens == 0) return;
  short_conv_kernel<<<grid_for(n_ch, 128), 128, 0, stream_>>>(bcx, n_tokens, n_ch, l_cache, w, state, y);
  SPINDLE_CUDA_LAUNCHED("short_conv");
}

}  // namespace spindle
