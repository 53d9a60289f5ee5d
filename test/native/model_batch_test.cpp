// model::forward_batch: several sequences in one call (prefill chunks and decodes mixed) give bitwise the
// logits of each sequence run alone through forward(); scattered block tables equal contiguous ones; bad
// batches throw.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/argmax.h"
#include "harness.h"
#include "model/model.h"
#include "model_test_gguf.h"

using namespace spindle;

namespace {

// head_dim: 0 keeps the fixture's (8; gemma3's 16); a q8_0 cache needs whole blocks of 32 (n_embd = 4 heads x
// head_dim; gemma3: key_length). gemma3: model_test::gemma3_spec (window 5 on 7 of 8 layers).
std::unique_ptr<model_test::loaded_model> load_arch(const std::string& arch, ggml_type type, kv_type kv = kv_type::f32,
                                        int head_dim = 0) {
  model_test::spec s = arch == "gemma3" ? model_test::gemma3_spec() : model_test::spec{};
  s.arch = arch;
  s.weight_type = type;
  if (head_dim > 0 && arch == "gemma3") s.head_dim = head_dim;
  else if (head_dim > 0) s.n_embd = s.n_head * head_dim;
  return model_test::load_built(model_test::build(s), s.arch + "-batch", 2, kv);
}

std::vector<int32_t> seq_tokens(int n, int n_vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 31 + salt * 7 + 3) % n_vocab);
  return t;
}

// Logits of every token of `tokens`, forwarded alone in chunks of `chunk`.   [n, n_vocab]
std::vector<float> alone(model& m, const std::vector<int32_t>& tokens) {
  const int64_t V = m.hparams().n_vocab;
  std::vector<float> out(tokens.size() * V);
  auto st = m.new_sequence((int64_t)tokens.size());
  m.forward(*st, tokens.data(), (int64_t)tokens.size(), out.data(), true);
  return out;
}

// Runs the sequences through forward_batch in steps: step s forwards tokens [s*k, (s+1)*k) of every sequence
// still having tokens (k = chunk), each with all logits; block tables from `tables`.
std::vector<std::vector<float>> batched(model& m, kv_cache& kv, const std::vector<std::vector<int32_t>>& seqs,
                                        const std::vector<std::vector<int32_t>>& tables, int chunk) {
  const int64_t V = m.hparams().n_vocab;
  std::vector<std::vector<float>> out(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) out[i].resize(seqs[i].size() * V);
  for (int first = 0;; first += chunk) {
    std::vector<batch_sequence> batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (first >= (int)seqs[i].size()) continue;
      batch_sequence b;
      b.tokens = seqs[i].data() + first;
      b.n_tokens = std::min<int>(chunk, (int)seqs[i].size() - first);
      b.first_pos = first;
      b.block_table = tables[i].data();
      b.n_table = (int32_t)tables[i].size();
      b.n_logits = b.n_tokens;
      batch.push_back(b);
      who.push_back(i);
    }
    if (batch.empty()) break;
    int64_t rows = 0;
    for (const batch_sequence& b : batch) rows += b.n_logits;
    std::vector<float> logits(rows * V);
    m.forward_batch(batch, kv, logits.data());
    const float* p = logits.data();
    for (size_t j = 0; j < batch.size(); ++j) {
      std::memcpy(out[who[j]].data() + (int64_t)first * V, p, batch[j].n_tokens * V * sizeof(float));
      p += batch[j].n_tokens * V;
    }
  }
  return out;
}

// A cache type's logits against the f32 cache's, 40 tokens each alone: max |dlogit| and the f32 logits' scale
// (max |logit|), printed.
struct logit_drift {
  double d, scale;
};
logit_drift drift_from_f32(model& typed, model& f32, const char* what) {
  const auto toks = seq_tokens(40, typed.hparams().n_vocab, 9);
  const auto a = alone(typed, toks), b = alone(f32, toks);
  logit_drift r{0, 0};
  for (size_t i = 0; i < a.size(); ++i) {
    r.d = std::max(r.d, (double)std::fabs(a[i] - b[i]));
    r.scale = std::max(r.scale, (double)std::fabs(b[i]));
  }
  std::printf("  kv %s: max |dlogit| %.3g of logit scale %.3g\n", what, r.d, r.scale);
  return r;
}

