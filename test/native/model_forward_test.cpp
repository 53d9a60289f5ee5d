// model::forward on small random-weight GGUFs against a double-precision reference (model_reference.h), and
// the batch-invariance promise: a token's logits are bitwise the same however the prompt is split into calls
// and whatever the thread count.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "harness.h"
#include "model/model.h"
#include "model_reference.h"
#include "model_test_gguf.h"

using namespace spindle;

namespace {

std::unique_ptr<model_test::loaded_model> load_spec(const model_test::spec& s, const model_test::built& b, int threads) {
  return model_test::load_built(b, s.arch, threads);
}

std::vector<int32_t> some_tokens(int n, int n_vocab) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 37 + 11) % n_vocab);
  t[0] = 1;  // <s>
  return t;
}

std::vector<float> run_all(model& m, const std::vector<int32_t>& tokens, const std::vector<int>& chunks) {
  const int64_t V = m.hparams().n_vocab;
  std::vector<float> out(tokens.size() * V);
  auto seq = m.new_sequence((int64_t)tokens.size());
  size_t at = 0;
  for (int c : chunks) {
    m.forward(*seq, tokens.data() + at, c, out.data() + at * V, true);
    at += c;
  }
  return out;
}

// The logits of `tokens` in one call on `one` (1 thread), checked bitwise equal to `three` (3 threads) in one call and a
// token at a time, and to `one` in `chunks`; returns them.
std::vector<float> invariant_logits(model& one, model& three, const std::vector<int32_t>& tokens, const std::vector<int>& chunks) {
  const std::vector<float> whole = run_all(one, tokens, {(int)tokens.size()});
  CHECK(whole == run_all(three, tokens, {(int)tokens.size()}));
  CHECK(whole == run_all(three, tokens, std::vector<int>(tokens.size(), 1)));
  CHECK(whole == run_all(one, tokens, chunks));
  return whole;
}

// model::forward's logits of n_tokens tokens against the reference; returns max |logit diff| (printed).
double check_against_reference(model_test::spec s, double tol, int n_tokens = 9) {
  const model_test::built b = model_test::build(s);
  auto l = load_spec(s, b, 2);
  const std::vector<int32_t> tokens = some_tokens(n_tokens, b.n_vocab);
  const std::vector<float> ours = run_all(*l->m, tokens, {n_tokens});
  const auto ref = model_test::reference_forward(b, s, tokens);
  double spread = 0;  // logits must not be degenerate for the comparison to mean anything
  for (size_t v = 1; v < ref.back().size(); ++v) spread = std::max(spread, std::fabs(ref.back()[v] - ref.back()[0]));
  CHECK(spread > 0.1);
  const double d = model_test::max_logit_diff(ours, ref);
  std::printf("  %s %s: max |logit diff| %.2e (tol %.0e)\n", s.arch.c_str(),
              ggml_type_info((uint32_t)s.weight_type)->name, d, tol);
  if (!(d <= tol)) harness::fail(__FILE__, __LINE__, s.arch + ": max |logit diff| " + std::to_string(d));
  return d;
}

// gemma3 over 20 tokens (several windows: the specs' are 4 or 5 positions): model::forward vs the reference within
// tol, and the reference with the window ignored at least 100 x tol away from it, so the comparison depends on it.
void check_gemma3(const model_test::spec& s, double tol) {
  check_against_reference(s, tol, 20);
  if (s.sliding_window <= 0) return;
  const model_test::built b = model_test::build(s);
  const std::vector<int32_t> tokens = some_tokens(20, b.n_vocab);
  const auto with = model_test::reference_forward(b, s, tokens);
  const auto without = model_test::reference_forward(b, s, tokens, false);
  double moved = 0;
  for (size_t t = 0; t < with.size(); ++t)
    for (size_t v = 0; v < with[t].size(); ++v) moved = std::max(moved, std::fabs(with[t][v] - without[t][v]));
  std::printf("    the window moves the reference's logits by %.2e\n", moved);
  CHECK(moved > 100 * tol);
}

}  // namespace

TEST_CASE("model forward: llama F32 matches the reference (adjacent-pair rope, GQA)") {
  model_test::spec s;
  check_against_reference(s, 2e-4);
}

