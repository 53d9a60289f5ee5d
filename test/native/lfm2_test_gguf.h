// Small random-weight LFM2 GGUF models for the native tests (the model_test_gguf.h vocabulary and value rules,
// lfm2's metadata and tensor table; with n_expert > 0 the lfm2moe architecture: layers from n_dense_lead on have
// a router, stacked experts and the selection bias exp_probs_b, sigmoid gating), and a plain double-precision
// reference forward of lfm2 written from the formulas of llama.cpp's src/models/lfm2.cpp. Invariant: the reference
// shares no code with native/model or the backend.
#pragma once
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model_reference.h"
#include "model_test_gguf.h"

namespace lfm2_test {

using model_test::built;
using model_test::dvec;
using spindle::ggml_type;
using spindle::gguf_value_type;

struct spec {
  int n_layer = 4, n_embd = 32, n_head = 4, n_head_kv = 2, n_ff = 48, l_cache = 3;
  std::vector<int> attention_layers = {1, 3};  // the others are short-conv layers
  ggml_type weight_type = ggml_type::F32;
  uint32_t seed = 3;
  uint32_t context_length = 256;  // the trained context written to the file
  bool tied = true;
  int32_t sliding_window = 0;  // written when > 0
  bool write_l_cache = true;
  int n_normal_tokens = 40;  // vocabulary words besides <unk> <s> </s> and the byte tokens
  std::function<void(std::vector<gguf_test::tensor_spec>&)> edit_tensors;
  // lfm2moe (n_expert > 0): experts per layer, per token, their width, and the leading dense layers
  int n_expert = 0, n_used = 2, n_ff_exp = 32, n_dense_lead = 1;
};

inline std::string arch_of(const spec& s) { return s.n_expert > 0 ? "lfm2moe" : "lfm2"; }

inline bool is_attention(const spec& s, int il) {
  for (int a : s.attention_layers) if (a == il) return true;
  return false;
}

inline std::vector<gguf_test::tensor_spec> tensor_list(const spec& s, int n_vocab) {
  const int64_t e = s.n_embd, kv = e / s.n_head * s.n_head_kv, hd = e / s.n_head;
  const ggml_type W = s.weight_type, F = ggml_type::F32;
  std::vector<gguf_test::tensor_spec> t = {{"token_embd.weight", {e, n_vocab}, W}, {"token_embd_norm.weight", {e}, F}};
  if (!s.tied) t.push_back({"output.weight", {e, n_vocab}, W});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    t.push_back({b + "attn_norm.weight", {e}, F});
    if (is_attention(s, il)) {
      t.push_back({b + "attn_q_norm.weight", {hd}, F});
      t.push_back({b + "attn_k_norm.weight", {hd}, F});
      t.push_back({b + "attn_q.weight", {e, e}, W});
      t.push_back({b + "attn_k.weight", {e, kv}, W});
      t.push_back({b + "attn_v.weight", {e, kv}, W});
      t.push_back({b + "attn_output.weight", {e, e}, W});
    } else {
      t.push_back({b + "shortconv.conv.weight", {s.l_cache, e}, F});
      t.push_back({b + "shortconv.in_proj.weight", {e, 3 * e}, W});
      t.push_back({b + "shortconv.out_proj.weight", {e, e}, W});
    }
    t.push_back({b + "ffn_norm.weight", {e}, F});
    if (s.n_expert > 0 && il >= s.n_dense_lead) {
      const int64_t ne = s.n_expert, ff = s.n_ff_exp;
      t.push_back({b + "ffn_gate_inp.weight", {e, ne}, F});
      t.push_back({b + "exp_probs_b.bias", {ne}, F});
      t.push_back({b + "ffn_gate_exps.weight", {e, ff, ne}, W});
      t.push_back({b + "ffn_up_exps.weight", {e, ff, ne}, W});
      t.push_back({b + "ffn_down_exps.weight", {ff, e, ne}, W});
      continue;
    }
    t.push_back({b + "ffn_gate.weight", {e, s.n_ff}, W});
    t.push_back({b + "ffn_up.weight", {e, s.n_ff}, W});
    t.push_back({b + "ffn_down.weight", {s.n_ff, e}, W});
  }
  return t;
}

inline uint64_t write_kvs(gguf_test::writer& w, const spec& s, const std::vector<std::string>& toks) {
  uint64_t n = 0;
  const std::string arch = arch_of(s);
  auto u32 = [&](const std::string& k, uint32_t v) { w.kv<uint32_t>(arch + "." + k, gguf_value_type::UINT32, v); ++n; };
  w.kv_str("general.architecture", arch);
  ++n;
  u32("context_length", s.context_length);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", s.n_head);
  std::vector<int32_t> kv;
  for (int il = 0; il < s.n_layer; ++il) kv.push_back(is_attention(s, il) ? s.n_head_kv : 0);
  w.arr_of<int32_t>(arch + ".attention.head_count_kv", gguf_value_type::INT32, kv);
  ++n;
  w.kv<float>(arch + ".attention.layer_norm_rms_epsilon", gguf_value_type::FLOAT32, 1e-5f);
  w.kv<float>(arch + ".rope.freq_base", gguf_value_type::FLOAT32, 1e6f);
  n += 2;
  if (s.n_expert > 0) {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_used);
    u32("expert_feed_forward_length", s.n_ff_exp);
    u32("leading_dense_block_count", s.n_dense_lead);
    u32("expert_gating_func", 2);  // sigmoid
  }
  if (s.write_l_cache) u32("shortconv.l_cache", s.l_cache);
  if (s.sliding_window > 0) u32("attention.sliding_window", s.sliding_window);
  model_test::write_vocab_kvs(w, toks);
  return n + model_test::k_n_vocab_kv;
}

