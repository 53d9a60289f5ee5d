// Builds small random-weight GGUF models (llama / qwen2 / qwen3 / gemma3) in memory for the native model tests, with a
// minimal SentencePiece vocabulary, and keeps the f32 values the file holds for a reference forward.
// Invariant: spec.weight_type F32 stores the host weights exactly; F16 / BF16 store them rounded, and `host` holds
// the rounded values, so a reference built from `host` sees exactly what the model file says.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/fp16.h"
#include "gguf_test_writer.h"
#include "model/model.h"
#include "test_quantize.h"

namespace model_test {

using spindle::ggml_type;
using spindle::gguf_value_type;

struct spec {
  std::string arch = "llama";
  int n_layer = 2, n_embd = 32, n_head = 4, n_head_kv = 2, n_ff = 48;
  int n_normal_tokens = 40;  // besides <unk> <s> </s> and the 256 byte tokens
  bool tied = false;         // no output.weight
  bool qkv_bias = false;
  float rope_base = 10000.0f;
  uint32_t context_length = 256;             // the trained context written to the file
  ggml_type weight_type = ggml_type::F32;  // of the 2-D matrices; 1-D tensors are always F32
  uint32_t seed = 1;
  int64_t block_count_override = -1;        // written instead of n_layer when >= 0
  // Written by write_more_kvs (build() and moe_test's call it after write_kvs):
  int head_dim = 0;          // > 0: attention.key_length = value_length = head_dim (q: n_head * head_dim wide)
  float rope_scale = 0.0f;   // > 0: rope.scaling.type linear, rope.scaling.factor (positions / factor; gemma3: the
                             // global layers only)
  // gemma3 (arch "gemma3"; ignored otherwise): a sliding window on the layers the pattern marks
  int sliding_window = 0;           // > 0: attention.sliding_window (positions); 0: not written, no window
  int64_t swa_pattern = -1;         // >= 0: attention.sliding_window_pattern as a number n (layer il slides unless
                                    // il % n == n - 1; 0: every layer); -1: not written (llama.cpp's default 6)
  std::vector<uint8_t> swa_layers;  // non-empty: the pattern as a bool array instead, one per layer (1: sliding)
  float rope_base_swa = 0.0f;       // > 0: rope.freq_base_swa, the sliding layers' rope base; 0: not written (10000)
  // granite (arch "granite"; ignored otherwise): its scalars, each written when > 0 (logit_scale is required)
  float embedding_scale = 0.0f, residual_scale = 0.0f, attention_scale = 0.0f, logit_scale = 0.0f;
  // More keys after all of the above (n_extra_kvs of them), for load-error tests (a bad type, a refused key).
  std::function<void(gguf_test::writer&)> extra_kvs;
  uint64_t n_extra_kvs = 0;
  // Edits applied to the tensor list before writing (drop / reshape / retype a tensor).
  std::function<void(std::vector<gguf_test::tensor_spec>&)> edit_tensors;
};

// Dims per attention head: spec.head_dim, else n_embd / n_head.
inline int head_dim(const spec& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }

// Whether layer il of a gemma3 spec attends through the sliding window (llama.cpp's set_swa_pattern / the array).
inline bool is_swa_layer(const spec& s, int il) {
  if (s.arch != "gemma3" || s.sliding_window <= 0) return false;
  if (!s.swa_layers.empty()) return (size_t)il < s.swa_layers.size() && s.swa_layers[(size_t)il] != 0;
  const int64_t n = s.swa_pattern >= 0 ? s.swa_pattern : 6;
  return n == 0 || il % n < n - 1;
}

struct tensor_data {
  std::vector<int64_t> ne;
  std::vector<float> host;  // values as stored (after f16 rounding)
};

struct built {
  std::vector<uint8_t> bytes;
  std::map<std::string, tensor_data> tensors;
  int n_vocab = 0;
};

inline std::vector<std::string> vocab_tokens(const spec& s) {
  std::vector<std::string> t = {"<unk>", "<s>", "</s>"};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    t.push_back(buf);
  }
  for (int i = 0; i < s.n_normal_tokens; ++i) t.push_back("\xE2\x96\x81w" + std::to_string(i));
  return t;
}

