// moe_ffn: routing rules (softmax / sigmoid, bias only for choosing, top-k order, renormalization, clamp,
// scale, NaN), the block against a plain double reference (F32 / F16 / Q4_K / Q6_K experts, softmax and
// sigmoid + bias), batch invariance (a token's output bitwise the same alone, in any batch, any order, any
// thread count), and reading the MoE config and tensors from a GGUF.
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "harness.h"
#include "model/moe_ffn.h"
#include "moe_reference.h"

using namespace spindle;

namespace {

struct test_layer {
  moe_config cfg;
  moe_test::ref_layer ref;
  std::vector<uint8_t> gate_bytes, up_bytes, down_bytes;
  moe_layer_weights w;  // points into the bytes above
};

std::vector<float> dequantize(ggml_type t, const std::vector<uint8_t>& bytes, int64_t rows, int64_t n) {
  std::vector<float> out(rows * n);
  const size_t row = cpu_row_bytes(t, n);
  for (int64_t r = 0; r < rows; ++r) cpu_dequantize_row(t, bytes.data() + r * row, out.data() + r * n, n);
  return out;
}

// A layer with router logits of std ~router_std (N(0, 1) inputs) and random experts of the given types.
std::unique_ptr<test_layer> make_layer(backend& be, moe_config cfg, int64_t n_embd, ggml_type gu, ggml_type dn,
                                       bool with_bias, uint32_t seed, float router_std = 1.5f) {
  std::mt19937 rng(seed);
  auto L = std::make_unique<test_layer>();
  L->cfg = cfg;
  moe_test::ref_layer& r = L->ref;
  r.n_embd = n_embd;
  r.n_expert = cfg.n_expert;
  r.k = cfg.n_expert_used;
  r.n_ff = cfg.n_ff_exp;
  r.sigmoid = cfg.gating == moe_gating::sigmoid;
  r.norm = cfg.norm_weights;
  r.scale = cfg.weights_scale;
  r.gate_type = gu;
  r.down_type = dn;
  std::normal_distribution<float> normal(0.0f, router_std / std::sqrt((float)n_embd));
  r.router.resize(cfg.n_expert * n_embd);
  for (auto& v : r.router) v = normal(rng);
  if (with_bias) {
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    for (int e = 0; e < cfg.n_expert; ++e) r.bias.push_back(u(rng));
    set_selection_bias(be, L->w, r.bias);
  }
  const int64_t rows_gu = (int64_t)cfg.n_expert * cfg.n_ff_exp, rows_dn = (int64_t)cfg.n_expert * n_embd;
  L->gate_bytes = kernels_test::random_rows(gu, rows_gu, n_embd, rng);
  L->up_bytes = kernels_test::random_rows(gu, rows_gu, n_embd, rng);
  L->down_bytes = kernels_test::random_rows(dn, rows_dn, cfg.n_ff_exp, rng);
  r.gate = dequantize(gu, L->gate_bytes, rows_gu, n_embd);
  r.up = dequantize(gu, L->up_bytes, rows_gu, n_embd);
  r.down = dequantize(dn, L->down_bytes, rows_dn, cfg.n_ff_exp);
  L->w.gate_inp = be.upload_weight(ggml_type::F32, r.router.data(), n_embd, cfg.n_expert);
  L->w.gate_exps = be.upload_weight(gu, L->gate_bytes.data(), n_embd, rows_gu);
  L->w.up_exps = be.upload_weight(gu, L->up_bytes.data(), n_embd, rows_gu);
  L->w.down_exps = be.upload_weight(dn, L->down_bytes.data(), cfg.n_ff_exp, rows_dn);
  return L;
}

moe_config config(int n_expert, int k, int n_ff, moe_gating g = moe_gating::softmax) {
  moe_config c;
  c.n_expert = n_expert;
  c.n_expert_used = k;
  c.n_ff_exp = n_ff;
  c.gating = g;
  return c;
}

std::vector<float> run(backend& be, moe_ffn& f, const test_layer& L, const std::vector<float>& x, int64_t n_embd) {
  const int64_t n = (int64_t)x.size() / n_embd;
  backend_buffer in(be, n * n_embd), out(be, n * n_embd);
  be.upload(in.data(), x.data(), n * n_embd);
  f.forward(be, L.cfg, L.w, in.data(), n, n_embd, out.data());
  std::vector<float> y(n * n_embd);
  be.download(y.data(), out.data(), n * n_embd);
  return y;
}

}  // namespace

