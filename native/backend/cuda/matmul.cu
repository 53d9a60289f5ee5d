// matmul / matmul_expert on the x32 layout: y[t, o] = W[o, :] . x[t, :] for rows o of W (see cuda_backend.h).
// Kernel shape: one lane per weight row (lanes of a warp = 32 adjacent rows, so weight loads are coalesced),
// NT tokens per lane sharing each weight load, and K split into S segments (one warp each) when the matrix
// has too few rows to fill the GPU. S depends only on the weight's shape (n_units, n_out), never on the token
// count, so a token's result has the same bits alone or in a batch:
//   y[t, o] = ((seg_0 + seg_1) + seg_2) + ...,  seg_s = sequential sum of the unit terms of segment s.
// Quantized weights use int8 activations (x32_types.cuh): the 32-value block types per 32 values
// (quantize_q8_32), the super-block types per 256 (quantize_q8_256); float weights the f32 ones.
// From k_mmq_min_tokens tokens on, quantized weights take the tensor-core kernels (matmul_mma.cu, matmul_mmq_k.cu),
// whose outputs have the same bits as this one's. One launch may carry up to four weights of one type reading the
// same input (gate / up too large for mmv8: matmul_group), each weight's rows computed as in a launch of its own.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_mma.h"
#include "backend/cuda/matmul_mmv8.h"
#include "backend/cuda/moe_ops.cuh"
#include "backend/cuda/moe_ops.h"
#include "backend/cuda/quantize_act.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"
#include "backend/pack_x32.h"

namespace spindle {

namespace {

constexpr int k_mmv_warps = 16;  // warps per block (at most 16 K segments)
constexpr int k_mmv_max_jobs = 4;

// x [n_rows, n_in] -> qx (int8), dx = amax / 127, sx = dx * sum(q), per 32 values; one warp per 32 values.
__global__ void quantize_q8_32(const float* x, int64_t n_in, int64_t n_sub_total, int64_t nsub, int8_t* qx, float* dx,
                               float* sx) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t b = (int64_t)blockIdx.x * (blockDim.x / k_warp) + threadIdx.x / k_warp;  // sub-block
  if (b >= n_sub_total) return;
  const int lane = threadIdx.x % k_warp;
  const int64_t row = b / nsub, s = b % nsub, at = row * n_in + s * 32 + lane;
  quantize32(x[at], qx + at, dx + b, sx + b);
}

// x [n_rows, n_in] -> qx (int8), dx = amax / 127 per 256 values, bx = sum(q) per 32; one block of 256 threads
// per 256 values (n_in a multiple of 256: the groups are consecutive).
__global__ void __launch_bounds__(256) quantize_q8_256(const float* x, int8_t* qx, float* dx, int32_t* bx) {
  pdl_begin();
  __shared__ float sh_amax[8];
  const int64_t g = blockIdx.x;
  quantize256_block(x[g * 256 + threadIdx.x], qx + g * 256, dx + g, bx + 8 * g, sh_amax);
}

// Weights of one launch (1..k_mmv_max_jobs of one type reading the same input: gate / up): block x belongs to the
// last job whose first block is <= x, so each weight's rows are computed as in a launch of their own.
struct mmv_jobs {
  mmv_shape sh[k_mmv_max_jobs];
  int64_t block0[k_mmv_max_jobs];
  int32_t n;
  int32_t pad_;  // no padding bytes (launch.cuh)
};
static_assert(sizeof(mmv_jobs) == k_mmv_max_jobs * (sizeof(mmv_shape) + 8) + 8, "mmv_jobs has padding");

template <class Q, int NT>
__global__ void __launch_bounds__(k_mmv_warps * k_warp) mmv_x32(mmv_jobs jobs, mmv_act a) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float part[k_mmv_warps][NT][k_warp];
  int j = 0;
  while (j + 1 < jobs.n && jobs.block0[j + 1] <= (int64_t)blockIdx.x) ++j;
  const mmv_shape sh = jobs.sh[j];
  const int64_t block = (int64_t)blockIdx.x - jobs.block0[j];
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp;
  const int seg = warp % sh.splits, local_group = warp / sh.splits, groups_per_block = k_mmv_warps / sh.splits;
  const int64_t rel = (block * groups_per_block + local_group) * k_warp + lane;
  const int t0 = blockIdx.y * NT;
  const bool valid = rel < sh.n_out;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  if (valid) {
    const int64_t r = sh.row0 + rel, g = r / k_warp;
    const int li = (int)(r % k_warp);
    const int64_t u0 = seg * sh.n_units / sh.splits, u1 = (seg + 1) * sh.n_units / sh.splits;
    const uint8_t* base = sh.w + (uint64_t)g * sh.n_units * (k_warp * Q::unit_bytes);
    for (int64_t u = u0; u < u1; ++u) Q::template dot_unit<NT>(base + (uint64_t)u * (k_warp * Q::unit_bytes), li, u, a, t0, acc);
  }
  if (sh.splits > 1) {
#pragma unroll
    for (int t = 0; t < NT; ++t) part[warp][t][lane] = acc[t];
    __syncthreads();
    if (seg != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float s = part[warp][t][lane];
      for (int k = 1; k < sh.splits; ++k) s = __fadd_rn(s, part[warp + k][t][lane]);
      acc[t] = s;
    }
  }
  if (!valid) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
    if (t0 + t < a.n_tok) sh.y[(int64_t)(t0 + t) * sh.ldy + rel] = acc[t];
}

