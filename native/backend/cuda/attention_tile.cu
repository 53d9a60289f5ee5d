// Attention for prompts (many query rows per sequence): the bits of attention_kernel (attention.cu), with the
// K / V rows of a split read once per tile of query rows instead of once per row.
// Block: (tile of up to k_tile_q consecutive query rows of one sequence, KV head + head group of up to 4 query
// heads, split of k_split = 32 positions) = up to 64 (query row, head) pairs, for head dims up to 64. Phases:
//   1. the split's K and V rows and the tile's q rows into shared memory;
//   2. scores: thread (pair, half) computes 16 of the pair's 32 q . k dots the way attention_kernel does: lane l's
//      partial fma(q[l + 32], k[l + 32], fma(q[l], k[l], 0)) for l < 32, then added in warp_sum's butterfly tree;
//   3. softmax: thread `pair` replays attention_kernel's four warps (8 positions each, groups of 4 with a running
//      max and sum) and the merge of the warps, keeping every factor (probabilities, corrections, warp weights);
//   4. weighted V: thread (pair, dim) replays each warp's accumulator chain and the merge with those factors.
// Every expression is attention_kernel's, written with explicit _rn intrinsics (or fmaf) in both files, so
// the output (or the split partial handed to attention_merge_kernel) has the same bits for every query row:
// which kernel a launch takes never changes a result (cuda_ops_test checks it).
#include <algorithm>

#include "backend/cuda/attention_args.cuh"
#include "backend/cuda/attention_tile.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"

namespace spindle {

namespace {

constexpr int k_hg = 4;                      // query heads per block (attention_kernel<2, 4>'s head group)
constexpr int k_pairs = k_tile_q * k_hg;     // (query row, head) pairs per block
constexpr int k_hd = 64;                     // head dim (2 per lane in attention_kernel<2, 4>)
constexpr int k_threads = 128;
constexpr int k_per_warp = k_split / k_attn_warps;  // positions per warp slice of attention_kernel (8)

struct tile_smem {
  float q[k_pairs][k_hd + 1];  // +1: a warp reading 32 pairs' same dim hits 32 banks
  float k[k_split][k_hd];
  float v[k_split][k_hd];
  float p[k_pairs][k_split + 1];  // scores, then probabilities (+1: phase 3's thread per pair hits 32 banks)
  float corr[k_pairs][k_attn_warps * 2 + 1];  // per warp slice w and group g (2w + g): the accumulator's correction
  float f[k_pairs][k_attn_warps];        // weight of each warp slice in the merge
  float mx[k_pairs], sum[k_pairs];
  int32_t n_kv[k_tile_q];
};

__global__ void __launch_bounds__(k_threads) attention_tile_kernel(attn_args a, const int32_t* tiles) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ tile_smem sm;
  const int tid = threadIdx.x;
  const int64_t i0 = tiles[2 * blockIdx.x];
  const int nq = tiles[2 * blockIdx.x + 1];
  const int32_t seq = a.tok_seq[i0];
  const int group_heads = a.n_head / a.n_head_kv;
  const int hgroups = (group_heads + k_hg - 1) / k_hg;
  const int kvh = blockIdx.y / hgroups, h0 = kvh * group_heads + (blockIdx.y % hgroups) * k_hg;
  const int nh = min(k_hg, kvh * group_heads + group_heads - h0);
  const int64_t split = blockIdx.z, j_first = split * k_split;
  // positions of each query row (rows are consecutive: the last has the most)
  if (tid < k_tile_q) sm.n_kv[tid] = tid < nq ? (int32_t)n_kv_of(a, i0 + tid, seq) : 0;
  __syncthreads();
  const int64_t n_kv_max = sm.n_kv[nq - 1];
  if (j_first >= n_kv_max) return;  // no row of the tile reaches this split (uniform across the block)
  const int32_t* table = a.tables ? a.tables + (int64_t)seq * a.table_stride : nullptr;

  // 1. K / V rows of the split (zeros past the last row's positions: never used) and the tile's q rows
  for (int e = tid; e < k_split * k_hd; e += k_threads) {
    const int u = e / k_hd, d = e % k_hd;
    const int64_t j = j_first + u;
    float kv = 0.0f, vv = 0.0f;
    if (j < n_kv_max) {
      const int64_t row = kv_row(table, a.block_size, j);
      if (d < a.hd_k) kv = a.k[row * a.k_stride + (int64_t)kvh * a.hd_k + d];
      if (d < a.hd_v) vv = a.v[row * a.v_stride + (int64_t)kvh * a.hd_v + d];
    }
    sm.k[u][d] = kv;
    sm.v[u][d] = vv;
  }
  for (int e = tid; e < k_pairs * k_hd; e += k_threads) {
    const int pr = e / k_hd, d = e % k_hd, t = pr / k_hg, h = pr % k_hg;
    sm.q[pr][d] = t < nq && h < nh && d < a.hd_k ? a.q[((i0 + t) * a.n_head + h0 + h) * a.hd_k + d] : 0.0f;
  }
  __syncthreads();

