// Mixture-of-experts feed-forward block (llama.cpp's build_moe_ffn with SiLU-gated experts), shared by the
// MoE architectures (qwen3moe; lfm2moe):
//   probs  = gating(x @ ffn_gate_inp)                          softmax over all experts, or sigmoid per expert
//   ids    = top-k of (probs + exp_probs_b)                    the bias (optional) only chooses experts
//   w_j    = probs[ids_j] (/ sum_j probs[ids_j]) (* scale)     the sum clamped to >= 2^-14, as llama.cpp
//   out    = sum_j w_j * down_e(silu(gate_e(x)) * up_e(x))     e = ids_j, summed in top-k order j = 0, 1, ...
// For a batch the tokens are grouped by expert, so each expert's weights are read once per call.
// Invariant (batch invariance): a token's output depends only on its own row of x: routing is per row, each
// expert matmul is per (row, token) (backend::matmul_expert), and the weighted sum runs in the token's
// top-k order, ((w_0 e_0 + w_1 e_1) + w_2 e_2) + ..., whatever else is in the batch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace spindle {

class gguf_file;
class tensor_table;

// Values of {arch}.expert_gating_func (llama.cpp's llama_expert_gating_func_type).
enum class moe_gating : int32_t { softmax = 1, sigmoid = 2 };

struct moe_config {
  int32_t n_expert = 0;       // experts per MoE layer ({arch}.expert_count)
  int32_t n_expert_used = 0;  // experts per token, k ({arch}.expert_used_count)
  int32_t n_ff_exp = 0;       // hidden width of one expert ({arch}.expert_feed_forward_length)
  moe_gating gating = moe_gating::softmax;
  bool norm_weights = true;    // divide the k selected weights by their sum (qwen3moe, lfm2moe: always)
  float weights_scale = 0.0f;  // multiply the weights by this after normalization; 0 or 1: no scaling
};

// One layer's router and experts. Stacked expert tensors hold expert e in rows [e * n_out, (e + 1) * n_out).
struct moe_layer_weights {
  backend_weight gate_inp;         // [n_embd, n_expert]: n_in n_embd, n_out n_expert (F32 in real files)
  std::vector<float> exp_probs_b;  // host [n_expert] selection bias, or empty (none)
  backend_buffer exp_probs_b_dev;  // the same in backend memory (set_selection_bias sets both)
  backend_weight gate_exps;        // [n_embd, n_ff_exp, n_expert]: n_in n_embd, n_out n_ff_exp * n_expert
  backend_weight up_exps;          // [n_embd, n_ff_exp, n_expert]: likewise
  backend_weight down_exps;        // [n_ff_exp, n_embd, n_expert]: n_in n_ff_exp, n_out n_embd * n_expert
  bool present() const { return gate_inp.data != nullptr; }
};

// Routing of n tokens, host memory: for token t and slot j < k, expert ids[t * k + j] with weight
// weights[t * k + j]; slots are in descending order of the selection score (ties: lower expert id first).
// probs: [n, n_expert] after the gating function; bias: [n_expert] or nullptr. A NaN score ranks lowest.
void moe_route(const moe_config& cfg, const float* probs, const float* bias, int64_t n, int32_t* ids,
               float* weights);

// Sets w's selection bias: the host copy and the backend one (what device routing reads).   bias: [n_expert]
void set_selection_bias(backend& be, moe_layer_weights& w, std::vector<float> bias);

// Runs the block; owns its scratch (grown, never shrunk). Not thread-safe: one instance per model.
class moe_ffn {
 public:
  // out[t, :] = the block's output for x[t, :].   x, out: backend [n, n_embd] (out may alias x; x must hold
  // the normed FFN input). Throws spindle::error (before any work) when cfg and w do not fit together.
  void forward(backend& be, const moe_config& cfg, const moe_layer_weights& w, const float* x, int64_t n,
               int64_t n_embd, float* out);
  // Whether forward of n tokens will run on the backend alone (the grouped path, routing on the backend: no host
  // read, no sync), so a decode step may record it in a step graph; when it will, the call's scratch is reserved
  // now (recording must allocate nothing).
  bool prepare_on_device(backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n, int64_t n_embd);
  // Routing of the last forward call of n tokens (tests, diagnostics): the first n * k entries of ids and
  // weights (token-major), the first n * n_expert of probs (after gating) are valid. Brought from the backend
  // when the grouped path routed there.
  const std::vector<int32_t>& last_ids() { routing_to_host(last_n_); return ids_; }
  const std::vector<float>& last_weights() { routing_to_host(last_n_); return weights_; }
  const std::vector<float>& last_probs() { routing_to_host(last_n_); return probs_; }
  // Appends the last call's selection scores (probs + exp_probs_b, as moe_route ranks them), [n, n_expert].
  void append_selection_scores(const moe_config& cfg, const moe_layer_weights& w, int64_t n,
                               std::vector<float>& sink);
  // Tests: the grouped path on any backend (its ops' defaults on the CPU), which must give the per-expert bits.
  void force_grouped(bool on) { force_grouped_ = on; }

