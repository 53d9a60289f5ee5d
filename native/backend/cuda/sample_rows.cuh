// Sampling on the device (cuda_backend::sample_rows, sample_rows.cu): the block code of its kernel, one block per
// logits row, over a few CUDA intrinsics so a host test (test/native/sample_rows_host_test.cpp) runs it with
// emulated threads, barriers and atomics. Per row, after the request's edits (backend/sample_rows.h, in op order):
//   - argmax: argmax_first of the edited row (temperature 0);
//   - draw: softmax_draw's token (engine/softmax_draw.h) bit for bit: the same float weights (its degree-6 exp,
//     no fused multiply-adds), the same 64-weight block sums (four float lanes), the blocks' running sum in double
//     in id order (one thread) and the same search, given the host's uniform value;
//   - shortlist: the row's best n_keep candidates (logit descending, id ascending) found by a radix select on the
//     logits' order-preserving bit keys (8 bits a pass, integer histograms), sorted, and where asked the top-p
//     normalizer sum(exp(double(l - max))) (a fixed tree): the host finishes the chain from them
//     (finish_from_shortlist);
//   - edits only: the host then takes the whole edited row.
// Invariant: a row's result depends on that row and its spec only, with fixed reduction orders (histogram counts
// are integers: their atomics commute exactly), whatever the block size or the other rows.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cuda/argmax_rows.cuh"
#include "backend/sample_rows.h"

