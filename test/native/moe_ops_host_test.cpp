// The MoE routing and combine kernels' block code (native/backend/cuda/moe_ops.cuh) on the host, with emulated
// threads (cuda_host_shim.h): route_block must give route_experts' ids and weights (backend/moe_route.h) bit for
// bit, slot-major, for softmax rows, a bias, ties, NaN and -inf scores, renormalized or scaled weights and a clamped
// sum; combine_value the per-expert path's products and slot-order sums.
// What this cannot check: the launches; the GPU suite checks those (cuda_model_test's MoE cases).
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "harness.h"

#include "cuda_host_shim.h"

#include "backend/cuda/moe_ops.cuh"

using namespace spindle;

TEST_CASE("moe route kernel on the host: route_experts' ids and weights, slot-major, bit for bit") {
  std::mt19937 rng(7);
  struct cfg {
    int32_t n_expert, k;
    bool norm, bias;
    float scale;
  };
  for (const cfg c : {cfg{8, 2, true, false, 0.0f}, cfg{128, 8, true, false, 0.0f}, cfg{40, 4, false, true, 2.5f},
                      cfg{300, 6, true, true, 1.0f}}) {
    const int64_t n = 5;
    std::vector<float> probs((size_t)(n * c.n_expert)), bias(c.bias ? (size_t)c.n_expert : 0);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (float& v : probs) v = u(rng) / (float)c.n_expert;
    for (float& v : bias) v = u(rng) * 0.01f;
    float* r = probs.data();
    r[0 * c.n_expert + 1] = r[0 * c.n_expert + 3] = 0.9f;  // a tie: the lower id first
    r[1 * c.n_expert + 0] = NAN;                            // NaN ranks lowest
    for (int e = 0; e < c.n_expert; ++e) r[2 * c.n_expert + e] = -INFINITY;  // all -inf: the lowest ids
    for (int e = 0; e < c.n_expert; ++e) r[3 * c.n_expert + e] = 1e-9f;     // a tiny sum: clamped
    moe_route_params p;
    p.n_expert = c.n_expert, p.k = c.k, p.norm_weights = c.norm, p.weights_scale = c.scale;
    std::vector<int32_t> want_ids((size_t)(n * c.k)), got_ids((size_t)(n * c.k), -1);
    std::vector<float> want_w((size_t)(n * c.k)), got_w((size_t)(n * c.k));
    route_experts(p, probs.data(), c.bias ? bias.data() : nullptr, n, want_ids.data(), want_w.data());
    for (int64_t t = 0; t < n; ++t) {
      char taken[k_route_max_experts];
      float wt[k_route_max_k], sv[32];
      int32_t si[32];
      cuda_host::run_block(64, (unsigned)t, 0, [&] {
        route_block(probs.data(), c.bias ? bias.data() : nullptr, n, p, got_ids.data(), got_w.data(), taken, wt, sv, si);
      }, dim3_host{(unsigned)n, 1, 1});
    }
    bool same = true;
    for (int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < c.k; ++j) {
        same = same && got_ids[(size_t)(j * n + t)] == want_ids[(size_t)(t * c.k + j)];
        same = same && std::memcmp(&got_w[(size_t)(j * n + t)], &want_w[(size_t)(t * c.k + j)], 4) == 0;
      }
    }
    CHECK(same);
  }
}

TEST_CASE("moe combine on the host: rounded products added in slot order") {
  const int64_t n = 3, k = 4, n_embd = 5;
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> y((size_t)(k * n * n_embd)), w((size_t)(k * n));
  for (float& v : y) v = d(rng);
  for (float& v : w) v = d(rng);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < n_embd; ++c) {
      float want = y[(size_t)(t * n_embd + c)] * w[(size_t)t];  // scale_rows, copy, then add slot by slot
      for (int64_t j = 1; j < k; ++j) want = want + y[(size_t)((j * n + t) * n_embd + c)] * w[(size_t)(j * n + t)];
      const float got = combine_value(y.data(), w.data(), n, k, n_embd, t, c);
      CHECK(std::memcmp(&got, &want, 4) == 0);
    }
  }
}

TEST_CASE("moe sort kernel on the host: entries by expert (stable), tiles of up to 8 of one expert") {
  std::mt19937 rng(13);
  for (const int32_t n_expert : {int32_t(5), int32_t(64), int32_t(200)}) {
    for (const int32_t n_entries : {int32_t(1), int32_t(30), int32_t(160)}) {
      std::vector<int32_t> ids((size_t)n_entries);
      std::uniform_int_distribution<int32_t> pick(0, std::min(n_expert, 9) - 1);  // few experts: long runs
      for (int32_t& v : ids) v = pick(rng);
      const int32_t max_tiles = moe_max_tiles(n_entries, n_expert);
      std::vector<int32_t> order((size_t)n_entries, -1), te((size_t)max_tiles, -1), tf((size_t)max_tiles, -1),
          tc((size_t)max_tiles, -1);
      int32_t n_tiles = -1;
      std::vector<int32_t> count(256), tiles(256), ids_s(256), sh(32);
      cuda_host::run_block(256, 0, 0, [&] {
        sort_entries_block(ids.data(), n_entries, n_expert, order.data(), te.data(), tf.data(), tc.data(), &n_tiles,
                           count.data(), tiles.data(), ids_s.data(), sh.data());
      });
      std::vector<int32_t> want((size_t)n_entries);
      for (int32_t i = 0; i < n_entries; ++i) want[(size_t)i] = i;
      std::stable_sort(want.begin(), want.end(), [&](int32_t a, int32_t b) { return ids[(size_t)a] < ids[(size_t)b]; });
      CHECK(order == want);
      // the tiles: experts ascending, consecutive positions, 1..8 entries of their expert, covering every entry once
      bool ok = n_tiles >= 1 && n_tiles <= max_tiles;
      int32_t at = 0;
      for (int32_t t = 0; ok && t < n_tiles; ++t) {
        ok = tf[(size_t)t] == at && tc[(size_t)t] >= 1 && tc[(size_t)t] <= 8 && (t == 0 || te[(size_t)t] >= te[(size_t)(t - 1)]);
        for (int32_t k = 0; ok && k < tc[(size_t)t]; ++k) ok = ids[(size_t)order[(size_t)(at + k)]] == te[(size_t)t];
        at += tc[(size_t)t];
      }
      CHECK(ok);
      CHECK_EQ(at, n_entries);
    }
  }
}
