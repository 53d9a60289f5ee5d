// LoRA adapters (model/lora.h): a model with an adapter against the double-precision reference over the merged
// weights W + scale * B A; adapters mixed in one batch (each row exactly as alone); load errors; the engine's
// adapter choice per request and its prefix-cache namespaces.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine_outputs.h"
#include "harness.h"
#include "lfm2_test_gguf.h"
#include "model/lora.h"
#include "model/model.h"
#include "model_reference.h"
#include "lora_test_gguf.h"
#include "model_test_gguf.h"
#include "moe_test_gguf.h"

using namespace spindle;

namespace {

using lora_test::adapter_spec;
using lora_test::build_adapter;

struct temp_file {
  std::string path;
  explicit temp_file(const model_test::built& b, const std::string& tag) : path(model_test::write_temp(b, tag)) {}
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// base with every adapted W replaced by W + scale * B A (scale = user_scale * alpha / rank), for the reference.
model_test::built merged(const model_test::built& base, const model_test::built& adapter, const adapter_spec& a,
                         float user_scale) {
  model_test::built m = base;
  const double scale = double(user_scale) * a.alpha / a.rank;
  for (const std::string& name : a.targets) {
    model_test::tensor_data& w = m.tensors.at(name);
    const model_test::tensor_data &A = adapter.tensors.at(name + ".lora_a"), &B = adapter.tensors.at(name + ".lora_b");
    const int64_t n_in = w.ne[0], n_out = w.ne[1];
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t i = 0; i < n_in; ++i) {
        double d = 0;
        for (int r = 0; r < a.rank; ++r) d += double(B.host[size_t(o * a.rank + r)]) * A.host[size_t(r * n_in + i)];
        w.host[size_t(o * n_in + i)] = float(w.host[size_t(o * n_in + i)] + scale * d);
      }
  }
  return m;
}

std::vector<std::string> all_targets(int n_layer) {
  std::vector<std::string> t = {"output.weight"};
  for (int il = 0; il < n_layer; ++il) {
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      t.push_back("blk." + std::to_string(il) + "." + n + ".weight");
    }
  }
  return t;
}

std::vector<int32_t> some_tokens(int n, int n_vocab, int salt = 0) {
  std::vector<int32_t> t((size_t)n);
  for (int i = 0; i < n; ++i) t[(size_t)i] = (int32_t)((i * 37 + 11 + salt * 5) % n_vocab);
  t[0] = 1;
  return t;
}

// All logits rows of `tokens` as one sequence, with the adapter (or none).
std::vector<float> logits_of(model& m, const std::vector<int32_t>& tokens, const lora_adapter* lora) {
  const int64_t V = m.hparams().n_vocab, n = (int64_t)tokens.size();
  auto kv = m.new_kv_cache(1, (int32_t)n, 1);  // one state slot (lfm2)
  const std::vector<int32_t> table = {0};
  std::vector<float> logits((size_t)(n * V));
  batch_sequence b{tokens.data(), (int32_t)n, 0, table.data(), 1, (int32_t)n};
  b.state_slot = 0;
  b.lora = lora;
  m.forward_batch({b}, *kv, logits.data());
  return logits;
}

std::unique_ptr<model> load(const std::string& path) {
  model_options o;
  o.threads = 2;
  return model::load(path, o);
}

}  // namespace