void check_batch_equals_alone(const std::string& arch, ggml_type type, kv_type kv = kv_type::f32, int head_dim = 0) {
  auto l = load_arch(arch, type, kv, head_dim);
  model& m = *l->m;
  CHECK(m.kv_dtype() == kv);
  const int V = m.hparams().n_vocab;
  const std::vector<std::vector<int32_t>> seqs = {seq_tokens(13, V, 1), seq_tokens(3, V, 2), seq_tokens(9, V, 3),
                                                  seq_tokens(1, V, 4)};
  // block size 4: contiguous tables, then scattered ones over the same 16 blocks
  const std::vector<std::vector<int32_t>> contiguous = {{0, 1, 2, 3}, {4}, {5, 6, 7}, {8}};
  const std::vector<std::vector<int32_t>> scattered = {{15, 2, 9, 4}, {11}, {0, 13, 6}, {7}};
  for (int chunk : {64, 1, 5}) {
    auto kv1 = m.new_kv_cache(16, 4);
    auto kv2 = m.new_kv_cache(16, 4);
    const auto a = batched(m, *kv1, seqs, contiguous, chunk);
    const auto b = batched(m, *kv2, seqs, scattered, chunk);
    for (size_t i = 0; i < seqs.size(); ++i) {
      CHECK(a[i] == alone(m, seqs[i]));
      CHECK(a[i] == b[i]);
    }
  }
}

}  // namespace

TEST_CASE("model forward_batch: mixed sequences equal each alone, bitwise (llama F32, qwen2 F16, gemma3 F32 / F16)") {
  check_batch_equals_alone("llama", ggml_type::F32);
  check_batch_equals_alone("qwen2", ggml_type::F16);
  // gemma3: windows of 5 over sequences of up to 13 tokens in blocks of 4: the window's start moves through blocks
  check_batch_equals_alone("gemma3", ggml_type::F32);
  check_batch_equals_alone("gemma3", ggml_type::F16);
}

TEST_CASE("model forward_batch: last-token logits only, and decode steps after a prefill") {
  auto l = load_arch("qwen3", ggml_type::F32);
  model& m = *l->m;
  const int V = m.hparams().n_vocab;
  const auto t0 = seq_tokens(10, V, 5), t1 = seq_tokens(6, V, 6);
  const auto w0 = alone(m, t0), w1 = alone(m, t1);
  auto kv = m.new_kv_cache(8, 2);
  const std::vector<int32_t> tab0 = {3, 0, 7, 1, 5}, tab1 = {2, 6, 4};
  // step 1: t0[0..8) (logits of the last), t1[0..6) (none); step 2: t1[5] rewritten in its slot (as a
  // recompute would), then t0[8..10), each with last-token logits, in the other order
  std::vector<float> lg(V);
  batch_sequence a{t0.data(), 8, 0, tab0.data(), 5, 1}, b{t1.data(), 6, 0, tab1.data(), 3, 0};
  m.forward_batch({a, b}, *kv, lg.data());
  CHECK(std::memcmp(lg.data(), w0.data() + 7 * V, V * sizeof(float)) == 0);
  std::vector<float> lg2(2 * V);
  batch_sequence a2{t0.data() + 8, 2, 8, tab0.data(), 5, 1};
  batch_sequence b2{t1.data() + 5, 1, 5, tab1.data(), 3, 1};  // recompute of the last prompt token's slot
  m.forward_batch({b2, a2}, *kv, lg2.data());
  CHECK(std::memcmp(lg2.data(), w1.data() + 5 * V, V * sizeof(float)) == 0);
  CHECK(std::memcmp(lg2.data() + V, w0.data() + 9 * V, V * sizeof(float)) == 0);
}

