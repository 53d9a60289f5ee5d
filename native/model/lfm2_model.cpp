// lfm2_model: sequence memory (paged K/V of the attention layers + conv state slots), argument checks, scratch
// and the batched forward pass around the layers (embedding -> blocks -> token_embd_norm -> output matmul on
// the rows that want logits). Invariant: forward_batch() throws before it writes anything when the call is
// invalid; a slot's state position is published only after the pass that advanced it completed.
#include "model/lfm2_model.h"

#include <algorithm>
#include <climits>
#include <string>

#include "common/checked_math.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/batch_rows.h"
#include "model/model_tensors.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

// ---- lfm2_kv_cache ----

int32_t lfm2_kv_cache::state_pos(int32_t slot) const {
  if (slot < 0 || slot >= n_slots_) throw error("lfm2 cache: state slot " + std::to_string(slot) + " out of range");
  return slot_pos[slot];
}

void lfm2_kv_cache::save_state(int32_t slot, float* out) const {
  if (state_pos(slot) < 0) throw error("lfm2 cache: state slot " + std::to_string(slot) + " holds no usable state");
  for (size_t i = 0; i < state.size(); ++i) {
    be_->download(out + i * layer_state_floats_, state[i].data() + slot * layer_state_floats_, layer_state_floats_);
  }
}

void lfm2_kv_cache::restore_state(int32_t slot, const float* in, int32_t pos) {
  state_pos(slot);  // range check
  if (pos <= 0) throw error("lfm2 cache: a restored state must be at a position > 0, got " + std::to_string(pos));
  slot_pos[slot] = -1;
  for (size_t i = 0; i < state.size(); ++i) {
    be_->upload(state[i].data() + slot * layer_state_floats_, in + i * layer_state_floats_, layer_state_floats_);
  }
  slot_pos[slot] = pos;
}

void lfm2_kv_cache::reserve_rollback(int64_t n_states) {
  if (n_states <= rollback_capacity) return;
  const int64_t n = (int64_t)checked_mul((uint64_t)n_states, (uint64_t)layer_state_floats_, "rollback states");
  rollback.clear();  // free the old buffers first
  rollback_capacity = 0;
  for (size_t i = 0; i < state.size(); ++i) rollback.emplace_back(*be_, n);  // [n_states, d, n_embd]
  rollback_capacity = n_states;
}

// ---- lfm2_model ----

lfm2_model::lfm2_model(std::unique_ptr<gguf_file> file, std::unique_ptr<tokenizer> vocab, std::unique_ptr<backend> be,
                       model_hparams hp, lfm2_weights weights)
    : file_(std::move(file)), vocab_(std::move(vocab)), be_(std::move(be)), hp_(std::move(hp)), w_(std::move(weights)) {
  zero_state_ = backend_buffer(*be_, (int64_t)(w_.l_cache - 1) * hp_.n_embd);  // alloc_f32 zeroes
}

lfm2_model::~lfm2_model() = default;

// The state after position pos, kept by the last forward pass for this slot (first < pos <= first + count), back
// in the slot. Every pass forgets what the ones before it kept.
void lfm2_model::rollback_state(kv_cache& kv_base, int32_t slot, int32_t pos) const {
  auto* kv = dynamic_cast<lfm2_kv_cache*>(&kv_base);
  if (!kv || kv->owner_ != this) throw error("rollback_state: kv_cache was not made by this model");
  if (w_.n_conv == 0) return;
  kv->state_pos(slot);  // range check
  const int32_t first = kv->rb_first[slot], count = kv->rb_count[slot];
  if (pos <= first || pos > first + count) {
    throw error("rollback_state: slot " + std::to_string(slot) + " kept no state after position " + std::to_string(pos) +
                " (its last pass kept " + std::to_string(count) + " after position " + std::to_string(first) + ")");
  }
  const int64_t lsf = kv->layer_state_floats_;
  const int64_t at = kv->rb_base[slot] + (pos - first - 1);
  kv->slot_pos[slot] = -1;
  for (size_t i = 0; i < kv->state.size(); ++i) {
    be_->copy(kv->state[i].data() + slot * lsf, kv->rollback[i].data() + at * lsf, lsf);
  }
  kv->slot_pos[slot] = pos;
}

uint64_t lfm2_model::state_bytes_per_slot() const {
  return (uint64_t)w_.n_conv * (uint64_t)(w_.l_cache - 1) * (uint64_t)hp_.n_embd * sizeof(float);
}

