// LFM2's gated short convolution on the CUDA backend (see backend::short_conv): one thread per channel walks
// the sequence's tokens in order; tap k of token t reads row t - d + k of (state ++ B * X), d = l_cache - 1.
// Invariant: channels are independent; the state is rewritten only after every output was computed, rows in
// ascending order, so each old row is read before it is overwritten (as the CPU kernel does). gather_bx_rows (the
// B * X rows of prefix-caching checkpoints and speculative rollback states) multiplies as the conv does.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"

namespace spindle {

namespace {

__device__ __forceinline__ float conv_input(const float* bcx, const float* state, int64_t n_ch, int32_t d, int64_t j,
                                            int64_t c) {
  if (j < 0) return state[(d + j) * n_ch + c];
  const float* row = bcx + j * 3 * n_ch;
  return row[c] * row[2 * n_ch + c];
}

// Channel c of one sequence: its outputs, then its state.
__device__ __forceinline__ void conv_channel(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache,
                                             const float* w, float* state, float* y, int64_t c) {
  const int32_t d = l_cache - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    float acc = 0.0f;
    for (int32_t k = 0; k < l_cache; ++k) acc = __fmaf_rn(conv_input(bcx, state, n_ch, d, t - d + k, c), w[k * n_ch + c], acc);
    y[t * n_ch + c] = bcx[t * 3 * n_ch + n_ch + c] * acc;
  }
  for (int32_t i = 0; i < d; ++i) state[i * n_ch + c] = conv_input(bcx, state, n_ch, d, n_tokens - d + i, c);
}

__global__ void short_conv_kernel(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                                  float* state, float* y) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c < n_ch) conv_channel(bcx, n_tokens, n_ch, l_cache, w, state, y, c);
}

// Sequence blockIdx.y of a batch: meta[3 s ..] = its first row, its token count, its state (a device address).
__global__ void short_conv_batch_kernel(const float* bcx, const int64_t* meta, int64_t n_ch, int32_t l_cache,
                                        const float* w, float* y) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_ch) return;
  const int64_t* m = meta + 3 * (int64_t)blockIdx.y;
  float* state = (float*)(uintptr_t)m[2];
  conv_channel(bcx + m[0] * 3 * n_ch, m[1], n_ch, l_cache, w, state, y + m[0] * n_ch, c);
}

// Row i of a gather: dst row dst_rows[i] = the B * X row of bcx row src_rows[i], with conv_input's multiply (the
// bits short_conv folds into a state: checkpoints and rollback states are those rows).
__global__ void gather_bx_rows_kernel(const float* bcx, const int64_t* src_rows, const int64_t* dst_rows, int64_t n_ch,
                                      float* dst) {
  pdl_begin();
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= n_ch) return;
  dst[dst_rows[blockIdx.y] * n_ch + c] = conv_input(bcx, nullptr, n_ch, 0, src_rows[blockIdx.y], c);
}

}  // namespace

void cuda_backend::gather_bx_rows(const float* bcx, const int64_t* src_rows, int64_t n, int64_t n_ch, float* dst,
                                  const int64_t* dst_rows) {
  if (n <= 0 || n_ch <= 0) return;
  const int64_t* d_src = stage(src_rows, n);
  const int64_t* d_dst = stage(dst_rows, n);
  for (int64_t i0 = 0; i0 < n; i0 += 65535) {  // grid.y limit
    const int64_t m = std::min<int64_t>(n - i0, 65535);
    launch("gather_bx_rows", gather_bx_rows_kernel, dim3(grid_for(n_ch, 128), (unsigned)m), dim3(128), bcx, d_src + i0,
           d_dst + i0, n_ch, dst);
  }
}

void cuda_backend::short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                              float* state, float* y) {
  if (n_tokens < 0 || n_ch <= 0 || l_cache < 2) {
    throw error("short_conv: need n_tokens >= 0, n_ch > 0 and l_cache >= 2, got " + std::to_string(n_tokens) + ", " +
                std::to_string(n_ch) + ", " + std::to_string(l_cache));
  }
  if (n_tokens == 0) return;
  launch("short_conv", short_conv_kernel, dim3(grid_for(n_ch, 128)), dim3(128), bcx, n_tokens, n_ch, l_cache, w, state,
         y);
}

void cuda_backend::short_conv_batch(const float* bcx, const int64_t* n_tokens, float* const* states, int64_t n_seqs,
                                    int64_t n_ch, int32_t l_cache, const float* w, float* y) {
  if (n_ch <= 0 || l_cache < 2 || n_seqs < 0 || n_seqs > 65535) {
    throw error("short_conv_batch: need n_ch > 0, l_cache >= 2 and at most 65535 sequences, got " +
                std::to_string(n_ch) + ", " + std::to_string(l_cache) + ", " + std::to_string(n_seqs));
  }
  std::vector<int64_t> meta;  // first row, tokens, state per sequence with tokens
  int64_t at = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    if (n_tokens[s] < 0) throw error("short_conv_batch: negative token count");
    if (n_tokens[s] > 0) meta.insert(meta.end(), {at, n_tokens[s], (int64_t)(uintptr_t)states[s]});
    at += n_tokens[s];
  }
  if (meta.empty()) return;
  const int64_t* d_meta = stage(meta.data(), (int64_t)meta.size());
  launch("short_conv_batch", short_conv_batch_kernel, dim3(grid_for(n_ch, 128), (unsigned)(meta.size() / 3)),
         dim3(128), bcx, d_meta, n_ch, l_cache, w, y);
}

}  // namespace spindle
