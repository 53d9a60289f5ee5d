// model::load: hyperparameters as llama.cpp reads them, and one clear spindle::error per bad-file class
// (missing tensor, wrong shape, unsupported type, unsupported architecture, block_count > 512, bad heads, gemma3's
// refused keys).
#include <cmath>
#include <filesystem>
#include <functional>
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

TEST_CASE("model load: hparams of a gemma3 file (window, its layers and rope, q.k scale, embedding scale, geglu)") {
  const model_test::spec g = model_test::gemma3_spec();  // 8 layers, window 5, head dim 16, rope 1e6 scaled by 8
  auto m = load_built(g);
  const model_hparams& hp = m->hparams();
  CHECK(hp.arch == "gemma3");
  CHECK(hp.rope_neox);
  CHECK_EQ(hp.head_dim_k, 16);
  CHECK_EQ(hp.head_dim_v, 16);
  CHECK(hp.embd_scale);
  CHECK(hp.ffn_gelu);
  CHECK_EQ(hp.attn_scale, 1.0f / std::sqrt(16.0f));
  CHECK_EQ(hp.swa_window, 5);
  CHECK(hp.swa_layers == std::vector<uint8_t>({1, 1, 1, 1, 1, 0, 1, 1}));  // il % 6 == 5 global
  CHECK_EQ(hp.rope_freq_base, 1e6f);
  CHECK_EQ(hp.rope_freq_scale, 0.125f);
  CHECK_EQ(hp.rope_freq_base_swa, 10000.0f);  // the default, unscaled
  CHECK_EQ(hp.rope_freq_scale_swa, 1.0f);
  for (int il = 0; il < 8; ++il) CHECK_EQ(hp.is_swa(il), il != 5);
  model_test::spec n = g;  // a number
  n.swa_pattern = 3;
  n.rope_base_swa = 20000.0f;
  const model_hparams hn = load_built(n)->hparams();
  CHECK(hn.swa_layers == std::vector<uint8_t>({1, 1, 0, 1, 1, 0, 1, 1}));
  CHECK_EQ(hn.rope_freq_base_swa, 20000.0f);
  n.swa_pattern = 0;  // every layer
  CHECK(load_built(n)->hparams().swa_layers == std::vector<uint8_t>(8, 1));
  model_test::spec a = g;  // a bool array
  a.swa_layers = {0, 1, 1, 0, 0, 1, 0, 1};
  CHECK(load_built(a)->hparams().swa_layers == a.swa_layers);
  model_test::spec none = g;  // no sliding_window key: no window anywhere
  none.sliding_window = 0;
  const model_hparams h0 = load_built(none)->hparams();
  CHECK_EQ(h0.swa_window, 0);
  for (int il = 0; il < 8; ++il) CHECK(!h0.is_swa(il));
  model_test::spec big = g;  // 62 layers (the 27B): q.k scaled by 1 / sqrt(n_embd / n_head), not the head dim
  big.n_layer = 62;
  CHECK_EQ(load_built(big)->hparams().attn_scale, 1.0f / std::sqrt(8.0f));
}

TEST_CASE("model load: gemma3 refuses logit soft-capping, a bad window or pattern, a missing post norm") {
  const auto with_kv = [](std::function<void(gguf_test::writer&)> kv) {
    model_test::spec s = model_test::gemma3_spec();
    s.extra_kvs = std::move(kv);
    s.n_extra_kvs = 1;
    return s;
  };
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.kv<float>("gemma3.final_logit_softcapping", gguf_value_type::FLOAT32, 30.0f);
                    })),
                    "key 'gemma3.final_logit_softcapping' = 30");
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.kv<float>("gemma3.final_logit_softcapping", gguf_value_type::FLOAT32, 30.0f);
                    })),
                    "soft-capping is not supported");
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {  // Ollama's own conversion
                      w.kv<float>("gemma3.rope.global.freq_base", gguf_value_type::FLOAT32, 1e6f);
                    })),
                    "'gemma3.rope.global.freq_base' (Ollama's own conversion) is not supported");
  load_built(with_kv([](gguf_test::writer& w) {  // 0: none, as llama.cpp reads it
    w.kv<float>("gemma3.final_logit_softcapping", gguf_value_type::FLOAT32, 0.0f);
  }));
  const char* k_pattern = "key 'gemma3.attention.sliding_window_pattern' must be a number or an array of 8 bools";
  model_test::spec short_arr = model_test::gemma3_spec();
  short_arr.swa_layers = std::vector<uint8_t>(7, 1);  // 8 layers
  CHECK_THROWS_WITH(load_built(short_arr), k_pattern);
  model_test::spec long_arr = model_test::gemma3_spec();
  long_arr.swa_layers = std::vector<uint8_t>(9, 1);
  CHECK_THROWS_WITH(load_built(long_arr), k_pattern);
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.arr_of<float>("gemma3.attention.sliding_window_pattern", gguf_value_type::FLOAT32,
                                      std::vector<float>(8, 1.0f));
                    })),
                    k_pattern);
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.arr_str("gemma3.attention.sliding_window_pattern", std::vector<std::string>(8, "1"));
                    })),
                    k_pattern);
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.kv<int32_t>("gemma3.attention.sliding_window_pattern", gguf_value_type::INT32, -2);
                    })),
                    "'gemma3.attention.sliding_window_pattern' = -2 out of range");
  model_test::spec neg = model_test::gemma3_spec();
  neg.sliding_window = 0;  // the key comes from extra_kvs instead
  neg.extra_kvs = [](gguf_test::writer& w) {
    w.kv<int32_t>("gemma3.attention.sliding_window", gguf_value_type::INT32, -1);
  };
  neg.n_extra_kvs = 1;
  CHECK_THROWS_WITH(load_built(neg), "key 'gemma3.attention.sliding_window' = -1 out of range");
  CHECK_THROWS_WITH(load_built(with_kv([](gguf_test::writer& w) {
                      w.kv<float>("gemma3.rope.freq_base_swa", gguf_value_type::FLOAT32, 0.0f);
                    })),
                    "'gemma3.rope.freq_base_swa' must be a positive finite number");
  model_test::spec no_post = model_test::gemma3_spec();
  no_post.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i].name == "blk.3.post_ffw_norm.weight") ts.erase(ts.begin() + i);
  };
  CHECK_THROWS_WITH(load_built(no_post), "'blk.3.post_ffw_norm.weight' not found (required by architecture gemma3");
}

TEST_CASE("model load: missing file is an error, not a crash") {
  CHECK_THROWS_WITH(model::load("/nonexistent/dir/model.gguf", model_options{}), "/nonexistent/dir/model.gguf");
}