TEST_CASE("model forward_batch: greedy rows give the argmax ids of the logits they would have written") {
  for (const char* arch : {"llama", "qwen3"}) {  // lfm2 writes its rows through the same batch_output_logits
    auto l = load_arch(arch, ggml_type::F16);
    model& m = *l->m;
    const int V = m.hparams().n_vocab;
    const auto t0 = seq_tokens(9, V, 11), t1 = seq_tokens(5, V, 12), t2 = seq_tokens(7, V, 13);
    const std::vector<int32_t> tab0 = {0, 1, 2}, tab1 = {3, 4}, tab2 = {5, 6};
    auto logits_of = [&](bool greedy, std::vector<int32_t>& ids) {  // t0: all 9 rows, t1: none, t2: the last
      auto kv = m.new_kv_cache(8, 4, 3);
      batch_sequence a{t0.data(), 9, 0, tab0.data(), 3, 9, 0}, b{t1.data(), 5, 0, tab1.data(), 2, 0, 1},
          c{t2.data(), 7, 0, tab2.data(), 2, 1, 2};
      ids.assign(10, -1);
      if (greedy) {  // rows of a and c: ids (the last 3 of them only for a: argmax_n < n_vocab)
        a.argmax = ids.data();
        a.argmax_n = V;
        c.argmax = ids.data() + 9;
        c.argmax_n = V - 3;
      }
      std::vector<float> lg(10 * (size_t)V, 0.0f);
      m.forward_batch({a, b, c}, *kv, lg.data());
      return lg;
    };
    std::vector<int32_t> none, ids;
    const std::vector<float> full = logits_of(false, none);
    logits_of(true, ids);
    bool same = true;
    for (int r = 0; r < 10; ++r) same = same && ids[r] == argmax_first(full.data() + (size_t)r * V, r < 9 ? V : V - 3);
    CHECK(same);
  }
}

TEST_CASE("model forward_batch: greedy runs around a sampled sequence: every greedy row's id, the sampled row's logits in place") {
  auto l = load_arch("llama", ggml_type::F16);
  model& m = *l->m;
  const int V = m.hparams().n_vocab;
  std::vector<std::vector<int32_t>> toks, tabs;
  for (int s = 0; s < 5; ++s) {
    toks.push_back(seq_tokens(3 + s, V, 20 + s));
    tabs.push_back({2 * s, 2 * s + 1});
  }
  const int32_t n_logits[5] = {2, 1, 1, 1, 1};  // rows 0-1, 2, 3, 4, 5
  auto run = [&](bool greedy, std::vector<int32_t>& ids) {
    auto kv = m.new_kv_cache(10, 4, 5);
    std::vector<batch_sequence> batch;
    ids.assign(6, -1);
    int row = 0;
    for (int s = 0; s < 5; ++s) {
      batch_sequence b{toks[(size_t)s].data(), 3 + s, 0, tabs[(size_t)s].data(), 2, n_logits[s], s};
      if (greedy && s != 2) {  // sequence 2 samples (its row is written), the others are greedy: runs {0, 1}, {3, 4}
        b.argmax = ids.data() + row;
        b.argmax_n = V;
      }
      row += n_logits[s];
      batch.push_back(b);
    }
    std::vector<float> lg(6 * (size_t)V, 0.0f);
    m.forward_batch(batch, *kv, lg.data());
    return lg;
  };
  std::vector<int32_t> none, ids;
  const std::vector<float> full = run(false, none), mixed = run(true, ids);
  bool same = true;
  for (int r = 0; r < 6; ++r)
    if (r != 3) same = same && ids[(size_t)r] == argmax_first(full.data() + (size_t)r * V, V);
  CHECK(same);
  CHECK(ids[3] == -1);  // the sampled row's id slot is untouched
  CHECK(std::memcmp(mixed.data() + 3 * (size_t)V, full.data() + 3 * (size_t)V, V * sizeof(float)) == 0);
}

