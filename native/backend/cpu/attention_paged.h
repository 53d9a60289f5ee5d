// Paged attention on the CPU: the KV rows of one sequence are found through its block table (position p in row
// block_table[p / block_size] * block_size + p % block_size of the store).
// Invariant: cpu_backend::attention_paged gathers the sequence's rows in position order and runs the same
// per-(query, head) kernel as cpu_backend::attention, so its output is bitwise that of attention() over a
// contiguous cache holding the same rows, whatever the block ids and whatever else shares the store.
#pragma once
#include <cstdint>

#include "backend/backend.h"

namespace spindle {

// Throws spindle::error unless the heads are valid and the table covers n_past + n_tokens positions with
// block ids in [0, n_blocks).
void attention_paged_check(const paged_attention_params& p);

// Throws spindle::error (prefixed `who`) when a q8_0 / q4_0 store's head dims or row strides are not whole 32-value
// blocks (the kernels address those rows by block); other store types have no such rule.
void attention_kv_blocks_check(const attention_params& a, const char* who);

// Store row of position pos (p checked by attention_paged_check).
int64_t attention_paged_row(const paged_attention_params& p, int64_t pos);

// Plain reference (scalar loops, double accumulation): out[t, h, :] = sum_j softmax_j(scale * q[t, h] . k_j) v_j
// over positions j in [0, P] for the query at P = n_past + t (every j < n_past + n_tokens when p.attn.causal is
// false), only those with P - j < window under a sliding window (p.attn.window > 0), K / V elements of p.attn.kv
// (16-bit ones widened exactly). For tests of the fast path.
void attention_paged_ref(const paged_attention_params& p, const float* q, const float* k_store,
                         const float* v_store, float* out);

}  // namespace spindle