// The SentencePiece vocabulary keys of every test model (unk, bos, eos, 256 byte tokens, then words).
constexpr uint64_t k_n_vocab_kv = 7;
inline void write_vocab_kvs(gguf_test::writer& w, const std::vector<std::string>& toks) {
  w.kv_str("tokenizer.ggml.model", "llama");
  w.arr_str("tokenizer.ggml.tokens", toks);
  std::vector<float> scores(toks.size());
  std::vector<int32_t> types(toks.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[3 + b] = 6;
  for (size_t i = 0; i < toks.size(); ++i) scores[i] = -(float)i;
  w.arr_of<float>("tokenizer.ggml.scores", gguf_value_type::FLOAT32, scores);
  w.arr_of<int32_t>("tokenizer.ggml.token_type", gguf_value_type::INT32, types);
  w.kv<uint32_t>("tokenizer.ggml.bos_token_id", gguf_value_type::UINT32, 1);
  w.kv<uint32_t>("tokenizer.ggml.eos_token_id", gguf_value_type::UINT32, 2);
  w.kv<uint32_t>("tokenizer.ggml.unknown_token_id", gguf_value_type::UINT32, 0);
}

inline void write_kvs(gguf_test::writer& w, const spec& s, const std::vector<std::string>& toks) {
  const std::string a = s.arch;
  const int64_t n_layer = s.block_count_override >= 0 ? s.block_count_override : s.n_layer;
  w.kv_str("general.architecture", a);
  w.kv<uint32_t>(a + ".context_length", gguf_value_type::UINT32, s.context_length);
  w.kv<uint32_t>(a + ".embedding_length", gguf_value_type::UINT32, s.n_embd);
  w.kv<uint32_t>(a + ".block_count", gguf_value_type::UINT32, (uint32_t)n_layer);
  w.kv<uint32_t>(a + ".feed_forward_length", gguf_value_type::UINT32, s.n_ff);
  w.kv<uint32_t>(a + ".attention.head_count", gguf_value_type::UINT32, s.n_head);
  w.kv<uint32_t>(a + ".attention.head_count_kv", gguf_value_type::UINT32, s.n_head_kv);
  w.kv<float>(a + ".attention.layer_norm_rms_epsilon", gguf_value_type::FLOAT32, 1e-6f);
  w.kv<float>(a + ".rope.freq_base", gguf_value_type::FLOAT32, s.rope_base);
  write_vocab_kvs(w, toks);
}
constexpr uint64_t k_n_kv = 9 + k_n_vocab_kv;  // keys written by write_kvs

// The keys build() writes after write_kvs' (head_dim, rope_scale, gemma3's window keys, granite's scalars, then
// extra_kvs); returns
// how many.
inline uint64_t write_more_kvs(gguf_test::writer& w, const spec& s) {
  const std::string a = s.arch;
  uint64_t n = 0;
  if (s.head_dim > 0) {
    w.kv<uint32_t>(a + ".attention.key_length", gguf_value_type::UINT32, (uint32_t)s.head_dim);
    w.kv<uint32_t>(a + ".attention.value_length", gguf_value_type::UINT32, (uint32_t)s.head_dim);
    n += 2;
  }
  if (s.rope_scale > 0.0f) {
    w.kv_str(a + ".rope.scaling.type", "linear");
    w.kv<float>(a + ".rope.scaling.factor", gguf_value_type::FLOAT32, s.rope_scale);
    n += 2;
  }
  if (a == "gemma3" && s.sliding_window > 0) {
    w.kv<uint32_t>(a + ".attention.sliding_window", gguf_value_type::UINT32, (uint32_t)s.sliding_window);
    ++n;
  }
  if (a == "gemma3" && !s.swa_layers.empty()) {
    w.arr_of<uint8_t>(a + ".attention.sliding_window_pattern", gguf_value_type::BOOL, s.swa_layers);
    ++n;
  } else if (a == "gemma3" && s.swa_pattern >= 0) {
    w.kv<uint32_t>(a + ".attention.sliding_window_pattern", gguf_value_type::UINT32, (uint32_t)s.swa_pattern);
    ++n;
  }
  if (a == "gemma3" && s.rope_base_swa > 0.0f) {
    w.kv<float>(a + ".rope.freq_base_swa", gguf_value_type::FLOAT32, s.rope_base_swa);
    ++n;
  }
  if (a == "granite") {
    for (const auto& [key, v] : {std::pair<const char*, float>{".logit_scale", s.logit_scale}, {".residual_scale", s.residual_scale},
                                 {".embedding_scale", s.embedding_scale}, {".attention.scale", s.attention_scale}}) {
      if (v <= 0.0f) continue;
      w.kv<float>(a + key, gguf_value_type::FLOAT32, v);
      ++n;
    }
  }
  if (s.extra_kvs) s.extra_kvs(w);
  return n + s.n_extra_kvs;
}

// llama.cpp's tensors of the architecture; gemma3: q / k norms and post_attention_norm / post_ffw_norm besides
// llama's (attn_q [n_embd, n_head * head_dim]).
inline std::vector<gguf_test::tensor_spec> tensor_list(const spec& s, int n_vocab) {
  const int64_t hd = head_dim(s), e = s.n_embd, q = hd * s.n_head, kv = hd * s.n_head_kv;
  const bool gemma3 = s.arch == "gemma3";
  const ggml_type W = s.weight_type, F = ggml_type::F32;
  std::vector<gguf_test::tensor_spec> t = {{"token_embd.weight", {e, n_vocab}, W}, {"output_norm.weight", {e}, F}};
  if (!s.tied) t.push_back({"output.weight", {e, n_vocab}, W});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    t.push_back({b + "attn_norm.weight", {e}, F});
    t.push_back({b + "attn_q.weight", {e, q}, W});
    t.push_back({b + "attn_k.weight", {e, kv}, W});
    t.push_back({b + "attn_v.weight", {e, kv}, W});
    if (s.qkv_bias) {
      t.push_back({b + "attn_q.bias", {q}, F});
      t.push_back({b + "attn_k.bias", {kv}, F});
      t.push_back({b + "attn_v.bias", {kv}, F});
    }
    if (s.arch == "qwen3" || gemma3) {
      t.push_back({b + "attn_q_norm.weight", {hd}, F});
      t.push_back({b + "attn_k_norm.weight", {hd}, F});
    }
    t.push_back({b + "attn_output.weight", {q, e}, W});
    if (gemma3) t.push_back({b + "post_attention_norm.weight", {e}, F});
    t.push_back({b + "ffn_norm.weight", {e}, F});
    t.push_back({b + "ffn_gate.weight", {e, s.n_ff}, W});
    t.push_back({b + "ffn_up.weight", {e, s.n_ff}, W});
    t.push_back({b + "ffn_down.weight", {s.n_ff, e}, W});
    if (gemma3) t.push_back({b + "post_ffw_norm.weight", {e}, F});
  }
  return t;
}

