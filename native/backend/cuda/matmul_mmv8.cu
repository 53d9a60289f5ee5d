// The few-token matmul for k-quant weights (q4_K, q5_K, q6_K) with eight lanes per weight row: the same bits as
// mmv_x32 (matmul.cu), with 8x the threads, so a decode step's small matrices keep the GPU's memory busy.
// mmv_x32 gives a lane one row and walks a unit's eight 32-value sub-blocks itself; here a unit's sub-blocks are
// spread over the row's eight lanes (each reads one 16-byte field of the x32 layout): each lane computes the
// exact int32 dots of its 16 weights with the q8_256 activations, times their scales, and the row's lanes add
// these integers (exact in any order), so every lane holds the unit's S1, S2 (q4_K, q5_K) or S (q6_K) of mmv_x32 and
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
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {

namespace {

constexpr int k_max_warps = 16;  // S * quads per block
constexpr unsigned k_full = 0xffffffffu;

// 16 quantized activations of token t: values [16c, 16c + 16) of sub-block sub.
__device__ __forceinline__ int4 x16(const mmv_act& a, int t, int64_t sub, int c) {
  return *(const int4*)(a.qx + (int64_t)t * a.n_in + sub * 32 + 16 * c);
}

__device__ __forceinline__ int dot16(int w0, int w1, int w2, int w3, int4 x) {
  int s = 0;
  s = __dp4a(w0, x.x, s);
  s = __dp4a(w1, x.y, s);
  s = __dp4a(w2, x.z, s);
  return __dp4a(w3, x.w, s);
}

// The sum of v over the eight lanes of a row (lanes 8r..8r+7): integers, exact in any order.
__device__ __forceinline__ int row_sum8(int v) {
  v += __shfl_xor_sync(k_full, v, 1);
  v += __shfl_xor_sync(k_full, v, 2);
  return v + __shfl_xor_sync(k_full, v, 4);
}

// q4_K (QhAt < 0) and q5_K: sub-lane s = 2k + c reads qs field s (values 16c..16c+15 of sub-blocks 2k, low
// nibbles, and 2k + 1, high; q5_K: their fifth bits, bits 2k and 2k + 1 of qh field c) and adds the min term of
// sub-block s.
template <int UnitBytes, int QsAt, int QhAt>
struct lanes8_affine {
  static constexpr int unit_bytes = UnitBytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int k = sl / 2, c = sl % 2;
    const int4 q = ld16(gb + QsAt + (sl * 32 + li) * 16);
    int lo[4] = {q.x & 0x0F0F0F0F, q.y & 0x0F0F0F0F, q.z & 0x0F0F0F0F, q.w & 0x0F0F0F0F};
    int hi[4] = {(q.x >> 4) & 0x0F0F0F0F, (q.y >> 4) & 0x0F0F0F0F, (q.z >> 4) & 0x0F0F0F0F, (q.w >> 4) & 0x0F0F0F0F};
    if constexpr (QhAt >= 0) {
      const int4 h = ld16(gb + QhAt + (c * 32 + li) * 16);
      const int hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        lo[i] |= ((hw[i] >> (2 * k)) & 0x01010101) << 4;
        hi[i] |= ((hw[i] >> (2 * k + 1)) & 0x01010101) << 4;
      }
    }
    const __half2 dm = *(const __half2*)(gb + 4 * li);
    const uint32_t* sp = (const uint32_t*)(gb + 128 + 12 * li);
    const uint32_t s0 = sp[0], s1w = sp[1], s2w = sp[2];
    int sc_lo, sc_hi, m, unused;
    q4_K_scale_min_words(2 * k, s0, s1w, s2w, sc_lo, unused);
    q4_K_scale_min_words(2 * k + 1, s0, s1w, s2w, sc_hi, unused);
    q4_K_scale_min_words(sl, s0, s1w, s2w, unused, m);
    const int64_t sub0 = u * 8 + 2 * k;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);  // past the call's tokens: computed, never used
      const int p_lo = dot16(lo[0], lo[1], lo[2], lo[3], x16(a, tt, sub0, c));
      const int p_hi = dot16(hi[0], hi[1], hi[2], hi[3], x16(a, tt, sub0 + 1, c));
      const int s1 = row_sum8(sc_lo * p_lo + sc_hi * p_hi);
      const int s2 = row_sum8(m * a.bx[(int64_t)tt * a.nsub + u * 8 + sl]);
      acc[t] = __fadd_rn(acc[t], affine_unit_term(__low2float(dm), __high2float(dm), a.dx[(int64_t)tt * (a.nsub / 8) + u], s1, s2));
    }
  }
};
using lanes8_q4_K = lanes8_affine<x32_q4_K::unit_bytes, x32_q4_K::qs_at, x32_q4_K::qh_at>;
using lanes8_q5_K = lanes8_affine<x32_q5_K::unit_bytes, x32_q5_K::qs_at, x32_q5_K::qh_at>;