TEST_CASE("model forward_batch: invalid batches throw") {
  auto l = load_arch("llama", ggml_type::F32);
  model& m = *l->m;
  const int V = m.hparams().n_vocab;
  auto kv = m.new_kv_cache(4, 4);
  std::vector<float> lg(V);
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5}, tab = {0, 1}, bad_tab = {0, 4};
  CHECK_THROWS_WITH(m.forward_batch({}, *kv, lg.data()), "empty");
  CHECK_THROWS_WITH(m.forward_batch({batch_sequence{toks.data(), 5, 4, tab.data(), 2, 1}}, *kv, lg.data()),
                    "does not cover");
  CHECK_THROWS_WITH(m.forward_batch({batch_sequence{toks.data(), 5, 0, bad_tab.data(), 2, 1}}, *kv, lg.data()),
                    "out of range");
  const std::vector<int32_t> bad_tok = {1, V};
  CHECK_THROWS_WITH(m.forward_batch({batch_sequence{bad_tok.data(), 2, 0, tab.data(), 2, 1}}, *kv, lg.data()),
                    "out of range");
  CHECK_THROWS_WITH(m.forward_batch({batch_sequence{toks.data(), 2, 0, tab.data(), 2, 3}}, *kv, lg.data()),
                    "n_logits");
  CHECK_THROWS_WITH(m.forward_batch({batch_sequence{toks.data(), 2, 0, tab.data(), 2, 1}}, *kv, nullptr),
                    "null logits");
  CHECK_THROWS_WITH(m.new_kv_cache(0, 16), "positive");
}

// Embeddings: a sequence with hidden rows gets the output-normed hidden states its logits come from (output
// matrix times each row = its logits, F32 weights, double reference), the other sequences' logits keep their rows
// and bits, and hidden rows are the same batched or alone.
TEST_CASE("model forward_batch: hidden rows are the states the logits come from; the other rows keep their bits") {
  model_test::spec s;
  s.arch = "llama";
  const model_test::built built = model_test::build(s);
  const std::string path = model_test::write_temp(built, "llama-hidden");
  model_options o;
  o.threads = 2;
  auto m = model::load(path, o);
  std::error_code ec;
  const int V = m->hparams().n_vocab, E = m->hparams().n_embd;
  const auto t0 = seq_tokens(7, V, 8), t1 = seq_tokens(5, V, 9);
  const auto w0 = alone(*m, t0), w1 = alone(*m, t1);
  const std::vector<int32_t> tab0 = {0, 1}, tab1 = {2, 3};
  std::vector<float> first;  // the hidden rows alone
  for (bool with_other : {false, true}) {
    auto kv = m->new_kv_cache(4, 4);
    std::vector<float> hidden(7 * E, NAN), lg(V, NAN);
    batch_sequence h{t0.data(), 7, 0, tab0.data(), 2, 7};  // all 7 rows as hidden states
    h.hidden = hidden.data();
    batch_sequence g{t1.data(), 5, 0, tab1.data(), 2, 1};  // the last row's logits
    std::vector<batch_sequence> batch = {h};
    if (with_other) batch = {g, h};
    m->forward_batch(batch, *kv, with_other ? lg.data() : nullptr);
    if (with_other) CHECK(std::memcmp(lg.data(), w1.data() + 4 * V, V * sizeof(float)) == 0);
    const std::vector<float>& out = built.tensors.at("output.weight").host;  // [V rows of E]
    double worst = 0;
    for (int t = 0; t < 7; ++t)
      for (int v = 0; v < V; ++v) {
        double dot = 0;
        for (int i = 0; i < E; ++i) dot += (double)out[(size_t)v * E + i] * hidden[(size_t)t * E + i];
        worst = std::max(worst, std::fabs(dot - w0[(size_t)t * V + v]));
      }
    CHECK(worst < 1e-4);
    if (!with_other) first = hidden;
    else CHECK(first == hidden);
  }
  std::filesystem::remove(path, ec);
}