// Random values: norms around 1, biases small, matrices scaled by 1/sqrt(n_in); rounded as stored.
inline std::vector<float> random_values(const gguf_test::tensor_spec& t, std::mt19937& rng) {
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  const bool is_norm = t.name.find("norm") != std::string::npos, is_bias = t.name.find(".bias") != std::string::npos;
  const float scale = is_norm ? 0.2f : is_bias ? 0.1f : 1.5f / std::sqrt((float)t.ne[0]);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v((size_t)n);
  for (auto& x : v) {
    x = (is_norm ? 1.0f : 0.0f) + scale * dist(rng);
    if (t.type == ggml_type::F16) x = spindle::fp16_to_f32(spindle::f32_to_fp16(x));
    if (t.type == ggml_type::BF16) x = spindle::bf16_to_f32(spindle::f32_to_bf16(x));
  }
  return v;
}

// F16 / BF16 round; the quantized CPU types quantize (test_quantize.h; `host` keeps the unquantized values then);
// anything else writes the f32 bytes (padded or cut to the tensor's size: a deliberately retyped tensor).
inline void append_data(std::vector<uint8_t>& out, const gguf_test::tensor_spec& t, const std::vector<float>& v) {
  std::vector<uint8_t> q;
  if (test_quantize::quantize(t.type, v, q) && q.size() == gguf_test::tensor_bytes(t)) {
    out.insert(out.end(), q.begin(), q.end());
  } else if (t.type == ggml_type::F16 || t.type == ggml_type::BF16) {
    for (float x : v) {
      const uint16_t h = t.type == ggml_type::F16 ? spindle::f32_to_fp16(x) : spindle::f32_to_bf16(x);
      out.push_back((uint8_t)(h & 0xff));
      out.push_back((uint8_t)(h >> 8));
    }
  } else {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(v.data());
    const uint64_t n = gguf_test::tensor_bytes(t);  // may be smaller/larger than v for retyped tensors
    for (uint64_t i = 0; i < n; ++i) out.push_back(i < v.size() * 4 ? p[i] : 0);
  }
}

