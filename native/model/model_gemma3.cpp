// Architecture "gemma3" (llama.cpp's llama_model_gemma3, text layers): NEOX rope, per-head RMSNorm of q and k, an
// RMSNorm after attention and after the FFN (post_attention_norm / post_ffw_norm) before each residual add, a geglu
// FFN, token embeddings times sqrt(n_embd), q.k scaled by 1 / sqrt(head_dim) (the 27B: 1 / sqrt(n_embd / n_head)),
// and sliding-window attention on most layers (attention.sliding_window; attention.sliding_window_pattern: every
// 6th layer, il % 6 == 5, is global by default, or a per-layer bool array), whose rope is rope.freq_base_swa
// (10000) without scaling while the global layers take rope.freq_base and its linear scaling.
// The norm weights are used as stored: llama.cpp's converter has already added Gemma's 1 to them.
// Invariant: the hparams returned describe exactly the graph llama.cpp builds for the file, or loading throws.
#include <cmath>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/dense_model.h"

namespace spindle {

namespace {

// llama.cpp's set_swa_pattern(n, dense_first = false): layer il slides unless il % n == n - 1; n 0: every layer.
std::vector<uint8_t> swa_pattern(int32_t n_layer, int64_t n) {
  std::vector<uint8_t> out((size_t)n_layer);
  for (int32_t il = 0; il < n_layer; ++il) out[(size_t)il] = n == 0 || il % n < n - 1;
  return out;
}

}  // namespace

void load_gemma3_hparams(const gguf_file& f, model_hparams& hp) {
  const std::string a = hp.arch + ".";
  hp.embd_scale = std::sqrt((float)hp.n_embd);
  hp.ffn_gelu = true;
  // Ollama's own gemma3 conversion names its ropes rope.global / rope.local.freq_base (and carries its vision tower
  // in the same file): read as llama.cpp's keys it would silently get the wrong rope, so it is refused
  if (f.find(a + "rope.global.freq_base") != nullptr) {
    throw error(f.path() + ": a gemma3 file with '" + a + "rope.global.freq_base' (Ollama's own conversion) is not "
                "supported; use a GGUF converted by llama.cpp (e.g. from hf.co/ggml-org/gemma-3-1b-it-GGUF)");
  }
  const double softcap = f.get_f64_or(a + "final_logit_softcapping", 0.0);
  if (softcap != 0.0) {
    throw error(f.path() + ": key '" + a + "final_logit_softcapping' = " + std::to_string(softcap) +
                ": final logit soft-capping is not supported");
  }
  // llama.cpp: the 62-layer 27B scales by its n_embd / n_head, the others by the head dim (gemma_pytorch's config)
  const double scale_dim = hp.n_layer == 62 ? (double)(hp.n_embd / hp.n_head) : (double)hp.head_dim_k;
  hp.attn_scale = 1.0f / std::sqrt((float)scale_dim);
  const int64_t window = f.get_i64_or(a + "attention.sliding_window", 0);
  if (window < 0 || window > INT32_MAX) {
    throw error(f.path() + ": key '" + a + "attention.sliding_window' = " + std::to_string(window) + " out of range");
  }
  if (window == 0) return;  // no sliding window: every layer global (llama.cpp's LLAMA_SWA_TYPE_NONE)
  hp.swa_window = (int32_t)window;
  const std::string k_pattern = a + "attention.sliding_window_pattern";
  const gguf_kv* kv = f.find(k_pattern);
  if (kv == nullptr) {
    hp.swa_layers = swa_pattern(hp.n_layer, 6);
  } else if (kv->type == gguf_value_type::ARRAY) {
    if (kv->array_size() != (uint64_t)hp.n_layer ||
        (kv->array_type != gguf_value_type::BOOL && kv->array_type != gguf_value_type::INT32 &&
         kv->array_type != gguf_value_type::UINT32)) {  // the element types llama.cpp's get_arr takes
      throw error(f.path() + ": key '" + k_pattern + "' must be a number or an array of " + std::to_string(hp.n_layer) +
                  " bools (one per layer)");
    }
    hp.swa_layers.resize((size_t)hp.n_layer);
    for (int32_t il = 0; il < hp.n_layer; ++il) {
      hp.swa_layers[(size_t)il] = kv->ints.empty() ? kv->uints[(size_t)il] != 0 : kv->ints[(size_t)il] != 0;
    }
  } else {
    const int64_t n = f.get_i64_or(k_pattern, 6);
    if (n < 0 || n > INT32_MAX) throw error(f.path() + ": key '" + k_pattern + "' = " + std::to_string(n) + " out of range");
    hp.swa_layers = swa_pattern(hp.n_layer, n);
  }
  hp.rope_freq_base_swa = (float)f.get_f64_or(a + "rope.freq_base_swa", 10000.0);
  if (!(hp.rope_freq_base_swa > 0.0f) || !std::isfinite(hp.rope_freq_base_swa)) {
    throw error(f.path() + ": key '" + a + "rope.freq_base_swa' must be a positive finite number");
  }
  hp.rope_freq_scale_swa = 1.0f;
}

dense_weights load_gemma3_weights(tensor_table& table, const model_hparams& hp) {
  dense_layout lay;
  lay.n_embd_q = (int64_t)hp.head_dim_k * hp.n_head;
  lay.qk_norm = true;
  lay.post_norms = true;
  return load_dense_weights(table, hp, lay);
}

}  // namespace spindle