// swiglu(gate, up) quantized for the next matmul, writing the swiglu values back to gate as the swiglu kernel
// does (the same expression, so the same bits as swiglu then quantize): per 32 values (one warp each) or per
// 256 (one block of 256 threads each; n_in a multiple of 256).
__device__ __forceinline__ float swiglu_value(float g, float u) { return g / (1.0f + expf(-g)) * u; }

__global__ void swiglu_quantize_q8_32(float* gate, const float* up, int64_t n_in, int64_t n_sub_total, int64_t nsub,
                                      int8_t* qx, float* dx, float* sx) {
  pdl_begin();
  const int64_t b = (int64_t)blockIdx.x * (blockDim.x / k_warp) + threadIdx.x / k_warp;  // sub-block
  if (b >= n_sub_total) return;
  const int lane = threadIdx.x % k_warp;
  const int64_t row = b / nsub, s = b % nsub, at = row * n_in + s * 32 + lane;
  const float v = swiglu_value(gate[at], up[at]);
  gate[at] = v;
  quantize32(v, qx + at, dx + b, sx + b);
}

__global__ void __launch_bounds__(256) swiglu_quantize_q8_256(float* gate, const float* up, int8_t* qx, float* dx,
                                                                int32_t* bx) {
  pdl_begin();
  __shared__ float sh_amax[8];
  const int64_t g = blockIdx.x, at = g * 256 + threadIdx.x;
  const float v = swiglu_value(gate[at], up[at]);
  gate[at] = v;
  quantize256_block(v, qx + g * 256, dx + g, bx + 8 * g, sh_amax);
}

// K segments for a weight of n_units units per row and n_out rows: enough warps (~2048) to fill the GPU, at
// most 16, at most half the units (each warp takes at least two). A function of the weight's shape only (batch invariance).
int splits_for(int64_t n_units, int64_t n_out) {
  const int64_t groups = (n_out + k_warp - 1) / k_warp;
  int s = 1;
  while (s < k_mmv_warps && groups * s < 2048 && 2 * s <= n_units) s *= 2;
  return s;
}

template <class Q, int NT>
void launch_nt(cuda_backend& be, const mmv_shape* shapes, int n, const mmv_act& a) {
  mmv_jobs jobs{};
  int64_t blocks = 0;
  for (int i = 0; i < n; ++i) {
    const mmv_shape& sh = shapes[i];
    const int64_t groups = (sh.n_out + k_warp - 1) / k_warp;
    const int64_t per_block = k_mmv_warps / sh.splits;
    jobs.sh[i] = sh;
    jobs.block0[i] = blocks;
    blocks += (groups + per_block - 1) / per_block;
  }
  jobs.n = n;
  const dim3 grid((unsigned)blocks, (unsigned)((a.n_tok + NT - 1) / NT));
  be.launch("mmv_x32", mmv_x32<Q, NT>, grid, dim3(k_mmv_warps * k_warp), jobs, a);
}

