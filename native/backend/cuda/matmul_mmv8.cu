// The few-token matmul for the super-block weights (q2_K .. q6_K, iq4_xs) with eight lanes per weight row: the same bits as
// mmv_x32 (matmul.cu), with 8x the threads, so a decode step's small matrices keep the GPU's memory busy.
// mmv_x32 gives a lane one row and walks a unit's eight 32-value sub-blocks itself; here a unit's sub-blocks are
// spread over the row's eight lanes (each reads one 16-byte field of the x32 layout): each lane computes the
// exact int32 dots of its 16 weights with the q8_256 activations, times their scales, and the row's lanes add
// these integers (exact in any order), so every lane holds the unit's S1, S2 (q2_K, q4_K, q5_K) or S of mmv_x32 and
// adds the unit's float term (affine_unit_term / scaled_unit_term) to its running sum, unit after unit.
// K segments (sh.splits, from splits_for) are warps of the block, added in segment order as in mmv_x32. So a
// token's output has the bits of mmv_x32 and of the tensor-core path (cuda_matmul_test checks it).
// Warp w of a block: row quad w / S (four rows, lanes 8r..8r+7 for row r), K segment w % S.
// One launch may carry up to four weights reading the same input (q / k / v, gate / up: matmul_group), each
// with its own blocks: fewer launches per decode step, and each weight's rows the same bits as alone.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mmv8.h"
#include "backend/cuda/matmul_mmv8_rows.cuh"
#include "backend/pack_x32.h"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {

namespace {

// Block x of the launch belongs to the last job whose first block is <= x; the branch on the weight type is
// uniform across the block. More: the launch has a job of another type than q4_K / q6_K (a separate instance, so
// the q4_K / q6_K one keeps its registers). The three kernels spell the type switch out: a shared dispatcher
// (a generic lambda) cost mmv8_tiles<false> 24 bytes of spills (sm_90, nvcc 13).
template <int NT, bool More>
__global__ void __launch_bounds__(k_max_warps * k_warp) mmv8_x32(mmv8_jobs jobs, mmv_act a) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float part[k_max_warps][NT][4];
  int j = 0;
  while (j + 1 < jobs.n && jobs.job[j + 1].block0 <= (int64_t)blockIdx.x) ++j;
  const mmv8_job& job = jobs.job[j];
  const int64_t block = (int64_t)blockIdx.x - job.block0;
  const int t0 = blockIdx.y * NT;
  if (job.type == (int32_t)ggml_type::Q4_K) mmv8_rows<lanes8_q4_K, NT>(job.sh, job.quads, block, a, part, t0);
  else if (More && job.type == (int32_t)ggml_type::Q5_K) mmv8_rows<lanes8_q5_K, NT>(job.sh, job.quads, block, a, part, t0);
  else if (More && job.type == (int32_t)ggml_type::Q3_K) mmv8_rows<lanes8_q3_K, NT>(job.sh, job.quads, block, a, part, t0);
  else if (More && job.type == (int32_t)ggml_type::Q2_K) mmv8_rows<lanes8_q2_K, NT>(job.sh, job.quads, block, a, part, t0);
  else if (More && job.type == (int32_t)ggml_type::IQ4_XS) mmv8_rows<lanes8_iq4_xs, NT>(job.sh, job.quads, block, a, part, t0);
  else mmv8_rows<lanes8_q6_K, NT>(job.sh, job.quads, block, a, part, t0);
}

template <int NT>
void launch_nt(cuda_backend& be, const mmv8_jobs& jobs, int warps, int64_t blocks, const mmv_act& a) {
  const dim3 grid((unsigned)blocks, (unsigned)((a.n_tok + NT - 1) / NT));
  bool more = false;
  for (int i = 0; i < jobs.n; ++i)
    more = more || (jobs.job[i].type != (int32_t)ggml_type::Q4_K && jobs.job[i].type != (int32_t)ggml_type::Q6_K);
  if (more) be.launch("mmv8_x32", mmv8_x32<NT, true>, grid, dim3(warps * k_warp), jobs, a);
  else be.launch("mmv8_x32", mmv8_x32<NT, false>, grid, dim3(warps * k_warp), jobs, a);
}

// Grouped experts: block (x, e) computes row block x of entry e's expert (mmv8_expert_rows).
template <bool More>
__global__ void __launch_bounds__(k_max_warps * k_warp) mmv8_experts(mmv8_job job, mmv_act a, const int32_t* ids,
                                                                     int64_t x_rows, float* y) {
  pdl_begin();
  __shared__ float part[k_max_warps][1][4];
  const int64_t e = blockIdx.y, block = blockIdx.x;
  if (job.type == (int32_t)ggml_type::Q4_K) mmv8_expert_rows<lanes8_q4_K>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q5_K) mmv8_expert_rows<lanes8_q5_K>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q3_K) mmv8_expert_rows<lanes8_q3_K>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q2_K) mmv8_expert_rows<lanes8_q2_K>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
  else if (More && job.type == (int32_t)ggml_type::IQ4_XS) mmv8_expert_rows<lanes8_iq4_xs>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
  else mmv8_expert_rows<lanes8_q6_K>(job.sh, job.quads, block, a, ids, e, x_rows, y, part);
}

