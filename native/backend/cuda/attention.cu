// Attention of the CUDA backend over a contiguous or paged K/V store (see backend.h), causal or not (a ViT's or an
// image span's bidirectional attention: every query of a sequence attends to all of its positions), with or without
// a sliding window (the query at P attends positions [lo, n_kv) with lo = P - window + 1 or 0, n_kv = P + 1 causal,
// the sequence's n_past + n_tokens not; the positions below lo are never read, and the splits are those of
// [lo, n_kv), still aligned at position 0). A launch takes sequences of one causality and window:
// attention_paged_batch launches once per run of consecutive sequences that share them. Head dims up to 128 go to
// the tensor-core kernels (attention_mma.cu); this file holds the launch, the merge of partials (prompts; decode
// merges in its last block and may quantize its output for the o projection: attention_mma.cu), and the per-row
// kernel for wider heads.
// Per-row kernel's work split: one block per (query row, KV head, head group of up to HG query heads sharing that KV head, split
// of k_split = 32 positions: short splits keep the chain of dependent loads per block short for decode). Each of the block's 4 warps takes k_split / 4 consecutive positions; for a position, the
// 32 lanes hold strided dims of q and of the K / V row (one coalesced read of each row serves every query head of
// the group), the q . k partial sums meet in a fixed butterfly, and an online softmax (running max and sum) keeps
// the weighted V sum. The block merges its warps in order (0..3); a query row whose positions need more than one
// split writes (max, sum, weighted V) per split and a second kernel merges the splits in order.
// Invariant: a (query row, head) output depends only on its query row, its own positions' K/V rows and its
// positions [lo, n_kv) (which fix its splits), never on the rest of the launch: batch-invariant and deterministic.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/attention_args.cuh"
#include "backend/cuda/attention_mma.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/x32_types.cuh"

namespace spindle {

namespace {

template <int DPL, int HG>
__global__ void __launch_bounds__(k_attn_warps * k_warp) attention_kernel(attn_args a) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float sm_m[k_attn_warps][HG], sm_l[k_attn_warps][HG];
  __shared__ float sm_acc[k_attn_warps][HG][DPL * k_warp];
  const int64_t i = blockIdx.x;
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp;
  const int group_heads = a.n_head / a.n_head_kv;
  const int hgroups = (group_heads + HG - 1) / HG;
  const int kvh = blockIdx.y / hgroups, h0 = kvh * group_heads + (blockIdx.y % hgroups) * HG;
  const int nh = min(HG, kvh * group_heads + group_heads - h0);  // query heads of this block
  const int32_t seq = a.tok_seq[i];
  const int64_t n_kv = n_kv_of(a, i, seq), lo = kv_lo_at(a, row_pos(a, i, seq));
  const int64_t n_split = spans_of(lo, n_kv, k_split), split = blockIdx.z;  // split: the row's partial index
  if (split >= n_split) return;
  const int32_t* table = a.tables ? a.tables + (int64_t)seq * a.table_stride : nullptr;

  float q[HG][DPL], acc[HG][DPL], m[HG], l[HG];
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int r = 0; r < DPL; ++r) {
      const int d = lane + r * k_warp;
      q[h][r] = h < nh && d < a.hd_k ? a.q[(i * a.n_head + h0 + h) * a.hd_k + d] : 0.0f;
      acc[h][r] = 0.0f;
    }
  }
  // this warp's positions [j0, j1): its share of the split, from the window's start on
  const int64_t per_warp = k_split / k_attn_warps;
  const int64_t w0 = (lo / k_split + split) * k_split + warp * per_warp;
  const int64_t j0 = max(w0, lo), j1 = min(w0 + per_warp, n_kv);
  const float* kbase = a.k + (int64_t)kvh * a.hd_k;
  const float* vbase = a.v + (int64_t)kvh * a.hd_v;
  for (int64_t jb = j0; jb < j1; jb += k_group) {
    float s[k_group][HG];
    int64_t rows[k_group];
#pragma unroll
    for (int u = 0; u < k_group; ++u) {
      const bool ok = jb + u < j1;
      rows[u] = ok ? kv_row(table, a.block_size, jb + u) : 0;
      float kr[DPL];
#pragma unroll
      for (int r = 0; r < DPL; ++r) {
        const int d = lane + r * k_warp;
        kr[r] = ok && d < a.hd_k ? kbase[rows[u] * a.k_stride + d] : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < HG; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int r = 0; r < DPL; ++r) dot = __fmaf_rn(q[h][r], kr[r], dot);
        dot = warp_sum(dot);  // every lane: ok is the same across the warp
        s[u][h] = ok ? dot * a.scale : -INFINITY;
      }
    }
