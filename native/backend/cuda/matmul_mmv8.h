// The eight-lanes-per-row few-token matmul of k-quant weights (matmul_mmv8.cu): the bits of mmv_x32.
#pragma once
#include "backend/cuda/x32_types.cuh"
#include "gguf/ggml_type.h"

namespace spindle {

class cuda_backend;

constexpr int k_mmv8_max_jobs = 4;

// One weight of a launch: its rows (sh), its type, row quads per block, its first block in the launch.
struct mmv8_job {
  mmv_shape sh;
  int32_t type;  // ggml_type: Q2_K .. Q6_K or IQ4_XS
  int32_t quads;
  int64_t block0;
};
static_assert(sizeof(mmv8_job) == sizeof(mmv_shape) + 2 * 4 + 8, "mmv8_job has padding");
struct mmv8_jobs {
  mmv8_job job[k_mmv8_max_jobs];
  int32_t n;
  int32_t pad_;  // no padding bytes (launch.cuh)
};
static_assert(sizeof(mmv8_jobs) == k_mmv8_max_jobs * sizeof(mmv8_job) + 8, "mmv8_jobs has padding");

// Weight bytes of a call up to which the eight-lane kernel is the faster one. Measured on an H200
// (bench/gpu/results/2026-11-26-h200-mmv8, op_bench): one token, 512 x 2048 q4_K 3.0 us (mmv_x32 3.9), 2048 x 2048
// 3.7 (4.0); eight tokens 5.8 (16.6) and 11.7 (17.1); but 8192 x 2048 10.1 us (4.5) and the 128256-row output
// 78.5 (40.5): with eight lanes a row of a large matrix spends more instructions per weight byte than one lane.
constexpr int64_t k_mmv8_max_bytes = 4 << 20;
// Whether the eight-lane kernel takes this call: a super-block type, at most 16 K segments, at most k_mmv8_max_bytes.
bool mmv8_takes(ggml_type type, const mmv_shape& sh);
// One launch for rows shapes[i].row0 .. + shapes[i].n_out of n weights (1..4, each taken by mmv8_takes) and
// a.n_tok tokens of one quantized input.
void launch_mmv8(cuda_backend& be, const ggml_type* types, const mmv_shape* shapes, int n, const mmv_act& a);
// Grouped experts (backend::matmul_experts): y[e] = rows of expert ids[e] (expert: one expert's shape, row0 0,
// taken by mmv8_takes) . row e % x_rows of a (q8_256), for e < n_entries (<= 65535); ids in device memory.
void launch_mmv8_experts(cuda_backend& be, ggml_type type, const mmv_shape& expert, const mmv_act& a,
                         const int32_t* ids, int64_t n_entries, int64_t x_rows, float* y);
// Grouped experts sorted by expert (moe_ops.h's launch_moe_sort): tile t < *n_tiles computes rows [tile_first[t],
// + tile_count[t]) of y from the same rows of a (gathered in sorted order) with expert tile_expert[t]; the grid holds
// max_tiles tiles (<= 65535).
void launch_mmv8_tiles(cuda_backend& be, ggml_type type, const mmv_shape& expert, const mmv_act& a,
                       const int32_t* tile_expert, const int32_t* tile_first, const int32_t* tile_count,
                       const int32_t* n_tiles, int32_t max_tiles, float* y);

}  // namespace spindle