// Sorted grouped experts: block (x, t) computes row block x of tile t (mmv8_tile_rows); tiles past *n_tiles (the
// grid holds the most a sort can make) return at once.
template <bool More>
__global__ void __launch_bounds__(k_max_warps * k_warp) mmv8_tiles(mmv8_job job, mmv_act a, const int32_t* tile_expert,
                                                                   const int32_t* tile_first, const int32_t* tile_count,
                                                                   const int32_t* n_tiles, float* y) {
  pdl_begin();
  __shared__ float part[k_max_warps][8][4];
  const int t = blockIdx.y;
  if (t >= *n_tiles) return;
  const int32_t e = tile_expert[t], first = tile_first[t], count = tile_count[t];
  const int64_t block = blockIdx.x;
  if (job.type == (int32_t)ggml_type::Q4_K) mmv8_tile_rows<lanes8_q4_K>(job.sh, job.quads, block, a, e, first, count, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q5_K) mmv8_tile_rows<lanes8_q5_K>(job.sh, job.quads, block, a, e, first, count, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q3_K) mmv8_tile_rows<lanes8_q3_K>(job.sh, job.quads, block, a, e, first, count, y, part);
  else if (More && job.type == (int32_t)ggml_type::Q2_K) mmv8_tile_rows<lanes8_q2_K>(job.sh, job.quads, block, a, e, first, count, y, part);
  else if (More && job.type == (int32_t)ggml_type::IQ4_XS) mmv8_tile_rows<lanes8_iq4_xs>(job.sh, job.quads, block, a, e, first, count, y, part);
  else mmv8_tile_rows<lanes8_q6_K>(job.sh, job.quads, block, a, e, first, count, y, part);
}

// One expert's launch layout: its job (rows, K segments, row quads per block), warps per block, row blocks, and
// whether its type needs the kernels' other-than-q4_K / q6_K instance.
struct expert_launch {
  mmv8_job job{};
  int warps = 4;
  unsigned blocks = 0;
  bool more = false;
};
expert_launch expert_layout(ggml_type type, const mmv_shape& expert) {
  expert_launch l;
  l.warps = std::max(4, expert.splits);
  l.job.sh = expert;
  l.job.type = (int32_t)type;
  l.job.quads = l.warps / expert.splits;
  l.blocks = (unsigned)((expert.n_out + 4 * l.job.quads - 1) / (4 * l.job.quads));
  l.more = type != ggml_type::Q4_K && type != ggml_type::Q6_K;
  return l;
}

}  // namespace

void launch_mmv8_tiles(cuda_backend& be, ggml_type type, const mmv_shape& expert, const mmv_act& a,
                       const int32_t* tile_expert, const int32_t* tile_first, const int32_t* tile_count,
                       const int32_t* n_tiles, int32_t max_tiles, float* y) {
  if (!mmv8_takes(type, expert) || max_tiles < 1 || max_tiles > 65535) {
    throw error("cuda matmul_experts: the tiled kernel takes k-quant experts and 1 to 65535 tiles");
  }
  const expert_launch l = expert_layout(type, expert);
  be.launch("mmv8_tiles", l.more ? mmv8_tiles<true> : mmv8_tiles<false>, dim3(l.blocks, (unsigned)max_tiles),
            dim3(l.warps * k_warp), l.job, a, tile_expert, tile_first, tile_count, n_tiles, y);
}

void launch_mmv8_experts(cuda_backend& be, ggml_type type, const mmv_shape& expert, const mmv_act& a,
                         const int32_t* ids, int64_t n_entries, int64_t x_rows, float* y) {
  if (!mmv8_takes(type, expert) || n_entries < 1 || n_entries > 65535) {
    throw error("cuda matmul_experts: the grouped kernel takes k-quant experts and 1 to 65535 entries");
  }
  const expert_launch l = expert_layout(type, expert);
  be.launch("mmv8_experts", l.more ? mmv8_experts<true> : mmv8_experts<false>, dim3(l.blocks, (unsigned)n_entries),
            dim3(l.warps * k_warp), l.job, a, ids, x_rows, y);
}

bool mmv8_takes(ggml_type type, const mmv_shape& sh) {
  if (type != ggml_type::Q2_K && type != ggml_type::Q3_K && type != ggml_type::Q4_K && type != ggml_type::Q5_K &&
      type != ggml_type::Q6_K && type != ggml_type::IQ4_XS) {
    return false;
  }
  const int64_t unit_bytes = x32_format_of(type)->unit_bytes;
  return sh.splits <= k_max_warps && sh.n_out * sh.n_units * unit_bytes <= k_mmv8_max_bytes;
}

void launch_mmv8(cuda_backend& be, const ggml_type* types, const mmv_shape* shapes, int n, const mmv_act& a) {
  if (n < 1 || n > k_mmv8_max_jobs) throw error("cuda matmul: 1 to 4 weights in one grouped launch");
  // warps per block: the most K segments of any job, at least 4; job i takes warps / S_i row quads per block
  int warps = 4;
  for (int i = 0; i < n; ++i) warps = std::max(warps, shapes[i].splits);
  mmv8_jobs jobs{};
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    if (!mmv8_takes(types[i], shapes[i])) throw error("cuda matmul: weight type not taken by mmv8");
    mmv8_job& job = jobs.job[i];
    job.sh = shapes[i];
    job.type = (int32_t)types[i];
    job.quads = warps / shapes[i].splits;
    job.block0 = blocks;
    blocks += (shapes[i].n_out + 4 * job.quads - 1) / (4 * job.quads);
  }
  jobs.n = n;
  if (a.n_tok <= 1) launch_nt<1>(be, jobs, warps, blocks, a);
  else if (a.n_tok <= 2) launch_nt<2>(be, jobs, warps, blocks, a);
  else if (a.n_tok <= 4) launch_nt<4>(be, jobs, warps, blocks, a);
  else launch_nt<8>(be, jobs, warps, blocks, a);
}

}  // namespace spindle
