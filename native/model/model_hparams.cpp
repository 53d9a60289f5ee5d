// Reads model_hparams from GGUF metadata (see model_hparams.h).
// Invariant: every integer read from the file is range-checked before it is narrowed to int32.
#include "model/model_hparams.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace spindle {

namespace {

std::string key_of(const std::string& arch, const char* suffix) { return arch + "." + suffix; }

[[noreturn]] void fail(const gguf_file& f, const std::string& what) { throw error(f.path() + ": " + what); }

int32_t to_i32(const gguf_file& f, const std::string& key, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    fail(f, "key '" + key + "' = " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return (int32_t)v;
}

constexpr int64_t k_max_dim = 1 << 24;  // any width beyond this is not a real model

int32_t required_int(const gguf_file& f, const std::string& key, int64_t lo, int64_t hi) {
  const uint64_t v = f.get_u64(key);
  if (v > (uint64_t)hi) fail(f, "key '" + key + "' = " + std::to_string(v) + " exceeds " + std::to_string(hi));
  return to_i32(f, key, (int64_t)v, lo, hi);
}

// A per-layer count (scalar or array of n_layer); the dense architectures need every layer equal.
int32_t uniform_per_layer(const gguf_file& f, const std::string& key, int32_t n_layer, int64_t fallback, int64_t lo) {
  if (!f.find(key)) {
    if (fallback < lo) fail(f, "key '" + key + "' not found");
    return to_i32(f, key, fallback, lo, k_max_dim);
  }
  const std::vector<int64_t> v = f.get_i64_array_or_scalar(key, (uint64_t)n_layer);
  for (int64_t x : v) {
    if (x != v[0]) fail(f, "key '" + key + "' differs between layers, which this architecture does not support");
  }
  return to_i32(f, key, v.empty() ? fallback : v[0], lo, k_max_dim);
}

void read_rope(const gguf_file& f, const std::string& arch, model_hparams& hp) {
  hp.rope_freq_base = (float)f.get_f64_or(key_of(arch, "rope.freq_base"), 10000.0);
  if (!(hp.rope_freq_base > 0.0f) || !std::isfinite(hp.rope_freq_base)) {
    fail(f, "key '" + key_of(arch, "rope.freq_base") + "' must be a positive finite number");
  }
  const std::string type = f.get_string_or(key_of(arch, "rope.scaling.type"), "linear");
  if (type != "none" && type != "linear") {
    fail(f, "rope scaling type '" + type + "' (key '" + key_of(arch, "rope.scaling.type") +
                "') is not supported (supported: none, linear)");
  }
  double factor = f.get_f64_or(key_of(arch, "rope.scaling.factor"), 0.0);
  if (!f.find(key_of(arch, "rope.scaling.factor"))) factor = f.get_f64_or(key_of(arch, "rope.scale_linear"), 0.0);
  if (factor < 0.0 || !std::isfinite(factor)) fail(f, "rope scaling factor must be a non-negative finite number");
  hp.rope_freq_scale = (type == "none" || factor == 0.0) ? 1.0f : (float)(1.0 / factor);
  const double attn_factor = f.get_f64_or(key_of(arch, "rope.scaling.attn_factor"), 1.0);
  if (attn_factor != 1.0) fail(f, "key '" + key_of(arch, "rope.scaling.attn_factor") + "' != 1 is not supported");
}

}  // namespace

void load_rope_hparams(const gguf_file& f, const std::string& arch, model_hparams& hp) { read_rope(f, arch, hp); }

model_hparams load_hparams(const gguf_file& f, const std::string& arch, int32_t n_vocab, bool rope_neox) {
  model_hparams hp;
  hp.arch = arch;
  hp.name = f.get_string_or("general.name", "");
  hp.rope_neox = rope_neox;
  if (n_vocab <= 0) fail(f, "the vocabulary is empty");
  hp.n_vocab = n_vocab;
  const std::string k_ctx = key_of(arch, "context_length"), k_embd = key_of(arch, "embedding_length");
  const std::string k_layers = key_of(arch, "block_count");
  hp.n_ctx_train = required_int(f, k_ctx, 0, INT32_MAX);
  hp.n_embd = required_int(f, k_embd, 1, k_max_dim);
  hp.n_layer = required_int(f, k_layers, 1, k_max_layers);

  // optional, as llama.cpp: n_ff and n_head default to 0 there, which no dense graph accepts
  hp.n_ff = uniform_per_layer(f, key_of(arch, "feed_forward_length"), hp.n_layer, 0, 1);
  hp.n_head = uniform_per_layer(f, key_of(arch, "attention.head_count"), hp.n_layer, 0, 1);
  hp.n_head_kv = uniform_per_layer(f, key_of(arch, "attention.head_count_kv"), hp.n_layer, hp.n_head, 1);
  if (hp.n_head % hp.n_head_kv != 0) {
    fail(f, "attention.head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(hp.n_head_kv));
  }
  const int64_t head_default = hp.n_embd / hp.n_head;
  const std::string k_hk = key_of(arch, "attention.key_length"), k_hv = key_of(arch, "attention.value_length");
  const std::string k_rot = key_of(arch, "rope.dimension_count");
  hp.head_dim_k = to_i32(f, k_hk, f.get_i64_or(k_hk, head_default), 1, k_max_dim);
  hp.head_dim_v = to_i32(f, k_hv, f.get_i64_or(k_hv, head_default), 1, k_max_dim);
  hp.n_rot = to_i32(f, k_rot, f.get_i64_or(k_rot, hp.head_dim_k), 1, k_max_dim);
  if (hp.n_rot != hp.head_dim_k || hp.head_dim_v != hp.head_dim_k) {
    fail(f, "rope dimension count " + std::to_string(hp.n_rot) + ", key length " + std::to_string(hp.head_dim_k) +
                " and value length " + std::to_string(hp.head_dim_v) + " must be equal for architecture " + arch);
  }
  if (hp.n_rot % 2 != 0) fail(f, "rope dimension count " + std::to_string(hp.n_rot) + " must be even");

  const std::string k_eps = key_of(arch, "attention.layer_norm_rms_epsilon");
  const double eps = f.get_f64(k_eps);  // required for llama, qwen2, qwen3
  if (!(eps >= 0.0) || !std::isfinite(eps)) fail(f, "key '" + k_eps + "' must be a non-negative finite number");
  hp.rms_eps = (float)eps;
  read_rope(f, arch, hp);
  return hp;
}

}  // namespace spindle
