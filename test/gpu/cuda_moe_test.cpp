// The MoE block's grouped GPU path (routing on the device, one grouped expert matmul per projection, the combine
// kernel: backend::moe_on_device) against the per-expert path on the same GPU (SPINDLE_CUDA_MOE=per-expert):
// the same bits and routing for k-quant experts at decode and small-prefill sizes (a block row per entry below two
// entries per expert, entries sorted by expert into tiles from there: 40 tokens take the tiles in every variant),
// softmax routing and sigmoid gating with a selection bias, both on the device; the grouped path takes those shapes
// (moe_on_device).
#include <cstring>
#include <random>

#include "gpu_test_util.h"
#include "kernels_util.h"
#include "model/moe_ffn.h"

using namespace gpu_test;

namespace {

struct layer_bytes {
  std::vector<float> router;
  std::vector<uint8_t> gate, up, down;
  std::vector<float> bias;
};

moe_layer_weights upload_layer(backend& be, const layer_bytes& b, const moe_config& c, int64_t n_embd, ggml_type gu,
                               ggml_type dn) {
  moe_layer_weights w;
  w.gate_inp = be.upload_weight(ggml_type::F32, b.router.data(), n_embd, c.n_expert);
  w.gate_exps = be.upload_weight(gu, b.gate.data(), n_embd, (int64_t)c.n_expert * c.n_ff_exp);
  w.up_exps = be.upload_weight(gu, b.up.data(), n_embd, (int64_t)c.n_expert * c.n_ff_exp);
  w.down_exps = be.upload_weight(dn, b.down.data(), c.n_ff_exp, (int64_t)c.n_expert * n_embd);
  set_selection_bias(be, w, b.bias);
  return w;
}

std::vector<float> run_block(backend& be, moe_ffn& f, const moe_config& c, const moe_layer_weights& w,
                             const std::vector<float>& x, int64_t n, int64_t n_embd) {
  buf in(be, x), out(be, n * n_embd);
  f.forward(be, c, w, in.p(), n, n_embd, out.p());
  return out.get();
}

}  // namespace

TEST_CASE("cuda MoE: the grouped path (device routing, grouped expert matmuls, combine) == the per-expert path, bitwise") {
  REQUIRE_GPU();
  std::mt19937 rng(61);
  struct variant {
    ggml_type gu, dn;
    int32_t n_expert, k, n_ff;
    moe_gating gating;
    bool bias;
  };
  const int64_t n_embd = 512;
  for (const variant v : {variant{ggml_type::Q4_K, ggml_type::Q6_K, 32, 4, 256, moe_gating::softmax, false},
                          variant{ggml_type::Q4_K, ggml_type::Q4_K, 128, 8, 256, moe_gating::softmax, false},
                          variant{ggml_type::Q5_K, ggml_type::Q6_K, 16, 2, 512, moe_gating::sigmoid, true}}) {
    moe_config c;
    c.n_expert = v.n_expert, c.n_expert_used = v.k, c.n_ff_exp = v.n_ff, c.gating = v.gating;
    layer_bytes b;
    std::normal_distribution<float> router(0.0f, 1.5f / std::sqrt((float)n_embd));
    b.router.resize((size_t)(c.n_expert * n_embd));
    for (float& r : b.router) r = router(rng);
    if (v.bias) {
      std::uniform_real_distribution<float> u(-0.2f, 0.2f);
      for (int e = 0; e < c.n_expert; ++e) b.bias.push_back(u(rng));
    }
    b.gate = kernels_test::random_rows(v.gu, (int64_t)c.n_expert * c.n_ff_exp, n_embd, rng);
    b.up = kernels_test::random_rows(v.gu, (int64_t)c.n_expert * c.n_ff_exp, n_embd, rng);
    b.down = kernels_test::random_rows(v.dn, (int64_t)c.n_expert * n_embd, c.n_ff_exp, rng);
    for (const int64_t n : {int64_t(1), int64_t(7), int64_t(40)}) {
      const std::vector<float> x = kernels_test::random_activations(n, n_embd, rng);
      std::vector<float> grouped, per_expert;
      std::vector<int32_t> ids_g, ids_p;
      {
        std::unique_ptr<backend> gpu = make_backend("cuda", 0);
        moe_layer_weights w = upload_layer(*gpu, b, c, n_embd, v.gu, v.dn);
        CHECK(gpu->moe_on_device(w.gate_exps, c.n_ff_exp, n * c.n_expert_used));
        CHECK(gpu->moe_on_device(w.down_exps, n_embd, n * c.n_expert_used));
        moe_ffn f;
        grouped = run_block(*gpu, f, c, w, x, n, n_embd);
        ids_g = f.last_ids();
      }
      with_env("SPINDLE_CUDA_MOE", "per-expert", [&] {
        std::unique_ptr<backend> gpu = make_backend("cuda", 0);
        moe_layer_weights w = upload_layer(*gpu, b, c, n_embd, v.gu, v.dn);
        CHECK(!gpu->moe_on_device(w.gate_exps, c.n_ff_exp, n * c.n_expert_used));
        moe_ffn f;
        per_expert = run_block(*gpu, f, c, w, x, n, n_embd);
        ids_p = f.last_ids();
        return 0;
      });
      ids_g.resize((size_t)(n * c.n_expert_used));
      ids_p.resize((size_t)(n * c.n_expert_used));
      CHECK(ids_g == ids_p);
      const bool same = grouped.size() == per_expert.size() &&
                        std::memcmp(grouped.data(), per_expert.data(), grouped.size() * sizeof(float)) == 0;
      if (!same) std::printf("  %d experts, k %d, %lld tokens: grouped != per-expert\n", v.n_expert, v.k, (long long)n);
      CHECK(same);
    }
  }
}