TEST_CASE("lora: a model with an adapter computes the merged weights W + scale * B A (llama, qwen2, qwen3)") {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    model_test::spec s;
    s.arch = arch;
    s.qkv_bias = std::string(arch) == "qwen2";  // the delta goes before the bias, as llama.cpp adds it
    const model_test::built base = model_test::build(s);
    adapter_spec a;
    a.arch = arch;
    a.targets = all_targets(s.n_layer);
    const model_test::built ad = build_adapter(base, a);
    temp_file base_file(base, "lora-base"), ad_file(ad, "lora-adapter");
    auto m = load(base_file.path);
    const std::vector<int32_t> tokens = some_tokens(9, base.n_vocab);
    for (float user_scale : {1.0f, 0.5f}) {
      std::shared_ptr<lora_adapter> lora = m->load_lora(ad_file.path, user_scale);
      CHECK(lora->n_pairs() == a.targets.size());
      const double with = model_test::max_logit_diff(logits_of(*m, tokens, lora.get()), model_test::reference_forward(merged(base, ad, a, user_scale), s, tokens));
      CHECK_NEAR(with, 0.0, 2e-3);
    }
    // the adapter changes the logits (the check above is not vacuous), and no adapter is the base model
    const double base_vs_merged = model_test::max_logit_diff(logits_of(*m, tokens, nullptr), model_test::reference_forward(merged(base, ad, a, 1), s, tokens));
    CHECK(base_vs_merged > 0.05);
    CHECK(model_test::max_logit_diff(logits_of(*m, tokens, nullptr), model_test::reference_forward(base, s, tokens)) < 2e-3);
  }
}

TEST_CASE("lora: alpha 0 means scale = the user scale; an adapter of some weights leaves the others alone") {
  model_test::spec s;
  const model_test::built base = model_test::build(s);
  adapter_spec a;
  a.alpha = 0;
  a.targets = {"blk.1.attn_v.weight", "blk.0.ffn_down.weight"};
  const model_test::built ad = build_adapter(base, a);
  temp_file base_file(base, "lora-base"), ad_file(ad, "lora-adapter");
  auto m = load(base_file.path);
  auto lora = m->load_lora(ad_file.path, 0.75f);
  adapter_spec as_if = a;
  as_if.alpha = float(a.rank);  // user_scale * alpha / rank == user_scale
  const std::vector<int32_t> tokens = some_tokens(7, base.n_vocab);
  CHECK(model_test::max_logit_diff(logits_of(*m, tokens, lora.get()), model_test::reference_forward(merged(base, ad, as_if, 0.75f), s, tokens)) < 2e-3);
}

TEST_CASE("lora: adapters mixed in one batch give every sequence exactly its logits alone") {
  model_test::spec s;
  const model_test::built base = model_test::build(s);
  adapter_spec a1, a2;
  a1.targets = all_targets(s.n_layer);
  a2.targets = {"blk.0.attn_q.weight", "blk.1.ffn_up.weight"};
  a2.seed = 21;
  const model_test::built ad1 = build_adapter(base, a1), ad2 = build_adapter(base, a2);
  temp_file base_file(base, "lora-base"), f1(ad1, "lora-a1"), f2(ad2, "lora-a2");
  auto m = load(base_file.path);
  auto l1 = m->load_lora(f1.path, 1), l2 = m->load_lora(f2.path, 1);
  const int64_t V = base.n_vocab;
  // four sequences: a1, none, a1, a2 (the two a1 rows are not adjacent: separate runs)
  std::vector<std::vector<int32_t>> toks = {some_tokens(5, V, 1), some_tokens(3, V, 2), some_tokens(4, V, 3), some_tokens(6, V, 4)};
  const lora_adapter* adapters[4] = {l1.get(), nullptr, l1.get(), l2.get()};
  auto kv = m->new_kv_cache(4, 16);
  std::vector<int32_t> tables[4] = {{0}, {1}, {2}, {3}};
  std::vector<batch_sequence> batch;
  int64_t rows = 0;
  for (int i = 0; i < 4; ++i) {
    batch_sequence b{toks[i].data(), (int32_t)toks[i].size(), 0, tables[i].data(), 1, (int32_t)toks[i].size()};
    b.lora = adapters[i];
    batch.push_back(b);
    rows += (int64_t)toks[i].size();
  }
  std::vector<float> all((size_t)(rows * V));
  m->forward_batch(batch, *kv, all.data());
  int64_t at = 0;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> alone = logits_of(*m, toks[i], adapters[i]);
    CHECK(std::equal(alone.begin(), alone.end(), all.begin() + at * V));
    at += (int64_t)toks[i].size();
  }
}

