// One transformer block of the dense architectures, on the backend:
//   cur = rms_norm(x) * attn_norm;  q, k, v = cur @ Wq, Wk, Wv (+ biases);  [qwen3: per-head rms_norm of q, k]
//   rope(q, k);  k, v -> cache rows n_past..;  attn = causal_attention(q, cache);  x += attn @ Wo (+ bo)
//   cur = rms_norm(x) * ffn_norm;  x += (silu(cur @ Wgate) * (cur @ Wup)) @ Wdown
// Invariant: K and V of the new tokens are computed straight into their cache rows, so attention sees
// positions [0, n_past + i] for query i and nothing past it.
#include <cmath>

#include "model/dense_model.h"

namespace spindle {

void dense_model::run_layer(int il, sequence_state& state, int64_t n) {
  const dense_layer& l = w_.layers[il];
  backend& be = *be_;
  const int64_t n_embd = hp_.n_embd, hd = hp_.head_dim_k;
  const int64_t q_dim = hd * hp_.n_head, k_dim = hd * hp_.n_head_kv, v_dim = (int64_t)hp_.head_dim_v * hp_.n_head_kv;
  float* x = scratch_.x.data();
  float* cur = scratch_.cur.data();
  float* q = scratch_.q.data();
  float* k_layer = state.k.data() + (int64_t)il * state.max_tokens * k_dim;  // [max_tokens, k_dim]
  float* v_layer = state.v.data() + (int64_t)il * state.max_tokens * v_dim;  // [max_tokens, v_dim]
  float* k_new = k_layer + state.n_past * k_dim;                            // [n, k_dim]
  float* v_new = v_layer + state.n_past * v_dim;                            // [n, v_dim]

  be.rms_norm(x, l.attn_norm.data(), cur, n, n_embd, hp_.rms_eps);
  be.matmul(l.wq, cur, n, q);
  be.matmul(l.wk, cur, n, k_new);
  be.matmul(l.wv, cur, n, v_new);
  if (l.bq.data()) be.add_row_vector(q, l.bq.data(), n, q_dim);
  if (l.bk.data()) be.add_row_vector(k_new, l.bk.data(), n, k_dim);
  if (l.bv.data()) be.add_row_vector(v_new, l.bv.data(), n, v_dim);
  if (l.q_norm.data()) be.rms_norm(q, l.q_norm.data(), q, n * hp_.n_head, hd, hp_.rms_eps);
  if (l.k_norm.data()) be.rms_norm(k_new, l.k_norm.data(), k_new, n * hp_.n_head_kv, hd, hp_.rms_eps);

  rope_params rp;
  rp.n_rot = hp_.n_rot;
  rp.freq_base = hp_.rope_freq_base;
  rp.freq_scale = hp_.rope_freq_scale;
  rp.neox = hp_.rope_neox;
  rp.freq_factors = w_.rope_freqs.data();
  be.rope(q, n, hp_.n_head, (int32_t)hd, scratch_.pos.data(), rp);
  be.rope(k_new, n, hp_.n_head_kv, (int32_t)hd, scratch_.pos.data(), rp);

  attention_params ap;
  ap.n_tokens = n;
  ap.n_past = state.n_past;
  ap.n_head = hp_.n_head;
  ap.n_head_kv = hp_.n_head_kv;
  ap.head_dim_k = hp_.head_dim_k;
  ap.head_dim_v = hp_.head_dim_v;
  ap.k_row_stride = k_dim;
  ap.v_row_stride = v_dim;
  ap.scale = 1.0f / std::sqrt((float)hd);
  be.attention(ap, q, k_layer, v_layer, scratch_.attn.data());  // [n, n_head * head_dim_v]

  be.matmul(l.wo, scratch_.attn.data(), n, cur);  // [n, n_embd]
  if (l.bo.data()) be.add_row_vector(cur, l.bo.data(), n, n_embd);
  be.add(cur, x, x, n * n_embd);

  float* gate = scratch_.gate.data();
  float* up = scratch_.up.data();
  be.rms_norm(x, l.ffn_norm.data(), cur, n, n_embd, hp_.rms_eps);
  be.matmul(l.ffn_gate, cur, n, gate);
  be.matmul(l.ffn_up, cur, n, up);
  be.swiglu(gate, up, gate, n * hp_.n_ff);
  be.matmul(l.ffn_down, gate, n, cur);
  be.add(cur, x, x, n * n_embd);
}

}  // namespace spindle