// A GGUF file: header, the n_kv keys already in `kvs`, then `tensors` (after `edit`, when set) filled with
// random_values from `seed`, their data 32-byte aligned. out.tensors keeps every tensor's values.
inline built build_file(std::vector<gguf_test::tensor_spec> tensors,
                        const std::function<void(std::vector<gguf_test::tensor_spec>&)>& edit, uint32_t seed,
                        const gguf_test::writer& kvs, uint64_t n_kv, int n_vocab) {
  built out;
  out.n_vocab = n_vocab;
  if (edit) edit(tensors);
  std::mt19937 rng(seed);
  std::vector<std::vector<float>> values;
  for (const auto& t : tensors) {
    values.push_back(random_values(t, rng));
    out.tensors[t.name] = {t.ne, values.back()};
  }
  gguf_test::writer w;
  w.header(3, tensors.size(), n_kv);
  w.bytes.insert(w.bytes.end(), kvs.bytes.begin(), kvs.bytes.end());
  uint64_t next = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors) {
    offsets.push_back(next);
    w.tensor_info(t.name, t.ne, (uint32_t)t.type, next);
    next = (next + gguf_test::tensor_bytes(t) + 31) / 32 * 32;
  }
  w.pad_to(32);
  const uint64_t data_start = w.bytes.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.bytes.resize(data_start + offsets[i], 0);
    append_data(w.bytes, tensors[i], values[i]);
  }
  out.bytes = std::move(w.bytes);
  return out;
}

inline built build(const spec& s) {
  const std::vector<std::string> toks = vocab_tokens(s);
  gguf_test::writer kvs;
  write_kvs(kvs, s, toks);
  const uint64_t n_more = write_more_kvs(kvs, s);
  return build_file(tensor_list(s, (int)toks.size()), s.edit_tensors, s.seed, kvs, k_n_kv + n_more, (int)toks.size());
}

// The gemma3 test model: 8 layers (the default pattern: layer 5 global, the others sliding with window 5), head dim
// 16 (key_length: q is 64 wide over n_embd 32), GQA 4 / 2, tied output, rope.freq_base 1e6 with linear scaling 8
// on the global layer (as Gemma 3 4B and up).
inline spec gemma3_spec() {
  spec s;
  s.arch = "gemma3";
  s.n_layer = 8;
  s.head_dim = 16;
  s.tied = true;
  s.rope_base = 1000000.0f;
  s.rope_scale = 8.0f;
  s.sliding_window = 5;
  return s;
}

// Writes the file to a unique temp path and returns it.
inline std::string write_temp(const built& b, const std::string& tag) {
  static int counter = 0;
  static const unsigned salt = std::random_device{}();
  const std::string name = "spindle_model_test_" + std::to_string(salt) + "_" + tag + "_" + std::to_string(counter++) + ".gguf";
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return path;
  std::fwrite(b.bytes.data(), 1, b.bytes.size(), f);
  std::fclose(f);
  return path;
}

// A model loaded from a temp file (write_temp) that is removed with the object.
struct loaded_model {
  std::string path;
  std::unique_ptr<spindle::model> m;
  ~loaded_model() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// Writes `b` to a temp file (named after `tag`) and loads it on `threads` CPU threads with a `kv` cache.
inline std::unique_ptr<loaded_model> load_built(const built& b, const std::string& tag, int threads,
                                                spindle::kv_type kv = spindle::kv_type::f32) {
  auto l = std::make_unique<loaded_model>();
  l->path = write_temp(b, tag);
  spindle::model_options o;
  o.threads = threads;
  o.kv = kv;
  l->m = spindle::model::load(l->path, o);
  return l;
}

// A small llama model written to a temp file for engine tests (removed with the object); load() gives a model
// on `threads` CPU threads.
struct temp_llama {
  std::string path;
  explicit temp_llama(const std::string& tag, int64_t context_length = 64) {
    spec s;
    s.arch = "llama";
    s.context_length = context_length;
    path = write_temp(build(s), tag);
  }
  ~temp_llama() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  temp_llama(const temp_llama&) = delete;
  temp_llama& operator=(const temp_llama&) = delete;
  std::shared_ptr<spindle::model> load(int threads = 2) const {
    spindle::model_options o;
    o.threads = threads;
    return std::shared_ptr<spindle::model>(spindle::model::load(path, o));
  }
};

}  // namespace model_test
