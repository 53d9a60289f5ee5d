// Test doubles for the engine tests: a character-level tokenizer and a scripted "model" whose logits make a
// chosen next token overwhelmingly likely. They implement the real interfaces (tokenizer, model), so the
// engine, sequence and sampler code under test is the production code.
// Invariant: fake_model::forward enforces the same contract as the real one (capacity, id range).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/argmax.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace engine_test {

using namespace spindle;

// Vocabulary: 0 "<s>" (BOS, control), 1 "</s>" (EOS, control), 2 "<|end|>" (EOG, control), then pieces.
class fake_tokenizer : public tokenizer {
 public:
  explicit fake_tokenizer(std::vector<std::string> pieces) {
    texts_ = {"<s>", "</s>", "<|end|>"};
    for (auto& p : pieces) texts_.push_back(p);
  }
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(0);
    for (char c : text) {
      for (int32_t i = 3; i < n_vocab(); ++i) {
        if (texts_[size_t(i)] == std::string(1, c)) { ids.push_back(i); break; }
      }
    }
    return ids;
  }
  std::string token_to_piece(int32_t id, bool special) const override {
    if (id < 0 || id >= n_vocab()) throw error("token id out of range");
    if (id < 3 && !special) return "";
    return texts_[size_t(id)];
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) s += token_to_piece(id, !skip_special);
    return s;
  }
  int32_t n_vocab() const override { return int32_t(texts_.size()); }
  int32_t bos_id() const override { return 0; }
  int32_t eos_id() const override { return 1; }
  bool add_bos() const override { return true; }
  bool is_eog(int32_t id) const override { return id == 1 || id == 2; }
  const std::vector<int32_t>& eog_ids() const override { return eog_; }
  token_attr attr(int32_t id) const override { return id < 3 ? token_attr::control : token_attr::normal; }
  const std::string& token_text(int32_t id) const override { return texts_[size_t(id)]; }
  int32_t id_of(const std::string& piece) const {
    for (int32_t i = 0; i < n_vocab(); ++i) if (texts_[size_t(i)] == piece) return i;
    throw error("no piece " + piece);
  }

 private:
  std::vector<std::string> texts_;
  std::vector<int32_t> eog_ = {1, 2};
};

// A GGUF image with only metadata (general.architecture, tokenizer.chat_template).
inline std::unique_ptr<gguf_file> metadata_only_gguf(std::vector<uint8_t>& storage, const std::string& tmpl) {
  gguf_test::writer w;
  w.header(3, 0, 2);
  w.kv_str("general.architecture", "fake");
  w.kv_str("tokenizer.chat_template", tmpl);
  storage = w.bytes;
  return gguf_file::from_memory(storage.data(), storage.size(), "fake.gguf");
}

// next(position, last token) picks the token whose logit is 20 (others 0). extra_rows: logit rows past the
// tokenizer's vocabulary (padded embedding tables, as some real models have); next() may point into them.
class fake_model : public model {
 public:
  using next_fn = std::function<int32_t(int64_t position, int32_t last)>;
  fake_model(std::vector<std::string> pieces, next_fn next, int32_t n_ctx_train = 64, int32_t extra_rows = 0)
      : tok_(std::move(pieces)), next_(std::move(next)), file_(metadata_only_gguf(storage_, "{{ messages }}")) {
    hp_.arch = "fake";
    hp_.name = "fake model";
    hp_.n_vocab = tok_.n_vocab() + extra_rows;
    hp_.n_ctx_train = n_ctx_train;
    hp_.n_layer = 1;  // a tiny nominal KV shape, so the engine can size its block pool
    hp_.n_head_kv = 1;
    hp_.head_dim_k = hp_.head_dim_v = 1;
  }
  const model_hparams& hparams() const override { return hp_; }
  const tokenizer& vocab() const override { return tok_; }
  const gguf_file& file() const override { return *file_; }
  const char* device_name() const override { return fake_total ? "fake-gpu" : "cpu"; }
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override {
    *free_bytes = fake_free;
    *total_bytes = fake_total;
    return fake_total > 0;
  }
  uint64_t fake_free = 0, fake_total = 0;  // set fake_total to act as a GPU model with this device memory
  std::unique_ptr<sequence_state> new_sequence(int64_t max_tokens) const override {
    auto s = std::make_unique<sequence_state>();
    s->max_tokens = max_tokens;
    return s;
  }
  void forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool) override {
    forward_calls++;
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    if (fail_at_position >= 0 && state.n_past + n > fail_at_position) throw error("injected forward failure");
    if (state.n_past + n > state.max_tokens) throw error("sequence capacity exceeded");
    for (int64_t i = 0; i < n; ++i) {
      if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab) throw error("token id out of range");
    }
    state.n_past += n;
    for (int32_t i = 0; i < hp_.n_vocab; ++i) logits[i] = 0.0f;
    logits[next_(state.n_past, tokens[n - 1])] = 20.0f;
  }
  struct fake_kv : kv_cache {
    int32_t n = 0, bs = 0;
    int32_t n_blocks() const override { return n; }
    int32_t block_size() const override { return bs; }
  };
  std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size) const override {
    auto kv = std::make_unique<fake_kv>();
    kv->n = n_blocks;
    kv->bs = block_size;
    return kv;
  }
  // Same rule as forward(): each sequence that wants logits gets next(first_pos + n_tokens, last token).
  void forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv, float* logits) override {
    forward_calls++;
    batch_sizes.push_back((int)batch.size());
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    for (const batch_sequence& b : batch) {
      const int64_t end = (int64_t)b.first_pos + b.n_tokens;
      if (fail_at_position >= 0 && end > fail_at_position) throw error("injected forward failure");
      if (end > (int64_t)b.n_table * kv.block_size()) throw error("block table too short");
      for (int32_t i = 0; i < b.n_tokens; ++i) {
        if (b.tokens[i] < 0 || b.tokens[i] >= hp_.n_vocab) throw error("token id out of range");
      }
    }
    for (const batch_sequence& b : batch) {
      for (int32_t r = b.n_tokens - b.n_logits; r < b.n_tokens; ++r) {
        for (int32_t i = 0; i < hp_.n_vocab; ++i) logits[i] = 0.0f;
        logits[next_(b.first_pos + r + 1, b.tokens[r])] = 20.0f;
        const int32_t n_ids = std::min(b.argmax_n, hp_.n_vocab), at = r - (b.n_tokens - b.n_logits);
        if (b.argmax && b.sample) b.argmax[at] = sample_row_host(logits, n_ids, b.sample[at], scratch_), sampled_rows++;
        else if (b.argmax) b.argmax[at] = argmax_first(logits, n_ids);
        logits += hp_.n_vocab;
      }
    }
  }
  const fake_tokenizer& tok() const { return tok_; }
  std::vector<int> batch_sizes;  // sequences per forward_batch call (engine thread only)
  sample_scratch scratch_;       // forward_batch's sampled rows

  std::atomic<int> forward_calls{0};
  std::atomic<int> sampled_rows{0};  // rows whose token forward_batch sampled (batch_sequence::sample)
  int delay_ms = 0;
  int64_t fail_at_position = -1;

 private:
  fake_tokenizer tok_;
  next_fn next_;
  std::vector<uint8_t> storage_;
  std::unique_ptr<gguf_file> file_;
  model_hparams hp_;
};

}  // namespace engine_test
