// dense_model: sequence creation, argument checks, scratch management and the forward pass around the layers
// (embedding lookup -> blocks -> final norm -> output matmul). Invariant: forward() throws before it writes
// anything when the call is invalid; on success n_past advanced by exactly n.
#include "model/dense_model.h"

#include <algorithm>
#include <climits>
#include <string>

#include "common/checked_math.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
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
  const uint64_t per_layer_k = checked_mul((uint64_t)max_tokens, (uint64_t)hp_.n_head_kv * hp_.head_dim_k, "KV cache");
  const uint64_t per_layer_v = checked_mul((uint64_t)max_tokens, (uint64_t)hp_.n_head_kv * hp_.head_dim_v, "KV cache");
  const uint64_t n_k = checked_mul(per_layer_k, (uint64_t)hp_.n_layer, "KV cache");
  const uint64_t n_v = checked_mul(per_layer_v, (uint64_t)hp_.n_layer, "KV cache");
  checked_mul(checked_add(n_k, n_v, "KV cache"), sizeof(float), "KV cache bytes");
  auto s = std::make_unique<sequence_state>();
  s->max_tokens = max_tokens;
  try {
    s->k.assign((size_t)n_k, 0.0f);
    s->v.assign((size_t)n_v, 0.0f);
  } catch (const std::bad_alloc&) {
    throw error("new_sequence: out of memory for a KV cache of " + std::to_string(max_tokens) + " tokens");
  }
  return s;
}

void dense_model::check_call(const sequence_state& s, const int32_t* tokens, int64_t n, const float* logits) const {
  if (n <= 0) throw error("forward: need at least one token, got " + std::to_string(n));
  if (!tokens || !logits) throw error("forward: null tokens or logits buffer");
  if (s.n_past < 0 || s.max_tokens <= 0 || n > s.max_tokens - s.n_past) {
    throw error("forward: " + std::to_string(n) + " tokens after " + std::to_string(s.n_past) +
                " would exceed the sequence capacity of " + std::to_string(s.max_tokens) + " tokens");
  }
  const uint64_t per_token_k = (uint64_t)hp_.n_head_kv * hp_.head_dim_k * hp_.n_layer;
  const uint64_t per_token_v = (uint64_t)hp_.n_head_kv * hp_.head_dim_v * hp_.n_layer;
  if (s.max_tokens > INT32_MAX || s.k.size() != checked_mul((uint64_t)s.max_tokens, per_token_k, "KV cache") ||
      s.v.size() != checked_mul((uint64_t)s.max_tokens, per_token_v, "KV cache")) {
    throw error("forward: sequence_state was not made by this model's new_sequence()");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab) {
      throw error("forward: token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                  " out of range [0, " + std::to_string(hp_.n_vocab) + ")");
    }
  }
}

void dense_model::reserve_scratch(int64_t n) {
  if (n <= scratch_.capacity) return;
  const int64_t q_dim = (int64_t)hp_.n_head * hp_.head_dim_k, o_dim = (int64_t)hp_.n_head * hp_.head_dim_v;
  const auto rows = [&](int64_t width) { return (int64_t)checked_mul((uint64_t)n, (uint64_t)width, "scratch"); };
  dense_scratch s;
  s.capacity = n;
  s.x = backend_buffer(*be_, rows(hp_.n_embd));
  s.cur = backend_buffer(*be_, rows(std::max<int64_t>({hp_.n_embd, q_dim, o_dim})));
  s.q = backend_buffer(*be_, rows(q_dim));
  s.attn = backend_buffer(*be_, rows(o_dim));
  s.gate = backend_buffer(*be_, rows(hp_.n_ff));
  s.up = backend_buffer(*be_, rows(hp_.n_ff));
  s.logits = backend_buffer(*be_, rows(hp_.n_vocab));
  s.pos.resize((size_t)n);
  scratch_ = std::move(s);
}

void dense_model::forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) {
  check_call(state, tokens, n, logits);
  reserve_scratch(n);
  for (int64_t i = 0; i < n; ++i) scratch_.pos[i] = (int32_t)(state.n_past + i);
  be_->get_rows(w_.tok_embd, tokens, n, scratch_.x.data());  // [n, n_embd]
  for (int il = 0; il < hp_.n_layer; ++il) run_layer(il, state, n);

  // only the rows whose logits are wanted go through the final norm and the output matmul
  const int64_t n_out = all_logits ? n : 1;
  const float* last = scratch_.x.data() + (n - n_out) * hp_.n_embd;
  be_->rms_norm(last, w_.output_norm.data(), scratch_.cur.data(), n_out, hp_.n_embd, hp_.rms_eps);
  be_->matmul(w_.output, scratch_.cur.data(), n_out, scratch_.logits.data());  // [n_out, n_vocab]
  if (w_.output_b.data()) be_->add_row_vector(scratch_.logits.data(), w_.output_b.data(), n_out, hp_.n_vocab);
  be_->download(logits, scratch_.logits.data(), n_out * hp_.n_vocab);
  be_->sync();
  state.n_past += n;
}

}  // namespace spindle
