// Small random-weight qwen3moe GGUF models for the native and GPU tests: a qwen3 test model (model_test_gguf.h)
// whose FFNs are experts.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "model_test_gguf.h"

namespace moe_test {

using spindle::ggml_type;
using spindle::gguf_value_type;

struct moe_spec {
  model_test::spec base;
  int64_t n_expert = 6, n_used = 2, n_ff_exp = 32;  // negative: key not written
};

// A qwen3 test model (model_test_gguf.h) whose FFNs are experts, written as architecture qwen3moe.
inline model_test::built build_qwen3moe(moe_spec m) {
  model_test::spec s = m.base;
  s.arch = "qwen3";  // tensor_list: q/k norms
  const std::vector<std::string> toks = model_test::vocab_tokens(s);
  std::vector<gguf_test::tensor_spec> ts;
  for (auto& t : model_test::tensor_list(s, (int)toks.size())) {
    if (t.name.find("ffn_gate.") != std::string::npos || t.name.find("ffn_up.") != std::string::npos) continue;
    if (t.name.find("ffn_down.") != std::string::npos) {
      const std::string b = t.name.substr(0, t.name.find("ffn_down."));
      const int64_t e = s.n_embd, ne = std::max<int64_t>(m.n_expert, 1), ff = std::max<int64_t>(m.n_ff_exp, 1);
      ts.push_back({b + "ffn_gate_inp.weight", {e, ne}, ggml_type::F32});
      ts.push_back({b + "ffn_gate_exps.weight", {e, ff, ne}, s.weight_type});
      ts.push_back({b + "ffn_up_exps.weight", {e, ff, ne}, s.weight_type});
      ts.push_back({b + "ffn_down_exps.weight", {ff, e, ne}, s.weight_type});
      continue;
    }
    ts.push_back(t);
  }
  s.arch = "qwen3moe";
  const uint64_t n_moe_kv = (m.n_expert >= 0) + (m.n_used >= 0) + (m.n_ff_exp >= 0);
  gguf_test::writer kvs;
  model_test::write_kvs(kvs, s, toks);
  const uint64_t n_more = model_test::write_more_kvs(kvs, s);  // head_dim, rope_scale, extra_kvs when set
  if (m.n_expert >= 0) kvs.kv<uint32_t>("qwen3moe.expert_count", gguf_value_type::UINT32, (uint32_t)m.n_expert);
  if (m.n_used >= 0) kvs.kv<uint32_t>("qwen3moe.expert_used_count", gguf_value_type::UINT32, (uint32_t)m.n_used);
  if (m.n_ff_exp >= 0) {
    kvs.kv<uint32_t>("qwen3moe.expert_feed_forward_length", gguf_value_type::UINT32, (uint32_t)m.n_ff_exp);
  }
  return model_test::build_file(std::move(ts), s.edit_tensors, s.seed, kvs, model_test::k_n_kv + n_more + n_moe_kv,
                                (int)toks.size());
}

}  // namespace moe_test
