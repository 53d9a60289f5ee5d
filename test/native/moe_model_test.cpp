// qwen3moe end to end on small in-memory GGUFs: loads (qwen3 attention + MoE FFN per layer), batch invariance of
// forward_batch (sequences batched in chunks == each alone, bitwise), the MoE layer equal to moe_ffn on the
// same rows, and load errors for missing / misshaped expert tensors and bad expert counts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "harness.h"
#include "model/model.h"
#include "moe_test_gguf.h"

using namespace spindle;

namespace {

using moe_test::moe_spec;
using moe_test::build_qwen3moe;

std::unique_ptr<model_test::loaded_model> load(const moe_spec& m, int threads = 2) {
  return model_test::load_built(build_qwen3moe(m), "qwen3moe", threads);
}

void load_fails(const moe_spec& m, const char* what) {
  const std::string path = model_test::write_temp(build_qwen3moe(m), "qwen3moe-bad");
  CHECK_THROWS_WITH(model::load(path, model_options{}), what);
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

std::vector<int32_t> tokens(int n, int n_vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 37 + salt * 11 + 5) % n_vocab);
  return t;
}

}  // namespace

TEST_CASE("qwen3moe: loads with its MoE config") {
  for (ggml_type wt : {ggml_type::F32, ggml_type::F16}) {
    moe_spec m;
    m.base.weight_type = wt;
    auto l = load(m);
    CHECK_EQ(l->m->hparams().arch, std::string("qwen3moe"));
    CHECK(l->m->hparams().rope_neox);
    const int V = l->m->hparams().n_vocab;
    auto st = l->m->new_sequence(16);
    const std::vector<int32_t> t = tokens(9, V, 1);
    std::vector<float> logits((size_t)V * 9);
    l->m->forward(*st, t.data(), 9, logits.data(), true);
    CHECK(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  }
}

TEST_CASE("qwen3moe: forward_batch of chunked, mixed sequences equals each sequence alone, bitwise") {
  moe_spec m;
  m.n_expert = 8;
  m.n_used = 3;
  auto l = load(m);
  model& md = *l->m;
  const int64_t V = md.hparams().n_vocab;
  const std::vector<std::vector<int32_t>> seqs = {tokens(13, (int)V, 1), tokens(5, (int)V, 2), tokens(21, (int)V, 3)};
  std::vector<std::vector<float>> want;
  for (const auto& s : seqs) {
    auto st = md.new_sequence((int64_t)s.size());
    want.emplace_back(s.size() * V);
    md.forward(*st, s.data(), (int64_t)s.size(), want.back().data(), true);
  }
  auto kv = md.new_kv_cache(16, 4);
  const std::vector<std::vector<int32_t>> tables = {{0, 1, 2, 3}, {4, 5}, {6, 7, 8, 9, 10, 11}};
  const int chunk = 4;
  std::vector<std::vector<float>> got(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) got[i].resize(seqs[i].size() * V);
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
    md.forward_batch(batch, *kv, logits.data());
    const float* p = logits.data();
    for (size_t j = 0; j < batch.size(); ++j) {
      std::memcpy(got[who[j]].data() + (int64_t)first * V, p, batch[j].n_tokens * V * sizeof(float));
      p += batch[j].n_tokens * V;
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i)
    CHECK(std::memcmp(got[i].data(), want[i].data(), want[i].size() * sizeof(float)) == 0);
}

TEST_CASE("qwen3moe: one thread and two give the same logits") {
  moe_spec m;
  auto a = load(m, 1), b = load(m, 2);
  const int V = a->m->hparams().n_vocab;
  const std::vector<int32_t> t = tokens(11, V, 4);
  std::vector<float> la((size_t)V * 11), lb((size_t)V * 11);
  auto sa = a->m->new_sequence(11), sb = b->m->new_sequence(11);
  a->m->forward(*sa, t.data(), 11, la.data(), true);
  b->m->forward(*sb, t.data(), 11, lb.data(), true);
  CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
}

TEST_CASE("qwen3moe: missing or misshaped experts and bad expert counts are load errors") {
  moe_spec missing;
  missing.base.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "blk.1.ffn_down_exps.weight"; }),
             ts.end());
  };
  load_fails(missing, "tensor 'blk.1.ffn_down_exps.weight' not found");
  moe_spec shape;
  shape.base.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& t : ts) if (t.name == "blk.0.ffn_up_exps.weight") t.ne = {32, 32, 5};
  };
  load_fails(shape, "tensor 'blk.0.ffn_up_exps.weight' has wrong shape [32, 32, 5], expected [32, 32, 6]");
  moe_spec router;
  router.base.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& t : ts) if (t.name == "blk.0.ffn_gate_inp.weight") t.ne = {32, 5};
  };
  load_fails(router, "tensor 'blk.0.ffn_gate_inp.weight' has wrong shape [32, 5], expected [32, 6]");
  moe_spec too_many;
  too_many.n_used = 7;
  load_fails(too_many, "expert_used_count' = 7 out of range [1, 6]");
  moe_spec no_count;
  no_count.n_expert = -1;
  load_fails(no_count, "key 'qwen3moe.expert_count' not found");
  moe_spec zero;
  zero.n_expert = 0;
  load_fails(zero, "expert_count' = 0 out of range [1, 1024]");
  moe_spec no_used;
  no_used.n_used = -1;
  load_fails(no_used, "key 'qwen3moe.expert_used_count' not found");
}

TEST_CASE("qwen3moe: expert width defaults to feed_forward_length / expert_used_count") {
  moe_spec m;
  m.n_ff_exp = -1;  // key absent: 48 / 2 = 24 (model_test's n_ff is 48)
  m.base.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& t : ts) {
      if (t.name.find("ffn_gate_exps") != std::string::npos || t.name.find("ffn_up_exps") != std::string::npos)
        t.ne = {32, 24, 6};
      if (t.name.find("ffn_down_exps") != std::string::npos) t.ne = {24, 32, 6};
    }
  };
  auto l = load(m);
  const int V = l->m->hparams().n_vocab;
  const std::vector<int32_t> t = tokens(3, V, 5);
  std::vector<float> logits((size_t)V * 3);
  auto st = l->m->new_sequence(3);
  l->m->forward(*st, t.data(), 3, logits.data(), true);
  CHECK(std::isfinite(logits[0]));
}
