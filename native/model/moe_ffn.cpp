// The MoE FFN block (see moe_ffn.h): router matmul and gating (softmax or sigmoid) on the backend, then
//   - per-expert path (the CPU; large batches): routing on the host, then per expert: gather its tokens' rows,
//     gate/up matmuls, SwiGLU, down matmul, scatter the rows into their top-k slot; finally every slot row times
//     its weight and the slots added in order;
//   - grouped path (a backend whose moe_on_device says so: a GPU at decode sizes): routing on the backend (the
//     selection bias from its backend copy), every (slot, token) entry's gate / up / down in one matmul_experts
//     call each, SwiGLU over all entries, moe_combine: no host round trip, the same bits.
// Invariant: nothing is computed before the shapes of cfg, w and n_embd have been checked against each other;
// x is only read before out is first written, so out may alias x.
#include "model/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "common/error.h"
#include "backend/moe_route.h"

namespace spindle {

namespace {

void check_shapes(const moe_config& cfg, const moe_layer_weights& w, int64_t n_embd) {
  const int64_t ne = cfg.n_expert, ff = cfg.n_ff_exp;
  if (ne < 1 || cfg.n_expert_used < 1 || cfg.n_expert_used > ne || ff < 1 || n_embd < 1) {
    throw error("moe_ffn: invalid config (" + std::to_string(ne) + " experts, " +
                std::to_string(cfg.n_expert_used) + " used, expert width " + std::to_string(ff) + ")");
  }
  const bool ok = w.gate_inp.n_in == n_embd && w.gate_inp.n_out == ne && w.gate_exps.n_in == n_embd &&
                  w.gate_exps.n_out == ff * ne && w.up_exps.n_in == n_embd && w.up_exps.n_out == ff * ne &&
                  w.down_exps.n_in == ff && w.down_exps.n_out == n_embd * ne &&
                  (w.exp_probs_b.empty() ||
                   ((int64_t)w.exp_probs_b.size() == ne && w.exp_probs_b_dev.size() == ne));
  if (!ok || !w.present()) throw error("moe_ffn: layer weights do not match the MoE config");
}

}  // namespace

void set_selection_bias(backend& be, moe_layer_weights& w, std::vector<float> bias) {
  w.exp_probs_b_dev = backend_buffer();
  if (!bias.empty()) {
    w.exp_probs_b_dev = backend_buffer(be, (int64_t)bias.size());
    be.upload(w.exp_probs_b_dev.data(), bias.data(), (int64_t)bias.size());
  }
  w.exp_probs_b = std::move(bias);
}

moe_route_params route_params(const moe_config& cfg) {
  moe_route_params p;
  p.n_expert = cfg.n_expert;
  p.k = cfg.n_expert_used;
  p.norm_weights = cfg.norm_weights;
  p.weights_scale = cfg.weights_scale;
  return p;
}

void moe_route(const moe_config& cfg, const float* probs, const float* bias, int64_t n, int32_t* ids,
               float* weights) {
  route_experts(route_params(cfg), probs, bias, n, ids, weights);
}

void moe_ffn::routing_to_host(int64_t n) {
  if (!routed_on_device_) return;
  routed_on_device_ = false;
  const int64_t ne = cap_expert_, k = cap_used_;
  be_->download(probs_.data(), logits_.data(), n * ne);
  std::vector<int32_t> id((size_t)(n * k));
  std::vector<float> wt((size_t)(n * k));
  be_->download(reinterpret_cast<float*>(id.data()), reinterpret_cast<const float*>(ids_dev_.data()), n * k);
  be_->download(wt.data(), weights_dev_.data(), n * k);
  slot_to_token_major(id.data(), n, k, ids_.data());
  slot_to_token_major(wt.data(), n, k, weights_.data());
}

void moe_ffn::route_on_host(backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n) {
  be.download(probs_.data(), logits_.data(), n * cfg.n_expert);
  moe_route(cfg, probs_.data(), w.exp_probs_b.empty() ? nullptr : w.exp_probs_b.data(), n, ids_.data(),
            weights_.data());
}

void moe_ffn::append_selection_scores(const moe_config& cfg, const moe_layer_weights& w, int64_t n,
                                      std::vector<float>& sink) {
  routing_to_host(n);
  const int64_t ne = cfg.n_expert;
  for (int64_t i = 0; i < n * ne; ++i) {
    sink.push_back(w.exp_probs_b.empty() ? probs_[i] : probs_[i] + w.exp_probs_b[i % ne]);
  }
}

void moe_ffn::reserve(backend& be, const moe_config& cfg, int64_t n, int64_t n_embd) {
  if (be_ == &be && n <= cap_tokens_ && n_embd == cap_embd_ && cfg.n_expert == cap_expert_ &&
      cfg.n_expert_used == cap_used_ && cfg.n_ff_exp == cap_ff_) {
    return;
  }
  const auto size = [&](int64_t a, int64_t b) { return (int64_t)checked_mul((uint64_t)a, (uint64_t)b, "moe_ffn scratch"); };
  const int64_t k = cfg.n_expert_used;
  logits_ = backend_buffer();  // free the old buffers first
  xg_ = backend_buffer();
  gate_ = backend_buffer();
  up_ = backend_buffer();
  slots_ = backend_buffer();
  cap_tokens_ = 0;
  gate_k_ = backend_buffer();  // the grouped path's, remade on its first use
  up_k_ = backend_buffer();
  ids_dev_ = backend_buffer();
  weights_dev_ = backend_buffer();
  cap_entries_ = 0;
  logits_ = backend_buffer(be, size(n, cfg.n_expert));
  xg_ = backend_buffer(be, size(n, n_embd));
  gate_ = backend_buffer(be, size(n, cfg.n_ff_exp));
  up_ = backend_buffer(be, size(n, cfg.n_ff_exp));
  slots_ = backend_buffer(be, size(size(k, n), n_embd));
  probs_.resize((size_t)size(n, cfg.n_expert));
  ids_.resize((size_t)size(n, k));
  weights_.resize((size_t)size(n, k));
  slot_weights_.resize((size_t)size(n, k));
  expert_rows_.resize((size_t)size(n, k));
  rows_.resize((size_t)size(n, k));
  expert_begin_.resize((size_t)cfg.n_expert + 1);
  be_ = &be;
  cap_tokens_ = n;
  cap_embd_ = n_embd;
  cap_expert_ = cfg.n_expert;
  cap_used_ = cfg.n_expert_used;
  cap_ff_ = cfg.n_ff_exp;
}

// CSR lists of the (token, slot) entries t * k + j per expert, tokens ascending (a stable counting sort).
void moe_ffn::group_by_expert(const moe_config& cfg, int64_t n) {
  const int64_t n_entries = n * cfg.n_expert_used;
  std::fill(expert_begin_.begin(), expert_begin_.end(), 0);
  for (int64_t i = 0; i < n_entries; ++i) expert_begin_[ids_[i] + 1]++;
  for (int32_t e = 0; e < cfg.n_expert; ++e) expert_begin_[e + 1] += expert_begin_[e];
  std::vector<int64_t> next(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t i = 0; i < n_entries; ++i) expert_rows_[next[ids_[i]]++] = i;
}

// Expert e over its m tokens: rows gathered into xg, swiglu(gate, up), down into xg, rows scattered to slots.
void moe_ffn::run_expert(backend& be, const moe_config& cfg, const moe_layer_weights& w, int32_t e, const float* x,
                         int64_t n, int64_t n_embd) {
  const int64_t k = cfg.n_expert_used, ff = cfg.n_ff_exp;
  const int64_t* entries = expert_rows_.data() + expert_begin_[e];
  const int64_t m = expert_begin_[e + 1] - expert_begin_[e];
  float* xg = xg_.data();    // [m, n_embd]
  float* gate = gate_.data();  // [m, ff]
  float* up = up_.data();      // [m, ff]
  for (int64_t i = 0; i < m; ++i) rows_[i] = entries[i] / k;  // the expert's tokens
  be.copy_rows(xg, nullptr, x, rows_.data(), m, n_embd);
  be.matmul_expert(w.gate_exps, e, ff, xg, m, gate);
  be.matmul_expert(w.up_exps, e, ff, xg, m, up);
  if (ff % 8 == 0) {
    be.swiglu(gate, up, gate, m * ff);
  } else {  // llama.cpp's vectorized groups of 8 start at every row
    for (int64_t i = 0; i < m; ++i) be.swiglu(gate + i * ff, up + i * ff, gate + i * ff, ff);
  }
  be.matmul_expert(w.down_exps, e, n_embd, gate, m, xg);  // [m, n_embd]
  for (int64_t i = 0; i < m; ++i) rows_[i] = (entries[i] % k) * n + entries[i] / k;  // slot j, token t
  be.copy_rows(slots_.data(), rows_.data(), xg, nullptr, m, n_embd);
}

void moe_ffn::forward(backend& be, const moe_config& cfg, const moe_layer_weights& w, const float* x, int64_t n,
                      int64_t n_embd, float* out) {
  check_shapes(cfg, w, n_embd);
  if (n < 0) throw error("moe_ffn: negative token count");
  if (n == 0) return;
  reserve(be, cfg, n, n_embd);
  const int64_t ne = cfg.n_expert, k = cfg.n_expert_used;
  float* logits = logits_.data();
  routed_on_device_ = false;
  last_n_ = n;
  be.matmul(w.gate_inp, x, n, logits);  // [n, n_expert]
  if (cfg.gating == moe_gating::softmax) be.softmax(logits, n, ne, 1.0f);
  else be.sigmoid(logits, n * ne);
  if (takes_grouped(be, cfg, w, n, n_embd)) {
    forward_grouped(be, cfg, w, x, n, n_embd, out);
    return;
  }
  route_on_host(be, cfg, w, n);
  group_by_expert(cfg, n);
  for (int32_t e = 0; e < cfg.n_expert; ++e) {
    if (expert_begin_[e + 1] > expert_begin_[e]) run_expert(be, cfg, w, e, x, n, n_embd);
  }
  token_to_slot_major(weights_.data(), n, k, slot_weights_.data());
  float* slots = slots_.data();  // [k, n, n_embd]
  be.scale_rows(slots, slot_weights_.data(), k * n, n_embd);
  be.copy(out, slots, n * n_embd);
  for (int64_t j = 1; j < k; ++j) be.add(out, slots + j * n * n_embd, out, n * n_embd);
}

bool moe_ffn::takes_grouped(const backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n,
                            int64_t n_embd) const {
  const int64_t entries = n * cfg.n_expert_used;
  return force_grouped_ || (be.moe_on_device(w.gate_exps, cfg.n_ff_exp, entries) &&
                            be.moe_on_device(w.up_exps, cfg.n_ff_exp, entries) &&
                            be.moe_on_device(w.down_exps, n_embd, entries));
}

bool moe_ffn::prepare_on_device(backend& be, const moe_config& cfg, const moe_layer_weights& w, int64_t n,
                                int64_t n_embd) {
  if (n <= 0 || !be.moe_route_on_device(route_params(cfg)) || !takes_grouped(be, cfg, w, n, n_embd)) return false;
  check_shapes(cfg, w, n_embd);
  reserve(be, cfg, n, n_embd);
  reserve_grouped(be, n * cfg.n_expert_used, cfg.n_ff_exp);
  return true;
}

void moe_ffn::forward_grouped(backend& be, const moe_config& cfg, const moe_layer_weights& w, const float* x,
                              int64_t n, int64_t n_embd, float* out) {
  const int64_t k = cfg.n_expert_used, ff = cfg.n_ff_exp, entries = n * k;
  reserve_grouped(be, entries, ff);
  int32_t* ids = reinterpret_cast<int32_t*>(ids_dev_.data());  // [k, n] int32 in float-sized slots
  be.moe_route(logits_.data(), w.exp_probs_b.empty() ? nullptr : w.exp_probs_b_dev.data(), n, route_params(cfg), ids,
               weights_dev_.data());
  routed_on_device_ = true;
  float* gate = gate_k_.data();  // [entries, ff]
  float* up = up_k_.data();
  be.matmul_experts(w.gate_exps, ff, ids, entries, n, x, gate);
  be.matmul_experts(w.up_exps, ff, ids, entries, n, x, up);
  if (ff % 8 == 0) {
    be.swiglu(gate, up, gate, entries * ff);
  } else {  // llama.cpp's vectorized groups of 8 start at every row
    for (int64_t i = 0; i < entries; ++i) be.swiglu(gate + i * ff, up + i * ff, gate + i * ff, ff);
  }
  float* slots = slots_.data();  // [k, n, n_embd]
  be.matmul_experts(w.down_exps, n_embd, ids, entries, entries, gate, slots);
  be.moe_combine(slots, weights_dev_.data(), n, k, n_embd, out);
}

void moe_ffn::reserve_grouped(backend& be, int64_t entries, int64_t ff) {
  if (entries <= cap_entries_) return;
  const int64_t size = (int64_t)checked_mul((uint64_t)entries, (uint64_t)ff, "moe_ffn scratch");
  gate_k_ = backend_buffer();
  up_k_ = backend_buffer();
  cap_entries_ = 0;
  gate_k_ = backend_buffer(be, size);
  up_k_ = backend_buffer(be, size);
  ids_dev_ = backend_buffer(be, entries);
  weights_dev_ = backend_buffer(be, entries);
  cap_entries_ = entries;
}

}  // namespace spindle