TEST_CASE("moe_route: softmax top-k in descending order, renormalized weights") {
  moe_config c = config(5, 3, 8);
  const float probs[] = {0.1f, 0.3f, 0.05f, 0.4f, 0.15f};
  int32_t ids[3];
  float w[3];
  moe_route(c, probs, nullptr, 1, ids, w);
  CHECK_EQ(ids[0], 3);
  CHECK_EQ(ids[1], 1);
  CHECK_EQ(ids[2], 4);
  const float sum = (float)((double)0.4f + (double)0.3f + (double)0.15f);
  CHECK(w[0] == 0.4f / sum && w[1] == 0.3f / sum && w[2] == 0.15f / sum);
  c.norm_weights = false;
  c.weights_scale = 2.5f;
  moe_route(c, probs, nullptr, 1, ids, w);
  CHECK(w[0] == 0.4f * 2.5f && w[1] == 0.3f * 2.5f && w[2] == 0.15f * 2.5f);
}

TEST_CASE("moe_route: the bias chooses the experts, the weights stay unbiased; ties and NaN") {
  moe_config c = config(4, 2, 8, moe_gating::sigmoid);
  const float probs[] = {0.9f, 0.8f, 0.2f, 0.1f};
  const float bias[] = {0.0f, 0.0f, 1.0f, 0.0f};
  int32_t ids[2];
  float w[2];
  moe_route(c, probs, bias, 1, ids, w);
  CHECK_EQ(ids[0], 2);  // 0.2 + 1.0
  CHECK_EQ(ids[1], 0);
  const float sum = (float)((double)0.2f + (double)0.9f);
  CHECK(w[0] == 0.2f / sum && w[1] == 0.9f / sum);
  const float tied[] = {0.25f, 0.25f, 0.25f, 0.25f};
  moe_route(c, tied, nullptr, 1, ids, w);
  CHECK(ids[0] == 0 && ids[1] == 1);  // lower expert id first
  const float nan_probs[] = {NAN, 0.1f, 0.05f, 0.2f};
  moe_route(c, nan_probs, nullptr, 1, ids, w);
  CHECK(ids[0] == 3 && ids[1] == 1);  // NaN ranks lowest
  const float tiny[] = {1e-9f, 2e-9f, 0.0f, 0.0f};
  moe_route(c, tiny, nullptr, 1, ids, w);
  CHECK(w[0] == 2e-9f / 6.103515625e-5f);  // the sum is clamped to 2^-14
}

