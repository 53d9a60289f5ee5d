// The layers of LFM2 on the backend (llama.cpp src/models/lfm2.cpp), after cur = rms_norm(x) * attn_norm:
//   conv:      bcx = cur @ in_proj (B | C | X);  y = C * short_conv(B * X) per sequence;  cur = y @ out_proj
//   attention: q, k, v = cur @ Wq, Wk, Wv;  per-head rms_norm of q and k;  NEOX rope;  k, v -> block slots;
//              paged causal attention per sequence;  cur = attn @ Wo
//   then x += cur and the FFN's norm (one fused op), and the FFN: cur = (silu(norm(x) @ Wgate) * (norm(x) @ Wup))
//   @ Wdown, or for lfm2moe's MoE layers cur = moe(norm(x)) (moe_ffn.h), which the next layer (or forward_batch
//   after the last) adds to x with its own norm.
// Matmuls and elementwise ops run once over all n tokens of the batch; the convolution and attention run per
// sequence over that sequence's own state slot / blocks only.
// Invariant: a sequence starting at position 0 begins from a zero conv state (a reused slot's old content is
// never read); K and V of every new token are in their slots before any attention of the layer runs.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/batch_rows.h"
#include "model/lfm2_model.h"

namespace spindle {

void lfm2_model::run_conv(const lfm2_layer& l, const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv,
                          int64_t n) {
  backend& be = *be_;
  const int64_t n_embd = hp_.n_embd;
  float* bcx = bcx_.data();           // [n, 3 * n_embd]
  float* y = scratch_.attn.data();    // [n, n_embd]
  scratch_.lora.matmul(be, l.conv_in, scratch_.cur.data(), n, bcx);
  float* states = kv.state[l.cache_index].data();  // [n_slots, l_cache - 1, n_embd]
  conv_tokens_.clear();
  conv_states_.clear();
  for (const batch_sequence& b : batch) {
    float* state = states + (int64_t)b.state_slot * kv.layer_state_floats_;
    if (b.first_pos == 0) be.copy(state, zero_state_.data(), kv.layer_state_floats_);
    conv_tokens_.push_back(b.n_tokens);
    conv_states_.push_back(state);
  }
  write_state_rows(kv, l.cache_index, bcx);  // checkpoints and rollback states, before the states move on
  be.short_conv_batch(bcx, conv_tokens_.data(), conv_states_.data(), (int64_t)batch.size(), n_embd, w_.l_cache,
                      l.conv_w.data(), y);
  scratch_.lora.matmul(be, l.conv_out, y, n, scratch_.cur.data());
}

// Adds to `plan` the d rows of the conv state of sequence b after position q (b.first_pos < q <= its last
// position + 1), i.e. the d rows of (state ++ B * X) ending there, as rows dst_row .. dst_row + d - 1 of a
// destination. Rows of the chunk come from bcx (the chunk starts at bcx row `at`), rows before it from the
// slot's state (still the state at first_pos while a conv layer copies them out: short_conv has not run yet;
// zeros at position 0).
void lfm2_state_rows::add(const batch_sequence& b, int64_t at, int64_t q, int64_t d, int64_t dst_row) {
  const int64_t f = b.first_pos;
  for (int64_t j = 0; j < d; ++j) {
    const int64_t r = q - d + j;  // position of row j
    if (r >= f) {
      bx_src.push_back(at + r - f);
      bx_dst.push_back(dst_row + j);
    } else {
      st_src.push_back((int64_t)b.state_slot * d + (r - f + d));
      st_dst.push_back(dst_row + j);
    }
  }
}

void lfm2_state_rows::clear() {
  bx_src.clear();
  bx_dst.clear();
  st_src.clear();
  st_dst.clear();
}

// The rows of this step, the same for every conv layer: prefix caching's checkpoint of every block whose last
// position the step computes (destination row block * d), and speculative decoding's states after each of a
// chunk's first n_rollback tokens (destination row (slot's first kept state + i) * d).
void lfm2_model::plan_state_rows(const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv) {
  const int64_t d = w_.l_cache - 1, bs = kv.block_size_;
  ckpt_rows_.clear();
  rollback_rows_.clear();
  std::fill(kv.rb_count.begin(), kv.rb_count.end(), 0);  // states kept by earlier passes are gone
  int64_t at = 0, kept = 0;  // first bcx row of the sequence; states kept for rollback so far
  for (const batch_sequence& b : batch) {
    const int64_t f = b.first_pos, end = f + b.n_tokens;
    if (kv.checkpoints()) {
      for (int64_t q = (f / bs + 1) * bs; q <= end; q += bs) {  // block boundaries after positions f .. end - 1
        ckpt_rows_.add(b, at, q, d, b.block_table[q / bs - 1] * d);
      }
    }
    kv.rb_first[b.state_slot] = b.first_pos;
    kv.rb_count[b.state_slot] = b.n_rollback;
    kv.rb_base[b.state_slot] = kept;
    for (int64_t i = 0; i < b.n_rollback; ++i) rollback_rows_.add(b, at, f + 1 + i, d, (kept + i) * d);
    kept += b.n_rollback;
    at += b.n_tokens;
  }
  kv.reserve_rollback(kept);
}

// One conv layer's planned rows, before its states move on.
void lfm2_model::write_state_rows(lfm2_kv_cache& kv, int32_t cache_index, const float* bcx) {
  const auto write = [&](const lfm2_state_rows& p, float* dst) {  // dst: [rows, n_embd]
    be_->gather_bx_rows(bcx, p.bx_src.data(), (int64_t)p.bx_src.size(), hp_.n_embd, dst, p.bx_dst.data());
    be_->copy_rows(dst, p.st_dst.data(), kv.state[cache_index].data(), p.st_src.data(), (int64_t)p.st_src.size(),
                   hp_.n_embd);
  };
  if (!ckpt_rows_.empty()) write(ckpt_rows_, kv.ckpt[cache_index].data());
  if (!rollback_rows_.empty()) write(rollback_rows_, kv.rollback[cache_index].data());
}

void lfm2_model::run_attention(const lfm2_layer& l, const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv,
                               int64_t n) {
  backend& be = *be_;
  const dense_layer& d = l.d;
  const int64_t hd = hp_.head_dim_k, q_dim = hd * hp_.n_head, kv_dim = hd * hp_.n_head_kv;
  float* cur = scratch_.cur.data();
  float* q = scratch_.q.data();
  float* k_new = scratch_.k.data();  // [n, kv_dim]
  float* v_new = scratch_.v.data();  // [n, kv_dim]
  const backend_weight* qkv[3] = {&d.wq, &d.wk, &d.wv};
  float* const qkv_out[3] = {q, k_new, v_new};
  scratch_.lora.matmul_group(be, qkv, qkv_out, 3, cur, n);
  if (d.bq.data()) be.add_row_vector(q, d.bq.data(), n, q_dim);
  if (d.bk.data()) be.add_row_vector(k_new, d.bk.data(), n, kv_dim);
  if (d.bv.data()) be.add_row_vector(v_new, d.bv.data(), n, kv_dim);
  be.rms_norm(q, d.q_norm.data(), q, n * hp_.n_head, hd, hp_.rms_eps);
  be.rms_norm(k_new, d.k_norm.data(), k_new, n * hp_.n_head_kv, hd, hp_.rms_eps);

  rope_params rp;
  rp.n_rot = hp_.n_rot;
  rp.freq_base = hp_.rope_freq_base;
  rp.freq_scale = hp_.rope_freq_scale;
  rp.neox = hp_.rope_neox;
  float* k_store = kv.k[l.cache_index].data();  // [n_blocks * block_size, kv_dim]
  float* v_store = kv.v[l.cache_index].data();
  // rope(q, k), then k, v into their slots
  be.rope_store_kv(q, k_new, v_new, n, hp_.n_head, hp_.n_head_kv, (int32_t)hd, scratch_.pos.data(), rp, k_store,
                   v_store, scratch_.kv_rows.data(), kv_dim, kv_dtype());

  paged_attention_params pp;
  pp.attn.n_head = hp_.n_head;
  pp.attn.n_head_kv = hp_.n_head_kv;
  pp.attn.head_dim_k = hp_.head_dim_k;
  pp.attn.head_dim_v = hp_.head_dim_v;
  pp.attn.k_row_stride = kv_dim;
  pp.attn.v_row_stride = kv_dim;
  pp.attn.scale = 1.0f / std::sqrt((float)hd);
  pp.attn.kv = kv_dtype();
  pp.block_size = kv.block_size_;
  pp.n_blocks = kv.n_blocks_;
  std::vector<paged_attention_params>& seqs = scratch_.attn_seqs;  // attention per sequence over its own blocks
  seqs.clear();
  for (const batch_sequence& b : batch) {
    pp.block_table = b.block_table;
    pp.n_table = b.n_table;
    append_attention_calls(seqs, pp, b);
  }
  be.attention_paged_batch(seqs.data(), (int64_t)seqs.size(), q, k_store, v_store, scratch_.attn.data());
  scratch_.lora.matmul(be, d.wo, scratch_.attn.data(), n, cur);  // [n, n_embd]
}

void lfm2_model::run_ffn(const lfm2_layer& l, int64_t n) {
  backend& be = *be_;
  float* x = scratch_.x.data();
  float* cur = scratch_.cur.data();
  float* gate = scratch_.gate.data();
  be.add_rms_norm(x, cur, l.d.ffn_norm.data(), cur, n, hp_.n_embd, hp_.rms_eps);  // x += mixer output; norm
  if (l.d.moe.present()) {
    moe_.forward(be, w_.moe, l.d.moe, cur, n, hp_.n_embd, cur);  // in place: [n, n_embd]
    return;  // cur: the FFN output, added to x by the next layer's add_rms_norm (or forward_batch after the last)
  }
  const backend_weight* gate_up[2] = {&l.d.ffn_gate, &l.d.ffn_up};
  float* const gate_up_out[2] = {gate, scratch_.up.data()};
  scratch_.lora.matmul_group(be, gate_up, gate_up_out, 2, cur, n);
  scratch_.lora.swiglu_matmul(be, l.d.ffn_down, gate, scratch_.up.data(), n, cur);
}

}  // namespace spindle
