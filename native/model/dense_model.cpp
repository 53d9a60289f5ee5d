// dense_model: KV caches, argument checks, scratch management and the batched forward pass around the layers
// (embedding lookup -> blocks -> final norm -> output matmul on the rows that want logits). Invariant:
// forward_batch() / forward() throw before they write anything when the call is invalid; on success forward()
// advanced n_past by exactly n.
#include "model/dense_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "common/checked_math.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/batch_rows.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

dense_model::dense_model(std::unique_ptr<gguf_file> file, std::unique_ptr<tokenizer> vocab,
                         std::unique_ptr<backend> be, model_hparams hp, dense_weights weights)
    : file_(std::move(file)), vocab_(std::move(vocab)), be_(std::move(be)), hp_(std::move(hp)), w_(std::move(weights)) {}

dense_model::~dense_model() = default;

std::unique_ptr<sequence_state> dense_model::new_sequence(int64_t max_tokens) const {
  if (max_tokens <= 0 || max_tokens > INT32_MAX) {
    throw error("new_sequence: max_tokens must be in [1, 2^31 - 1], got " + std::to_string(max_tokens));
  }
  auto s = std::make_unique<sequence_state>();
  s->max_tokens = max_tokens;
  s->kv = new_kv_cache(1, (int32_t)max_tokens);  // one block: rows are positions
  return s;
}

std::unique_ptr<kv_cache> dense_model::new_kv_cache(int32_t n_blocks, int32_t block_size) const {
  if (n_blocks <= 0 || block_size <= 0) {
    throw error("new_kv_cache: n_blocks and block_size must be positive, got " + std::to_string(n_blocks) +
                " and " + std::to_string(block_size));
  }
  const uint64_t rows = checked_mul((uint64_t)n_blocks, (uint64_t)block_size, "KV cache");
  const uint64_t n_k = checked_mul(rows, (uint64_t)hp_.n_head_kv * hp_.head_dim_k, "KV cache");
  const uint64_t n_v = checked_mul(rows, (uint64_t)hp_.n_head_kv * hp_.head_dim_v, "KV cache");
  const uint64_t total = checked_mul(checked_add(n_k, n_v, "KV cache"), (uint64_t)hp_.n_layer, "KV cache");
  checked_mul(total, sizeof(float), "KV cache bytes");
  if (n_k > (uint64_t)INT64_MAX || n_v > (uint64_t)INT64_MAX) throw error("new_kv_cache: KV cache too large");
  auto kv = std::make_unique<dense_kv_cache>();
  kv->n_blocks_ = n_blocks;
  kv->block_size_ = block_size;
  kv->owner_ = this;
  for (int il = 0; il < hp_.n_layer; ++il) {
    // [n_blocks * block_size, n_head_kv * head_dim_k] and _v elements of kv_dtype()
    kv->k.emplace_back(*be_, kv_store_floats(kv_dtype(), (int64_t)n_k));
    kv->v.emplace_back(*be_, kv_store_floats(kv_dtype(), (int64_t)n_v));
  }
  return kv;
}

void dense_model::check_call(const sequence_state& s, const int32_t* tokens, int64_t n, const float* logits) const {
  if (n <= 0) throw error("forward: need at least one token, got " + std::to_string(n));
  if (!tokens || !logits) throw error("forward: null tokens or logits buffer");
  if (s.n_past < 0 || s.max_tokens <= 0 || n > s.max_tokens - s.n_past) {
    throw error("forward: " + std::to_string(n) + " tokens after " + std::to_string(s.n_past) +
                " would exceed the sequence capacity of " + std::to_string(s.max_tokens) + " tokens");
  }
  const auto* kv = dynamic_cast<const dense_kv_cache*>(s.kv.get());
  if (!kv || kv->owner_ != this || kv->n_blocks_ != 1 || kv->block_size_ != s.max_tokens) {
    throw error("forward: sequence_state was not made by this model's new_sequence()");
  }
}

int64_t dense_model::check_batch(const std::vector<batch_sequence>& batch, const dense_kv_cache& kv) const {
  if (kv.owner_ != this) throw error("forward_batch: kv_cache was not made by this model's new_kv_cache()");
  return check_batch_sequences(batch, kv.n_blocks_, kv.block_size_, hp_.n_vocab);
}

