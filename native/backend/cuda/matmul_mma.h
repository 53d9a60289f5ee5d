// The tensor-core path of the CUDA matmul (matmul_mma.cu): same bits as mmv_x32 for every output.
#pragma once
#include <cstdint>

#include "backend/cuda/x32_types.cuh"
#include "gguf/ggml_type.h"

namespace spindle {

class cuda_backend;

// Whether the tensor-core path takes this weight type at this first row (rows come in x32 groups).
bool mmq_supports(ggml_type type, int64_t row0);
// Whether the call's K segments should run in separate blocks (then added by a second kernel): when it has fewer
// tiles (64 rows x 64 tokens) than max_tiles (cuda_backend: half the GPU's SMs unless SPINDLE_CUDA_MMQ_SPLIT says
// otherwise). The choice never changes an output's bits.
bool mmq_split_k(const mmv_shape& sh, const mmv_act& a, double max_tiles);
// Launches it for rows sh.row0 .. + sh.n_out of a weight of n_groups x32 groups, all a.n_tok tokens. part: null
// (each block sums every K segment), or scratch of sh.splits * a.n_tok * sh.n_out floats: the segments run in
// separate blocks and are added after (for calls with few tiles).
void launch_mmq(cuda_backend& be, ggml_type type, const mmv_shape& sh, const mmv_act& a, int64_t n_groups,
                float* part);
// The k-quant kernel (matmul_mmq_k.cu) behind launch_mmq for q4_K / q5_K / q6_K (without the segment sums' kernel).
void launch_mmq_k(cuda_backend& be, ggml_type type, const mmv_shape& sh, const mmv_act& a, int64_t n_groups,
                  float* part);

// Token counts from which matmul takes the tensor-core path (below it, mmv_x32 reads each weight once for all).
constexpr int k_mmq_min_tokens = 16;

}  // namespace spindle
