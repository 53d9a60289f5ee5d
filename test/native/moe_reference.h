// A plain double-precision MoE FFN (router, gating, top-k, weights, SiLU-gated experts, weighted sum) for checking
// moe_ffn, written from the formulas in moe_ffn.h. Activations enter each matmul as the kernel sees them
// (rounded to f16 / quantized to q8_K for those weight types), so only summation rounding separates the two.
// Invariant: shares no code with native/model; weights come in as dequantized f32 rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels_util.h"

namespace moe_test {

using namespace spindle;

struct ref_layer {
  int64_t n_embd = 0, n_expert = 0, k = 0, n_ff = 0;
  bool sigmoid = false, norm = true;
  float scale = 0.0f;
  std::vector<float> router;            // [n_expert, n_embd] (F32)
  std::vector<float> bias;              // [n_expert] or empty
  std::vector<float> gate, up;          // [n_expert * n_ff, n_embd] dequantized
  std::vector<float> down;              // [n_expert * n_embd, n_ff] dequantized
  ggml_type gate_type = ggml_type::F32, down_type = ggml_type::F32;
};

struct ref_out {
  std::vector<int> ids;        // [k] top-k order
  std::vector<double> weights; // [k]
  double margin = INFINITY;    // k-th minus (k+1)-th selection score
  std::vector<double> y;       // [n_embd]
};

// The activation row as the matmul kernel for weight type t sees it.
inline std::vector<float> as_kernel_sees(ggml_type t, const std::vector<float>& x) {
  if (t == ggml_type::F32) return x;
  const int64_t n = (int64_t)x.size();
  const std::vector<uint8_t> a = kernels_test::convert_activations(t, x, 1, n);
  return kernels_test::activation_values(cpu_activation_type(t), a.data(), n);
}

inline double dot(const float* w, const std::vector<float>& x) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (double)w[i] * x[i];
  return s;
}

inline ref_out moe_ref(const ref_layer& L, const float* x_row) {
  ref_out r;
  const std::vector<float> x(x_row, x_row + L.n_embd);
  std::vector<double> p((size_t)L.n_expert), sel((size_t)L.n_expert);
  double mx = -INFINITY, sum = 0;
  for (int64_t e = 0; e < L.n_expert; ++e) {
    p[e] = dot(L.router.data() + e * L.n_embd, x);
    mx = std::max(mx, p[e]);
  }
  for (auto& v : p) {
    if (L.sigmoid) v = 1.0 / (1.0 + std::exp(-v));
    else sum += (v = std::exp(v - mx));
  }
  if (!L.sigmoid) for (auto& v : p) v /= sum;
  std::vector<int> order((size_t)L.n_expert);
  for (int64_t e = 0; e < L.n_expert; ++e) {
    order[e] = (int)e;
    sel[e] = p[e] + (L.bias.empty() ? 0.0 : L.bias[e]);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return sel[a] > sel[b]; });
  if (L.k < L.n_expert) r.margin = sel[order[L.k - 1]] - sel[order[L.k]];
  double wsum = 0;
  for (int64_t j = 0; j < L.k; ++j) {
    r.ids.push_back(order[j]);
    r.weights.push_back(p[order[j]]);
    wsum += p[order[j]];
  }
  for (auto& w : r.weights) {
    if (L.norm) w /= std::max(wsum, 6.103515625e-5);
    if (L.scale != 0.0f && L.scale != 1.0f) w *= L.scale;
  }
  r.y.assign((size_t)L.n_embd, 0.0);
  const std::vector<float> xg = as_kernel_sees(L.gate_type, x);
  for (int64_t j = 0; j < L.k; ++j) {
    const int64_t e = r.ids[j];
    std::vector<float> h((size_t)L.n_ff);
    for (int64_t f = 0; f < L.n_ff; ++f) {
      const double g = dot(L.gate.data() + (e * L.n_ff + f) * L.n_embd, xg);
      const double u = dot(L.up.data() + (e * L.n_ff + f) * L.n_embd, xg);
      h[f] = (float)(g / (1.0 + std::exp(-g)) * u);
    }
    const std::vector<float> hd = as_kernel_sees(L.down_type, h);
    for (int64_t o = 0; o < L.n_embd; ++o) r.y[o] += r.weights[j] * dot(L.down.data() + (e * L.n_embd + o) * L.n_ff, hd);
  }
  return r;
}

}  // namespace moe_test