TEST_CASE("lora: lfm2 adapts its short-convolution projections, attention and FFN (merged reference)") {
  lfm2_test::spec s;
  const model_test::built base = lfm2_test::build(s);
  adapter_spec a;
  a.arch = "lfm2";
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    const bool attn = lfm2_test::is_attention(s, il);
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "shortconv.in_proj", "shortconv.out_proj", "ffn_gate", "ffn_up", "ffn_down"}) {
      if (base.tensors.count(b + n + ".weight") != 0) a.targets.push_back(b + n + ".weight");
    }
    CHECK(base.tensors.count(b + (attn ? "attn_q.weight" : "shortconv.in_proj.weight")) == 1);
  }
  const model_test::built ad = build_adapter(base, a);
  temp_file base_file(base, "lora-lfm2"), ad_file(ad, "lora-lfm2-adapter");
  auto m = load(base_file.path);
  CHECK(m->lora_targets().size() == a.targets.size());  // tied: no output.weight
  auto lora = m->load_lora(ad_file.path, 1);
  const std::vector<int32_t> tokens = some_tokens(8, base.n_vocab);
  const double with = model_test::max_logit_diff(logits_of(*m, tokens, lora.get()), lfm2_test::reference_forward(merged(base, ad, a, 1), s, tokens));
  CHECK_NEAR(with, 0.0, 2e-3);
  CHECK(model_test::max_logit_diff(logits_of(*m, tokens, nullptr), lfm2_test::reference_forward(merged(base, ad, a, 1), s, tokens)) > 0.05);
}

TEST_CASE("lora: qwen3moe takes attention adapters (rows as alone when mixed); expert and router adapters are refused") {
  moe_test::moe_spec ms;
  const model_test::built base = moe_test::build_qwen3moe(ms);
  adapter_spec a;
  a.arch = "qwen3moe";
  a.targets = {"blk.0.attn_q.weight", "blk.1.attn_output.weight"};
  const model_test::built ad = build_adapter(base, a);
  temp_file base_file(base, "lora-moe"), ad_file(ad, "lora-moe-adapter");
  auto m = load(base_file.path);
  auto lora = m->load_lora(ad_file.path, 1);
  const std::vector<int32_t> t1 = some_tokens(6, base.n_vocab, 1), t2 = some_tokens(5, base.n_vocab, 2);
  const std::vector<float> with = logits_of(*m, t1, lora.get()), without = logits_of(*m, t1, nullptr);
  double d = 0;
  for (size_t i = 0; i < with.size(); ++i) d = std::max(d, double(std::fabs(with[i] - without[i])));
  CHECK(d > 1e-3);
  const int64_t V = base.n_vocab;
  auto kv = m->new_kv_cache(2, 16);
  std::vector<int32_t> tab0 = {0}, tab1 = {1};
  batch_sequence b1{t1.data(), (int32_t)t1.size(), 0, tab0.data(), 1, (int32_t)t1.size()};
  batch_sequence b2{t2.data(), (int32_t)t2.size(), 0, tab1.data(), 1, (int32_t)t2.size()};
  b1.lora = lora.get();
  std::vector<float> all((t1.size() + t2.size()) * V);
  m->forward_batch({b1, b2}, *kv, all.data());
  const std::vector<float> alone2 = logits_of(*m, t2, nullptr);
  CHECK(std::equal(with.begin(), with.end(), all.begin()));
  CHECK(std::equal(alone2.begin(), alone2.end(), all.begin() + t1.size() * V));
  for (const char* name : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_exps.weight"}) {
    adapter_spec x = a;
    x.targets = {};
    const model_test::tensor_data& w = base.tensors.at(name);
    x.edit = [&](std::vector<gguf_test::tensor_spec>& t) {
      t.push_back({std::string(name) + ".lora_a", {w.ne[0], 4}, ggml_type::F32});
      t.push_back({std::string(name) + ".lora_b", {4, w.ne[1]}, ggml_type::F32});
    };
    const model_test::built bad = build_adapter(base, x);
    temp_file f(bad, "lora-moe-bad");
    CHECK_THROWS_WITH(m->load_lora(f.path, 1), "adapting MoE experts and routers is not supported");
  }
}