#pragma unroll
    for (int h = 0; h < HG; ++h) {
      float m_new = m[h];
#pragma unroll
      for (int u = 0; u < k_group; ++u) m_new = fmaxf(m_new, s[u][h]);
      const float corr = expf(m[h] - m_new);  // 0 on the first group (m = -inf)
      float psum = 0.0f;
#pragma unroll
      for (int u = 0; u < k_group; ++u) {
        s[u][h] = expf(s[u][h] - m_new);  // p: 0 past the end
        psum += s[u][h];
      }
      l[h] = __fmaf_rn(l[h], corr, psum);
      m[h] = m_new;
#pragma unroll
      for (int r = 0; r < DPL; ++r) acc[h][r] *= corr;
    }
#pragma unroll
    for (int u = 0; u < k_group; ++u) {
      if (jb + u >= j1) break;
#pragma unroll
      for (int r = 0; r < DPL; ++r) {
        const int d = lane + r * k_warp;
        const float vv = d < a.hd_v ? vbase[rows[u] * a.v_stride + d] : 0.0f;
#pragma unroll
        for (int h = 0; h < HG; ++h) acc[h][r] = __fmaf_rn(s[u][h], vv, acc[h][r]);
      }
    }
  }
  // Merge the warps in order.
#pragma unroll
  for (int h = 0; h < HG; ++h) {
    if (lane == 0) {
      sm_m[warp][h] = m[h];
      sm_l[warp][h] = l[h];
    }
#pragma unroll
    for (int r = 0; r < DPL; ++r) sm_acc[warp][h][lane + r * k_warp] = acc[h][r];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < HG * DPL * k_warp; e += blockDim.x) {
    const int h = e / (DPL * k_warp), d = e % (DPL * k_warp);
    if (h >= nh || d >= a.hd_v) continue;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) mx = fmaxf(mx, sm_m[w][h]);
    float sum = 0.0f, val = 0.0f;
#pragma unroll
    for (int w = 0; w < k_attn_warps; ++w) {
      const float f = sm_m[w][h] == -INFINITY ? 0.0f : expf(sm_m[w][h] - mx);
      sum = __fmaf_rn(sm_l[w][h], f, sum);
      val = __fmaf_rn(sm_acc[w][h][d], f, val);
    }
    const int64_t oh = i * a.n_head + h0 + h;
    if (n_split == 1) {
      a.out[oh * a.hd_v + d] = val / sum;
    } else {
      float* pr = a.part + (oh * a.n_split_max + split) * (a.hd_v + 2);
      if (d == 0) {
        pr[0] = mx;
        pr[1] = sum;
      }
      pr[2 + d] = val;
    }
  }
}

// Merges the partials (of a.part_span positions each) of every (query row, head) that has more than one, in order.
__global__ void attention_merge_kernel(attn_args a) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y;
  const int32_t seq = a.tok_seq[i];
  const int64_t n_kv = n_kv_of(a, i, seq);
  const int64_t n_split = spans_of(kv_lo_at(a, row_pos(a, i, seq)), n_kv, a.part_span);
  if (n_split <= 1) return;
  const int64_t oh = i * a.n_head + h;
  const float* pr = a.part + oh * a.n_split_max * (a.hd_v + 2);
  const float mx = merge_max(a, pr, n_split);
  for (int d = threadIdx.x; d < a.hd_v; d += blockDim.x) a.out[oh * a.hd_v + d] = merge_dim(a, pr, n_split, mx, d);
}

void check_attention(const attention_params& p) {
  if (p.n_tokens < 0 || p.n_past < 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0 ||
      p.head_dim_k <= 0 || p.head_dim_v <= 0 || p.head_dim_k > k_max_head_dim || p.head_dim_v > k_max_head_dim ||
      p.k_row_stride < (int64_t)p.n_head_kv * p.head_dim_k || p.v_row_stride < (int64_t)p.n_head_kv * p.head_dim_v) {
    throw error("cuda attention: invalid shape (heads " + std::to_string(p.n_head) + "/" + std::to_string(p.n_head_kv) +
                ", head dims " + std::to_string(p.head_dim_k) + "/" + std::to_string(p.head_dim_v) + ", at most " +
                std::to_string(k_max_head_dim) + ")");
  }
  if (p.n_past + p.n_tokens > 0x7fffffff || p.n_head > 65535) throw error("cuda attention: too many positions or heads");
  if (p.window < 0) throw error("cuda attention: a sliding window must be >= 0, got " + std::to_string(p.window));
}

