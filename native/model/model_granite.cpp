// Architecture "granite" (IBM Granite 3.x dense, llama.cpp's llama_model_granite): the llama graph (adjacent-pair
// rope, optional attn_output bias and rope_freqs) with four scalars: token embeddings times embedding_scale, q.k
// times attention.scale (instead of 1 / sqrt(head_dim)), each attention and FFN output times residual_scale before
// its residual add, and the logits times 1 / logit_scale.
// Refused by name: rope switched off (rope.scaling.finetuned false: llama.cpp then runs without rope) and Granite
// Vision's deepstack layers (LongRoPE, like every scaling but linear, is refused by load_hparams; FFN biases by the
// dense tensor loader).
// Invariant: the hparams returned describe exactly the graph llama.cpp builds for the file, or loading throws.
#include <cmath>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/dense_model.h"

namespace spindle {

namespace {

// An optional positive finite scalar key (0 when absent); `required` keys must be there.
float scale_key(const gguf_file& f, const std::string& key, bool required) {
  if (f.find(key) == nullptr) {
    if (required) throw error(f.path() + ": missing key '" + key + "'");
    return 0.0f;
  }
  const double v = f.get_f64(key);
  if (!(v > 0.0) || !std::isfinite(v)) {
    throw error(f.path() + ": key '" + key + "' = " + std::to_string(v) + " must be a positive finite number");
  }
  return (float)v;
}

}  // namespace

void load_granite_hparams(const gguf_file& f, model_hparams& hp) {
  const std::string a = hp.arch + ".";
  hp.logit_scale = scale_key(f, a + "logit_scale", true);  // llama.cpp requires it
  hp.residual_scale = scale_key(f, a + "residual_scale", false);
  hp.embd_scale = scale_key(f, a + "embedding_scale", false);
  hp.attn_scale = scale_key(f, a + "attention.scale", false);
  if (!f.get_bool_or(a + "rope.scaling.finetuned", true)) {
    throw error(f.path() + ": key '" + a + "rope.scaling.finetuned' is false: a granite model without rope is not supported");
  }
  if (const gguf_kv* ds = f.find(a + "deepstack_mapping"); ds != nullptr && ds->type == gguf_value_type::ARRAY) {
    for (int64_t v : ds->ints) {
      if (v >= 0) throw error(f.path() + ": Granite Vision's deepstack layers ('" + a + "deepstack_mapping') are not supported");
    }
  }
}

}  // namespace spindle