  // 2. scores: thread -> pair tid % 64, positions 16 * (tid / 64) ..
  {
    const int pr = tid % k_pairs, t = pr / k_hg;
    const int64_t n_kv = sm.n_kv[t];
    float qv[k_hd];
#pragma unroll
    for (int d = 0; d < k_hd; ++d) qv[d] = sm.q[pr][d];
    for (int uu = 0; uu < k_split / 2; ++uu) {
      const int u = (tid / k_pairs) * (k_split / 2) + uu;
      float lane_sum[k_warp];
#pragma unroll
      for (int l = 0; l < k_warp; ++l) lane_sum[l] = __fmaf_rn(qv[l + k_warp], sm.k[u][l + k_warp], __fmaf_rn(qv[l], sm.k[u][l], 0.0f));
      // warp_sum's butterfly: at each step lane l adds lane l ^ m (m = 16, 8, 4, 2, 1)
#pragma unroll
      for (int l = 0; l < 16; ++l) lane_sum[l] = __fadd_rn(lane_sum[l], lane_sum[l + 16]);
#pragma unroll
      for (int l = 0; l < 8; ++l) lane_sum[l] = __fadd_rn(lane_sum[l], lane_sum[l + 8]);
#pragma unroll
      for (int l = 0; l < 4; ++l) lane_sum[l] = __fadd_rn(lane_sum[l], lane_sum[l + 4]);
#pragma unroll
      for (int l = 0; l < 2; ++l) lane_sum[l] = __fadd_rn(lane_sum[l], lane_sum[l + 2]);
      lane_sum[0] = __fadd_rn(lane_sum[0], lane_sum[1]);
      sm.p[pr][u] = j_first + u < n_kv ? lane_sum[0] * a.scale : -INFINITY;
    }
  }
  __syncthreads();

  // 3. softmax of each warp slice (groups of k_group positions), then the merge weights of the slices
  if (tid < k_pairs) {
    const int pr = tid, t = pr / k_hg;
    const int64_t n_kv = sm.n_kv[t];
    float mw[k_attn_warps], lw[k_attn_warps];
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) {
      const int64_t j0 = j_first + w * k_per_warp, j1 = min(j0 + k_per_warp, n_kv);
      float m = -INFINITY, l = 0.0f;
#pragma unroll
      for (int g = 0; g < k_per_warp / k_group; ++g) {
        const int64_t jb = j0 + g * k_group;
        if (jb >= j1) break;
        float* s = &sm.p[pr][jb - j_first];
        float m_new = m;
#pragma unroll
        for (int u = 0; u < k_group; ++u) m_new = fmaxf(m_new, s[u]);
        const float corr = expf(m - m_new);
        float psum = 0.0f;
#pragma unroll
        for (int u = 0; u < k_group; ++u) {
          s[u] = expf(s[u] - m_new);
          psum += s[u];
        }
        l = __fmaf_rn(l, corr, psum);
        m = m_new;
        sm.corr[pr][2 * w + g] = corr;
      }
      mw[w] = m;
      lw[w] = l;
    }
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) mx = fmaxf(mx, mw[w]);
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) {
      const float f = mw[w] == -INFINITY ? 0.0f : expf(mw[w] - mx);
      sum = __fmaf_rn(lw[w], f, sum);
      sm.f[pr][w] = f;
    }
    sm.mx[pr] = mx;
    sm.sum[pr] = sum;
  }
  __syncthreads();

  // 4. weighted V: thread -> (pair, dim), each warp slice's accumulator chain, then the merge
  for (int e = tid; e < k_pairs * k_hd; e += k_threads) {
    const int pr = e / k_hd, d = e % k_hd, t = pr / k_hg, h = pr % k_hg;
    if (t >= nq || h >= nh || d >= a.hd_v) continue;
    const int64_t n_kv = sm.n_kv[t];
    const int64_t n_split = (n_kv + k_split - 1) / k_split;
    if (split >= n_split) continue;  // attention_kernel's block for this row and split writes nothing
    float val = 0.0f;
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) {
      const int64_t j0 = j_first + w * k_per_warp, j1 = min(j0 + k_per_warp, n_kv);
      float acc = 0.0f;
#pragma unroll
      for (int g = 0; g < k_per_warp / k_group; ++g) {
        const int64_t jb = j0 + g * k_group;
        if (jb >= j1) break;
        acc *= sm.corr[pr][2 * w + g];
#pragma unroll
        for (int u = 0; u < k_group; ++u) {
          if (jb + u >= j1) break;
          const int c = (int)(jb + u - j_first);
          acc = __fmaf_rn(sm.p[pr][c], sm.v[c][d], acc);
        }
      }
      val = __fmaf_rn(acc, sm.f[pr][w], val);
    }
    const int64_t oh = (i0 + t) * a.n_head + h0 + h;
    if (n_split == 1) {
      a.out[oh * a.hd_v + d] = val / sm.sum[pr];
    } else {
      float* part = a.part + (oh * a.n_split_max + split) * (a.hd_v + 2);
      if (d == 0) {
        part[0] = sm.mx[pr];
        part[1] = sm.sum[pr];
      }
      part[2 + d] = val;
    }
  }
}

}  // namespace

bool attention_tiles_take(int32_t hd_k, int32_t hd_v, int32_t n_head, int32_t n_head_kv) {
  // attention_kernel<2, 4> (head dims up to 64, 4 query heads per block) is the kernel it repeats
  return hd_k <= k_hd && hd_v <= k_hd && n_head_kv > 0 && n_head % n_head_kv == 0;
}

void launch_attention_tiles(cuda_backend& be, const attn_args& args, const int32_t* d_tiles, int64_t n_tiles) {
  const int group_heads = args.n_head / args.n_head_kv, hgroups = (group_heads + k_hg - 1) / k_hg;
  be.launch("attention_tile", attention_tile_kernel,
            dim3((unsigned)n_tiles, (unsigned)(args.n_head_kv * hgroups), (unsigned)args.n_split_max),
            dim3(k_threads), args, d_tiles);
}

}  // namespace spindle
