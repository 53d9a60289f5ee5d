// MoE hyperparameters and tensors from a GGUF file (see moe_ffn.h), with llama.cpp's names, defaults and
// limits (llama-model.cpp load_hparams: expert_count <= LLAMA_MAX_EXPERTS, 0 < expert_used_count <= expert_count).
// Invariant: a returned config has 1 <= n_expert_used <= n_expert <= 1024 and n_ff_exp >= 1; every returned
// tensor has exactly the shape cfg implies and a type the backend computes with; anything else throws
// spindle::error naming the file and the key or tensor.
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/model_tensors.h"
#include "model/moe_ffn.h"

namespace spindle {

namespace {

constexpr int64_t k_max_experts = 1024;  // LLAMA_MAX_EXPERTS
constexpr int64_t k_max_width = 1 << 24;

[[noreturn]] void fail(const gguf_file& f, const std::string& what) { throw error(f.path() + ": " + what); }

// A per-layer count (scalar, or an array of n_layer with every entry equal) in [lo, hi]; absent: fallback.
int64_t uniform_count(const gguf_file& f, const std::string& key, int32_t n_layer, int64_t lo, int64_t hi,
                      int64_t fallback) {
  if (!f.find(key)) {
    if (fallback < lo) fail(f, "key '" + key + "' not found");
    return fallback;
  }
  const std::vector<int64_t> v = f.get_i64_array_or_scalar(key, (uint64_t)n_layer);
  if (v.empty()) fail(f, "key '" + key + "' is empty");
  for (int64_t x : v) {
    if (x != v[0]) fail(f, "key '" + key + "' differs between layers, which is not supported");
  }
  if (v[0] < lo || v[0] > hi) {
    fail(f, "key '" + key + "' = " + std::to_string(v[0]) + " out of range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  }
  return v[0];
}

// A stacked expert tensor ne = [n_in, n_out, n_expert] as one weight of n_out * n_expert rows.
backend_weight stacked(tensor_table& t, const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert) {
  const gguf_file& f = t.file();
  const std::vector<int64_t> want = {n_in, n_out, n_expert};
  const gguf_tensor* g = f.find_tensor(name);
  if (!g) fail(f, "tensor '" + name + "' not found (required by the MoE layers, expected shape " + shape_str(want.data(), int(want.size())) + ")");
  if (g->ne[0] != n_in || g->ne[1] != n_out || g->ne[2] != n_expert || g->ne[3] != 1) {
    fail(f, "tensor '" + name + "' has wrong shape " +
                shape_str(g->ne, int(g->n_dims)) + ", expected " + shape_str(want.data(), int(want.size())));
  }
  backend& be = t.compute_backend();
  if (!be.supports_type(g->type)) {
    fail(f, "tensor '" + name + "' has type " + type_name(g->type) + ", which the " + be.name() +
                " backend does not support (supported: " + supported_type_names(be) + ")");
  }
  const uint64_t rows = checked_mul((uint64_t)n_out, (uint64_t)n_expert, "expert rows");
  return be.upload_weight(g->type, g->data, n_in, (int64_t)rows);
}

}  // namespace

moe_config read_moe_config(const gguf_file& f, const std::string& arch, int32_t n_layer, int32_t n_ff) {
  moe_config c;
  const std::string k_count = arch + ".expert_count", k_used = arch + ".expert_used_count";
  const std::string k_ff = arch + ".expert_feed_forward_length";
  if (!f.find(k_count)) fail(f, "key '" + k_count + "' not found (required by architecture " + arch + ")");
  const uint64_t count = f.get_u64(k_count);
  if (count < 1 || count > (uint64_t)k_max_experts) {
    fail(f, "key '" + k_count + "' = " + std::to_string(count) + " out of range [1, " +
                std::to_string(k_max_experts) + "]");
  }
  c.n_expert = (int32_t)count;
  c.n_expert_used = (int32_t)uniform_count(f, k_used, n_layer, 1, c.n_expert, 0);
  const int64_t fallback = n_ff > 0 ? n_ff / c.n_expert_used : 0;
  c.n_ff_exp = (int32_t)uniform_count(f, k_ff, n_layer, 1, k_max_width, fallback);
  return c;
}

moe_gating read_moe_gating(const gguf_file& f, const std::string& arch) {
  const std::string key = arch + ".expert_gating_func";
  if (!f.find(key)) fail(f, "key '" + key + "' not found (required by architecture " + arch + ")");
  const uint64_t v = f.get_u64(key);
  if (v == (uint64_t)moe_gating::softmax) return moe_gating::softmax;
  if (v == (uint64_t)moe_gating::sigmoid) return moe_gating::sigmoid;
  fail(f, "key '" + key + "' = " + std::to_string(v) + ": unsupported expert gating function (supported: 1 softmax, "
          "2 sigmoid)");
}

moe_layer_weights load_moe_layer(tensor_table& t, int il, int64_t n_embd, const moe_config& cfg,
                                 bool with_probs_bias) {
  const int64_t ne = cfg.n_expert, ff = cfg.n_ff_exp;
  moe_layer_weights w;
  w.gate_inp = t.matrix(tensor_table::blk(il, "ffn_gate_inp.weight"), n_embd, ne, true);
  w.gate_exps = stacked(t, tensor_table::blk(il, "ffn_gate_exps.weight"), n_embd, ff, ne);
  w.up_exps = stacked(t, tensor_table::blk(il, "ffn_up_exps.weight"), n_embd, ff, ne);
  w.down_exps = stacked(t, tensor_table::blk(il, "ffn_down_exps.weight"), ff, n_embd, ne);
  if (with_probs_bias) {
    backend_buffer b = t.vector(tensor_table::blk(il, "exp_probs_b.bias"), ne, true);
    w.exp_probs_b.resize((size_t)ne);
    t.compute_backend().download(w.exp_probs_b.data(), b.data(), ne);
    w.exp_probs_b_dev = std::move(b);
  }
  return w;
}

}  // namespace spindle