TEST_CASE("model forward_batch: 16-bit KV caches (f16, bf16) keep batch invariance, near the f32 cache's logits") {
  for (kv_type kv : {kv_type::f16, kv_type::bf16}) {
    check_batch_equals_alone("llama", ggml_type::F32, kv);
    check_batch_equals_alone("qwen2", ggml_type::F16, kv);
    check_batch_equals_alone("gemma3", ggml_type::F32, kv);
    auto l16 = load_arch("llama", ggml_type::F32, kv);
    auto l32 = load_arch("llama", ggml_type::F32);
    CHECK(l16->m->kv_dtype() == kv);
    CHECK(l32->m->kv_dtype() == kv_type::f32);
    model_options auto_kv;  // --dtype auto: float16 on the CPU
    auto_kv.threads = 1;
    auto_kv.kv_auto = true;
    CHECK(model::load(l16->path, auto_kv)->kv_dtype() == kv_type::f16);
    const logit_drift r = drift_from_f32(*l16->m, *l32->m, kv == kv_type::f16 ? "f16" : "bf16");
    // K / V rounded to 2^-11 (f16) / 2^-8 (bf16) relative: the logits move by about that much of their scale
    CHECK(r.d < (kv == kv_type::f16 ? 2e-3 : 2e-2) * r.scale);
    CHECK(r.d > 0);  // the cache really is 16-bit
  }
}

TEST_CASE("model forward_batch: q8_0 and q4_0 KV caches keep batch invariance, near the f32 cache's logits; other head dims get float16") {
  // q8_0: each K / V value within half a step (amax / 254) of its block, about bf16's relative error; q4_0: within a
  // step (|max| / 8), 16x that: the fixture measured 0.011 / 0.18 of the logit scale, held to 2e-2 / twice that
  for (const auto& [kv, tol] : {std::pair{kv_type::q8_0, 2e-2}, std::pair{kv_type::q4_0, 0.36}}) {
    check_batch_equals_alone("llama", ggml_type::F32, kv, 32);
    check_batch_equals_alone("qwen2", ggml_type::F16, kv, 64);
    check_batch_equals_alone("gemma3", ggml_type::F32, kv, 32);
    auto typed = load_arch("llama", ggml_type::F32, kv, 32);
    auto f32 = load_arch("llama", ggml_type::F32, kv_type::f32, 32);
    CHECK(typed->m->kv_dtype() == kv);
    const logit_drift r = drift_from_f32(*typed->m, *f32->m, kv_type_name(kv));
    CHECK(r.d < tol * r.scale);
    CHECK(r.d > 0);  // the cache really is quantized
    CHECK(load_arch("llama", ggml_type::F32, kv)->m->kv_dtype() == kv_type::f16);  // head dim 8
    CHECK(load_arch("llama", ggml_type::F32, kv, 48)->m->kv_dtype() == kv_type::f16);
  }
}

TEST_CASE("model forward_batch: fp8 KV caches (e4m3, e5m2) keep batch invariance, near the f32 cache's logits") {
  for (kv_type kv : {kv_type::fp8_e4m3, kv_type::fp8_e5m2}) {
    check_batch_equals_alone("llama", ggml_type::F32, kv);
    check_batch_equals_alone("qwen2", ggml_type::F16, kv);
    check_batch_equals_alone("gemma3", ggml_type::F32, kv);
    auto l8 = load_arch("llama", ggml_type::F32, kv);
    auto l32 = load_arch("llama", ggml_type::F32);
    CHECK(l8->m->kv_dtype() == kv);
    const logit_drift r = drift_from_f32(*l8->m, *l32->m, kv_type_name(kv));
    // K / V rounded to 4 (e4m3) / 3 (e5m2) significant bits: half steps of 2^-4 / 2^-3 relative, 32x / 64x bf16's;
    // the fixture measured 0.079 / 0.32 of the logit scale (bf16 0.0066), held to twice that
    CHECK(r.d < (kv == kv_type::fp8_e4m3 ? 0.16 : 0.64) * r.scale);
    CHECK(r.d > 0);  // the cache really is 8-bit
  }
}
