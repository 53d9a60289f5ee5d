// The tensor-core path of matmul for many tokens (prefill, large batches): the super-block types (q2_K .. q6_K, iq4_xs) take the
// pipelined kernel of matmul_mmq_k.cu; the 32-value block types (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl) this one.
// int8 mma.sync (sm_80+) computes each 32-value
// sub-block's integer dot of a weight row and a token's q8_32 activations, exactly the integer mmv_x32 gets from
// dp4a; the float terms then follow mmv_x32's sequence operation for operation (the same _rn intrinsics, the same
// sub-block order, the same K segments summed in the same order). So a token's output has the same bits on
// either path: the choice of path by token count never breaks batch invariance (cuda_matmul_test checks it).
// Too few tiles to fill the GPU: the K segments run in separate blocks, each writing its segment's sum, and a
// second kernel adds them in mmv_x32's order (the same bits again).
// Tile: 64 weight rows (two x32 groups) x 64 tokens per block of 4 warps (warp w: rows 16w..16w+15, all 64
// tokens as 8 mma tiles of 8). Per stage, 8 units (256 values) of K: the weights dequantized to int8 in shared
// memory with their scales, the activations likewise with theirs.
#include <type_traits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/matmul_mma_tile.cuh"
#include "backend/cuda/mma_int8.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {

namespace {

using namespace mq;

// part: null, or [splits][n_tok][n_out] when the K segments run in separate blocks (blockIdx.z = segment):
// each block then writes its segment's sum there and mmq_reduce adds the segments in order.
template <class S>
__global__ void __launch_bounds__(128) mmq_x32(mmv_shape sh, mmv_act a, int64_t n_groups, float* part) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ mmq_smem<S> sm;
  mmq_x32_block<S>(sh, a, n_groups, part, sm);
}

// y = ((part[0] + part[1]) + part[2]) + ...: mmv_x32's order of the K segments.
__global__ void mmq_reduce(const float* part, int splits, int64_t n, int64_t n_out, float* y, int64_t ldy) {
  pdl_begin();
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = part[i];
  for (int k = 1; k < splits; ++k) s = __fadd_rn(s, part[(int64_t)k * n + i]);
  y[(i / n_out) * ldy + i % n_out] = s;
}

template <class S>
void launch_mmq_type(cuda_backend& be, const mmv_shape& sh, const mmv_act& a, int64_t n_groups, float* part) {
  const dim3 grid((unsigned)((sh.n_out + k_tile_rows - 1) / k_tile_rows), (unsigned)((a.n_tok + k_tile_tok - 1) / k_tile_tok),
                  part ? (unsigned)sh.splits : 1u);
  be.launch("mmq_x32", mmq_x32<S>, grid, dim3(128), sh, a, n_groups, part);
}

}  // namespace

bool mmq_supports(ggml_type type, int64_t row0) {
  if (row0 % 32 != 0) return false;
  switch (type) {  // every quantized type the CUDA backend reads
    case ggml_type::Q2_K: case ggml_type::Q3_K: case ggml_type::Q4_K: case ggml_type::Q5_K: case ggml_type::Q6_K:
    case ggml_type::IQ4_XS: case ggml_type::Q8_0: case ggml_type::Q4_0: case ggml_type::Q4_1: case ggml_type::Q5_0:
    case ggml_type::Q5_1: case ggml_type::IQ4_NL: return true;
    default: return false;
  }
}

bool mmq_split_k(const mmv_shape& sh, const mmv_act& a, double max_tiles) {
  const int64_t tiles = ((sh.n_out + k_tile_rows - 1) / k_tile_rows) * ((a.n_tok + k_tile_tok - 1) / k_tile_tok);
  return sh.splits > 1 && (double)tiles < max_tiles;
}

void launch_mmq(cuda_backend& be, ggml_type type, const mmv_shape& sh, const mmv_act& a, int64_t n_groups,
                float* part) {
  switch (type) {
    case ggml_type::Q4_K:
    case ggml_type::Q5_K:
    case ggml_type::Q6_K:
    case ggml_type::Q3_K:
    case ggml_type::Q2_K:
    case ggml_type::IQ4_XS: launch_mmq_k(be, type, sh, a, n_groups, part); break;
    case ggml_type::Q8_0: launch_mmq_type<stage_q8_0>(be, sh, a, n_groups, part); break;
    case ggml_type::Q4_0: launch_mmq_type<stage_q4_0>(be, sh, a, n_groups, part); break;
    case ggml_type::Q4_1: launch_mmq_type<stage_q4_1>(be, sh, a, n_groups, part); break;
    case ggml_type::Q5_0: launch_mmq_type<stage_q5_0>(be, sh, a, n_groups, part); break;
    case ggml_type::Q5_1: launch_mmq_type<stage_q5_1>(be, sh, a, n_groups, part); break;
    case ggml_type::IQ4_NL: launch_mmq_type<stage_iq4_nl>(be, sh, a, n_groups, part); break;
    default: throw error("cuda matmul: no tensor-core path for this weight type");
  }
  if (part) {
    const int64_t n = (int64_t)a.n_tok * sh.n_out;
    be.launch("mmq_reduce", mmq_reduce, dim3(grid_for(n, 256)), dim3(256), (const float*)part, sh.splits, n, sh.n_out,
              sh.y, sh.ldy);
  }
}

}  // namespace spindle
