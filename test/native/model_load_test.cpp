// model::load: hyperparameters as llama.cpp reads them, and one clear spindle::error per bad-file class
// (missing tensor, wrong shape, unsupported type, unsupported architecture, block_count > 512, bad heads).
#include <filesystem>
#include <memory>
#include <string>

#include "harness.h"
#include "model/model.h"
#include "model_test_gguf.h"
#include "tokenizer/tokenizer.h"

using namespace spindle;

namespace {

// Loads a model built from `s` and returns it (throws what model::load throws).
std::unique_ptr<model> load_built(const model_test::spec& s) {
  const std::string path = model_test::write_temp(model_test::build(s), s.arch);
  struct remover {
    std::string p;
    ~remover() { std::error_code ec; std::filesystem::remove(p, ec); }
  } rm{path};
  return model::load(path, model_options{});
}

void retype(model_test::spec& s, const std::string& name, ggml_type t) {
  s.edit_tensors = [=](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& x : ts) if (x.name == name) x.type = t;
  };
}

}  // namespace

TEST_CASE("model load: hparams of a qwen3 file") {
  model_test::spec s;
  s.arch = "qwen3";
  s.rope_base = 1e6f;
  auto m = load_built(s);
  const model_hparams& hp = m->hparams();
  CHECK(hp.arch == "qwen3");
  CHECK_EQ(hp.n_vocab, 3 + 256 + s.n_normal_tokens);
  CHECK_EQ(hp.n_vocab, m->vocab().n_vocab());
  CHECK_EQ(hp.n_ctx_train, 256);
  CHECK_EQ(hp.n_embd, 32);
  CHECK_EQ(hp.n_layer, 2);
  CHECK_EQ(hp.n_head, 4);
  CHECK_EQ(hp.n_head_kv, 2);
  CHECK_EQ(hp.n_ff, 48);
  CHECK_EQ(hp.head_dim_k, 8);  // default n_embd / n_head
  CHECK_EQ(hp.head_dim_v, 8);
  CHECK_EQ(hp.n_rot, 8);
  CHECK_NEAR(hp.rms_eps, 1e-6, 1e-12);
  CHECK_EQ(hp.rope_freq_base, 1e6f);
  CHECK_EQ(hp.rope_freq_scale, 1.0f);
  CHECK(hp.rope_neox);
  CHECK(!load_built(model_test::spec{})->hparams().rope_neox);  // llama: adjacent pairs
}

TEST_CASE("model load: missing tensor names the file and the tensor") {
  model_test::spec s;
  s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == "blk.1.ffn_up.weight") ts.erase(ts.begin() + i);
  };
  CHECK_THROWS_WITH(load_built(s), "tensor 'blk.1.ffn_up.weight' not found");
  CHECK_THROWS_WITH(load_built(s), "spindle_model_test_");
  model_test::spec q3;
  q3.arch = "qwen3";
  q3.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == "blk.0.attn_k_norm.weight") ts.erase(ts.begin() + i);
  };
  CHECK_THROWS_WITH(load_built(q3), "'blk.0.attn_k_norm.weight' not found (required by architecture qwen3");
}

TEST_CASE("model load: wrong shape gives actual and expected shape") {
  model_test::spec s;
  s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& x : ts) if (x.name == "blk.0.attn_k.weight") x.ne = {32, 32};
  };
  CHECK_THROWS_WITH(load_built(s), "tensor 'blk.0.attn_k.weight' has wrong shape [32, 32], expected [32, 16]");
  model_test::spec n;
  n.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (auto& x : ts) if (x.name == "output_norm.weight") x.ne = {32, 1, 2};
  };
  CHECK_THROWS_WITH(load_built(n), "'output_norm.weight' has wrong shape [32, 1, 2], expected [32]");
}

TEST_CASE("model load: unsupported weight types are named") {
  model_test::spec s;
  retype(s, "blk.0.attn_q.weight", ggml_type::MXFP4);  // a type the reader knows and the CPU backend cannot compute
  CHECK_THROWS_WITH(load_built(s), "tensor 'blk.0.attn_q.weight' has type mxfp4, which the cpu backend does not support");
  model_test::spec q;
  retype(q, "blk.1.ffn_up.weight", ggml_type::Q8_1);  // an activation format, never a weight type
  CHECK_THROWS_WITH(load_built(q), "tensor 'blk.1.ffn_up.weight' has type q8_1, which the cpu backend does not support");
  model_test::spec n;
  retype(n, "blk.0.attn_norm.weight", ggml_type::Q8_0);
  CHECK_THROWS_WITH(load_built(n), "'blk.0.attn_norm.weight' has type q8_0, expected f32, f16 or bf16");
}

TEST_CASE("model load: unsupported architecture, block_count > 512, bad head counts") {
  model_test::spec a;
  a.arch = "gpt2";
  CHECK_THROWS_WITH(load_built(a), "unsupported architecture 'gpt2'");
  model_test::spec b;
  b.block_count_override = 513;
  CHECK_THROWS_WITH(load_built(b), "block_count' = 513 exceeds 512");
  model_test::spec z;
  z.block_count_override = 0;
  CHECK_THROWS_WITH(load_built(z), "block_count' = 0 out of range");
  model_test::spec h;
  h.n_head_kv = 3;
  CHECK_THROWS_WITH(load_built(h), "not a multiple of head_count_kv 3");
  model_test::spec fused;
  fused.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    ts.push_back({"blk.0.attn_qkv.weight", {32, 64}, ggml_type::F32});
  };
  CHECK_THROWS_WITH(load_built(fused), "fused QKV");
}

TEST_CASE("model load: missing file is an error, not a crash") {
  CHECK_THROWS_WITH(model::load("/nonexistent/dir/model.gguf", model_options{}), "/nonexistent/dir/model.gguf");
}
