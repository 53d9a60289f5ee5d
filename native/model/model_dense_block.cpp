// One transformer block of the dense architectures, on the backend:
//   [x += cur, the previous layer's FFN output;]  cur = rms_norm(x) * attn_norm;  q, k, v = cur @ Wq, Wk, Wv
//   (+ biases);  [qwen3, gemma3: per-head rms_norm of q, k]  rope(q, k);  k, v -> block slots;  attn = paged causal
//   attention per sequence [gemma3's sliding-window layers: over the window, with their own rope; gemma3's image
//   embeddings: non-causal among themselves];
//   x += attn @ Wo (+ bo) [gemma3: rms_norm(attn @ Wo) * post_attention_norm; granite: times residual_scale];
//   cur = rms_norm(x) * ffn_norm;
//   cur = (silu(cur @ Wgate) * (cur @ Wup)) @ Wdown   [gemma3: gelu for silu, then rms_norm(cur) * post_ffw_norm;
//   qwen3moe: cur = moe(cur); granite: times residual_scale], left for the next layer to add (forward_batch adds the
//   last layer's). The residual
//   adds and the norms after them are one fused op each.
// Every op but attention runs once over all n tokens of the batch (rows = tokens, row-wise independent).
// Invariant: K and V of every new token are in their block slots before any attention runs, so attention of
// a sequence's query at position p sees its own positions [0, p] (a sliding layer: [p - window + 1, p]; a query of a
// bidirectional span: up to the span's end) and nothing of other sequences.
#include <cmath>
#include <vector>

#include "model/batch_rows.h"
#include "model/dense_model.h"

namespace spindle {

void dense_model::run_layer(int il, const std::vector<batch_sequence>& batch, dense_kv_cache& kv, int64_t n) {
  const dense_layer& l = w_.layers[il];
  backend& be = *be_;
  const int64_t n_embd = hp_.n_embd, hd = hp_.head_dim_k;
  const int64_t q_dim = hd * hp_.n_head, k_dim = hd * hp_.n_head_kv, v_dim = (int64_t)hp_.head_dim_v * hp_.n_head_kv;
  float* x = scratch_.x.data();
  float* cur = scratch_.cur.data();
  float* q = scratch_.q.data();
  float* k_new = scratch_.k.data();  // [n, k_dim]
  float* v_new = scratch_.v.data();  // [n, v_dim]

  // The previous layer left its FFN output in cur: x += cur and the norm in one op.
  if (il == 0) be.rms_norm(x, l.attn_norm.data(), cur, n, n_embd, hp_.rms_eps);
  else be.add_rms_norm(x, cur, l.attn_norm.data(), cur, n, n_embd, hp_.rms_eps);
  const backend_weight* qkv[3] = {&l.wq, &l.wk, &l.wv};
  float* const qkv_out[3] = {q, k_new, v_new};
  scratch_.lora.matmul_group(be, qkv, qkv_out, 3, cur, n);
  if (l.bq.data()) be.add_row_vector(q, l.bq.data(), n, q_dim);
  if (l.bk.data()) be.add_row_vector(k_new, l.bk.data(), n, k_dim);
  if (l.bv.data()) be.add_row_vector(v_new, l.bv.data(), n, v_dim);
  if (l.q_norm.data()) be.rms_norm(q, l.q_norm.data(), q, n * hp_.n_head, hd, hp_.rms_eps);
  if (l.k_norm.data()) be.rms_norm(k_new, l.k_norm.data(), k_new, n * hp_.n_head_kv, hd, hp_.rms_eps);

  const bool swa = hp_.is_swa(il);  // a sliding-window layer: its window and its own rope
  rope_params rp;
  rp.n_rot = hp_.n_rot;
  rp.freq_base = swa ? hp_.rope_freq_base_swa : hp_.rope_freq_base;
  rp.freq_scale = swa ? hp_.rope_freq_scale_swa : hp_.rope_freq_scale;
  rp.neox = hp_.rope_neox;
  rp.freq_factors = w_.rope_freqs.data();
  float* k_store = kv.k[il].data();  // [n_blocks * block_size, k_dim]
  float* v_store = kv.v[il].data();  // [n_blocks * block_size, v_dim]
  // rope(q, k), then k, v into their slots
  be.rope_store_kv(q, k_new, v_new, n, hp_.n_head, hp_.n_head_kv, (int32_t)hd, scratch_.pos.data(), rp, k_store,
                   v_store, scratch_.kv_rows.data(), v_dim, kv_dtype());

  attention_params ap;
  ap.n_head = hp_.n_head;
  ap.n_head_kv = hp_.n_head_kv;
  ap.head_dim_k = hp_.head_dim_k;
  ap.head_dim_v = hp_.head_dim_v;
  ap.k_row_stride = k_dim;
  ap.v_row_stride = v_dim;
  ap.scale = hp_.attn_scale > 0.0f ? hp_.attn_scale : 1.0f / std::sqrt((float)hd);
  ap.window = swa ? hp_.swa_window : 0;
  ap.kv = kv_dtype();
  std::vector<paged_attention_params>& seqs = scratch_.attn_seqs;  // attention per sequence over its own blocks
  seqs.clear();
  for (const batch_sequence& b : batch) {
    paged_attention_params pp;
    pp.attn = ap;
    pp.block_table = b.block_table;
    pp.n_table = b.n_table;
    pp.block_size = kv.block_size_;
    pp.n_blocks = kv.n_blocks_;
    append_attention_calls(seqs, pp, b);  // one call, or several around bidirectional spans (image embeddings)
  }
  be.attention_paged_batch(seqs.data(), (int64_t)seqs.size(), q, k_store, v_store, scratch_.attn.data());

  scratch_.lora.matmul(be, l.wo, scratch_.attn.data(), n, cur);  // [n, n_embd]
  if (l.bo.data()) be.add_row_vector(cur, l.bo.data(), n, n_embd);
  if (l.attn_post_norm.data()) be.rms_norm(cur, l.attn_post_norm.data(), cur, n, n_embd, hp_.rms_eps);
  if (hp_.residual_scale != 0.0f) be.scale_rows(cur, scratch_.residual_scale.data(), n, n_embd);  // granite
  be.add_rms_norm(x, cur, l.ffn_norm.data(), cur, n, n_embd, hp_.rms_eps);  // x += attention output; norm
  if (l.moe.present()) {
    moe_.forward(be, w_.moe, l.moe, cur, n, n_embd, cur);  // in place: [n, n_embd]
    if (moe_trace_) moe_.append_selection_scores(w_.moe, l.moe, n, *moe_trace_);
    return;  // cur: the FFN output, added to x by the next layer (or forward_batch after the last)
  }
  float* gate = scratch_.gate.data();
  float* up = scratch_.up.data();
  const backend_weight* gate_up[2] = {&l.ffn_gate, &l.ffn_up};
  float* const gate_up_out[2] = {gate, up};
  scratch_.lora.matmul_group(be, gate_up, gate_up_out, 2, cur, n);
  if (hp_.ffn_gelu) {
    be.geglu(gate, up, gate, n * hp_.n_ff);
    scratch_.lora.matmul(be, l.ffn_down, gate, n, cur);
  } else {
    scratch_.lora.swiglu_matmul(be, l.ffn_down, gate, up, n, cur);
  }
  if (l.ffn_post_norm.data()) be.rms_norm(cur, l.ffn_post_norm.data(), cur, n, n_embd, hp_.rms_eps);
  if (hp_.residual_scale != 0.0f) be.scale_rows(cur, scratch_.residual_scale.data(), n, n_embd);  // granite
}

}  // namespace spindle