// Blocks of the table that positions [0, end) use; throws when the table does not cover them.
int64_t check_table(const paged_attention_params& p) {
  const int64_t end = p.attn.n_past + p.attn.n_tokens;
  if (p.block_size <= 0 || !p.block_table || (int64_t)p.n_table * p.block_size < end) {
    throw error("attention_paged: block table does not cover " + std::to_string(end) + " positions");
  }
  const int64_t used = (end + p.block_size - 1) / p.block_size;
  for (int64_t b = 0; b < used; ++b) {
    if (p.block_table[b] < 0 || p.block_table[b] >= p.n_blocks) {
      throw error("attention_paged: block id " + std::to_string(p.block_table[b]) + " out of range");
    }
  }
  return used;
}

bool same_shape(const attention_params& a, const attention_params& b) {
  return a.n_head == b.n_head && a.n_head_kv == b.n_head_kv && a.head_dim_k == b.head_dim_k &&
         a.head_dim_v == b.head_dim_v && a.k_row_stride == b.k_row_stride && a.v_row_stride == b.v_row_stride &&
         a.scale == b.scale;
}

// Whether two sequences' rows attend alike (attn_args::causal and ::window are the launch's).
bool same_mode(const attention_params& a, const attention_params& b) {
  return a.causal == b.causal && a.window == b.window;
}

// Throws unless every sequence is a valid attention with the first one's heads, dims, strides, scale, K / V store
// type and (paged) block size, over a table that covers its positions. Returns the most table blocks one uses.
int64_t check_batch(const paged_attention_params* seqs, int64_t n_seqs, bool paged) {
  int64_t max_blocks = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    check_attention(seqs[s].attn);
    if (!same_shape(seqs[s].attn, seqs[0].attn) || (paged && seqs[s].block_size != seqs[0].block_size)) {
      throw error("attention_paged_batch: every sequence must have the same heads, dims, strides, scale and block "
                  "size");
    }
    if (seqs[s].attn.kv != seqs[0].attn.kv) {
      throw error("cuda attention: the sequences of a launch share one K / V store type");
    }
    if (paged) max_blocks = std::max<int64_t>(max_blocks, check_table(seqs[s]));
  }
  return max_blocks;
}

// The most positions the rows of one block (a tile of `rows` query rows of one sequence, at consecutive positions,
// from its first row's window start to its last row's end) reach, over the sequences of a launch: all of the
// longest context without a window; with one, window + rows - 1 for causal rows, window + n_tokens - 1 for
// non-causal ones (every row ends at its sequence's end, the first starts at its window's start).
int64_t positions_reached(const paged_attention_params* seqs, int64_t n_seqs, int64_t rows) {
  int64_t max_kv = 0, most = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const attention_params& a = seqs[s].attn;
    max_kv = std::max<int64_t>(max_kv, a.n_past + a.n_tokens);
    if (a.window > 0) most = std::max<int64_t>(most, a.window + (a.causal ? rows : a.n_tokens) - 1);
  }
  return seqs[0].attn.window > 0 ? std::min(max_kv, most) : max_kv;
}

// Query heads per block for a head dim (the accumulators of HG heads x DPL dims per lane stay in registers; head
// dims up to 128 go to the tensor-core kernels, so DPL is 8 or 16 here).
template <int DPL>
constexpr int heads_per_block() { return DPL == 8 ? 2 : 1; }

template <int DPL>
void launch_attention(cuda_backend& be, const attn_args& args) {
  constexpr int HG = heads_per_block<DPL>();
  const int group_heads = args.n_head / args.n_head_kv, hgroups = (group_heads + HG - 1) / HG;
  be.launch("attention", attention_kernel<DPL, HG>,
            dim3((unsigned)args.n_tok, (unsigned)(args.n_head_kv * hgroups), (unsigned)args.n_split_max),
            dim3(k_attn_warps * k_warp), args);
}

uint32_t next_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

bool cuda_backend::supports_kv_heads(kv_type t, int32_t head_dim_k, int32_t head_dim_v) const {
  return supports_kv(t) && (t == kv_type::f32 || attention_mma_takes(head_dim_k, head_dim_v));
}

