// A plain double-precision forward pass of the dense architectures over the f32 values a test GGUF holds
// (model_test_gguf.h), written from the formulas, for checking model::forward.
// Invariant: shares no code with native/model or the backend; only the file's values and the spec.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "model_test_gguf.h"

namespace model_test {

using dvec = std::vector<double>;

inline const tensor_data* find(const built& b, const std::string& name) {
  auto it = b.tensors.find(name);
  return it == b.tensors.end() ? nullptr : &it->second;
}

// y = W x for W stored as [n_out rows of n_in] (ne = [n_in, n_out]).
inline dvec mat_vec(const tensor_data& w, const dvec& x) {
  const int64_t n_in = w.ne[0], n_out = w.ne[1];
  dvec y((size_t)n_out, 0.0);
  for (int64_t o = 0; o < n_out; ++o)
    for (int64_t i = 0; i < n_in; ++i) y[o] += (double)w.host[o * n_in + i] * x[i];
  return y;
}

inline dvec rms_norm(const dvec& x, const float* w, size_t off, size_t n, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double s = 1.0 / std::sqrt(ss / n + eps);
  dvec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[off + i] * s * w[i];
  return y;
}

inline void add_bias(dvec& y, const tensor_data* b) {
  if (b) for (size_t i = 0; i < y.size(); ++i) y[i] += b->host[i];
}

inline void rope(dvec& x, int n_head, int hd, int pos, double base, bool neox) {
  for (int h = 0; h < n_head; ++h) {
    for (int j = 0; j < hd / 2; ++j) {
      const double a = pos * std::pow(base, -2.0 * j / hd);
      const size_t i0 = h * hd + (neox ? j : 2 * j), i1 = h * hd + (neox ? j + hd / 2 : 2 * j + 1);
      const double x0 = x[i0], x1 = x[i1];
      x[i0] = x0 * std::cos(a) - x1 * std::sin(a);
      x[i1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  }
}

inline void head_norm(dvec& x, int n_head, int hd, const tensor_data* w) {
  if (!w) return;
  for (int h = 0; h < n_head; ++h) {
    dvec y = rms_norm(x, w->host.data(), (size_t)h * hd, hd, 1e-6);
    for (int i = 0; i < hd; ++i) x[h * hd + i] = y[i];
  }
}

// logits [n][n_vocab]
inline std::vector<dvec> reference_forward(const built& b, const spec& s, const std::vector<int32_t>& tokens) {
  const int n = (int)tokens.size(), e = s.n_embd, hd = s.n_embd / s.n_head, group = s.n_head / s.n_head_kv;
  const bool neox = s.arch != "llama";
  const tensor_data& embd = *find(b, "token_embd.weight");
  std::vector<dvec> x(n);
  for (int t = 0; t < n; ++t) x[t].assign(embd.host.begin() + tokens[t] * e, embd.host.begin() + (tokens[t] + 1) * e);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    auto T = [&](const char* name) { return find(b, p + name); };
    std::vector<dvec> K(n), V(n), Q(n);
    for (int t = 0; t < n; ++t) {
      dvec h = rms_norm(x[t], T("attn_norm.weight")->host.data(), 0, e, 1e-6);
      Q[t] = mat_vec(*T("attn_q.weight"), h), K[t] = mat_vec(*T("attn_k.weight"), h), V[t] = mat_vec(*T("attn_v.weight"), h);
      add_bias(Q[t], T("attn_q.bias")), add_bias(K[t], T("attn_k.bias")), add_bias(V[t], T("attn_v.bias"));
      head_norm(Q[t], s.n_head, hd, T("attn_q_norm.weight"));
      head_norm(K[t], s.n_head_kv, hd, T("attn_k_norm.weight"));
      rope(Q[t], s.n_head, hd, t, s.rope_base, neox);
      rope(K[t], s.n_head_kv, hd, t, s.rope_base, neox);
    }
    for (int t = 0; t < n; ++t) {
      dvec att((size_t)s.n_head * hd, 0.0);
      for (int h = 0; h < s.n_head; ++h) {
        const int kh = h / group;
        dvec sc(t + 1);
        double m = -1e300, tot = 0;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += Q[t][h * hd + i] * K[j][kh * hd + i];
          sc[j] = d / std::sqrt((double)hd);
          m = std::max(m, sc[j]);
        }
        for (auto& v : sc) tot += (v = std::exp(v - m));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[j] / tot * V[j][kh * hd + i];
      }
      dvec o = mat_vec(*T("attn_output.weight"), att);
      for (int i = 0; i < e; ++i) x[t][i] += o[i];
      dvec h = rms_norm(x[t], T("ffn_norm.weight")->host.data(), 0, e, 1e-6);
      dvec g = mat_vec(*T("ffn_gate.weight"), h), u = mat_vec(*T("ffn_up.weight"), h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      dvec d = mat_vec(*T("ffn_down.weight"), g);
      for (int i = 0; i < e; ++i) x[t][i] += d[i];
    }
  }
  const tensor_data* out = find(b, "output.weight");
  std::vector<dvec> logits(n);
  for (int t = 0; t < n; ++t) logits[t] = mat_vec(out ? *out : embd, rms_norm(x[t], find(b, "output_norm.weight")->host.data(), 0, e, 1e-6));
  return logits;
}

// Max |ours - ref| over every position and vocabulary entry.   ours: [positions * n_vocab], ref: [positions][n_vocab]
inline double max_logit_diff(const std::vector<float>& ours, const std::vector<dvec>& ref) {
  double d = 0;
  const size_t V = ref[0].size();
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t v = 0; v < V; ++v) d = std::max(d, std::fabs(ours[t * V + v] - ref[t][v]));
  return d;
}

}  // namespace model_test