uint64_t lfm2_model::checkpoint_bytes_per_block(int32_t) const { return state_bytes_per_slot(); }

void lfm2_model::enable_block_checkpoints(kv_cache& kv_base) const {
  auto* kv = dynamic_cast<lfm2_kv_cache*>(&kv_base);
  if (!kv || kv->owner_ != this) throw error("enable_block_checkpoints: kv_cache was not made by this model");
  if (kv->checkpoints() || w_.n_conv == 0) return;
  const uint64_t n = checked_mul((uint64_t)kv->n_blocks_, (uint64_t)kv->layer_state_floats_, "checkpoint store");
  for (int32_t i = 0; i < w_.n_conv; ++i) kv->ckpt.emplace_back(*be_, (int64_t)n);  // [n_blocks, d, n_embd]
}

void lfm2_model::restore_from_block(kv_cache& kv_base, int32_t slot, int32_t block_id, int32_t pos) const {
  auto* kv = dynamic_cast<lfm2_kv_cache*>(&kv_base);
  if (!kv || kv->owner_ != this || !kv->checkpoints()) throw error("restore_from_block: no block checkpoints here");
  if (slot < 0 || slot >= kv->n_slots_ || block_id < 0 || block_id >= kv->n_blocks_ || pos <= 0) {
    throw error("restore_from_block: slot " + std::to_string(slot) + ", block " + std::to_string(block_id) +
                " or position " + std::to_string(pos) + " out of range");
  }
  const int64_t lsf = kv->layer_state_floats_;
  for (size_t i = 0; i < kv->state.size(); ++i) {
    be_->copy(kv->state[i].data() + slot * lsf, kv->ckpt[i].data() + block_id * lsf, lsf);
  }
  kv->slot_pos[slot] = pos;
}

std::unique_ptr<sequence_state> lfm2_model::new_sequence(int64_t max_tokens) const {
  if (max_tokens <= 0 || max_tokens > INT32_MAX) {
    throw error("new_sequence: max_tokens must be in [1, 2^31 - 1], got " + std::to_string(max_tokens));
  }
  auto s = std::make_unique<sequence_state>();
  s->max_tokens = max_tokens;
  s->kv = new_kv_cache(1, (int32_t)max_tokens, 1);  // one block (rows are positions), one state slot
  return s;
}

std::unique_ptr<kv_cache> lfm2_model::new_kv_cache(int32_t n_blocks, int32_t block_size) const {
  return new_kv_cache(n_blocks, block_size, 1);
}

std::unique_ptr<kv_cache> lfm2_model::new_kv_cache(int32_t n_blocks, int32_t block_size, int32_t n_state_slots) const {
  if (n_blocks <= 0 || block_size <= 0 || n_state_slots <= 0) {
    throw error("new_kv_cache: n_blocks, block_size and n_state_slots must be positive, got " +
                std::to_string(n_blocks) + ", " + std::to_string(block_size) + " and " + std::to_string(n_state_slots));
  }
  const uint64_t rows = checked_mul((uint64_t)n_blocks, (uint64_t)block_size, "KV cache");
  const uint64_t n_k = checked_mul(rows, (uint64_t)hp_.n_head_kv * hp_.head_dim_k, "KV cache");
  const uint64_t n_v = checked_mul(rows, (uint64_t)hp_.n_head_kv * hp_.head_dim_v, "KV cache");
  const uint64_t layer_state = (uint64_t)(w_.l_cache - 1) * (uint64_t)hp_.n_embd;
  const uint64_t n_state = checked_mul(layer_state, (uint64_t)n_state_slots, "state slots");
  checked_mul(checked_add(checked_mul(checked_add(n_k, n_v, "KV cache"), (uint64_t)w_.n_attention, "KV cache"),
                          checked_mul(n_state, (uint64_t)w_.n_conv, "state slots"), "KV cache"),
              sizeof(float), "KV cache bytes");
  if (n_k > (uint64_t)INT64_MAX || n_v > (uint64_t)INT64_MAX || n_state > (uint64_t)INT64_MAX) {
    throw error("new_kv_cache: KV cache too large");
  }
  auto kv = std::make_unique<lfm2_kv_cache>();
  kv->n_blocks_ = n_blocks;
  kv->block_size_ = block_size;
  kv->n_slots_ = n_state_slots;
  kv->layer_state_floats_ = (int64_t)layer_state;
  kv->state_floats_ = (int64_t)layer_state * w_.n_conv;
  kv->owner_ = this;
  kv->be_ = be_.get();
  for (int32_t i = 0; i < w_.n_attention; ++i) {
    // [n_blocks * block_size, n_head_kv * head_dim_k] and _v elements of kv_dtype()
    kv->k.emplace_back(*be_, kv_store_floats(kv_dtype(), (int64_t)n_k));
    kv->v.emplace_back(*be_, kv_store_floats(kv_dtype(), (int64_t)n_v));
  }
  for (int32_t i = 0; i < w_.n_conv; ++i) kv->state.emplace_back(*be_, (int64_t)n_state);  // [slots, d, n_embd]
  kv->slot_pos.assign((size_t)n_state_slots, -1);
  kv->rb_first.assign((size_t)n_state_slots, 0);
  kv->rb_count.assign((size_t)n_state_slots, 0);
  kv->rb_base.assign((size_t)n_state_slots, 0);
  return kv;
}

