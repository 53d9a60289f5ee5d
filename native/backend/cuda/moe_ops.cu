// MoE routing and combine on the device (cuda_backend::moe_route, moe_combine; moe_ops.cuh has the block code):
// with the grouped expert matmul (matmul.cu: matmul_experts) a decode step's MoE layers need no host round trip.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_ops.cuh"
#include "backend/cuda/moe_ops.h"
#include "common/error.h"

namespace spindle {

namespace {

constexpr int k_route_threads = 128;

// (moe_route_params has padding bytes: its fields go one by one, launch.cuh)
__global__ void __launch_bounds__(k_route_threads)
    moe_route_kernel(const float* probs, const float* bias, int64_t n, int32_t n_expert, int32_t k, int32_t norm,
                     float scale, int32_t* ids, float* weights) {
  pdl_begin();
  moe_route_params p;
  p.n_expert = n_expert;
  p.k = k;
  p.norm_weights = norm != 0;
  p.weights_scale = scale;
  __shared__ char taken[k_route_max_experts];
  __shared__ float wt[k_route_max_k];
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  route_block(probs, bias, n, p, ids, weights, taken, wt, sv, si);
}

__global__ void moe_combine_kernel(const float* y, const float* weights, int64_t n, int64_t k, int64_t n_embd,
                                   float* out) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * n_embd) return;
  out[i] = combine_value(y, weights, n, k, n_embd, i / n_embd, i % n_embd);
}

__global__ void __launch_bounds__(k_moe_sort_threads)
    moe_sort_kernel(const int32_t* ids, int32_t n_entries, int32_t n_expert, int32_t* order, int32_t* tile_expert,
                    int32_t* tile_first, int32_t* tile_count, int32_t* n_tiles) {
  pdl_begin();
  __shared__ int32_t count[k_moe_sort_threads], tiles[k_moe_sort_threads], ids_s[k_moe_sort_threads], sh[32];
  sort_entries_block(ids, n_entries, n_expert, order, tile_expert, tile_first, tile_count, n_tiles, count, tiles,
                     ids_s, sh);
}

// out[i, :] = x[order[i] % x_rows, :] (gather) or y[order[i], :] = x[i, :] (scatter); blockIdx.y: the row i.
__global__ void permute_rows_kernel(const float* x, const int32_t* order, int64_t x_rows, int64_t width, int32_t scatter,
                                    float* out) {
  pdl_begin();
  const int64_t i = blockIdx.y, c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= width) return;
  if (scatter) out[(int64_t)order[i] * width + c] = x[i * width + c];
  else out[i * width + c] = x[(int64_t)(order[i] % x_rows) * width + c];
}

}  // namespace

void launch_moe_sort(cuda_backend& be, const int32_t* ids, int32_t n_entries, int32_t n_expert, int32_t* order,
                     int32_t* tile_expert, int32_t* tile_first, int32_t* tile_count, int32_t* n_tiles) {
  if (n_entries < 1 || n_entries > k_moe_sort_threads || n_expert < 1 || n_expert > k_moe_sort_threads) {
    throw error("cuda matmul_experts: the sort takes 1 to 1024 entries of 1 to 1024 experts");
  }
  be.launch("moe_sort", moe_sort_kernel, dim3(1), dim3(k_moe_sort_threads), ids, n_entries, n_expert, order, tile_expert,
            tile_first, tile_count, n_tiles);
}

void launch_permute_rows(cuda_backend& be, const float* x, const int32_t* order, int64_t n, int64_t x_rows,
                         int64_t width, bool scatter, float* out) {
  if (n < 1) return;
  if (n > 65535) throw error("cuda matmul_experts: at most 65535 rows to permute");
  be.launch("permute_rows", permute_rows_kernel, dim3(grid_for(width, 256), (unsigned)n), dim3(256), x, order, x_rows,
            width, scatter ? 1 : 0, out);
}

bool cuda_backend::moe_route_on_device(const moe_route_params& p) const {
  return p.n_expert >= 1 && p.n_expert <= k_route_max_experts && p.k >= 1 && p.k <= k_route_max_k && p.k <= p.n_expert;
}

void cuda_backend::moe_route(const float* probs, const float* bias, int64_t n, const moe_route_params& p,
                             int32_t* ids, float* weights) {
  if (n <= 0) return;
  if (!moe_route_on_device(p) || n > 0x7fffffff) {
    backend::moe_route(probs, bias, n, p, ids, weights);  // through the host
    return;
  }
  launch("moe_route", moe_route_kernel, dim3((unsigned)n), dim3(k_route_threads), probs, bias, n, p.n_expert, p.k,
         p.norm_weights ? 1 : 0, p.weights_scale, ids, weights);
}

void cuda_backend::moe_combine(float* y, const float* weights, int64_t n, int64_t k, int64_t n_embd, float* out) {
  if (n <= 0) return;
  launch("moe_combine", moe_combine_kernel, dim3(grid_for(n * n_embd, 256)), dim3(256), y, weights, n, k, n_embd,
         out);
}

}  // namespace spindle
