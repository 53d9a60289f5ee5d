// model::load: opens the GGUF, picks the architecture, reads hparams, builds the tokenizer and the backend,
// and loads the tensor table. Invariant: returns a complete model or throws spindle::error naming the file.
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/dense_model.h"
#include "model/lfm2_model.h"
#include "model/lora.h"
#include "model/model_hparams.h"
#include "model/model_tensors.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

namespace {

struct arch_entry {
  const char* name;
  bool rope_neox;  // llama.cpp's llama_model_rope_type: NORM for llama / granite, NEOX for qwen2 / qwen3 / gemma3
  dense_weights (*load)(tensor_table&, const model_hparams&);
  void (*arch_hparams)(const gguf_file&, model_hparams&) = nullptr;  // the architecture's own keys, if any
};

const arch_entry k_archs[] = {
    {"llama", false, load_llama_weights},
    {"qwen2", true, load_qwen2_weights},
    {"qwen3", true, load_qwen3_weights},
    {"qwen3moe", true, load_qwen3moe_weights},
    {"gemma3", true, load_gemma3_weights, load_gemma3_hparams},
    {"granite", false, load_llama_weights, load_granite_hparams},
};

const arch_entry& find_arch(const gguf_file& file, const std::string& arch) {
  for (const arch_entry& e : k_archs) {
    if (arch == e.name) return e;
  }
  throw error(file.path() + ": unsupported architecture '" + arch +
              "' (supported: llama, qwen2, qwen3, qwen3moe, gemma3, granite, lfm2, lfm2moe)");
}

}  // namespace

std::unique_ptr<model> model::load(const std::string& path, const model_options& options) {
  std::unique_ptr<gguf_file> file = gguf_file::open(path);
  const std::string arch = file->get_string("general.architecture");
  if (arch == "lfm2" || arch == "lfm2moe") {  // hybrid: its own class
    std::unique_ptr<model> m = load_lfm2_model(std::move(file), options);
    m->apply_backend_options(options);
    return m;
  }
  const arch_entry& entry = find_arch(*file, arch);
  std::unique_ptr<tokenizer> vocab = tokenizer::from_gguf(*file);
  model_hparams hp = load_hparams(*file, arch, vocab->n_vocab(), entry.rope_neox);
  if (entry.arch_hparams) entry.arch_hparams(*file, hp);
  std::unique_ptr<backend> be = make_backend_for_file(*file, options.device, options.threads);
  tensor_table table(*file, *be, arch);
  dense_weights w = entry.load(table, hp);
  std::unique_ptr<model> m = std::make_unique<dense_model>(std::move(file), std::move(vocab), std::move(be),
                                                           std::move(hp), std::move(w));
  m->apply_backend_options(options);
  return m;
}

std::vector<lora_target> model::lora_targets() const { return {}; }

std::shared_ptr<lora_adapter> model::load_lora(const std::string& path, float scale) {
  const std::vector<lora_target> targets = lora_targets();
  backend* be = compute_backend();
  if (targets.empty() || be == nullptr) {
    throw error("LoRA adapter " + path + ": the " + hparams().arch + " model takes no adapters");
  }
  return lora_adapter::load(path, scale, hparams().arch, targets, *be);
}

void add_dense_lora_targets(std::vector<lora_target>& out, const dense_layer& l, int il) {
  const std::pair<const char*, const backend_weight*> named[] = {
      {"attn_q.weight", &l.wq},     {"attn_k.weight", &l.wk},   {"attn_v.weight", &l.wv},
      {"attn_output.weight", &l.wo}, {"ffn_gate.weight", &l.ffn_gate}, {"ffn_up.weight", &l.ffn_up},
      {"ffn_down.weight", &l.ffn_down}};
  for (const auto& [name, w] : named) {
    if (w->data != nullptr) out.push_back({tensor_table::blk(il, name), w});  // absent: a conv layer / MoE FFN
  }
}

}  // namespace spindle