TEST_CASE("model forward: qwen2 F32 with q/k/v biases matches the reference (NEOX rope)") {
  model_test::spec s;
  s.arch = "qwen2";
  s.qkv_bias = true;
  s.rope_base = 1000000.0f;
  check_against_reference(s, 2e-4);
}

TEST_CASE("model forward: qwen3 F32 with q/k norm, tied output, MQA matches the reference") {
  model_test::spec s;
  s.arch = "qwen3";
  s.tied = true;
  s.n_head_kv = 1;
  check_against_reference(s, 2e-4);
}

TEST_CASE("model forward: F16 weights match the reference on the rounded weights") {
  model_test::spec s;
  s.weight_type = ggml_type::F16;
  check_against_reference(s, 2e-2);  // activations are rounded to f16 before each dot, as llama.cpp does
}

TEST_CASE("model forward: gemma3 F32 matches the reference (default pattern: 7 of 8 layers slide, window 5, 20 tokens)") {
  check_gemma3(model_test::gemma3_spec(), 2e-4);
}

TEST_CASE("model forward: gemma3 F32 with the pattern as a bool array and rope.freq_base_swa matches the reference") {
  model_test::spec s = model_test::gemma3_spec();
  s.n_layer = 6;
  s.swa_layers = {1, 0, 1, 1, 0, 1};
  s.rope_base_swa = 50000.0f;
  s.sliding_window = 4;
  check_gemma3(s, 2e-4);
}

TEST_CASE("model forward: gemma3 F32 with every layer sliding (pattern 0), and with no window, matches the reference") {
  model_test::spec s = model_test::gemma3_spec();
  s.n_layer = 3;
  s.swa_pattern = 0;
  check_gemma3(s, 2e-4);
  s.sliding_window = 0;  // no attention.sliding_window key: every layer global (rope.freq_base, scaled)
  check_gemma3(s, 2e-4);
}

TEST_CASE("model forward: gemma3 of 62 layers (the 27B's q.k scale, 1 / sqrt(n_embd / n_head)) matches the reference") {
  model_test::spec s = model_test::gemma3_spec();
  s.n_layer = 62;  // head dim 16, n_embd / n_head 8
  check_against_reference(s, 2e-4);
}

TEST_CASE("model forward: gemma3 F16 weights match the reference on the rounded weights") {
  model_test::spec s = model_test::gemma3_spec();
  s.weight_type = ggml_type::F16;
  check_gemma3(s, 2e-2);
}

TEST_CASE("model forward: logits are batch- and thread-invariant (bitwise)") {
  model_test::spec s;
  s.arch = "qwen3";
  const model_test::built b = model_test::build(s);
  auto one = load_spec(s, b, 1);
  auto three = load_spec(s, b, 3);
  const std::vector<int32_t> tokens = some_tokens(12, b.n_vocab);
  const std::vector<float> whole = invariant_logits(*one->m, *three->m, tokens, {5, 2, 4, 1});
  // last-token-only output equals the last row of all_logits
  const int64_t V = b.n_vocab;
  auto seq = three->m->new_sequence(16);
  std::vector<float> last(V);
  three->m->forward(*seq, tokens.data(), 12, last.data(), false);
  CHECK_EQ(seq->n_past, (int64_t)12);
  CHECK(std::memcmp(last.data(), whole.data() + 11 * V, V * sizeof(float)) == 0);
}

