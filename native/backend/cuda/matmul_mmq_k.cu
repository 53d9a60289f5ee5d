// The tensor-core matmul of the 256-value super-block weights (q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs) at many
// tokens (prefill, large batches), pipelined: each 256-value unit of K is a stage whose bytes (the weights' raw x32
// unit bytes for 64 rows, the q8_256 activations of 64 tokens with their scales and sums) stream into shared
// memory with cp.async, k_stages deep, so loading stage i + 2 overlaps the tensor cores' work on stage i. Weight
// fragments are unpacked from the raw bytes as they go into the mma (no int8 weight copy in shared memory).
// Arithmetic (x32_types.cuh, x32_types_more.cuh): int8 mma.sync gives each 32-value (q2_K, q3_K, q6_K: 16-value)
// sub-block dot exactly; times the sub-block scales they add up in int32 over the unit: S1 (and for the affine
// types q2_K, q4_K, q5_K S2 = sum of mins * activation sums, from an mma of the mins against the activations), the
// same integers mmv_x32 and mmv8 get from dp4a. The unit's float term is affine_unit_term / scaled_unit_term, added
// to the K segment's running sum unit by unit; segments are added in order ((s0 + s1) + s2) ... as in mmv_x32.
// So every output has the bits of the one-token kernels: batch invariance across the path switch.
// Tile: 64 weight rows (two x32 groups) x 64 tokens per block of 4 warps; warp w: rows 16w..16w+15, all 64
// tokens as 8 mma tiles of 8 (m16n8k32 for the 32-value sub-blocks, two m16n8k16 for 16-value scales).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/matmul_mmq_k_tile.cuh"
#include "backend/cuda/mma_int8.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {

namespace {

using namespace kq;

template <class W>
__global__ void __launch_bounds__(k_threads, 2) mmq_kq(mmv_shape sh, mmv_act a, int64_t n_groups, float* part) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  extern __shared__ __align__(16) uint8_t smem[];
  mmq_kq_block<W>(sh, a, n_groups, part, smem);
}

template <class W>
void launch_kq(cuda_backend& be, const mmv_shape& sh, const mmv_act& a, int64_t n_groups, float* part) {
  const size_t smem = k_stages * sizeof(kq_stage<W>);
  static thread_local int allowed_on = -1;  // the device whose limit for this kernel is raised (a driver call)
  if (allowed_on != be.device()) {
    SPINDLE_CUDA_CHECK(cudaFuncSetAttribute(mmq_kq<W>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    allowed_on = be.device();
  }
  const dim3 grid((unsigned)((sh.n_out + k_rows - 1) / k_rows), (unsigned)((a.n_tok + k_tok - 1) / k_tok),
                  part ? (unsigned)sh.splits : 1u);
  be.launch_smem("mmq_kq", mmq_kq<W>, grid, dim3(k_threads), smem, sh, a, n_groups, part);
}

}  // namespace

void launch_mmq_k(cuda_backend& be, ggml_type type, const mmv_shape& sh, const mmv_act& a, int64_t n_groups,
                  float* part) {
  if (type == ggml_type::Q4_K) launch_kq<kq_q4_K>(be, sh, a, n_groups, part);
  else if (type == ggml_type::Q5_K) launch_kq<kq_q5_K>(be, sh, a, n_groups, part);
  else if (type == ggml_type::Q6_K) launch_kq<kq_q6_K>(be, sh, a, n_groups, part);
  else if (type == ggml_type::IQ4_XS) launch_kq<kq_iq4_xs>(be, sh, a, n_groups, part);
  else if (type == ggml_type::Q3_K) launch_kq<kq_q3_K>(be, sh, a, n_groups, part);
  else if (type == ggml_type::Q2_K) launch_kq<kq_q2_K>(be, sh, a, n_groups, part);
  else throw error("cuda matmul: the pipelined tensor-core kernel takes the 256-value super-block types");
}

}  // namespace spindle