namespace spindle {

enum : int32_t { k_sample_argmax = 0, k_sample_draw = 1, k_sample_shortlist = 2, k_sample_edits_only = 3 };

// One row's work, as the host lays it out (sample_rows.cu).
struct device_sample_row {
  int32_t mode = k_sample_argmax;
  int32_t edit0 = 0, n_edits = 0;  // the row's edits: [edit0, edit0 + n_edits) of the launch's edit array
  int32_t n_keep = 0;              // shortlist: candidates to write (<= k_shortlist_max, <= n)
  int32_t cand0 = 0;               // shortlist: the row's first slot in the candidate arrays
  int32_t want_sum = 0;            // shortlist: also the normalizer
  float inv_temperature = 1.0f;    // draw: 1.0f / temperature, the host's float division (as softmax_draw)
  int32_t pad = 0;
  double u01 = 0.0;                // draw: the request generator's value
};
static_assert(sizeof(device_sample_row) == 40, "device_sample_row: no padding bytes");

// Host: the device work of each row from its spec, edits gathered into one array; *n_cands: the candidate slots
// the shortlists take, *any_draw: whether a row draws (the launch then needs the draw scratch).
inline void plan_device_rows(const sample_spec* specs, int64_t n_rows, int32_t n, std::vector<device_sample_row>& rows,
                             std::vector<logit_edit>& edits, int32_t* n_cands, bool* any_draw) {
  rows.assign((size_t)n_rows, device_sample_row{});
  edits.clear();
  *n_cands = 0;
  *any_draw = false;
  for (int64_t r = 0; r < n_rows; ++r) {
    const sample_spec& s = specs[r];
    device_sample_row& d = rows[(size_t)r];
    d.edit0 = (int32_t)edits.size();
    d.n_edits = s.n_edits;
    edits.insert(edits.end(), s.edits, s.edits + s.n_edits);
    int32_t keep = 0;
    if (s.temperature == 0.0f) {
      d.mode = k_sample_argmax;
    } else if (!sample_truncated(s, n)) {
      d.mode = k_sample_draw;
      d.inv_temperature = 1.0f / s.temperature;
      d.u01 = s.u01;
      *any_draw = true;
    } else if ((keep = std::min(shortlist_size(s, n), n)) > 0) {
      d.mode = k_sample_shortlist;
      d.n_keep = keep;
      d.cand0 = *n_cands;
      d.want_sum = shortlist_needs_sum(s, n) ? 1 : 0;
      *n_cands += keep;
    } else {
      d.mode = k_sample_edits_only;
    }
  }
}

// Host: row r's token from the launch's results (ids [rows], candidate ids / logits, sums [rows]); false when the
// host needs the whole (edited) row: sample_row_host on it with the spec's edits left out.
inline bool finish_device_row(const device_sample_row& d, const sample_spec& s, int32_t n, int64_t r,
                              const int32_t* ids, const int32_t* cand_ids, const float* cand_logits,
                              const double* sums, std::vector<token_candidate>& shortlist, sample_scratch& scratch,
                              int32_t* token) {
  if (d.mode == k_sample_argmax || d.mode == k_sample_draw) {
    *token = ids[r];
    return true;
  }
  if (d.mode != k_sample_shortlist) return false;
  shortlist.resize((size_t)d.n_keep);
  for (int32_t j = 0; j < d.n_keep; ++j) shortlist[(size_t)j] = {cand_ids[d.cand0 + j], cand_logits[d.cand0 + j]};
  return finish_from_shortlist(shortlist.data(), d.n_keep, n, sums[r], s, scratch, token);
}

// Shared memory of a sampling block.
struct sample_smem {
  uint64_t keys[k_shortlist_max];  // shortlist: (order key << 32 | ~id) of the candidates
  int32_t ints[1024];              // per-thread counts (blockDim <= 1024)
  double sums[1024];               // per-thread partial sums
  int32_t hist[256];
  float sv[32];
  int32_t si[32];
  int32_t best, n_above, need;
  uint32_t prefix;
};

// ---- edits ----

// The row's edits in op order: each op's edits in parallel (repetition and penalty ids are distinct; masks are
// idempotent), logit_bias in the request's order by one thread (an id may repeat), a barrier between ops.
__device__ __forceinline__ void apply_edits_block(float* row, const logit_edit* e, int32_t n) {
  for (int op = 0; op < k_logit_edit_ops; ++op) {
    const bool serial = op == (int)logit_edit_op::add_bias;
    for (int32_t i = serial ? 0 : (int32_t)threadIdx.x; i < n && (!serial || threadIdx.x == 0);
         i += serial ? 1 : (int32_t)blockDim.x) {
      if ((int)e[i].op != op) continue;
      float& l = row[e[i].id];
      const float v = e[i].value;
      if (op == (int)logit_edit_op::repetition) l = l > 0.0f ? __fdiv_rn(l, v) : __fmul_rn(l, v);
      else if (op == (int)logit_edit_op::mask) l = -INFINITY;
      else l = __fadd_rn(l, v);
    }
    __syncthreads();
  }
}

// argmax_first of the row, in every thread.
__device__ __forceinline__ int32_t row_argmax(const float* row, int64_t n, sample_smem& sm) {
  float bv;
  int32_t bi;
  thread_argmax(row, 0, n, bv, bi);
  block_argmax(bv, bi, sm.sv, sm.si);
  if (threadIdx.x == 0) sm.best = argmax_answer(row, bi);
  __syncthreads();
  return sm.best;
}

// ---- draw: softmax_draw bit for bit ----

// exp(x) for x in [-87, 0], softmax_draw's exp_scalar operation by operation (each rounded, never fused).
__device__ __forceinline__ float draw_exp(float x) {
  if (!(x >= -87.0f)) return 0.0f;
  const float fn = rintf(__fmul_rn(x, 1.44269504088896341f));
  float r = __fsub_rn(x, __fmul_rn(fn, 0.693359375f));
  r = __fsub_rn(r, __fmul_rn(fn, -2.12194440e-4f));
  float p = 1.9875691500e-4f;
  p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
  p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
  p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
  p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
  float y = __fmul_rn(p, __fmul_rn(r, r));
  y = __fadd_rn(y, r);
  y = __fadd_rn(y, 1.0f);
  return __fmul_rn(y, __int_as_float(((int)fn + 127) << 23));
}

__device__ __forceinline__ float draw_weight(const float* row, int64_t n, int64_t i, float max_logit, float inv) {
  return i < n ? draw_exp(__fmul_rn(__fsub_rn(row[i], max_logit), inv)) : 0.0f;
}

// Block b's sum of 64 weights: four float lanes (i % 4) in id order, ((l0 + l1) + (l2 + l3)).
__device__ __forceinline__ double draw_block_sum(const float* row, int64_t n, int64_t b, float max_logit, float inv) {
  float lane[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int k = 0; k < 64; k += 4) {
#pragma unroll
    for (int l = 0; l < 4; ++l) lane[l] = __fadd_rn(lane[l], draw_weight(row, n, b * 64 + k + l, max_logit, inv));
  }
  return (double)__fadd_rn(__fadd_rn(lane[0], lane[1]), __fadd_rn(lane[2], lane[3]));
}

// softmax_draw(row, n, 1 / inv, u01): its token, in thread 0. prefix: global scratch [ceil(n / 64)] doubles.
__device__ __forceinline__ int32_t draw_block(const float* row, int64_t n, float inv, double u01, double* prefix,
                                              sample_smem& sm) {
  const int32_t best = row_argmax(row, n, sm);
  const float max_logit = row[best];
  if (!isfinite(max_logit)) return best;
  const int64_t n_blocks = (n + 63) / 64;
  for (int64_t b = threadIdx.x; b < n_blocks; b += blockDim.x) prefix[b] = draw_block_sum(row, n, b, max_logit, inv);
  __syncthreads();
  if (threadIdx.x != 0) return best;
  double cum = 0;
  for (int64_t b = 0; b < n_blocks; ++b) prefix[b] = cum = cum + prefix[b];  // the running sum, in id order
  const double total = cum;
  if (!(total > 0) || !isfinite(total)) return best;
  const double u = u01 * total;
  int64_t lo = 0, hi = n_blocks;  // the first block whose running sum passes u
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (u < prefix[mid]) hi = mid;
    else lo = mid + 1;
  }
  for (int64_t b = lo; b < n_blocks; ++b) {  // a rounding miss falls through to the next block, as on the host
    double c = b > 0 ? prefix[b - 1] : 0.0;
    for (int k = 0; k < 64; ++k) {
      const float w = draw_weight(row, n, b * 64 + k, max_logit, inv);
      c += (double)w;
      if (w > 0.0f && u < c) return (int32_t)(b * 64 + k);
    }
  }
  return best;
}

