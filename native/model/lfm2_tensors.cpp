// Architectures "lfm2" / "lfm2moe": hyperparameters (llama_model_lfm2{,moe}::load_arch_hparams) and the tensor
// table (load_arch_tensors), then the model. Invariant: a returned model has every tensor its forward pass reads, with
// the checked shape; layer kinds are exactly head_count_kv[il] == 0 (conv) / > 0 (attention).
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/lfm2_model.h"
#include "model/model_hparams.h"
#include "model/model_tensors.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

namespace {

constexpr int64_t k_max_dim = 1 << 24;     // any width beyond this is not a real model
constexpr int64_t k_max_l_cache = 1024;    // taps of the short convolution

[[noreturn]] void fail(const gguf_file& f, const std::string& what) { throw error(f.path() + ": " + what); }

std::string key(const model_hparams& hp, const char* suffix) { return hp.arch + "." + suffix; }

int32_t in_range(const gguf_file& f, const std::string& k, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    fail(f, "key '" + k + "' = " + std::to_string(v) + " out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return (int32_t)v;
}

int32_t required_int(const gguf_file& f, const std::string& k, int64_t lo, int64_t hi) {
  const uint64_t v = f.get_u64(k);
  if (v > (uint64_t)hi) fail(f, "key '" + k + "' = " + std::to_string(v) + " exceeds " + std::to_string(hi));
  return in_range(f, k, (int64_t)v, lo, hi);
}

// A per-layer count (scalar or array of n_layer) that lfm2 needs equal in every layer (>= 1).
int32_t uniform(const gguf_file& f, const std::string& k, int32_t n_layer) {
  const std::vector<int64_t> v = f.get_i64_array_or_scalar(k, (uint64_t)n_layer);
  for (int64_t x : v) {
    if (x != v[0]) fail(f, "key '" + k + "' differs between layers, which lfm2 does not support");
  }
  return in_range(f, k, v[0], 1, k_max_dim);
}

// head_count_kv per layer: 0 marks a short-conv layer; every attention layer must have the same count.
std::vector<bool> read_layer_kinds(const gguf_file& f, model_hparams& hp) {
  const std::string k = key(hp, "attention.head_count_kv");
  const std::vector<int64_t> kv = f.get_i64_array_or_scalar(k, (uint64_t)hp.n_layer);
  std::vector<bool> attention((size_t)hp.n_layer);
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    const int32_t n = in_range(f, k + "[" + std::to_string(il) + "]", kv[il], 0, k_max_dim);
    attention[il] = n > 0;
    if (n == 0) continue;
    if (hp.n_head_kv != 0 && n != hp.n_head_kv) fail(f, "key '" + k + "': attention layers differ in KV heads");
    hp.n_head_kv = n;
    hp.n_layer_kv++;
  }
  if (hp.n_layer_kv == 0) {
    fail(f, "key '" + k + "': no attention layer (a model of only short-conv layers is not supported)");
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    fail(f, "attention.head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(hp.n_head_kv));
  }
  return attention;
}

// What the lfm2 loader reads beside model_hparams.
struct lfm2_params {
  std::vector<bool> attention;  // per layer
  int32_t l_cache = 0;
  int32_t n_dense_lead = 0;     // lfm2moe: leading layers with a dense FFN (lfm2: every layer)
  moe_config moe;               // lfm2moe only
};

// Head width, value width and rope dimensions: defaults n_embd / n_head; all equal, n_head * width == n_embd.
void read_attention_dims(const gguf_file& f, model_hparams& hp) {
  const auto dim = [&](const char* k, int64_t fallback) {
    return in_range(f, key(hp, k), f.get_i64_or(key(hp, k), fallback), 1, k_max_dim);
  };
  hp.head_dim_k = dim("attention.key_length", hp.n_embd / hp.n_head);
  hp.head_dim_v = dim("attention.value_length", hp.n_embd / hp.n_head);
  hp.n_rot = dim("rope.dimension_count", hp.head_dim_k);
  if (hp.head_dim_v != hp.head_dim_k || hp.n_rot != hp.head_dim_k || hp.n_rot % 2 != 0 ||
      (int64_t)hp.n_head * hp.head_dim_k != hp.n_embd) {
    fail(f, hp.arch + " needs key length == value length == rope dimension count (even) and n_head * key length == "
            "n_embd (attn_q / attn_output are [n_embd, n_embd]), got key " + std::to_string(hp.head_dim_k) +
            ", value " + std::to_string(hp.head_dim_v) + ", rope " + std::to_string(hp.n_rot));
  }
}

// lfm2moe (llama_model_lfm2moe::load_arch_hparams): leading dense layers, expert counts and widths, gating.
void read_moe_params(const gguf_file& f, const model_hparams& hp, lfm2_params& p) {
  const std::string k_lead = key(hp, "leading_dense_block_count"), k_ff_exp = key(hp, "expert_feed_forward_length");
  p.n_dense_lead = in_range(f, k_lead, f.get_i64_or(k_lead, 0), 0, hp.n_layer);
  if (p.n_dense_lead > 0 && hp.n_ff <= 0) {
    fail(f, "key '" + key(hp, "feed_forward_length") + "' not found (the dense layers need it)");
  }
  if (!f.find(k_ff_exp)) fail(f, "key '" + k_ff_exp + "' not found (required by architecture " + hp.arch + ")");
  p.moe = read_moe_config(f, hp.arch, hp.n_layer, hp.n_ff);
  p.moe.gating = read_moe_gating(f, hp.arch);
  p.moe.norm_weights = true;    // build_moe_ffn(..., norm_w = true, ...)
  p.moe.weights_scale = 0.0f;   // expert_weights_scale is not read for lfm2moe: no scaling
}

model_hparams read_hparams(const gguf_file& f, const std::string& arch, int32_t n_vocab, lfm2_params& p) {
  model_hparams hp;
  hp.arch = arch;
  hp.name = f.get_string_or("general.name", "");
  hp.rope_neox = true;  // llama_model_rope_type: NEOX for LFM2
  if (n_vocab <= 0) fail(f, "the vocabulary is empty");
  hp.n_vocab = n_vocab;
  hp.n_ctx_train = required_int(f, key(hp, "context_length"), 0, INT32_MAX);
  hp.n_embd = required_int(f, key(hp, "embedding_length"), 1, k_max_dim);
  hp.n_layer = required_int(f, key(hp, "block_count"), 1, k_max_layers);
  const bool moe = arch == "lfm2moe";
  // lfm2moe needs feed_forward_length only for its leading dense layers
  hp.n_ff = moe && !f.find(key(hp, "feed_forward_length")) ? 0 : uniform(f, key(hp, "feed_forward_length"), hp.n_layer);
  hp.n_head = uniform(f, key(hp, "attention.head_count"), hp.n_layer);
  p.attention = read_layer_kinds(f, hp);
  read_attention_dims(f, hp);
  const double eps = f.get_f64(key(hp, "attention.layer_norm_rms_epsilon"));
  if (!(eps >= 0.0) || !std::isfinite(eps)) {
    fail(f, "key '" + key(hp, "attention.layer_norm_rms_epsilon") + "' must be finite and >= 0");
  }
  hp.rms_eps = (float)eps;
  load_rope_hparams(f, arch, hp);
  p.l_cache = required_int(f, key(hp, "shortconv.l_cache"), 2, k_max_l_cache);
  if (f.get_i64_or(key(hp, "attention.sliding_window"), 0) > 0) {
    fail(f, arch + " with sliding-window attention (key '" + key(hp, "attention.sliding_window") +
                "') is not supported");
  }
  if (!f.get_bool_or(key(hp, "attention.causal"), true)) {
    fail(f, "non-causal " + arch + " (embedding model, key '" + key(hp, "attention.causal") +
                "' = false) is not supported");
  }
  p.n_dense_lead = hp.n_layer;
  if (moe) read_moe_params(f, hp, p);
  return hp;
}

// shortconv.conv.weight: n_embd rows of l_cache taps in the file; returned tap-major [l_cache, n_embd].
backend_buffer load_conv_taps(tensor_table& t, backend& be, const std::string& name, int32_t l_cache, int64_t n_embd) {
  const gguf_tensor& w = t.host_matrix(name, l_cache, n_embd);  // host bytes: rearranged, then uploaded
  if (w.type != ggml_type::F32 && w.type != ggml_type::F16 && w.type != ggml_type::BF16) {
    throw error(t.file().path() + ": tensor '" + name + "' must be f32, f16 or bf16 (llama.cpp never quantizes it)");
  }
  const uint64_t row_bytes = ggml_row_size(w.type, (uint64_t)l_cache);
  std::vector<float> row((size_t)l_cache), taps((size_t)(l_cache * n_embd));
  for (int64_t c = 0; c < n_embd; ++c) {
    cpu_dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + c * row_bytes, row.data(), l_cache);
    for (int32_t k = 0; k < l_cache; ++k) taps[(size_t)(k * n_embd + c)] = row[k];
  }
  backend_buffer buf(be, l_cache * n_embd);
  be.upload(buf.data(), taps.data(), l_cache * n_embd);
  return buf;
}

void load_attention(tensor_table& t, const model_hparams& hp, int il, dense_layer& l) {
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k, n_kv = hd * hp.n_head_kv;
  if (t.has(tensor_table::blk(il, "attn_qkv.weight"))) {
    throw error(t.file().path() + ": tensor '" + tensor_table::blk(il, "attn_qkv.weight") +
                "': fused QKV weights are not supported (expected separate attn_q / attn_k / attn_v)");
  }
  l.q_norm = t.vector(tensor_table::blk(il, "attn_q_norm.weight"), hd, true);
  l.k_norm = t.vector(tensor_table::blk(il, "attn_k_norm.weight"), hd, true);
  l.wq = t.matrix(tensor_table::blk(il, "attn_q.weight"), n_embd, n_embd, true);
  l.wk = t.matrix(tensor_table::blk(il, "attn_k.weight"), n_embd, n_kv, true);
  l.wv = t.matrix(tensor_table::blk(il, "attn_v.weight"), n_embd, n_kv, true);
  l.bq = t.vector(tensor_table::blk(il, "attn_q.bias"), n_embd, false);
  l.bk = t.vector(tensor_table::blk(il, "attn_k.bias"), n_kv, false);
  l.bv = t.vector(tensor_table::blk(il, "attn_v.bias"), n_kv, false);
  l.wo = t.matrix(tensor_table::blk(il, "attn_output.weight"), n_embd, n_embd, true);
}

lfm2_layer load_layer(tensor_table& t, backend& be, const model_hparams& hp, const lfm2_params& p, int il) {
  const int64_t n_embd = hp.n_embd;
  lfm2_layer l;
  l.attention = p.attention[il];
  l.d.attn_norm = t.vector(tensor_table::blk(il, "attn_norm.weight"), n_embd, true);  // operator_norm
  if (l.attention) {
    load_attention(t, hp, il, l.d);
  } else {
    l.conv_w = load_conv_taps(t, be, tensor_table::blk(il, "shortconv.conv.weight"), p.l_cache, n_embd);
    l.conv_in = t.matrix(tensor_table::blk(il, "shortconv.in_proj.weight"), n_embd, 3 * n_embd, true);
    l.conv_out = t.matrix(tensor_table::blk(il, "shortconv.out_proj.weight"), n_embd, n_embd, true);
  }
  l.d.ffn_norm = t.vector(tensor_table::blk(il, "ffn_norm.weight"), n_embd, true);
  if (il >= p.n_dense_lead) {  // lfm2moe: router (with its selection bias) and stacked experts
    l.d.moe = load_moe_layer(t, il, n_embd, p.moe, /*with_probs_bias=*/true);
    return l;
  }
  l.d.ffn_gate = t.matrix(tensor_table::blk(il, "ffn_gate.weight"), n_embd, hp.n_ff, true);
  l.d.ffn_up = t.matrix(tensor_table::blk(il, "ffn_up.weight"), n_embd, hp.n_ff, true);
  l.d.ffn_down = t.matrix(tensor_table::blk(il, "ffn_down.weight"), hp.n_ff, n_embd, true);
  return l;
}

lfm2_weights load_weights(tensor_table& t, backend& be, const model_hparams& hp, const lfm2_params& p) {
  lfm2_weights w;
  w.l_cache = p.l_cache;
  if (p.n_dense_lead < hp.n_layer) w.moe = p.moe;
  w.tok_embd = t.matrix("token_embd.weight", hp.n_embd, hp.n_vocab, true);
  w.output_norm = t.vector("token_embd_norm.weight", hp.n_embd, true);  // LLM_TENSOR_OUTPUT_NORM_LFM2
  w.output = t.matrix("output.weight", hp.n_embd, hp.n_vocab, false);
  if (w.output.data == nullptr) w.output = w.tok_embd;  // tied embeddings
  w.layers.reserve((size_t)hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    lfm2_layer l = load_layer(t, be, hp, p, il);
    l.cache_index = l.attention ? w.n_attention++ : w.n_conv++;
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace

std::unique_ptr<model> load_lfm2_model(std::unique_ptr<gguf_file> file, const model_options& options) {
  const std::string arch = file->get_string("general.architecture");
  if (arch != "lfm2" && arch != "lfm2moe") throw error(file->path() + ": architecture '" + arch + "' is not lfm2");
  std::unique_ptr<tokenizer> vocab = tokenizer::from_gguf(*file);
  lfm2_params p;
  model_hparams hp = read_hparams(*file, arch, vocab->n_vocab(), p);
  std::unique_ptr<backend> be = make_backend_for_file(*file, options.device, options.threads);
  tensor_table table(*file, *be, hp.arch);
  lfm2_weights w = load_weights(table, *be, hp, p);
  return std::make_unique<lfm2_model>(std::move(file), std::move(vocab), std::move(be), std::move(hp), std::move(w));
}

}  // namespace spindle