 private:
  void reserve(backend& be, const moe_config& cfg, int64_t n, int64_t n_embd);
  bool takes_grouped(const backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n,
                     int64_t n_embd) const;
  void group_by_expert(const moe_config& cfg, int64_t n);
  void run_expert(backend& be, const moe_config& cfg, const moe_layer_weights& w, int32_t e, const float* x,
                  int64_t n, int64_t n_embd);
  void forward_grouped(backend& be, const moe_config& cfg, const moe_layer_weights& w, const float* x, int64_t n,
                       int64_t n_embd, float* out);
  void reserve_grouped(backend& be, int64_t entries, int64_t ff);
  void routing_to_host(int64_t n);  // probs_, ids_, weights_ from the backend after a grouped call routed there
  // probs_ (downloaded), ids_ and weights_ from the gated router scores in logits_.
  void route_on_host(backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n);

  backend* be_ = nullptr;     // the backend the buffers belong to
  int64_t cap_tokens_ = 0;    // tokens the buffers hold for the dims below
  int64_t cap_embd_ = 0, cap_expert_ = 0, cap_used_ = 0, cap_ff_ = 0;
  backend_buffer logits_;     // [n, n_expert] router logits, then probs (softmax)
  backend_buffer xg_;         // [n, n_embd] one expert's gathered input rows, then its output rows
  backend_buffer gate_, up_;  // [n, n_ff_exp]
  backend_buffer slots_;      // [k, n, n_embd] weighted expert outputs, slot-major
  std::vector<float> probs_;          // host [n, n_expert]
  std::vector<int32_t> ids_;          // host [n * k]
  std::vector<float> weights_;        // host [n * k]
  std::vector<float> slot_weights_;   // host [k * n] weights in slot-major order
  std::vector<int64_t> expert_begin_; // host [n_expert + 1] CSR offsets into expert_rows_
  std::vector<int64_t> expert_rows_;  // host [n * k] entries t * k + j, by expert, tokens ascending
  std::vector<int64_t> rows_;         // host [n * k] row indices of one expert's gather / scatter
  // grouped path (entries = n * k, slot-major)
  int64_t cap_entries_ = 0;
  backend_buffer gate_k_, up_k_;      // [entries, n_ff_exp]
  backend_buffer ids_dev_;            // [entries] int32 expert ids
  backend_buffer weights_dev_;        // [entries] weights
  bool routed_on_device_ = false;     // the last call routed on the backend: the host vectors are stale
  bool force_grouped_ = false;
  int64_t last_n_ = 0;                // tokens of the last call
};

// Reads {arch}.expert_count, expert_used_count and expert_feed_forward_length (scalar, or an array with every
// layer equal). n_ff_exp falls back to n_ff / n_expert_used when the key is absent and n_ff > 0 (llama.cpp's
// qwen3moe rule). Leaves gating / norm_weights / weights_scale at their defaults for the caller to set.
// Throws spindle::error naming the file and key on a missing or out-of-range value.
moe_config read_moe_config(const gguf_file& f, const std::string& arch, int32_t n_layer, int32_t n_ff);
// A step's graph key (step_graph_key's) kept only where every MoE block of `layers` (layer_moe(layer): its
// moe_layer_weights) stays on the device for n tokens (moe_ffn::prepare_on_device), else 0: op by op.
template <class Layers, class LayerMoe>
uint64_t moe_step_graph_key(uint64_t key, moe_ffn& f, backend& be, const moe_config& cfg, const Layers& layers,
                            LayerMoe layer_moe, int64_t n, int64_t n_embd) {
  for (const auto& layer : layers) {
    if (key == 0) break;
    const moe_layer_weights& m = layer_moe(layer);
    if (m.present() && !f.prepare_on_device(be, cfg, m, n, n_embd)) key = 0;
  }
  return key;
}

// {arch}.expert_gating_func (required): 1 softmax, 2 sigmoid; anything else throws.
moe_gating read_moe_gating(const gguf_file& f, const std::string& arch);

// Loads blk.<il>.ffn_gate_inp.weight, ffn_{gate,up,down}_exps.weight and, when with_probs_bias,
// blk.<il>.exp_probs_b.bias (required then), checking every shape against cfg and n_embd.
moe_layer_weights load_moe_layer(tensor_table& t, int il, int64_t n_embd, const moe_config& cfg,
                                 bool with_probs_bias);

}  // namespace spindle