// ---- shortlist ----

// An order-preserving key: a larger logit has a larger key (-0 as +0; NaN below every number).
__device__ __forceinline__ uint32_t order_key(float v) {
  if (isnan(v)) return 0u;
  const uint32_t u = v == 0.0f ? 0u : __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ uint64_t cand_key(uint32_t key, int64_t i) {
  return ((uint64_t)key << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)i);  // ties: the smaller id ranks higher
}

// keys[0, m) sorted descending (bitonic over the next power of two, padded with 0: below every candidate).
__device__ __forceinline__ void sort_desc(uint64_t* keys, int32_t m) {
  int32_t p = 1;
  while (p < m) p <<= 1;
  for (int32_t i = m + (int32_t)threadIdx.x; i < p; i += (int32_t)blockDim.x) keys[i] = 0;
  __syncthreads();
  for (int32_t k = 2; k <= p; k <<= 1) {
    for (int32_t j = k >> 1; j > 0; j >>= 1) {
      for (int32_t i = (int32_t)threadIdx.x; i < p; i += (int32_t)blockDim.x) {
        const int32_t o = i ^ j;
        if (o <= i) continue;
        const bool desc = (i & k) == 0;
        const uint64_t a = keys[i], b = keys[o];
        if (desc ? a < b : a > b) keys[i] = b, keys[o] = a;
      }
      __syncthreads();
    }
  }
}

