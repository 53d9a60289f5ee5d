// LoRA adapter files for the native and GPU tests, in llama.cpp's GGUF adapter format (general.type adapter,
// adapter.type lora, adapter.lora.alpha, W.lora_a [n_in, rank] and W.lora_b [rank, n_out] per adapted weight W),
// with random values (model_test_gguf.h's rules) kept in `built` for references.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model_test_gguf.h"

namespace lora_test {

struct adapter_spec {
  std::string arch = "llama";
  std::string general_type = "adapter";
  float alpha = 8;
  int rank = 4;
  std::vector<std::string> targets;  // base tensor names
  uint32_t seed = 9;
  spindle::ggml_type type = spindle::ggml_type::F32;  // of A and B
  std::function<void(std::vector<gguf_test::tensor_spec>&)> edit;  // break the file on purpose
};

// An adapter file for a model built from `base` (shapes read from it).
inline model_test::built build_adapter(const model_test::built& base, const adapter_spec& a) {
  std::vector<gguf_test::tensor_spec> t;
  for (const std::string& name : a.targets) {
    const model_test::tensor_data& w = base.tensors.at(name);
    t.push_back({name + ".lora_a", {w.ne[0], a.rank}, a.type});
    t.push_back({name + ".lora_b", {a.rank, w.ne[1]}, a.type});
  }
  gguf_test::writer kvs;
  kvs.kv_str("general.architecture", a.arch);
  kvs.kv_str("general.type", a.general_type);
  kvs.kv_str("adapter.type", "lora");
  kvs.kv<float>("adapter.lora.alpha", spindle::gguf_value_type::FLOAT32, a.alpha);
  return model_test::build_file(t, a.edit, a.seed, kvs, 4, base.n_vocab);
}

}  // namespace lora_test