TEST_CASE("model forward: invalid calls throw and leave the sequence unchanged") {
  model_test::spec s;
  const model_test::built b = model_test::build(s);
  auto l = load_spec(s, b, 2);
  model& m = *l->m;
  auto seq = m.new_sequence(4);
  std::vector<float> logits(5 * b.n_vocab);
  std::vector<int32_t> bad = {1, b.n_vocab};
  CHECK_THROWS_WITH(m.forward(*seq, bad.data(), 2, logits.data(), true), "out of range");
  bad[1] = -1;
  CHECK_THROWS_WITH(m.forward(*seq, bad.data(), 2, logits.data(), true), "out of range");
  std::vector<int32_t> five = {1, 2, 3, 4, 5};
  CHECK_THROWS_WITH(m.forward(*seq, five.data(), 5, logits.data(), true), "capacity");
  CHECK_THROWS_WITH(m.forward(*seq, five.data(), 0, logits.data(), true), "at least one token");
  CHECK_EQ(seq->n_past, (int64_t)0);
  m.forward(*seq, five.data(), 4, logits.data(), false);
  CHECK_EQ(seq->n_past, (int64_t)4);
  CHECK_THROWS_WITH(m.forward(*seq, five.data(), 1, logits.data(), false), "capacity");
  CHECK_THROWS_WITH(m.new_sequence(0), "max_tokens");
  sequence_state foreign;
  foreign.max_tokens = 4;
  CHECK_THROWS_WITH(m.forward(foreign, five.data(), 1, logits.data(), false), "new_sequence");
}

TEST_CASE("model forward: gemma3 logits are chunk- and thread-invariant across the window (bitwise)") {
  const model_test::spec s = model_test::gemma3_spec();
  const model_test::built b = model_test::build(s);
  auto one = load_spec(s, b, 1);
  auto three = load_spec(s, b, 3);
  const std::vector<int32_t> tokens = some_tokens(20, b.n_vocab);
  const std::vector<float> whole = invariant_logits(*one->m, *three->m, tokens, {5, 2, 4, 1, 8});
  CHECK(whole == run_all(*three->m, tokens, {3, 7, 10}));
}

TEST_CASE("model forward: granite F32 (embedding, attention, residual and logit scales) matches the reference") {
  model_test::spec s;
  s.arch = "granite";
  s.embedding_scale = 12.0f;
  s.residual_scale = 0.22f;
  s.attention_scale = 0.0625f;
  s.logit_scale = 8.0f;
  const double d = check_against_reference(s, 2e-4);
  // without the scalars the reference moves far (the test depends on each)
  const model_test::built b = model_test::build(s);
  const std::vector<int32_t> tokens = some_tokens(12, b.n_vocab);
  const auto with = model_test::reference_forward(b, s, tokens);
  for (float model_test::spec::*field : {&model_test::spec::embedding_scale, &model_test::spec::residual_scale,
                                         &model_test::spec::attention_scale, &model_test::spec::logit_scale}) {
    model_test::spec plain = s;
    plain.*field = 0.0f;
    const auto without = model_test::reference_forward(b, plain, tokens);
    double moved = 0;
    for (size_t t = 0; t < with.size(); ++t)
      for (size_t v = 0; v < with[t].size(); ++v) moved = std::max(moved, std::fabs(with[t][v] - without[t][v]));
    CHECK(moved > 100 * std::max(d, 1e-6));
  }
}

TEST_CASE("model load: granite refuses a missing logit_scale, a bad scalar, rope switched off, FFN biases") {
  model_test::spec s;
  s.arch = "granite";
  CHECK_THROWS_WITH(load_spec(s, model_test::build(s), 1), "missing key 'granite.logit_scale'");
  s.logit_scale = 8.0f;
  s.residual_scale = -1.0f;  // not written (<= 0): a bad value goes in through extra_kvs
  s.extra_kvs = [](gguf_test::writer& w) { w.kv<float>("granite.residual_scale", gguf_value_type::FLOAT32, -0.5f); };
  s.n_extra_kvs = 1;
  CHECK_THROWS_WITH(load_spec(s, model_test::build(s), 1), "'granite.residual_scale' = -0.500000 must be a positive finite number");
  s.extra_kvs = [](gguf_test::writer& w) { w.kv<uint8_t>("granite.rope.scaling.finetuned", gguf_value_type::BOOL, 0); };
  CHECK_THROWS_WITH(load_spec(s, model_test::build(s), 1), "a granite model without rope is not supported");
  s.extra_kvs = nullptr;
  s.n_extra_kvs = 0;
  s.edit_tensors = [&](std::vector<gguf_test::tensor_spec>& t) { t.push_back({"blk.1.ffn_down.bias", {s.n_embd}, ggml_type::F32}); };
  CHECK_THROWS_WITH(load_spec(s, model_test::build(s), 1), "tensor 'blk.1.ffn_down.bias': FFN biases are not supported");
}