int64_t lfm2_model::check_batch(const std::vector<batch_sequence>& batch, const lfm2_kv_cache& kv) const {
  if (kv.owner_ != this) throw error("forward_batch: kv_cache was not made by this model's new_kv_cache()");
  const int64_t total = check_batch_sequences(batch, kv.n_blocks_, kv.block_size_, hp_.n_vocab);
  check_slots(batch, kv);
  return total;
}

// Every sequence names its own slot, and a continuing sequence finds its state at exactly first_pos.
void lfm2_model::check_slots(const std::vector<batch_sequence>& batch, const lfm2_kv_cache& kv) const {
  if (w_.n_conv == 0) return;
  std::vector<bool> used((size_t)kv.n_slots_, false);
  for (size_t i = 0; i < batch.size(); ++i) {
    const batch_sequence& b = batch[i];
    const std::string at = "forward_batch: sequence " + std::to_string(i) + ": ";
    if (b.state_slot < 0 || b.state_slot >= kv.n_slots_) {
      throw error(at + "state slot " + std::to_string(b.state_slot) + " out of range [0, " +
                  std::to_string(kv.n_slots_) + ")");
    }
    if (used[b.state_slot]) throw error(at + "state slot " + std::to_string(b.state_slot) + " used twice in a batch");
    used[b.state_slot] = true;
    if (b.first_pos > 0 && kv.slot_pos[b.state_slot] != b.first_pos) {
      throw error(at + "continues at position " + std::to_string(b.first_pos) + ", but state slot " +
                  std::to_string(b.state_slot) + " holds the recurrent state at position " +
                  std::to_string(kv.slot_pos[b.state_slot]) + " (-1: none); recompute from position 0");
    }
  }
}

void lfm2_model::reserve_scratch(int64_t n) {
  if (n <= scratch_.capacity) return;
  const int64_t q_dim = (int64_t)hp_.n_head * hp_.head_dim_k;  // == n_embd
  const int64_t kv_dim = (int64_t)hp_.n_head_kv * hp_.head_dim_k;
  const auto rows = [&](int64_t width) { return (int64_t)checked_mul((uint64_t)n, (uint64_t)width, "scratch"); };
  scratch_ = dense_scratch();  // free the old buffers first
  bcx_ = backend_buffer();
  dense_scratch s;
  s.capacity = n;
  s.x = backend_buffer(*be_, rows(hp_.n_embd));
  s.cur = backend_buffer(*be_, rows(hp_.n_embd));
  s.q = backend_buffer(*be_, rows(q_dim));
  s.k = backend_buffer(*be_, rows(kv_dim));
  s.v = backend_buffer(*be_, rows(kv_dim));
  s.attn = backend_buffer(*be_, rows(hp_.n_embd));  // attention output, or the conv output y
  s.gate = backend_buffer(*be_, rows(hp_.n_ff));
  s.up = backend_buffer(*be_, rows(hp_.n_ff));
  s.pos.resize((size_t)n);
  s.tokens.resize((size_t)n);
  s.n_embd = hp_.n_embd;
  s.kv_rows.resize((size_t)n);
  if (w_.n_conv > 0) bcx_ = backend_buffer(*be_, rows(3 * (int64_t)hp_.n_embd));
  scratch_ = std::move(s);
}