TEST_CASE("moe_ffn matches the double reference (F32 / F16 / Q4_K / Q6_K experts, softmax and sigmoid + bias)") {
  auto be = make_cpu_backend(2);
  struct variant { ggml_type gu, dn; int64_t n_embd; moe_config cfg; bool bias; double tol; };
  const variant vs[] = {
      {ggml_type::F32, ggml_type::F32, 72, config(8, 3, 44), false, 1e-5},  // n_ff % 8 != 0: per-row swiglu
      {ggml_type::F16, ggml_type::F16, 64, config(6, 2, 48, moe_gating::sigmoid), true, 1e-3},
      {ggml_type::Q4_K, ggml_type::Q6_K, 256, config(8, 3, 256), false, 2e-3},
      {ggml_type::Q4_K, ggml_type::Q4_K, 256, config(16, 4, 256, moe_gating::sigmoid), true, 2e-3},
  };
  uint32_t seed = 1;
  for (const variant& v : vs) {
    auto L = make_layer(*be, v.cfg, v.n_embd, v.gu, v.dn, v.bias, seed++);
    const int64_t n = 17;
    std::mt19937 rng(seed);
    const std::vector<float> x = kernels_test::random_activations(n, v.n_embd, rng);
    moe_ffn f;
    const std::vector<float> y = run(*be, f, *L, x, v.n_embd);
    int compared = 0;
    for (int64_t t = 0; t < n; ++t) {
      const moe_test::ref_out r = moe_test::moe_ref(L->ref, x.data() + t * v.n_embd);
      if (r.margin < 1e-4) continue;  // a near-tie: either choice is right
      ++compared;
      for (int j = 0; j < v.cfg.n_expert_used; ++j) {
        CHECK_EQ(f.last_ids()[t * v.cfg.n_expert_used + j], r.ids[j]);
        CHECK_NEAR(f.last_weights()[t * v.cfg.n_expert_used + j], r.weights[j], 1e-5);
      }
      double scale = 1e-6;
      for (double o : r.y) scale = std::max(scale, std::fabs(o));
      for (int64_t o = 0; o < v.n_embd; ++o) CHECK_NEAR(y[t * v.n_embd + o], r.y[o], v.tol * scale);
    }
    CHECK(compared >= n - 2);
  }
}