template <class Q>
void launch_mmv(cuda_backend& be, const mmv_shape* shapes, int n, const mmv_act& a) {
  if (a.n_tok <= 1) launch_nt<Q, 1>(be, shapes, n, a);
  else if (a.n_tok <= 2) launch_nt<Q, 2>(be, shapes, n, a);
  else if (a.n_tok <= 4) launch_nt<Q, 4>(be, shapes, n, a);
  else launch_nt<Q, 8>(be, shapes, n, a);
}

// One launch of mmv_x32 for n (1..k_mmv_max_jobs) weights of one type reading the same input.
void launch_mmv_of(cuda_backend& be, ggml_type type, const mmv_shape* sh, int n, const mmv_act& a) {
  if (n < 1 || n > k_mmv_max_jobs) throw error("cuda matmul: 1 to 4 weights in one grouped launch");
  switch (type) {
    case ggml_type::F32: launch_mmv<x32_f32>(be, sh, n, a); break;
    case ggml_type::F16: launch_mmv<x32_f16>(be, sh, n, a); break;
    case ggml_type::BF16: launch_mmv<x32_bf16>(be, sh, n, a); break;
    case ggml_type::Q8_0: launch_mmv<x32_q8_0>(be, sh, n, a); break;
    case ggml_type::Q4_0: launch_mmv<x32_q4_0>(be, sh, n, a); break;
    case ggml_type::Q4_K: launch_mmv<x32_q4_K>(be, sh, n, a); break;
    case ggml_type::Q6_K: launch_mmv<x32_q6_K>(be, sh, n, a); break;
    case ggml_type::Q4_1: launch_mmv<x32_q4_1>(be, sh, n, a); break;
    case ggml_type::Q5_0: launch_mmv<x32_q5_0>(be, sh, n, a); break;
    case ggml_type::Q5_1: launch_mmv<x32_q5_1>(be, sh, n, a); break;
    case ggml_type::IQ4_NL: launch_mmv<x32_iq4_nl>(be, sh, n, a); break;
    case ggml_type::Q2_K: launch_mmv<x32_q2_K>(be, sh, n, a); break;
    case ggml_type::Q3_K: launch_mmv<x32_q3_K>(be, sh, n, a); break;
    case ggml_type::Q5_K: launch_mmv<x32_q5_K>(be, sh, n, a); break;
    case ggml_type::IQ4_XS: launch_mmv<x32_iq4_xs>(be, sh, n, a); break;
    default: throw error("cuda matmul: unsupported weight type");
  }
}

}  // namespace

// Room for n_rows x n_in activations quantized in either format: the int8 values, and in *scales
// 2 * n_rows * n_in / 32 floats (q8_32: d, then d * sum(q) per 32 values; q8_256: d per 256 values, then from
// n_rows * n_in / 32 on the int32 sums per 32 values).
int8_t* cuda_backend::reserve_q8(int64_t n_rows, int64_t n_in, float** scales) {
  std::vector<void*>* keep = recording() ? &outgrown_ : nullptr;  // recorded ops may still use outgrown buffers
  *scales = qx_scale_.reserve(2 * n_rows * (n_in / 32), keep);
  return qx_.reserve(n_rows * n_in, keep);
}

// The q8 scratch, reserved for n_rows x n_in activations in format fmt.
mmv_act cuda_backend::q8_view(int64_t n_rows, int64_t n_in, act_format fmt) {
  mmv_act a{nullptr, nullptr, nullptr, nullptr, nullptr, n_in, n_in / 32, (int)n_rows};
  const int64_t n_sub = n_rows * a.nsub;
  float* scales = nullptr;
  a.qx = reserve_q8(n_rows, n_in, &scales);
  a.dx = scales;
  if (fmt == act_format::q8_32) a.sx = scales + n_sub;
  else a.bx = (const int32_t*)(scales + n_sub);
  return a;
}