inline built build(const spec& s) {
  model_test::spec vocab;
  vocab.n_normal_tokens = s.n_normal_tokens;
  const std::vector<std::string> toks = model_test::vocab_tokens(vocab);
  gguf_test::writer kvs;
  const uint64_t n_kv = write_kvs(kvs, s, toks);
  return model_test::build_file(tensor_list(s, (int)toks.size()), s.edit_tensors, s.seed, kvs, n_kv, (int)toks.size());
}

// logits [n][n_vocab] of tokens at positions 0..n-1, in double.
inline std::vector<dvec> reference_forward(const built& b, const spec& s, const std::vector<int32_t>& tokens) {
  using model_test::find;
  const int n = (int)tokens.size(), e = s.n_embd, hd = e / s.n_head, group = s.n_head / s.n_head_kv;
  const double eps = 1e-5;
  const model_test::tensor_data& embd = *find(b, "token_embd.weight");
  std::vector<dvec> x(n);
  for (int t = 0; t < n; ++t) x[t].assign(embd.host.begin() + tokens[t] * e, embd.host.begin() + (tokens[t] + 1) * e);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    auto T = [&](const char* name) { return find(b, p + name); };
    std::vector<dvec> h(n), mix(n);
    for (int t = 0; t < n; ++t) h[t] = model_test::rms_norm(x[t], T("attn_norm.weight")->host.data(), 0, e, eps);
    if (!is_attention(s, il)) {  // y = C * conv(B * X), taps over t - l_cache + 1 .. t, zeros before 0
      std::vector<dvec> bcx(n);
      for (int t = 0; t < n; ++t) bcx[t] = model_test::mat_vec(*T("shortconv.in_proj.weight"), h[t]);
      const model_test::tensor_data& conv = *T("shortconv.conv.weight");  // [n_embd rows of l_cache]
      for (int t = 0; t < n; ++t) {
        dvec y(e, 0.0);
        for (int c = 0; c < e; ++c) {
          double acc = 0;
          for (int k = 0; k < s.l_cache; ++k) {
            const int j = t - (s.l_cache - 1) + k;
            if (j >= 0) acc += conv.host[c * s.l_cache + k] * (bcx[j][c] * bcx[j][2 * e + c]);
          }
          y[c] = bcx[t][e + c] * acc;
        }
        mix[t] = model_test::mat_vec(*T("shortconv.out_proj.weight"), y);
      }
    } else {
      std::vector<dvec> Q(n), K(n), V(n);
      for (int t = 0; t < n; ++t) {
        Q[t] = model_test::mat_vec(*T("attn_q.weight"), h[t]);
        K[t] = model_test::mat_vec(*T("attn_k.weight"), h[t]);
        V[t] = model_test::mat_vec(*T("attn_v.weight"), h[t]);
        for (int hh = 0; hh < s.n_head; ++hh) {
          dvec y = model_test::rms_norm(Q[t], T("attn_q_norm.weight")->host.data(), (size_t)hh * hd, hd, eps);
          for (int i = 0; i < hd; ++i) Q[t][hh * hd + i] = y[i];
        }
        for (int hh = 0; hh < s.n_head_kv; ++hh) {
          dvec y = model_test::rms_norm(K[t], T("attn_k_norm.weight")->host.data(), (size_t)hh * hd, hd, eps);
          for (int i = 0; i < hd; ++i) K[t][hh * hd + i] = y[i];
        }
        model_test::rope(Q[t], s.n_head, hd, t, 1e6, true);
        model_test::rope(K[t], s.n_head_kv, hd, t, 1e6, true);
      }
      for (int t = 0; t < n; ++t) {
        dvec att((size_t)e, 0.0);
        for (int hh = 0; hh < s.n_head; ++hh) {
          const int kh = hh / group;
          dvec sc(t + 1);
          double m = -1e300, tot = 0;
          for (int j = 0; j <= t; ++j) {
            double d = 0;
            for (int i = 0; i < hd; ++i) d += Q[t][hh * hd + i] * K[j][kh * hd + i];
            sc[j] = d / std::sqrt((double)hd);
            m = std::max(m, sc[j]);
          }
          for (auto& v : sc) tot += (v = std::exp(v - m));
          for (int j = 0; j <= t; ++j)
            for (int i = 0; i < hd; ++i) att[hh * hd + i] += sc[j] / tot * V[j][kh * hd + i];
        }
        mix[t] = model_test::mat_vec(*T("attn_output.weight"), att);
      }
    }
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < e; ++i) x[t][i] += mix[t][i];
      dvec f = model_test::rms_norm(x[t], T("ffn_norm.weight")->host.data(), 0, e, eps);
      dvec g = model_test::mat_vec(*T("ffn_gate.weight"), f), u = model_test::mat_vec(*T("ffn_up.weight"), f);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      dvec d = model_test::mat_vec(*T("ffn_down.weight"), g);
      for (int i = 0; i < e; ++i) x[t][i] += d[i];
    }
  }
  const model_test::tensor_data* out = find(b, "output.weight");
  std::vector<dvec> logits(n);
  for (int t = 0; t < n; ++t) {
    logits[t] = model_test::mat_vec(out ? *out : embd, model_test::rms_norm(x[t], find(b, "token_embd_norm.weight")->host.data(), 0, e, eps));
  }
  return logits;
}

}  // namespace lfm2_test
