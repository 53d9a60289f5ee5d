// The defaults of backend::sigmoid, moe_route, matmul_experts and moe_combine (backend.h): through the host where
// the gating, ids or weights are needed, otherwise the per-expert ops, so a backend without its own versions gives the same
// bits as the per-expert path.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"

namespace spindle {

void backend::sigmoid(float* x, int64_t n) {
  if (n <= 0) return;
  std::vector<float> h((size_t)n);
  download(h.data(), x, n);
  for (float& v : h) v = sigmoid_gate(v);
  upload(x, h.data(), n);
}

void backend::moe_route(const float* probs, const float* bias, int64_t n, const moe_route_params& p, int32_t* ids,
                        float* weights) {
  const int64_t ne = p.n_expert, k = p.k;
  std::vector<float> h_probs((size_t)(n * ne)), h_bias(bias ? (size_t)ne : 0), h_w((size_t)(n * k)), w((size_t)(n * k));
  std::vector<int32_t> h_ids((size_t)(n * k)), id((size_t)(n * k));
  download(h_probs.data(), probs, n * ne);
  if (bias) download(h_bias.data(), bias, ne);
  route_experts(p, h_probs.data(), bias ? h_bias.data() : nullptr, n, h_ids.data(), h_w.data());
  token_to_slot_major(h_ids.data(), n, k, id.data());
  token_to_slot_major(h_w.data(), n, k, w.data());
  upload(reinterpret_cast<float*>(ids), reinterpret_cast<const float*>(id.data()), n * k);  // int32 bits
  upload(weights, w.data(), n * k);
}

void backend::matmul_experts(const backend_weight& w, int64_t n_out, const int32_t* ids, int64_t n_entries,
                             int64_t x_rows, const float* x, float* y) {
  if (n_entries <= 0) return;
  if (n_out <= 0 || w.n_out % n_out != 0 || x_rows <= 0) throw error("matmul_experts: bad shape");
  const int64_t n_expert = w.n_out / n_out;
  std::vector<int32_t> h((size_t)n_entries);
  download(reinterpret_cast<float*>(h.data()), reinterpret_cast<const float*>(ids), n_entries);
  // the entries of each expert, in entry order (a stable counting sort)
  std::vector<int64_t> begin((size_t)n_expert + 1, 0), order((size_t)n_entries);
  for (int32_t e : h) {
    if (e < 0 || e >= n_expert) {
      throw error("matmul_experts: expert id " + std::to_string(e) + " outside [0, " + std::to_string(n_expert) + ")");
    }
    begin[(size_t)e + 1]++;
  }
  for (int64_t e = 0; e < n_expert; ++e) begin[(size_t)e + 1] += begin[(size_t)e];
  std::vector<int64_t> next(begin.begin(), begin.end() - 1), src((size_t)n_entries), dst((size_t)n_entries);
  for (int64_t i = 0; i < n_entries; ++i) order[(size_t)next[(size_t)h[(size_t)i]]++] = i;
  backend_buffer xg(*this, n_entries * w.n_in), yg(*this, n_entries * n_out);
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t m = begin[(size_t)e + 1] - begin[(size_t)e];
    if (m == 0) continue;
    for (int64_t i = 0; i < m; ++i) {
      src[(size_t)i] = order[(size_t)(begin[(size_t)e] + i)] % x_rows;
      dst[(size_t)i] = order[(size_t)(begin[(size_t)e] + i)];
    }
    copy_rows(xg.data(), nullptr, x, src.data(), m, w.n_in);
    matmul_expert(w, e, n_out, xg.data(), m, yg.data());
    copy_rows(y, dst.data(), yg.data(), nullptr, m, n_out);
  }
  sync();  // the scratch goes now
}

void backend::moe_combine(float* y, const float* weights, int64_t n, int64_t k, int64_t n_embd, float* out) {
  if (n <= 0) return;
  std::vector<float> w((size_t)(n * k));
  download(w.data(), weights, n * k);
  scale_rows(y, w.data(), k * n, n_embd);
  copy(out, y, n * n_embd);
  for (int64_t j = 1; j < k; ++j) add(out, y + j * n * n_embd, out, n * n_embd);
}

}  // namespace spindle