// The row's best n_keep ids with their logits, best first, into ids / logits; *sum (thread 0) the normalizer
// when want_sum. n_keep <= min(n, k_shortlist_max).
__device__ __forceinline__ void shortlist_block(const float* row, int64_t n, int32_t n_keep, bool want_sum,
                                                int32_t* ids, float* logits, double* sum, sample_smem& sm) {
  const int32_t t = (int32_t)threadIdx.x, nt = (int32_t)blockDim.x;
  if (n_keep >= n) {  // every id is a candidate
    for (int64_t i = t; i < n; i += nt) sm.keys[i] = cand_key(order_key(row[i]), i);
  } else {
    // radix select, 8 bits a pass from the top: the key of the n_keep-th best (prefix) and how many of the ids
    // holding exactly that key are still to take (need)
    if (t == 0) sm.prefix = 0, sm.need = n_keep;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = t; i < 256; i += nt) sm.hist[i] = 0;
      __syncthreads();
      const uint32_t hi_mask = shift == 24 ? 0u : 0xFFFFFFFFu << (shift + 8), prefix = sm.prefix;
      for (int64_t i = t; i < n; i += nt) {
        const uint32_t k = order_key(row[i]);
        if ((k & hi_mask) == prefix) atomicAdd(&sm.hist[(k >> shift) & 255u], 1);
      }
      __syncthreads();
      if (t == 0) {
        int32_t need = sm.need, bin = 255;
        for (; bin > 0 && sm.hist[bin] < need; --bin) need -= sm.hist[bin];
        sm.prefix = prefix | ((uint32_t)bin << shift);
        sm.need = need;
      }
      __syncthreads();
    }
    const uint32_t kth = sm.prefix;
    const int32_t need = sm.need, above = n_keep - need;
    // ids with a larger key (any slot order: sorted below), and a count of kth ties per contiguous range
    if (t == 0) sm.n_above = 0;
    __syncthreads();
    const int64_t span = (n + nt - 1) / nt, i0 = min((int64_t)t * span, n), i1 = min(i0 + span, n);
    int32_t ties = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const uint32_t k = order_key(row[i]);
      if (k > kth) sm.keys[atomicAdd(&sm.n_above, 1)] = cand_key(k, i);
      else if (k == kth) ++ties;
    }
    sm.ints[t] = ties;
    __syncthreads();
    if (t == 0) {  // exclusive prefix over the ranges, in id order
      int32_t run = 0;
      for (int32_t k = 0; k < nt; ++k) {
        const int32_t c = sm.ints[k];
        sm.ints[k] = run;
        run += c;
      }
    }
    __syncthreads();
    int32_t rank = sm.ints[t];  // the ties with the smallest ids fill the last `need` slots
    for (int64_t i = i0; i < i1 && rank < need; ++i) {
      const uint32_t k = order_key(row[i]);
      if (k == kth) sm.keys[above + rank++] = cand_key(k, i);
    }
  }
  __syncthreads();
  sort_desc(sm.keys, n_keep);
  for (int32_t j = t; j < n_keep; j += nt) {
    const int32_t id = (int32_t)(0xFFFFFFFFu - (uint32_t)(sm.keys[j] & 0xFFFFFFFFu));
    ids[j] = id;
    logits[j] = row[id];
  }
  if (!want_sum) return;
  const float max_logit = row[(int32_t)(0xFFFFFFFFu - (uint32_t)(sm.keys[0] & 0xFFFFFFFFu))];
  double s = 0;
  for (int64_t i = t; i < n; i += nt) s += exp((double)__fsub_rn(row[i], max_logit));
  sm.sums[t] = s;
  __syncthreads();
  if (t == 0) {
    double total = 0;
    for (int32_t k = 0; k < nt; ++k) total += sm.sums[k];
    *sum = total;
  }
}

// Block blockIdx.x: row blockIdx.x of x (stride floats apart, n ids) under rows[blockIdx.x]. out_ids: the token
// (argmax, draw); cand_ids / cand_logits: the shortlists; sums: [rows] normalizers; prefix: [rows, ceil(n / 64)].
__device__ __forceinline__ void sample_row_block(float* x, int64_t stride, int64_t n, const device_sample_row* rows,
                                                 const logit_edit* edits, int32_t* out_ids, int32_t* cand_ids,
                                                 float* cand_logits, double* sums, double* prefix, sample_smem& sm) {
  const device_sample_row& r = rows[blockIdx.x];
  float* row = x + (int64_t)blockIdx.x * stride;
  apply_edits_block(row, edits + r.edit0, r.n_edits);
  if (r.mode == k_sample_argmax) {
    const int32_t best = row_argmax(row, n, sm);
    if (threadIdx.x == 0) out_ids[blockIdx.x] = best;
  } else if (r.mode == k_sample_draw) {
    const int32_t id = draw_block(row, n, r.inv_temperature, r.u01, prefix + (int64_t)blockIdx.x * ((n + 63) / 64), sm);
    if (threadIdx.x == 0) out_ids[blockIdx.x] = id;
  } else if (r.mode == k_sample_shortlist) {
    shortlist_block(row, n, r.n_keep, r.want_sum != 0, cand_ids + r.cand0, cand_logits + r.cand0, sums + blockIdx.x,
                    sm);
  }
}

}  // namespace spindle