// x quantized in format fmt into the q8 scratch (skipped when the scratch still holds x in that format: the
// matmul before read the same input, as q / k / v and gate / up do, or add_rms_norm quantized its output).
mmv_act cuda_backend::quantized_act(const float* x, int64_t n_rows, int64_t n_in, act_format fmt) {
  const bool have = qx_of_ == x && qx_rows_ == n_rows && qx_n_in_ == n_in && qx_fmt_ == fmt;
  next_fmt_ = fmt;  // what add_rms_norm quantizes its output into from now on
  mmv_act a = q8_view(n_rows, n_in, fmt);
  if (!have) {
    const int64_t n_sub = n_rows * a.nsub;
    if (fmt == act_format::q8_32) {
      launch("quantize_q8_32", quantize_q8_32, dim3(grid_for(n_sub, 8)), dim3(8 * k_warp), x, n_in, n_sub, a.nsub,
             (int8_t*)a.qx, (float*)a.dx, (float*)a.sx);
    } else {
      if (n_sub / 8 > 0x7fffffff) throw error("cuda matmul: too many activations to quantize");
      launch("quantize_q8_256", quantize_q8_256, dim3((unsigned)(n_sub / 8)), dim3(256), x, (int8_t*)a.qx, (float*)a.dx,
             (int32_t*)a.bx);
    }
  }
  return a;
}

// After the launches of a matmul of x (each launch forgets the quantized input): the q8 scratch holds x again.
void cuda_backend::keep_quantized_act(const float* x, int64_t n_rows, int64_t n_in, act_format fmt) {
  qx_of_ = x;
  qx_rows_ = n_rows;
  qx_n_in_ = n_in;
  qx_fmt_ = fmt;
}

namespace {
bool is_float_type(ggml_type t) { return t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16; }
// Whether the float ranges [a, a + na) and [b, b + nb) meet.
bool overlaps(const float* a, int64_t na, const float* b, int64_t nb) { return a < b + nb && b < a + na; }
// Rows [row0, row0 + n_out) of packed weight w (x32 shape xs) into y [n_tok, n_out], K segments by splits_for.
mmv_shape rows_shape(const backend_weight& w, const x32_shape& xs, int64_t row0, int64_t n_out, float* y) {
  return mmv_shape{(const uint8_t*)w.data, xs.n_units, row0, n_out, y, n_out, splits_for(xs.n_units, n_out), 0};
}
}  // namespace

void cuda_backend::matmul_rows(const backend_weight& w, int64_t row0, int64_t n_out, const float* x, int64_t n_rows,
                               float* y) {
  if (n_rows <= 0 || n_out <= 0) return;
  if (n_rows > 65535LL * 8) throw error("cuda matmul: too many rows in one call");
  const x32_shape xs = x32_shape_of(w.type, w.n_in, w.n_out);
  const mmv_shape sh = rows_shape(w, xs, row0, n_out, y);
  const bool quantized = !is_float_type(w.type);
  const act_format fmt = act_format_of(w.type);
  const mmv_act a = quantized ? quantized_act(x, n_rows, w.n_in, fmt)
                              : mmv_act{nullptr, nullptr, nullptr, nullptr, x, w.n_in, w.n_in / 32, (int)n_rows};
  if (quantized && n_rows >= k_mmq_min_tokens && mmq_supports(w.type, row0)) {
    // tensor cores, the same bits (matmul_mma.cu); K segments in separate blocks when the tiles are few
    float* part = nullptr;
    if (mmq_split_k(sh, a, mmq_split_tiles_per_sm_ * sm_count_)) {
      part = mmq_part_.reserve((int64_t)sh.splits * n_rows * n_out, recording() ? &outgrown_ : nullptr);
    }
    launch_mmq(*this, w.type, sh, a, xs.n_groups, part);
  } else if (mmv8_ && mmv8_takes(w.type, sh)) {  // k-quants: eight lanes per row, the same bits
    launch_mmv8(*this, &w.type, &sh, 1, a);
  } else {
    launch_mmv_of(*this, w.type, &sh, 1, a);
  }
  if (quantized && !overlaps(x, n_rows * w.n_in, y, n_rows * n_out)) keep_quantized_act(x, n_rows, w.n_in, fmt);
}