TEST_CASE("lora: files that do not fit the model are refused with a message naming the problem") {
  model_test::spec s;
  s.tied = true;
  const model_test::built base = model_test::build(s);
  temp_file base_file(base, "lora-base");
  auto m = load(base_file.path);
  const auto refused = [&](adapter_spec a, const std::string& needle) {
    const model_test::built ad = build_adapter(base, a);
    temp_file f(ad, "lora-bad");
    CHECK_THROWS_WITH(m->load_lora(f.path, 1), needle);
    CHECK_THROWS_WITH(m->load_lora(f.path, 1), "LoRA adapter " + f.path + ": ");
  };
  adapter_spec ok;
  ok.targets = {"blk.0.attn_q.weight"};
  adapter_spec x = ok;
  x.arch = "qwen3";
  refused(x, "made for architecture 'qwen3', the model is 'llama'");
  x = ok;
  x.general_type = "model";
  refused(x, "general.type is 'model', expected 'adapter'");
  x = ok;
  x.targets = {"token_embd.weight"};
  refused(x, "adapting the token embeddings is not supported");
  x = ok;
  x.edit = [](std::vector<gguf_test::tensor_spec>& t) { t.pop_back(); };  // no lora_b
  refused(x, "'blk.0.attn_q.weight.lora_a' has no .lora_b");
  x = ok;
  x.edit = [](std::vector<gguf_test::tensor_spec>& t) { t[1].ne = {4, 7}; };  // lora_b of the wrong width
  refused(x, "do not adapt a weight of shape [32, 32]");
  x = ok;
  x.edit = [](std::vector<gguf_test::tensor_spec>& t) { t[0].name = "blk.0.attn_q.weight.lora_c"; };
  refused(x, "neither a .lora_a nor a .lora_b");
  // a tied model has no output.weight of its own: an adapter for it is refused, not applied to the embeddings
  x = ok;
  x.targets = {"token_embd.weight"};
  x.edit = [](std::vector<gguf_test::tensor_spec>& t) {
    for (auto& e : t) e.name.replace(0, 17, "output.weight");
  };
  refused(x, "'output.weight': it is not a weight matrix Spindle adapts");
}