// q6_K: sub-lane s = 4n + 2p + c reads ql field s and qh field 2n + c: values 16c..16c+15 of quarters p and
// p + 2 of 128-value half n, each sixteen with its own scale.
struct lanes8_q6_K {
  static constexpr int unit_bytes = x32_q6_K::unit_bytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int n = sl / 4, p = (sl / 2) % 2, c = sl % 2;
    const int4 l = ld16(gb + (sl * 32 + li) * 16);
    const int4 h = ld16(gb + 4096 + ((2 * n + c) * 32 + li) * 16);
    const int ql[4] = {l.x, l.y, l.z, l.w}, qh[4] = {h.x, h.y, h.z, h.w};
    int w[2][4];  // [hi]: quarter p + 2 * hi
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int lo4 = (ql[i] >> (4 * hi)) & 0x0F0F0F0F;
        const int hi2 = ((qh[i] >> (2 * (p + 2 * hi))) & 0x03030303) << 4;
        w[hi][i] = __vsubss4(lo4 | hi2, 0x20202020);
      }
    const float d = ld_half(gb + 6656 + 2 * li);
    const int8_t* scp = (const int8_t*)(gb + 6144 + li * 16 + 8 * n + c);
    const int sc0 = scp[2 * p], sc1 = scp[2 * (p + 2)];  // quarters p and p + 2, sixteen c
    const int64_t sub_p = u * 8 + 4 * n + p;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      const int s0 = dot16(w[0][0], w[0][1], w[0][2], w[0][3], x16(a, tt, sub_p, c));
      const int s1 = dot16(w[1][0], w[1][1], w[1][2], w[1][3], x16(a, tt, sub_p + 2, c));
      const int s = row_sum8(sc0 * s0 + sc1 * s1);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s));
    }
  }
};

// The rows of one job (a block's share of it) at NT tokens: see the top of the file.
template <class Q, int NT>
__device__ __forceinline__ void mmv8_rows(const mmv_shape& sh, int quads, int64_t block, const mmv_act& a,
                                          float (&part)[k_max_warps][NT][4]) {
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp;
  const int seg = warp % sh.splits, quad = warp / sh.splits;
  const int rq = lane / 8, sl = lane % 8;
  const int64_t rel = (block * quads + quad) * 4 + rq;
  const bool valid = rel < sh.n_out;
  const int64_t r = sh.row0 + (valid ? rel : sh.n_out - 1);  // a row past the call computes row n_out - 1's sums
  const int64_t g = r / k_warp;
  const int li = (int)(r % k_warp);
  const int t0 = blockIdx.y * NT;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  const int64_t u0 = seg * sh.n_units / sh.splits, u1 = (seg + 1) * sh.n_units / sh.splits;
  const uint8_t* gbase = sh.w + (uint64_t)g * sh.n_units * (k_warp * Q::unit_bytes);
  for (int64_t u = u0; u < u1; ++u) Q::template unit<NT>(gbase + (uint64_t)u * (k_warp * Q::unit_bytes), li, sl, u, a, t0, acc);
  if (sh.splits > 1) {
    if (sl == 0) {
#pragma unroll
      for (int t = 0; t < NT; ++t) part[warp][t][rq] = acc[t];
    }
    __syncthreads();
    if (seg != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float s = part[warp][t][rq];
      for (int k = 1; k < sh.splits; ++k) s = __fadd_rn(s, part[warp + k][t][rq]);
      acc[t] = s;
    }
  }
  if (!valid || sl != 0) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
    if (t0 + t < a.n_tok) sh.y[(int64_t)(t0 + t) * sh.ldy + rel] = acc[t];
}

// Block x of the launch belongs to the last job whose first block is <= x; the branch on the weight type is
// uniform across the block. Q5: the launch has a q5_K job (a separate instance, so the q4_K / q6_K one keeps
// its registers).
template <int NT, bool Q5>
__global__ void __launch_bounds__(k_max_warps * k_warp) mmv8_x32(mmv8_jobs jobs, mmv_act a) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float part[k_max_warps][NT][4];
  int j = 0;
  while (j + 1 < jobs.n && jobs.job[j + 1].block0 <= (int64_t)blockIdx.x) ++j;
  const mmv8_job& job = jobs.job[j];
  const int64_t block = (int64_t)blockIdx.x - job.block0;
  if (job.type == (int32_t)ggml_type::Q4_K) mmv8_rows<lanes8_q4_K, NT>(job.sh, job.quads, block, a, part);
  else if (Q5 && job.type == (int32_t)ggml_type::Q5_K) mmv8_rows<lanes8_q5_K, NT>(job.sh, job.quads, block, a, part);
  else mmv8_rows<lanes8_q6_K, NT>(job.sh, job.quads, block, a, part);
}

template <int NT>
void launch_nt(cuda_backend& be, const mmv8_jobs& jobs, int warps, int64_t blocks, const mmv_act& a) {
  const dim3 grid((unsigned)blocks, (unsigned)((a.n_tok + NT - 1) / NT));
  bool q5 = false;
  for (int i = 0; i < jobs.n; ++i) q5 = q5 || jobs.job[i].type == (int32_t)ggml_type::Q5_K;
  if (q5) be.launch("mmv8_x32", mmv8_x32<NT, true>, grid, dim3(warps * k_warp), jobs, a);
  else be.launch("mmv8_x32", mmv8_x32<NT, false>, grid, dim3(warps * k_warp), jobs, a);
}

}  // namespace

bool mmv8_takes(ggml_type type, const mmv_shape& sh) {
  if (type != ggml_type::Q4_K && type != ggml_type::Q5_K && type != ggml_type::Q6_K) return false;
  const int64_t unit_bytes = type == ggml_type::Q4_K   ? x32_q4_K::unit_bytes
                             : type == ggml_type::Q5_K ? x32_q5_K::unit_bytes
                                                       : x32_q6_K::unit_bytes;
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