// q / k / v or gate / up at a few tokens: one launch where the weights are k-quants mmv8 takes, or all of one
// quantized type (mmv_x32); the rows' bits are those of separate calls either way.
void cuda_backend::matmul_group(const backend_weight* const* ws, float* const* ys, int n, const float* x,
                                int64_t n_rows) {
  static_assert(k_mmv_max_jobs == k_mmv8_max_jobs, "one job table size for both grouped kernels");
  const int64_t n_in = ws[0]->n_in;
  const ggml_type type = ws[0]->type;
  bool fits = n >= 2 && n <= k_mmv8_max_jobs && n_rows > 0 && n_rows < k_mmq_min_tokens;
  bool all_mmv8 = mmv8_;                                // k-quants the eight-lane kernel takes
  bool same_type = fused_ && !is_float_type(type);      // any size, one quantized type: the one-lane kernel
  ggml_type types[k_mmv8_max_jobs];
  mmv_shape shapes[k_mmv8_max_jobs];
  for (int i = 0; fits && i < n; ++i) {
    const backend_weight& w = *ws[i];
    types[i] = w.type;
    shapes[i] = rows_shape(w, x32_shape_of(w.type, w.n_in, w.n_out), 0, w.n_out, ys[i]);
    fits = w.n_in == n_in;
    all_mmv8 = all_mmv8 && mmv8_takes(w.type, shapes[i]);
    same_type = same_type && w.type == type && w.n_out > 0;
  }
  if (!fits || !(all_mmv8 || same_type)) {
    backend::matmul_group(ws, ys, n, x, n_rows);
    return;
  }
  const act_format fmt = all_mmv8 ? act_format::q8_256 : act_format_of(type);  // mmv8: k-quants only
  const mmv_act a = quantized_act(x, n_rows, n_in, fmt);
  if (all_mmv8) launch_mmv8(*this, types, shapes, n, a);
  else launch_mmv_of(*this, type, shapes, n, a);
  bool x_intact = true;
  for (int i = 0; i < n; ++i) x_intact = x_intact && !overlaps(x, n_rows * n_in, ys[i], n_rows * ws[i]->n_out);
  if (x_intact) keep_quantized_act(x, n_rows, n_in, fmt);
}

void cuda_backend::matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) {
  matmul_rows(w, 0, w.n_out, x, n_rows, y);
}

void cuda_backend::swiglu_matmul(const backend_weight& w, float* gate, const float* up, int64_t n_rows, float* y) {
  const bool quantized = w.type != ggml_type::F32 && w.type != ggml_type::F16 && w.type != ggml_type::BF16;
  if (!quantized || n_rows <= 0) {
    backend::swiglu_matmul(w, gate, up, n_rows, y);
    return;
  }
  // swiglu and the activation quantization in one kernel; matmul_rows then finds its input quantized
  const act_format fmt = act_format_of(w.type);
  const int64_t n_sub = n_rows * (w.n_in / 32);
  const mmv_act a = q8_view(n_rows, w.n_in, fmt);
  if (fmt == act_format::q8_32) {
    launch("swiglu_quantize_q8_32", swiglu_quantize_q8_32, dim3(grid_for(n_sub, 8)), dim3(8 * k_warp), gate, up,
           w.n_in, n_sub, w.n_in / 32, (int8_t*)a.qx, (float*)a.dx, (float*)a.sx);
  } else {
    if (n_sub / 8 > 0x7fffffff) throw error("cuda matmul: too many activations to quantize");
    launch("swiglu_quantize_q8_256", swiglu_quantize_q8_256, dim3((unsigned)(n_sub / 8)), dim3(256), gate, up,
           (int8_t*)a.qx, (float*)a.dx, (int32_t*)a.bx);
  }
  keep_quantized_act(gate, n_rows, w.n_in, fmt);
  matmul_rows(w, 0, w.n_out, gate, n_rows, y);
}