void dense_model::reserve_scratch(int64_t n) {
  if (n <= scratch_.capacity) return;
  const int64_t q_dim = (int64_t)hp_.n_head * hp_.head_dim_k, o_dim = (int64_t)hp_.n_head * hp_.head_dim_v;
  const int64_t k_dim = (int64_t)hp_.n_head_kv * hp_.head_dim_k, v_dim = (int64_t)hp_.n_head_kv * hp_.head_dim_v;
  const auto rows = [&](int64_t width) { return (int64_t)checked_mul((uint64_t)n, (uint64_t)width, "scratch"); };
  scratch_ = dense_scratch();  // free the old buffers first
  dense_scratch s;
  s.capacity = n;
  s.x = backend_buffer(*be_, rows(hp_.n_embd));
  s.cur = backend_buffer(*be_, rows(std::max<int64_t>({hp_.n_embd, q_dim, o_dim})));
  s.q = backend_buffer(*be_, rows(q_dim));
  s.k = backend_buffer(*be_, rows(k_dim));
  s.v = backend_buffer(*be_, rows(v_dim));
  s.attn = backend_buffer(*be_, rows(o_dim));
  const int64_t n_ff = w_.moe.n_expert > 0 ? 0 : hp_.n_ff;  // MoE layers use moe_ffn's own scratch
  s.gate = backend_buffer(*be_, rows(n_ff));
  s.up = backend_buffer(*be_, rows(n_ff));
  s.pos.resize((size_t)n);
  if (hp_.embd_scale != 0.0f) s.embd_scale.assign((size_t)n, hp_.embd_scale);
  if (hp_.residual_scale != 0.0f) s.residual_scale.assign((size_t)n, hp_.residual_scale);
  s.tokens.resize((size_t)n);
  s.n_embd = hp_.n_embd;
  s.kv_rows.resize((size_t)n);
  scratch_ = std::move(s);
}

void dense_model::forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv_base, float* logits) {
  auto* kv = dynamic_cast<dense_kv_cache*>(&kv_base);
  if (!kv) throw error("forward_batch: kv_cache was not made by this model's new_kv_cache()");
  const int64_t n = check_batch(batch, *kv);
  check_logits_buffer(batch, logits);
  reserve_scratch(n);
  fill_batch_rows(batch, kv->block_size_, scratch_);
  scratch_.lora.set(batch);
  // MoE layers: a step graph only where every MoE layer stays on the device (else routing comes back mid-layer).
  step_graph_scope graph(*be_, moe_step_graph_key(step_graph_key(batch, n, scratch_), moe_, *be_, w_.moe, w_.layers,
                                                  [](const dense_layer& l) -> const moe_layer_weights& { return l.moe; },
                                                  n, hp_.n_embd));
  batch_input_rows(*be_, w_.tok_embd, scratch_, n, hp_.embd_scale != 0.0f ? scratch_.embd_scale.data() : nullptr);
  for (int il = 0; il < hp_.n_layer; ++il) run_layer(il, batch, *kv, n);
  if (hp_.n_layer > 0) be_->add(scratch_.cur.data(), scratch_.x.data(), scratch_.x.data(), n * hp_.n_embd);  // last FFN
  batch_output_logits(*be_, batch, scratch_, hp_, w_.output_norm, w_.output, &w_.output_b, logits, graph);
  be_->sync();
}

std::vector<lora_target> dense_model::lora_targets() const {
  std::vector<lora_target> out;
  for (size_t il = 0; il < w_.layers.size(); ++il) add_dense_lora_targets(out, w_.layers[il], int(il));
  if (w_.output.data != w_.tok_embd.data) out.push_back({"output.weight", &w_.output});  // not when tied
  return out;
}

void dense_model::forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) {
  check_call(state, tokens, n, logits);
  const int32_t block0 = 0;
  batch_sequence b;
  b.tokens = tokens;
  b.n_tokens = (int32_t)n;
  b.first_pos = (int32_t)state.n_past;
  b.block_table = &block0;
  b.n_table = 1;
  b.n_logits = all_logits ? (int32_t)n : 1;
  forward_batch({b}, *state.kv, logits);
  state.n_past += n;
}

}  // namespace spindle