std::vector<lora_target> lfm2_model::lora_targets() const {
  std::vector<lora_target> out;
  for (size_t il = 0; il < w_.layers.size(); ++il) {
    const lfm2_layer& l = w_.layers[il];
    add_dense_lora_targets(out, l.d, int(il));
    if (l.attention) continue;
    out.push_back({tensor_table::blk(int(il), "shortconv.in_proj.weight"), &l.conv_in});
    out.push_back({tensor_table::blk(int(il), "shortconv.out_proj.weight"), &l.conv_out});
  }
  if (w_.output.data != w_.tok_embd.data) out.push_back({"output.weight", &w_.output});  // not when tied
  return out;
}

void lfm2_model::forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv_base, float* logits) {
  auto* kv = dynamic_cast<lfm2_kv_cache*>(&kv_base);
  if (!kv) throw error("forward_batch: kv_cache was not made by this model's new_kv_cache()");
  const int64_t n = check_batch(batch, *kv);
  check_logits_buffer(batch, logits);
  reserve_scratch(n);
  fill_batch_rows(batch, kv->block_size_, scratch_);
  scratch_.lora.set(batch);
  if (w_.n_conv > 0) {
    for (const batch_sequence& b : batch) kv->slot_pos[b.state_slot] = -1;  // mid-update until the pass completes
  }
  if (w_.n_conv > 0) plan_state_rows(batch, *kv);
  // MoE layers: a step graph only where every MoE layer stays on the device (else routing comes back mid-layer).
  step_graph_scope graph(*be_, moe_step_graph_key(step_graph_key(batch, n, scratch_), moe_, *be_, w_.moe, w_.layers,
                                                  [](const lfm2_layer& l) -> const moe_layer_weights& { return l.d.moe; },
                                                  n, hp_.n_embd));
  batch_input_rows(*be_, w_.tok_embd, scratch_, n);  // [n, n_embd]
  // Each layer leaves its FFN output in cur; the next layer adds it to x with its own norm (one fused op).
  float* x = scratch_.x.data();
  float* cur = scratch_.cur.data();
  for (size_t il = 0; il < w_.layers.size(); ++il) {
    const lfm2_layer& l = w_.layers[il];
    if (il == 0) be_->rms_norm(x, l.d.attn_norm.data(), cur, n, hp_.n_embd, hp_.rms_eps);
    else be_->add_rms_norm(x, cur, l.d.attn_norm.data(), cur, n, hp_.n_embd, hp_.rms_eps);
    if (l.attention) run_attention(l, batch, *kv, n);
    else run_conv(l, batch, *kv, n);
    run_ffn(l, n);
  }
  if (!w_.layers.empty()) be_->add(cur, x, x, n * hp_.n_embd);
  // token_embd_norm, then the output matmul
  batch_output_logits(*be_, batch, scratch_, hp_, w_.output_norm, w_.output, nullptr, logits, graph);
  be_->sync();
  if (w_.n_conv > 0) {
    for (const batch_sequence& b : batch) kv->slot_pos[b.state_slot] = b.first_pos + b.n_tokens;
  }
}

void lfm2_model::forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) {
  if (n <= 0) throw error("forward: need at least one token, got " + std::to_string(n));
  if (!tokens || !logits) throw error("forward: null tokens or logits buffer");
  if (state.n_past < 0 || state.max_tokens <= 0 || n > state.max_tokens - state.n_past) {
    throw error("forward: " + std::to_string(n) + " tokens after " + std::to_string(state.n_past) +
                " would exceed the sequence capacity of " + std::to_string(state.max_tokens) + " tokens");
  }
  const auto* kv = dynamic_cast<const lfm2_kv_cache*>(state.kv.get());
  if (!kv || kv->owner_ != this || kv->n_blocks_ != 1 || kv->block_size_ != state.max_tokens || kv->n_slots_ != 1) {
    throw error("forward: sequence_state was not made by this model's new_sequence()");
  }
  const int32_t block0 = 0;
  batch_sequence b;
  b.tokens = tokens;
  b.n_tokens = (int32_t)n;
  b.first_pos = (int32_t)state.n_past;
  b.block_table = &block0;
  b.n_table = 1;
  b.n_logits = all_logits ? (int32_t)n : 1;
  b.state_slot = 0;
  forward_batch({b}, *state.kv, logits);
  state.n_past += n;
}

}  // namespace spindle