// One launch over every query row of every sequence (all of one causality and window): metadata [tok_seq | n_past |
// first | tables] staged as one int32 array. Each sequence's table gets the same stride and the split grid the same
// depth, both rounded up to powers of two, so a decode step's launch keeps its shape (and its step graph) while
// sequences grow.
void cuda_backend::attention_launch(const paged_attention_params* seqs, int64_t n_seqs, bool paged, const float* q,
                                    const float* k, const float* v, float* out) {
  const int64_t max_blocks = check_batch(seqs, n_seqs, paged);
  int64_t n_tok = 0, max_kv = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    if (!same_mode(seqs[s].attn, seqs[0].attn)) {
      throw error("cuda attention: the sequences of a launch share one causality and window");
    }
    n_tok += seqs[s].attn.n_tokens;
    max_kv = std::max<int64_t>(max_kv, seqs[s].attn.n_past + seqs[s].attn.n_tokens);
  }
  if (n_tok == 0) return;
  if (n_tok > 0x7fffffff || n_seqs > 0x7fffffff) throw error("cuda attention: too many tokens");
  const int64_t stride = paged ? next_pow2((uint32_t)max_blocks) : 0;
  const attention_params& p = seqs[0].attn;
  // head dims up to 128: the tensor-core kernels (prompts: warps own row tiles; decode: warps own splits; the same
  // bits either way); wider heads: the per-row kernel
  const bool mma = attention_mma_takes(p.head_dim_k, p.head_dim_v);
  if (!supports_kv_heads(p.kv, p.head_dim_k, p.head_dim_v)) {
    throw error("cuda attention: 16-bit and fp8 K / V stores need head dims of at most 128");
  }
  const mma_layout lay = attention_mma_layout(p.n_head, p.n_head_kv);
  const bool rows_shape = n_tok >= 2 * lay.rq * n_seqs;
  const int64_t tile_rows = rows_shape ? 4 * lay.rq : lay.rq;
  // Partials per row at most (grid z): the spans a block's positions touch, counted from its first row's first span.
  // Without a window all of [0, max_kv); with one, the positions_reached by a tile's rows (mma tiles of tile_rows
  // query rows, the per-row kernel's single rows), anywhere.
  const int64_t span = mma ? k_mma_chunk : k_split;
  const int64_t reach = positions_reached(seqs, n_seqs, mma ? tile_rows : 1);
  const int64_t n_split_max =
      next_pow2((uint32_t)std::min<int64_t>((max_kv + span - 1) / span, (reach + span - 2) / span + 1));
  if (n_split_max > 65535) throw error("cuda attention: too many positions");
  if ((n_tok + 2 * n_seqs + n_seqs * stride) > 0x7fffffff) throw error("cuda attention: block tables too large");
  int64_t n_tiles = 0;
  if (mma) {
    for (int64_t s = 0; s < n_seqs; ++s) n_tiles += (seqs[s].attn.n_tokens + tile_rows - 1) / tile_rows;
  }
  const int64_t meta_base = n_tok + 2 * n_seqs + n_seqs * stride;
  if (meta_base + 2 * n_tiles > 0x7fffffff || n_tiles > 0x7fffffff) throw error("cuda attention: block tables too large");
  std::vector<int32_t>& meta = attn_meta_;
  meta.assign((size_t)(meta_base + 2 * n_tiles), 0);
  int32_t* tok_seq = meta.data();
  int32_t* n_past = tok_seq + n_tok;
  int32_t* first = n_past + n_seqs;
  int32_t* tables = first + n_seqs;
  int64_t at = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const attention_params& a = seqs[s].attn;
    for (int64_t t = 0; t < a.n_tokens; ++t) tok_seq[at + t] = (int32_t)s;
    n_past[s] = (int32_t)a.n_past;
    first[s] = (int32_t)at;
    if (paged) {
      const int64_t used = (a.n_past + a.n_tokens + seqs[s].block_size - 1) / seqs[s].block_size;
      std::copy(seqs[s].block_table, seqs[s].block_table + used, tables + s * stride);
    }
    at += a.n_tokens;
  }
  int32_t* tiles = meta.data() + meta_base;  // [first row, rows] per tile
  for (int64_t s = 0, t = 0; mma && s < n_seqs; ++s) {
    for (int64_t r = 0; r < seqs[s].attn.n_tokens; r += tile_rows, ++t) {
      tiles[2 * t] = first[s] + (int32_t)r;
      tiles[2 * t + 1] = (int32_t)std::min<int64_t>(tile_rows, seqs[s].attn.n_tokens - r);
    }
  }
  const int32_t* d = stage(meta.data(), (int64_t)meta.size());
  float* part = nullptr;
  if (n_split_max > 1) {
    part = attn_part_.reserve(n_tok * p.n_head * n_split_max * (p.head_dim_v + 2), recording() ? &outgrown_ : nullptr);
  }
  // decode on tensor cores: the kernel's last block of a tile merges its chunks (no merge launch), and where each
  // tile's outputs are whole q8_256 groups (head dims up to 64) and the o projection reads that format (as the last
  // quantized matmul did), quantizes them for it (no quantize launch)
  const bool merge_in_kernel = fused_ && mma && !rows_shape && n_split_max > 1 &&
                               n_tiles * p.n_head_kv * lay.hgroups <= k_attn_done_max;
  const int64_t out_width = (int64_t)p.n_head * p.head_dim_v;
  const int hd = std::max(p.head_dim_k, p.head_dim_v);
  // the launch's blocks as the warp rule sees them (SPINDLE_CUDA_ATTN_WARPS: as if none, or as if many)
  const int64_t rule_blocks = attn_fewer_warps_ == attn_warps::never          ? 0
                              : attn_fewer_warps_ == attn_warps::every_launch ? INT64_MAX
                                                                              : n_tiles * p.n_head_kv * lay.hgroups;
  const int decode_warps = mma && !rows_shape ? attention_mma_decode_warps(hd, reach, rule_blocks, sm_count_) : 0;
  const bool quantize_out = fused_ && mma && !rows_shape && (n_split_max == 1 || merge_in_kernel) &&
                            std::max(p.head_dim_k, p.head_dim_v) <= 64 && next_fmt_ == act_format::q8_256 &&
                            (lay.gh * p.head_dim_v) % 256 == 0 && (p.n_head / p.n_head_kv) % lay.gh == 0;
  const mmv_act qa = quantize_out ? q8_view(n_tok, out_width, act_format::q8_256) : mmv_act{};
  attn_args args{q, k, v, out, part, d, d + n_tok, d + n_tok + n_seqs, paged ? d + n_tok + 2 * n_seqs : nullptr,
                 merge_in_kernel ? attn_done() : nullptr, (int8_t*)qa.qx, (float*)qa.dx, (int32_t*)qa.bx,
                 p.k_row_stride, p.v_row_stride, (int32_t)stride, paged ? seqs[0].block_size : 1, p.n_head,
                 p.n_head_kv, p.head_dim_k, p.head_dim_v, p.scale, (int32_t)n_seqs, (int32_t)n_tok,
                 (int32_t)n_split_max, p.causal ? 1 : 0, (int32_t)span, (int32_t)p.kv, p.window};
  if (mma) launch_attention_mma(*this, args, d + meta_base, n_tiles, rows_shape, lay, decode_warps);
  else if (hd <= 256) launch_attention<8>(*this, args);
  else launch_attention<16>(*this, args);
  if (n_split_max > 1 && !merge_in_kernel) {
    launch("attention_merge", attention_merge_kernel, dim3((unsigned)n_tok, (unsigned)p.n_head), dim3(128), args);
  }
  if (quantize_out) keep_quantized_act(out, n_tok, out_width, act_format::q8_256);
}

