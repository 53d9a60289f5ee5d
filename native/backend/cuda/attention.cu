// Attention of the CUDA backend over a contiguous or paged K/V store (see backend.h), causal or not (a ViT's
// bidirectional attention: every query of a sequence attends to all of its positions). One block per
// (query token, query head): positions are taken in chunks of k_chunk, one per thread for the score
// (q . k summed over dims ascending), with a running max and sum (online softmax) and each thread owning
// output dims for the weighted sum of V rows (positions ascending inside a chunk).
// Invariant: a (token, head) pair's output depends only on its query row and its own positions' K/V rows, in a
// fixed order: batch-invariant and deterministic.
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace spindle {

namespace {

constexpr int k_chunk = 128;        // positions per step = threads per block
constexpr int k_max_head_dim = 512; // dims a block can hold (4 per thread)

// Shapes shared by every sequence of a launch, and the per-token / per-sequence tables (device memory):
//   token i (global, query row i of q and out) belongs to sequence tok_seq[i], whose query rows start at global
//   row first[s], whose positions before its first query are n_past[s], and whose block ids are
//   tables[table_off[s] ..] (paged) or none (contiguous: row = position).
struct attn_args {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  const int32_t* tok_seq;
  const int32_t* n_past;
  const int32_t* first;
  const int32_t* table_off;
  const int32_t* tables;  // nullptr: contiguous
  int32_t block_size;
  int32_t n_head, n_head_kv, hd_k, hd_v;
  int64_t k_stride, v_stride;
  float scale;
  int32_t n_seqs, n_tok;  // sequences and query rows of the launch (a sequence's rows end where the next's start)
  bool causal;            // false: every query attends to all n_past + n_tokens positions of its sequence
};

__device__ __forceinline__ int64_t kv_row(const int32_t* table, int32_t block_size, int64_t j) {
  return table ? (int64_t)table[j / block_size] * block_size + j % block_size : j;
}

__global__ void __launch_bounds__(k_chunk) attention_kernel(attn_args a) {
  __shared__ float qs[k_max_head_dim];
  __shared__ float p[k_chunk];
  __shared__ int64_t rows[k_chunk];
  __shared__ float red[32];
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y, tid = threadIdx.x;
  const int32_t seq = a.tok_seq[i];
  const int32_t* table = a.tables ? a.tables + a.table_off[seq] : nullptr;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const float* qrow = a.q + (i * a.n_head + h) * a.hd_k;
  for (int d = tid; d < a.hd_k; d += k_chunk) qs[d] = qrow[d];
  const int64_t end = seq + 1 < a.n_seqs ? a.first[seq + 1] : a.n_tok;  // one past the sequence's last query row
  const int64_t n_kv = (int64_t)a.n_past[seq] + (a.causal ? i - a.first[seq] + 1 : end - a.first[seq]);
  float acc[k_max_head_dim / k_chunk] = {0.0f, 0.0f, 0.0f, 0.0f};
  float m = -INFINITY, l = 0.0f;
  __syncthreads();
  for (int64_t c0 = 0; c0 < n_kv; c0 += k_chunk) {
    const int64_t j = c0 + tid;
    float s = -INFINITY;
    if (j < n_kv) {
      const int64_t row = kv_row(table, a.block_size, j);
      rows[tid] = row;
      const float* kr = a.k + row * a.k_stride + (int64_t)kvh * a.hd_k;
      float dot = 0.0f;
      for (int d = 0; d < a.hd_k; ++d) dot = __fmaf_rn(qs[d], kr[d], dot);
      s = dot * a.scale;
    }
    const float m_new = fmaxf(m, block_max(s, red));
    const float pj = j < n_kv ? expf(s - m_new) : 0.0f;
    p[tid] = pj;
    const float corr = expf(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * corr + block_sum(pj, red);   // block_sum's barriers also publish p[] and rows[]
    const int n_here = n_kv - c0 < k_chunk ? (int)(n_kv - c0) : k_chunk;
#pragma unroll
    for (int r = 0; r < k_max_head_dim / k_chunk; ++r) {
      const int d = tid + r * k_chunk;
      if (d >= a.hd_v) break;
      float sum = acc[r] * corr;
      for (int jj = 0; jj < n_here; ++jj) {
        sum = __fmaf_rn(p[jj], a.v[rows[jj] * a.v_stride + (int64_t)kvh * a.hd_v + d], sum);
      }
      acc[r] = sum;
    }
    m = m_new;
    __syncthreads();  // p[] and rows[] are rewritten by the next chunk
  }
  float* orow = a.out + (i * a.n_head + h) * a.hd_v;
#pragma unroll
  for (int r = 0; r < k_max_head_dim / k_chunk; ++r) {
    const int d = tid + r * k_chunk;
    if (d < a.hd_v) orow[d] = acc[r] / l;
  }
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
         a.scale == b.scale && a.causal == b.causal;
}

}  // namespace

// One launch over every query row of every sequence: metadata [tok_seq | n_past | first | table_off | tables]
// staged as one int32 array.
void cuda_backend::attention_launch(const paged_attention_params* seqs, int64_t n_seqs, bool paged, const float* q,
                                    const float* k, const float* v, float* out) {
  std::vector<int32_t> meta;
  int64_t n_tok = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    check_attention(seqs[s].attn);
    if (!same_shape(seqs[s].attn, seqs[0].attn) || (paged && seqs[s].block_size != seqs[0].block_size)) {
      throw error("attention_paged_batch: every sequence must have the same heads, dims, strides, block size and "
                  "causality");
    }
    n_tok += seqs[s].attn.n_tokens;
  }
  if (n_tok == 0) return;
  if (n_tok > 0x7fffffff || n_seqs > 0x7fffffff) throw error("cuda attention: too many tokens");
  meta.resize((size_t)(n_tok + 3 * n_seqs));
  int32_t* tok_seq = meta.data();
  int32_t* n_past = tok_seq + n_tok;
  int32_t* first = n_past + n_seqs;
  int32_t* table_off = first + n_seqs;
  int64_t at = 0;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const attention_params& a = seqs[s].attn;
    for (int64_t t = 0; t < a.n_tokens; ++t) tok_seq[at + t] = (int32_t)s;
    n_past[s] = (int32_t)a.n_past;
    first[s] = (int32_t)at;
    table_off[s] = (int32_t)(meta.size() - (size_t)(n_tok + 3 * n_seqs));
    if (paged) {
      const int64_t used = check_table(seqs[s]);
      meta.insert(meta.end(), seqs[s].block_table, seqs[s].block_table + used);
      tok_seq = meta.data(), n_past = tok_seq + n_tok, first = n_past + n_seqs, table_off = first + n_seqs;
    }
    at += a.n_tokens;
  }
  const int32_t* d = stage(meta.data(), (int64_t)meta.size());
  const attention_params& p = seqs[0].attn;
  attn_args args{q, k, v, out, d, d + n_tok, d + n_tok + n_seqs, d + n_tok + 2 * n_seqs,
                 paged ? d + n_tok + 3 * n_seqs : nullptr, paged ? seqs[0].block_size : 1, p.n_head, p.n_head_kv,
                 p.head_dim_k, p.head_dim_v, p.k_row_stride, p.v_row_stride, p.scale, (int32_t)n_seqs,
                 (int32_t)n_tok, p.causal};
  attention_kernel<<<dim3((unsigned)n_tok, (unsigned)p.n_head), k_chunk, 0, stream_>>>(args);
  SPINDLE_CUDA_LAUNCHED("attention");
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

void cuda_backend::attention_paged_batch(const paged_attention_params* seqs, int64_t n_seqs, const float* q,
                                         const float* k_store, const float* v_store, float* out) {
  if (n_seqs > 0) attention_launch(seqs, n_seqs, true, q, k_store, v_store, out);
}

}  // namespace spindle
