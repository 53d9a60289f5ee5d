// What the attention kernels share (attention.cu: one block per query row, any head dim; attention_mma.cu:
// tensor cores, head dims up to 128): the launch arguments, the per-row split constants, the position -> K/V
// row mapping, and a row's positions: [kv_lo_at(its position), n_kv_of), all of [0, n_kv_of) without a sliding
// window.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace spindle {

constexpr int k_attn_warps = 4;
constexpr int k_split = 32;           // positions per split (k_split / k_attn_warps per warp)
constexpr int k_max_head_dim = 512;   // 16 dims per lane
constexpr int k_group = 4;            // positions a warp reads before it updates its softmax state (8 measured
                                      // slower on an H200: 350 vs 227 us for 64 sequences x 1024 positions)

// Shapes shared by every sequence of a launch, and the per-token / per-sequence tables (device memory):
//   token i (global, query row i of q and out) belongs to sequence tok_seq[i], whose query rows start at global
//   row first[s], whose positions before its first query are n_past[s], and whose block ids are
//   tables[s * table_stride ..] (paged) or none (contiguous: row = position).
struct attn_args {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  // [n_tok, n_head, n_split_max, hd_v + 2] partials (max, sum, weighted V) of part_span positions each, spans aligned
  // at position 0: partial s of a row covers span kv_lo / part_span + s (its first span is its window's)
  float* part;
  const int32_t* tok_seq;
  const int32_t* n_past;
  const int32_t* first;
  const int32_t* tables;  // nullptr: contiguous
  int32_t* done;  // decode tensor-core kernel: chunks finished per (tile, blockIdx.y), all 0 between launches; or null
  // decode tensor-core kernel: out quantized in the q8_256 format too (act_format, for the o projection), or null
  int8_t* out_q;
  float* out_d;
  int32_t* out_bsum;
  int64_t k_stride, v_stride;
  int32_t table_stride;
  int32_t block_size;
  int32_t n_head, n_head_kv, hd_k, hd_v;
  float scale;
  int32_t n_seqs, n_tok;  // sequences and query rows of the launch (a sequence's rows end where the next's start)
  int32_t n_split_max;    // gridDim.z: partials per (query row, head) at most
  int32_t causal;         // 0: every query attends to all n_past + n_tokens positions of its sequence (from its
                          // window's start): every sequence of a launch alike
  int32_t part_span;      // positions per partial (k_split for attention_kernel, k_mma_chunk for the mma kernels)
  int32_t kv_elem;        // the K / V stores' element type (kv_type: f32, f16, bf16, fp8_*); strides in elements
  int32_t window;         // sliding window (attention_params::window): > 0: the row at position P attends no position
                          // below P - window + 1 (kv_lo_at), causal or not; 0: none below 0
};
static_assert(sizeof(attn_args) == 13 * sizeof(void*) + 2 * 8 + 14 * 4, "attn_args has padding");

// Four floats p[d .. d + 4) of an f32 K / V row of n (zeros past n); vec: p aligned to 4 floats and n a multiple of
// 4. (16-bit stores are read as they are stored: attention_mma.cu's load4_16.)
__device__ __forceinline__ float4 load4_kv(const float* p, int d, int n, bool vec) {
  if (vec && d + 4 <= n) return *reinterpret_cast<const float4*>(p + d);
  return make_float4(d < n ? p[d] : 0.0f, d + 1 < n ? p[d + 1] : 0.0f, d + 2 < n ? p[d + 2] : 0.0f,
                     d + 3 < n ? p[d + 3] : 0.0f);
}

// Row of position j in the K / V store: table[j / block_size] * block_size + j % block_size, in 32-bit
// arithmetic (positions stay below 2^31: attention_launch checks) with a shift for power-of-two block sizes.
__device__ __forceinline__ int64_t kv_row(const int32_t* table, int32_t block_size, int64_t j) {
  if (!table) return j;
  const uint32_t p = (uint32_t)j, bs = (uint32_t)block_size;
  const uint32_t b = (bs & (bs - 1)) == 0 ? p >> (__ffs((int)bs) - 1) : p / bs;
  return (int64_t)table[b] * block_size + (int64_t)(p - b * bs);
}

// One past the last position query row i attends to (its number of positions, without a window): its own
// position + 1 (causal), or its sequence's last position + 1.
__device__ __forceinline__ int64_t n_kv_of(const attn_args& a, int64_t i, int32_t seq) {
  const int64_t end = seq + 1 < a.n_seqs ? a.first[seq + 1] : a.n_tok;  // one past the sequence's last query row
  return (int64_t)a.n_past[seq] + (a.causal ? i - a.first[seq] + 1 : end - a.first[seq]);
}

// Position of query row i of sequence seq: n_past + its index among the sequence's rows.
__device__ __forceinline__ int64_t row_pos(const attn_args& a, int64_t i, int32_t seq) {
  return (int64_t)a.n_past[seq] + (i - a.first[seq]);
}

// First position the row at position pos attends: its sliding window's start (llama.cpp's standard SWA masks key j
// of the query at pos when pos - j >= window; causal or not), 0 without a window. Rows of a sequence at later
// positions start no earlier.
__device__ __forceinline__ int64_t kv_lo_at(const attn_args& a, int64_t pos) {
  return a.window > 0 && pos >= a.window ? pos - a.window + 1 : 0;
}

// Whether positions [j0, j0 + span) hold some of a row's positions [lo, n_kv): decided by position, never by a
// split's max, so a row whose scores are all NaN still folds its splits and writes NaN (as the CPU does).
__device__ __forceinline__ bool row_reaches(int64_t lo, int64_t n_kv, int64_t j0, int64_t span) {
  return j0 < n_kv && j0 + span > lo;
}

// Spans of `span` positions, aligned at position 0, that positions [lo, n_kv) touch: a row's partials.
__host__ __device__ __forceinline__ int64_t spans_of(int64_t lo, int64_t n_kv, int64_t span) {
  return n_kv <= lo ? 0 : (n_kv - 1) / span - lo / span + 1;
}

// Merge of the n_split > 1 partials pr (a.part of one (query row, head)) in split order: the largest max, then
// per output dim the weighted sums. attention_merge_kernel and the decode kernel's last block use these, so a
// row's output has the same bits whichever merged it. Loads bypass L1 (__ldcg): the partials may come from other
// blocks of the same launch.
__device__ __forceinline__ float merge_max(const attn_args& a, const float* pr, int64_t n_split) {
  float mx = -INFINITY;
#pragma unroll 4
  for (int64_t s = 0; s < n_split; ++s) mx = fmaxf(mx, __ldcg(pr + s * (a.hd_v + 2)));
  return mx;
}
__device__ __forceinline__ float merge_dim(const attn_args& a, const float* pr, int64_t n_split, float mx, int d) {
  float sum = 0.0f, val = 0.0f;
#pragma unroll 4
  for (int64_t s = 0; s < n_split; ++s) {
    const float* p = pr + s * (a.hd_v + 2);
    const float f = expf(__ldcg(p) - mx);
    sum = __fmaf_rn(__ldcg(p + 1), f, sum);
    val = __fmaf_rn(__ldcg(p + 2 + d), f, val);
  }
  return __fdiv_rn(val, sum);
}

}  // namespace spindle