// The grouped decode path of MoE blocks (backend::moe_on_device): k-quant experts the eight-lane kernel takes, up
// to k_moe_grouped_max entries (a decode step's tokens x experts per token), whose rows then have matmul_expert's
// bits (that call takes mmv8 below k_mmq_min_tokens tokens too).
constexpr int64_t k_moe_grouped_max = 512;

bool cuda_backend::moe_on_device(const backend_weight& w, int64_t n_out, int64_t n_entries) const {
  if (!moe_grouped_ || !mmv8_ || n_entries < 1 || n_entries > k_moe_grouped_max || n_out <= 0 ||
      w.n_out % n_out != 0 || is_float_type(w.type)) {
    return false;
  }
  const x32_shape xs = x32_shape_of(w.type, w.n_in, w.n_out);
  return mmv8_takes(w.type, rows_shape(w, xs, 0, n_out, nullptr));
}

void cuda_backend::matmul_experts(const backend_weight& w, int64_t n_out, const int32_t* ids, int64_t n_entries,
                                  int64_t x_rows, const float* x, float* y) {
  if (n_entries <= 0) return;
  if (!moe_on_device(w, n_out, n_entries) || x_rows <= 0) {
    backend::matmul_experts(w, n_out, ids, n_entries, x_rows, x, y);  // through the host, per expert
    return;
  }
  const x32_shape xs = x32_shape_of(w.type, w.n_in, w.n_out);
  const act_format fmt = act_format_of(w.type);
  const mmv_shape expert = rows_shape(w, xs, 0, n_out, y);
  const int64_t n_expert = w.n_out / n_out;
  if (n_entries < 2 * n_expert || n_expert > k_moe_sort_threads) {  // few entries per expert: one block row each
    const mmv_act a = quantized_act(x, x_rows, w.n_in, fmt);
    launch_mmv8_experts(*this, w.type, expert, a, ids, n_entries, x_rows, y);
    if (!overlaps(x, x_rows * w.n_in, y, n_entries * n_out)) keep_quantized_act(x, x_rows, w.n_in, fmt);
    return;
  }
  // entries sorted by expert, their input rows gathered in that order, tiles of up to 8 entries of one expert (one
  // weight read each), the output rows scattered back to entry order
  std::vector<void*>* keep = recording() ? &outgrown_ : nullptr;
  const int32_t max_tiles = moe_max_tiles((int32_t)n_entries, (int32_t)n_expert);
  int32_t* order = moe_idx_.reserve(n_entries + 3 * (int64_t)max_tiles + 1, keep);
  int32_t* tile_expert = order + n_entries;
  int32_t* tile_first = tile_expert + max_tiles;
  int32_t* tile_count = tile_first + max_tiles;
  int32_t* n_tiles = tile_count + max_tiles;
  float* x_sorted = moe_x_.reserve(n_entries * w.n_in, keep);
  float* y_sorted = moe_y_.reserve(n_entries * n_out, keep);
  launch_moe_sort(*this, ids, (int32_t)n_entries, (int32_t)n_expert, order, tile_expert, tile_first, tile_count,
                  n_tiles);
  launch_permute_rows(*this, x, order, n_entries, x_rows, w.n_in, false, x_sorted);
  const mmv_act a = quantized_act(x_sorted, n_entries, w.n_in, fmt);
  launch_mmv8_tiles(*this, w.type, expert, a, tile_expert, tile_first, tile_count, n_tiles, max_tiles, y_sorted);
  launch_permute_rows(*this, y_sorted, order, n_entries, n_entries, n_out, true, y);
}

void cuda_backend::matmul_expert(const backend_weight& w, int64_t expert, int64_t n_out, const float* x,
                                 int64_t n_rows, float* y) {
  if (n_out <= 0 || expert < 0 || w.n_out % n_out != 0 || expert >= w.n_out / n_out) {
    throw error("matmul_expert: expert " + std::to_string(expert) + " with " + std::to_string(n_out) +
                " rows does not fit a stacked weight of " + std::to_string(w.n_out) + " rows");
  }
  matmul_rows(w, expert * n_out, n_out, x, n_rows, y);
}

}  // namespace spindle