TEST_CASE("lora engine: requests pick adapters by index; the prefix cache never crosses adapters or salts") {
  model_test::spec s;
  s.context_length = 64;
  const model_test::built base = model_test::build(s);
  adapter_spec a;
  a.targets = all_targets(s.n_layer);
  a.alpha = 64;  // strong enough that greedy tokens differ from the base model's
  const model_test::built ad = build_adapter(base, a);
  temp_file base_file(base, "lora-base"), ad_file(ad, "lora-adapter");
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 64;
  o.block_size = 8;
  o.loras.push_back(lora_spec{ad_file.path, 1.0f});
  engine e([&] { return std::shared_ptr<model>(load(base_file.path)); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  const auto gen = [&](int32_t lora, const std::string& salt = "") {
    request r;
    r.prompt = some_tokens(30, base.n_vocab);
    r.params.temperature = 0;
    r.params.max_tokens = 6;
    r.params.ignore_eos = true;
    r.lora = lora;
    r.cache_salt = salt;
    return outs.wait(e.submit(r));
  };
  const auto tokens = [](const std::vector<request_output>& steps) {
    std::vector<int32_t> t;
    for (const request_output& s : steps) t.insert(t.end(), s.tokens.begin(), s.tokens.end());
    return t;
  };
  const auto base_run = gen(-1), lora_run = gen(0), lora_again = gen(0), base_again = gen(-1), salted = gen(0, "x");
  const auto salted_again = gen(0, "x"), base_salted = gen(-1, "x");
  CHECK(salted_again.front().cached_tokens > 0);  // its own salt's blocks
  CHECK(base_salted.front().cached_tokens == 0);  // the same salt under another adapter: another namespace
  CHECK(lora_run.front().cached_tokens == 0);   // the base model's blocks are not the adapter's
  CHECK(lora_again.front().cached_tokens > 0);  // its own are
  CHECK(base_again.front().cached_tokens > 0);
  CHECK(salted.front().cached_tokens == 0);     // another salt: another namespace
  CHECK(tokens(lora_again) == tokens(lora_run));
  CHECK(tokens(base_again) == tokens(base_run));
  CHECK(tokens(salted) == tokens(lora_run));
  CHECK(tokens(lora_run) != tokens(base_run));
  // the engine's greedy tokens with the adapter are the model's with it
  auto m = load(base_file.path);
  auto lora = m->load_lora(ad_file.path, 1);
  std::vector<int32_t> seq = some_tokens(30, base.n_vocab);
  const int64_t V = base.n_vocab;
  for (int i = 0; i < 6; ++i) {
    const std::vector<float> l = logits_of(*m, seq, lora.get());
    const float* last = l.data() + (seq.size() - 1) * V;
    seq.push_back(int32_t(std::max_element(last, last + V) - last));
  }
  CHECK(std::vector<int32_t>(seq.end() - 6, seq.end()) == tokens(lora_run));
  request bad;
  bad.prompt = some_tokens(4, base.n_vocab);
  bad.lora = 1;
  const std::vector<request_output> failed = outs.wait(e.submit(bad));
  CHECK(failed.back().error.find("LoRA adapter slot 1 holds no adapter") != std::string::npos);
  bad.lora = -2;
  CHECK_THROWS_WITH(e.submit(bad), "lora: adapter slot -2 is out of range");

  // runtime loads: slot 1 gets the same file (its own namespace: nothing cached yet), then slot 0 is unloaded while
  // a request runs with it (that request finishes with it), and loaded again (a new namespace again)
  e.load_lora(1, lora_spec{ad_file.path, 1.0f});
  CHECK(outs.wait_lora(1, 1) == "");
  const auto slot1 = gen(1);
  CHECK(slot1.front().cached_tokens == 0);
  CHECK(tokens(slot1) == tokens(lora_run));
  request longer;
  longer.prompt = some_tokens(30, base.n_vocab);
  longer.params.temperature = 0;
  longer.params.max_tokens = 20;
  longer.params.ignore_eos = true;
  longer.lora = 0;
  const uint64_t running = e.submit(longer);
  e.unload_lora(0);
  CHECK(outs.wait_lora(0, 1) == "");
  const std::vector<request_output> finished = outs.wait(running);
  CHECK(finished.back().error.empty());
  const std::vector<int32_t> finished_tokens = tokens(finished);
  CHECK(std::vector<int32_t>(finished_tokens.begin(), finished_tokens.begin() + 6) == tokens(lora_run));
  const auto after = outs.wait(e.submit(longer));
  CHECK(after.back().error.find("LoRA adapter slot 0 holds no adapter (never loaded, or unloaded)") != std::string::npos);
  e.unload_lora(0);
  CHECK(outs.wait_lora(0, 2) == "LoRA adapter slot 0 holds no adapter");
  e.load_lora(0, lora_spec{ad_file.path, 1.0f});
  CHECK(outs.wait_lora(0, 3) == "");
  e.load_lora(0, lora_spec{ad_file.path, 1.0f});
  CHECK(outs.wait_lora(0, 4) == "LoRA adapter slot 0 already holds an adapter");
  const auto reloaded = gen(0);
  CHECK(reloaded.front().cached_tokens == 0);  // a new load: a new namespace
  CHECK(tokens(reloaded) == tokens(lora_run));
  e.load_lora(2, lora_spec{base_file.path, 1.0f});
  CHECK(outs.wait_lora(2, 1).find("expected 'adapter'") != std::string::npos);
}

TEST_CASE("lora engine: an adapter that does not load fails the engine's load with its message") {
  model_test::spec s;
  const model_test::built base = model_test::build(s);
  temp_file base_file(base, "lora-base");
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 64;
  o.loras.push_back(lora_spec{"/nonexistent/adapter.gguf", 1.0f});
  engine e([&] { return std::shared_ptr<model>(load(base_file.path)); }, o, outs.sink());
  CHECK(!outs.wait_ready());
  CHECK(outs.load_error.find("/nonexistent/adapter.gguf") != std::string::npos);
}