void cuda_backend::attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                             float* out) {
  paged_attention_params one;
  one.attn = p;
  attention_launch(&one, 1, false, q, k_cache, v_cache, out);
}

void cuda_backend::attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                                   const float* v_store, float* out) {
  attention_launch(&p, 1, true, q, k_store, v_store, out);
}

// One launch per run of consecutive sequences with the same causality and window (a prompt chunk with an image span:
// its causal segment, the span's non-causal one, the next causal one; a decode step: one run). A row's bits do not
// depend on the launch it is in (attention_mma.cu, the per-row kernel), so they are those of its own call.
void cuda_backend::attention_paged_batch(const paged_attention_params* seqs, int64_t n_seqs, const float* q,
                                         const float* k_store, const float* v_store, float* out) {
  if (n_seqs <= 0) return;
  check_batch(seqs, n_seqs, true);  // the whole batch before its first launch
  const attention_params& a = seqs[0].attn;
  const int64_t q_row = (int64_t)a.n_head * a.head_dim_k, out_row = (int64_t)a.n_head * a.head_dim_v;
  int64_t row = 0;  // the run's first query row
  for (int64_t b = 0, e = 0; b < n_seqs; b = e) {
    int64_t rows = 0;
    for (e = b; e < n_seqs && same_mode(seqs[e].attn, seqs[b].attn); ++e) rows += seqs[e].attn.n_tokens;
    attention_launch(seqs + b, e - b, true, q + row * q_row, k_store, v_store, out + row * out_row);
    row += rows;
  }
}

}  // namespace spindle