TEST_CASE("moe_ffn: a token's output is bitwise the same alone, in any batch, order or thread count") {
  auto be2 = make_cpu_backend(2), be1 = make_cpu_backend(1);
  for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
    const int64_t n_embd = 256, n = 23;
    auto L2 = make_layer(*be2, config(8, 3, 256), n_embd, t, t == ggml_type::F32 ? t : ggml_type::Q6_K, true, 40);
    auto L1 = make_layer(*be1, config(8, 3, 256), n_embd, t, t == ggml_type::F32 ? t : ggml_type::Q6_K, true, 40);
    std::mt19937 rng(41);
    const std::vector<float> x = kernels_test::random_activations(n, n_embd, rng);
    moe_ffn f2, f1;
    const std::vector<float> all = run(*be2, f2, *L2, x, n_embd);
    // reversed order, every third token, on one thread
    std::vector<int64_t> picked;
    std::vector<float> xs;
    for (int64_t i = n - 1; i >= 0; i -= 3) {
      picked.push_back(i);
      xs.insert(xs.end(), x.begin() + i * n_embd, x.begin() + (i + 1) * n_embd);
    }
    const std::vector<float> some = run(*be1, f1, *L1, xs, n_embd);
    for (size_t p = 0; p < picked.size(); ++p)
      CHECK(std::memcmp(some.data() + p * n_embd, all.data() + picked[p] * n_embd, n_embd * sizeof(float)) == 0);
    for (int64_t i = 0; i < n; i += 5) {  // alone, reusing the bigger scratch
      const std::vector<float> xi(x.begin() + i * n_embd, x.begin() + (i + 1) * n_embd);
      const std::vector<float> yi = run(*be2, f2, *L2, xi, n_embd);
      CHECK(std::memcmp(yi.data(), all.data() + i * n_embd, n_embd * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("moe_ffn: output may alias the input; mismatched config and weights throw") {
  auto be = make_cpu_backend(1);
  const int64_t n_embd = 64, n = 5;
  auto L = make_layer(*be, config(4, 2, 32), n_embd, ggml_type::F32, ggml_type::F32, false, 50);
  std::mt19937 rng(51);
  const std::vector<float> x = kernels_test::random_activations(n, n_embd, rng);
  moe_ffn f;
  const std::vector<float> want = run(*be, f, *L, x, n_embd);
  backend_buffer io(*be, n * n_embd);
  be->upload(io.data(), x.data(), n * n_embd);
  f.forward(*be, L->cfg, L->w, io.data(), n, n_embd, io.data());
  std::vector<float> got(n * n_embd);
  be->download(got.data(), io.data(), n * n_embd);
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
  moe_config bad = L->cfg;
  bad.n_expert_used = 5;
  CHECK_THROWS_WITH(f.forward(*be, bad, L->w, io.data(), n, n_embd, io.data()), "invalid config");
  bad = L->cfg;
  bad.n_ff_exp = 16;
  CHECK_THROWS_WITH(f.forward(*be, bad, L->w, io.data(), n, n_embd, io.data()), "do not match");
  CHECK_THROWS_WITH(f.forward(*be, L->cfg, L->w, io.data(), n, n_embd + 1, io.data()), "do not match");
}

TEST_CASE("moe_ffn: the grouped path (routing, matmul_experts, moe_combine) gives the per-expert path's bits") {
  auto be = make_cpu_backend(2);
  struct variant { ggml_type gu, dn; int64_t n_embd; moe_config cfg; bool bias; };
  moe_config scaled = config(16, 4, 256);
  scaled.norm_weights = false;
  scaled.weights_scale = 2.5f;
  const variant vs[] = {
      {ggml_type::F32, ggml_type::F32, 72, config(8, 3, 44), false},   // n_ff % 8 != 0: per-row swiglu
      {ggml_type::Q4_K, ggml_type::Q6_K, 256, config(16, 4, 256), false},
      {ggml_type::F16, ggml_type::F16, 64, config(8, 2, 64, moe_gating::sigmoid), true},  // routed on the host
      {ggml_type::Q4_K, ggml_type::Q4_K, 256, scaled, false},
  };
  uint32_t seed = 40;
  for (const variant& v : vs) {
    auto L = make_layer(*be, v.cfg, v.n_embd, v.gu, v.dn, v.bias, seed++);
    for (const int64_t n : {int64_t(1), int64_t(5), int64_t(33)}) {
      std::mt19937 rng(seed + (uint32_t)n);
      const std::vector<float> x = kernels_test::random_activations(n, v.n_embd, rng);
      moe_ffn per_expert, grouped;
      grouped.force_grouped(true);
      const std::vector<float> want = run(*be, per_expert, *L, x, v.n_embd);
      const std::vector<float> got = run(*be, grouped, *L, x, v.n_embd);
      CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
      CHECK(grouped.last_ids() == per_expert.last_ids());
      CHECK(grouped.last_weights() == per_expert.last_weights());
    }
  }
}

TEST_CASE("backend MoE ops: slot-major routing, a bad expert id is a clear error") {
  auto be = make_cpu_backend(1);
  moe_route_params p;
  p.n_expert = 4;
  p.k = 2;
  const float probs[] = {0.1f, 0.6f, 0.2f, 0.1f, 0.5f, 0.1f, 0.1f, 0.3f};  // two tokens
  backend_buffer pr(*be, 8), ids(*be, 4), w(*be, 4);
  be->upload(pr.data(), probs, 8);
  be->moe_route(pr.data(), nullptr, 2, p, reinterpret_cast<int32_t*>(ids.data()), w.data());
  int32_t got[4];
  be->download(reinterpret_cast<float*>(got), ids.data(), 4);
  CHECK(got[0] == 1 && got[1] == 0 && got[2] == 2 && got[3] == 3);  // slot 0 of tokens 0, 1; then slot 1
  const std::vector<float> table(4 * 8 * 8, 0.5f);
  backend_weight wt = be->upload_weight(ggml_type::F32, table.data(), 8, 4 * 8);
  const int32_t bad[1] = {4};
  be->upload(ids.data(), reinterpret_cast<const float*>(bad), 1);
  backend_buffer x(*be, 8), y(*be, 8);
  CHECK_THROWS_WITH(be->matmul_experts(wt, 8, reinterpret_cast<const int32_t*>(ids.data()), 1, 1, x.data(), y.data()),
                    "matmul_experts: expert id 4 outside [0, 4)");
  be->release_weight(wt);
}
