// A plain double-precision forward pass of the dense architectures (llama, qwen2, qwen3, gemma3, granite) over the f32 values
// a test GGUF holds (model_test_gguf.h), written from the formulas, for checking model::forward.
// gemma3, from llama.cpp's llama_model_gemma3 graph: token embeddings times sqrtf(n_embd) (in f32, as ggml_scale
// does); per-head RMSNorm of q and k; NEOX rope with the layer's own base and scale (sliding layers:
// rope.freq_base_swa, else 10000, unscaled; global layers: rope.freq_base and the linear scaling); q.k times
// 1 / sqrt(head_dim) (62 layers, the 27B: 1 / sqrt(n_embd / n_head)); a sliding layer's query at position t attends
// [max(0, t - window + 1), t]; RMSNorm of the attention output (post_attention_norm) before its residual add; FFN
// gelu(gate) * up with gelu's tanh form; RMSNorm of the FFN output (post_ffw_norm) before its residual add; the
// other archs' output norm and head.
// Invariant: shares no code with native/model or the backend; only the file's values and the spec.
#pragma once
#include <algorithm>
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

// Rotates each head's pairs (NEOX: j and j + hd / 2; else 2j and 2j + 1) by pos * freq_scale * base^(-2j / hd).
inline void rope(dvec& x, int n_head, int hd, int pos, double base, bool neox, double freq_scale = 1.0) {
  for (int h = 0; h < n_head; ++h) {
    for (int j = 0; j < hd / 2; ++j) {
      const double a = pos * freq_scale * std::pow(base, -2.0 * j / hd);
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

// gelu's tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
inline double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

// logits [n][n_vocab] of tokens at positions 0..n-1. window false: sliding layers attend all of [0, t] (their rope
// unchanged), to show that a test's result depends on the window. bidir: [begin, end) spans whose queries attend
// up to the span's end (gemma3's image embeddings; within a sliding layer's window behind them, as llama.cpp masks).
inline std::vector<dvec> reference_forward(const built& b, const spec& s, const std::vector<int32_t>& tokens,
                                           bool window = true, const std::vector<std::pair<int, int>>& bidir = {}) {
  const int n = (int)tokens.size(), e = s.n_embd, hd = head_dim(s), group = s.n_head / s.n_head_kv;
  const bool neox = s.arch != "llama" && s.arch != "granite", gemma3 = s.arch == "gemma3";  // llama.cpp's rope types
  const tensor_data& embd = *find(b, "token_embd.weight");
  const bool granite = s.arch == "granite";
  const float embd_scale = gemma3 ? std::sqrt((float)e) : granite && s.embedding_scale > 0 ? s.embedding_scale : 1.0f;
  double kq_scale = 1.0 / std::sqrt(gemma3 && s.n_layer == 62 ? (double)(e / s.n_head) : (double)hd);
  if (granite && s.attention_scale > 0) kq_scale = s.attention_scale;
  const double residual = granite && s.residual_scale > 0 ? s.residual_scale : 1.0;  // granite's branch outputs
  std::vector<dvec> x(n, dvec(e));
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < e; ++i) x[t][i] = embd.host[(size_t)tokens[t] * e + i] * embd_scale;  // f32 product
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    auto T = [&](const char* name) { return find(b, p + name); };
    const bool swa = is_swa_layer(s, il);
    const double base = swa ? (s.rope_base_swa > 0 ? s.rope_base_swa : 10000.0) : s.rope_base;
    const double freq_scale = !swa && s.rope_scale > 0 ? 1.0 / s.rope_scale : 1.0;
    const int span = swa && window ? s.sliding_window : n;  // positions a query attends, its own included
    std::vector<dvec> K(n), V(n), Q(n);
    for (int t = 0; t < n; ++t) {
      dvec h = rms_norm(x[t], T("attn_norm.weight")->host.data(), 0, e, 1e-6);
      Q[t] = mat_vec(*T("attn_q.weight"), h), K[t] = mat_vec(*T("attn_k.weight"), h), V[t] = mat_vec(*T("attn_v.weight"), h);
      add_bias(Q[t], T("attn_q.bias")), add_bias(K[t], T("attn_k.bias")), add_bias(V[t], T("attn_v.bias"));
      head_norm(Q[t], s.n_head, hd, T("attn_q_norm.weight"));
      head_norm(K[t], s.n_head_kv, hd, T("attn_k_norm.weight"));
      rope(Q[t], s.n_head, hd, t, base, neox, freq_scale);
      rope(K[t], s.n_head_kv, hd, t, base, neox, freq_scale);
    }
    for (int t = 0; t < n; ++t) {
      const int j0 = std::max(0, t - span + 1);
      int last = t;  // the last key position it attends
      for (const auto& [sb, se] : bidir) last = t >= sb && t < se ? se - 1 : last;
      dvec att((size_t)s.n_head * hd, 0.0);
      for (int h = 0; h < s.n_head; ++h) {
        const int kh = h / group;
        dvec sc(last + 1 - j0);
        double m = -1e300, tot = 0;
        for (int j = j0; j <= last; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += Q[t][h * hd + i] * K[j][kh * hd + i];
          sc[j - j0] = d * kq_scale;
          m = std::max(m, sc[j - j0]);
        }
        for (auto& v : sc) tot += (v = std::exp(v - m));
        for (int j = j0; j <= last; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[j - j0] / tot * V[j][kh * hd + i];
      }
      dvec o = mat_vec(*T("attn_output.weight"), att);
      if (const tensor_data* pn = T("post_attention_norm.weight")) o = rms_norm(o, pn->host.data(), 0, e, 1e-6);
      for (int i = 0; i < e; ++i) x[t][i] += o[i] * residual;
      dvec h = rms_norm(x[t], T("ffn_norm.weight")->host.data(), 0, e, 1e-6);
      dvec g = mat_vec(*T("ffn_gate.weight"), h), u = mat_vec(*T("ffn_up.weight"), h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = (gemma3 ? gelu_tanh(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      dvec d = mat_vec(*T("ffn_down.weight"), g);
      if (const tensor_data* pn = T("post_ffw_norm.weight")) d = rms_norm(d, pn->host.data(), 0, e, 1e-6);
      for (int i = 0; i < e; ++i) x[t][i] += d[i] * residual;
    }
  }
  const tensor_data* out = find(b, "output.weight");
  std::vector<dvec> logits(n);
  for (int t = 0; t < n; ++t) logits[t] = mat_vec(out ? *out : embd, rms_norm(x[t], find(b, "output_norm.weight")->host.data(), 0, e, 1e-6));
  if (granite && s.logit_scale > 0) {
    for (dvec& row : logits)
      for (double& v : row) v /= s.logit_scale;
  }
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
