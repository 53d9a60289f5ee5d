// Writes the benchmark shapes of bench/cpu-compare.mjs as GGUF files without Node (for the GPU machine, which
// has no Node): random weights through the native test-model builders, with llama.cpp's Q4_K_M / Q5_K_M type mix
// (Q6_K for the tied output / token_embd and for attn_v / ffn_down of the use_more_bits layers, Q4_K / Q5_K
// elsewhere) and a 128256-token SentencePiece-style vocabulary (the shape of the Llama 3 one; token texts are
// synthetic).
//   spindle_gen_bench_model <llama1b-q4_k_m|llama1b-q5_k_m|llama1b-q8_0|lfm2-1.2b-q4_k_m|qwen3moe-small-q4_k_m|
//                            lfm2moe-small-q4_k_m> out.gguf
// qwen3moe-small-q4_k_m: bench/common.mjs's small Qwen3-MoE (dim 1024, 16 layers, 16 experts of 768, 4 per token,
// 128-dim heads) in the same Q4_K_M mix, for the GPU's MoE paths; lfm2moe-small-q4_k_m: the same experts in
// LFM2-8B-A1B's layout (two leading dense layers, short convolutions, sigmoid routing with a selection bias).
// Prints the file's tensor bytes and what one decoded token reads (the shapes are tied; of the stacked experts,
// the used share).
#include <cstdio>
#include <string>

#include "gguf/gguf_file.h"
#include "lfm2_test_gguf.h"
#include "model_test_gguf.h"
#include "moe_test_gguf.h"

namespace {

using spindle::ggml_type;

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// llama.cpp's Q4_K_M (base Q4_K) or Q5_K_M (base Q5_K) choice for the 2-D tensors of n_layer layers.
void k_m_mix(std::vector<gguf_test::tensor_spec>& ts, int n_layer, ggml_type base) {
  for (auto& t : ts) {
    if (t.ne.size() < 2 || t.ne[0] % 256 != 0) continue;  // vectors, LFM2's conv taps: kept as written (f32)
    if (t.name.find("ffn_gate_inp.") != std::string::npos) continue;  // MoE routers stay f32, as llama-quantize leaves them
    if (t.name == "token_embd.weight" || t.name == "output.weight") { t.type = ggml_type::Q6_K; continue; }
    const size_t dot = t.name.find('.', 4);
    const int layer = t.name.rfind("blk.", 0) == 0 ? std::stoi(t.name.substr(4, dot - 4)) : -1;
    const bool more = layer >= 0 && use_more_bits(layer, n_layer) &&
                      (t.name.find("attn_v.") != std::string::npos || t.name.find("ffn_down.") != std::string::npos);
    t.type = more ? ggml_type::Q6_K : base;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <llama1b-q4_k_m|llama1b-q5_k_m|llama1b-q8_0|lfm2-1.2b-q4_k_m|qwen3moe-small-q4_k_m|"
                 "lfm2moe-small-q4_k_m> out.gguf\n", argv[0]);
    return 2;
  }
  const std::string shape = argv[1], out = argv[2];
  const int n_vocab = 128256, n_layer = 16;
  model_test::built b;
  if (shape == "llama1b-q4_k_m" || shape == "llama1b-q5_k_m" || shape == "llama1b-q8_0") {
    model_test::spec s;
    s.arch = "llama";
    s.n_layer = n_layer;
    s.n_embd = 2048;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 8192;
    s.tied = true;
    s.n_normal_tokens = n_vocab - 259;
    s.rope_base = 500000.0f;
    s.context_length = 131072;  // Llama 3.2 1B's (servers size their slots by it: the serving workload needs 1152)
    s.weight_type = shape == "llama1b-q8_0" ? ggml_type::Q8_0 : ggml_type::Q4_K;
    if (shape == "llama1b-q4_k_m") s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) { k_m_mix(ts, n_layer, ggml_type::Q4_K); };
    if (shape == "llama1b-q5_k_m") s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) { k_m_mix(ts, n_layer, ggml_type::Q5_K); };
    b = model_test::build(s);
  } else if (shape == "lfm2-1.2b-q4_k_m") {
    lfm2_test::spec s;
    s.n_layer = n_layer;
    s.n_embd = 2048;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 8192;
    s.attention_layers = {2, 5, 8, 10, 12, 14};
    s.n_normal_tokens = n_vocab - 259;
    s.context_length = 128000;  // LFM2-1.2B's
    s.weight_type = ggml_type::Q4_K;
    s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) { k_m_mix(ts, n_layer, ggml_type::Q4_K); };
    b = lfm2_test::build(s);
  } else if (shape == "qwen3moe-small-q4_k_m") {
    moe_test::moe_spec m;
    m.base.n_layer = n_layer;
    m.base.n_embd = 1024;
    m.base.n_head = 8;  // 128-dim heads
    m.base.n_head_kv = 4;
    m.base.n_ff = 3072;
    m.base.n_normal_tokens = n_vocab - 259;
    m.base.rope_base = 1000000.0f;
    m.base.context_length = 40960;  // Qwen3-30B-A3B's
    m.base.weight_type = ggml_type::Q4_K;
    m.base.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) { k_m_mix(ts, n_layer, ggml_type::Q4_K); };
    m.n_expert = 16;
    m.n_used = 4;
    m.n_ff_exp = 768;
    b = moe_test::build_qwen3moe(m);
  } else if (shape == "lfm2moe-small-q4_k_m") {  // qwen3moe-small's expert shapes in LFM2-8B-A1B's layout
    lfm2_test::spec s;
    s.n_layer = n_layer;
    s.n_embd = 1024;
    s.n_head = 16;  // 64-dim heads
    s.n_head_kv = 8;
    s.n_ff = 3072;  // the leading dense layers
    s.attention_layers = {2, 5, 8, 10, 12, 14};
    s.n_normal_tokens = n_vocab - 259;
    s.context_length = 128000;
    s.weight_type = ggml_type::Q4_K;
    s.edit_tensors = [](std::vector<gguf_test::tensor_spec>& ts) { k_m_mix(ts, n_layer, ggml_type::Q4_K); };
    s.n_expert = 16;
    s.n_used = 4;
    s.n_ff_exp = 768;
    s.n_dense_lead = 2;
    b = lfm2_test::build(s);
  } else {
    std::fprintf(stderr, "unknown shape '%s'\n", shape.c_str());
    return 2;
  }
  FILE* f = std::fopen(out.c_str(), "wb");
  if (!f || std::fwrite(b.bytes.data(), 1, b.bytes.size(), f) != b.bytes.size()) {
    std::fprintf(stderr, "cannot write %s\n", out.c_str());
    return 1;
  }
  std::fclose(f);
  const auto file = spindle::gguf_file::open(out);
  const std::string arch = file->get_string_or("general.architecture", "");
  const int64_t n_expert = file->get_i64_or(arch + ".expert_count", 0), n_used = file->get_i64_or(arch + ".expert_used_count", 0);
  uint64_t weight_bytes = 0, per_token = 0;
  for (const auto& t : file->tensors()) {
    weight_bytes += t.n_bytes;
    const bool experts = n_expert > 0 && t.name.find("_exps.") != std::string::npos;
    per_token += experts ? t.n_bytes / (uint64_t)n_expert * (uint64_t)n_used : t.n_bytes;
  }
  std::printf("%s: %s, file %.1f MB, tensor bytes %llu, read per decoded token %llu\n", out.c_str(), shape.c_str(),
              b.bytes.size() / 1e6, (unsigned long long)weight_bytes, (unsigned long long)per_token);
  return 0;
}
