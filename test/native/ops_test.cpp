// Tests of the single-row float kernels (backend/cpu/ops.h) against plain double-precision references.
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/ops.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST_CASE("ops: dot_f32 matches a double reference for all tail lengths") {
  for (int64_t n : {0, 1, 7, 8, 9, 31, 64, 257}) {
    auto a = random_vec(n, 1), b = random_vec(n, 2);
    double ref = 0;
    for (int64_t i = 0; i < n; ++i) ref += (double)a[i] * b[i];
    CHECK_NEAR(ops_dot_f32(a.data(), b.data(), n), ref, 1e-5 * (1 + n));
  }
}

TEST_CASE("ops: rms_norm_row with and without weight") {
  const int64_t n = 96;
  auto x = random_vec(n, 3), w = random_vec(n, 4);
  double ss = 0;
  for (float v : x) ss += (double)v * v;
  const double scale = 1.0 / std::sqrt(ss / n + 1e-6);
  std::vector<float> y(n), yw(n);
  ops_rms_norm_row(x.data(), nullptr, y.data(), n, 1e-6f);
  ops_rms_norm_row(x.data(), w.data(), yw.data(), n, 1e-6f);
  for (int64_t i = 0; i < n; ++i) {
    CHECK_NEAR(y[i], x[i] * scale, 1e-5);
    CHECK_NEAR(yw[i], x[i] * scale * w[i], 1e-5);
  }
  // in place
  std::vector<float> z = x;
  ops_rms_norm_row(z.data(), w.data(), z.data(), n, 1e-6f);
  for (int64_t i = 0; i < n; ++i) CHECK_EQ(z[i], yw[i]);
  // eps dominates a zero row: output stays zero and finite
  std::vector<float> zero(n, 0.0f), out(n, 1.0f);
  ops_rms_norm_row(zero.data(), nullptr, out.data(), n, 1e-5f);
  for (float v : out) CHECK_EQ(v, 0.0f);
}

TEST_CASE("ops: rope cache equals pos * base^(-2j/n_rot) with freq factors and scale") {
  rope_params p;
  p.n_rot = 16;
  p.freq_base = 10000.0f;
  std::vector<float> ff(8);
  for (int j = 0; j < 8; ++j) ff[j] = 1.0f + 0.5f * j;
  for (int variant = 0; variant < 2; ++variant) {
    p.freq_factors = variant ? ff.data() : nullptr;
    p.freq_scale = variant ? 0.5f : 1.0f;
    std::vector<float> cache(16);
    ops_rope_cache(37, p, cache.data());
    for (int j = 0; j < 8; ++j) {
      double angle = 37.0 * std::pow(10000.0, -2.0 * j / 16.0) * p.freq_scale / (variant ? ff[j] : 1.0);
      CHECK_NEAR(cache[2 * j], std::cos(angle), 2e-5);
      CHECK_NEAR(cache[2 * j + 1], std::sin(angle), 2e-5);
    }
  }
}

TEST_CASE("ops: rope_head rotates adjacent pairs (normal) or halves (neox), rest untouched") {
  const int32_t head_dim = 12, n_rot = 8;
  rope_params p;
  p.n_rot = n_rot;
  p.freq_base = 500.0f;
  std::vector<float> cache(n_rot);
  ops_rope_cache(5, p, cache.data());
  auto x = random_vec(head_dim, 5);
  for (bool neox : {false, true}) {
    std::vector<float> y = x;
    ops_rope_head(y.data(), cache.data(), n_rot, neox);
    for (int j = 0; j < n_rot / 2; ++j) {
      const int a = neox ? j : 2 * j, b = neox ? j + n_rot / 2 : 2 * j + 1;
      const double c = cache[2 * j], s = cache[2 * j + 1];
      CHECK_NEAR(y[a], x[a] * c - x[b] * s, 1e-6);
      CHECK_NEAR(y[b], x[a] * s + x[b] * c, 1e-6);
    }
    for (int i = n_rot; i < head_dim; ++i) CHECK_EQ(y[i], x[i]);
  }
  // position 0 is the identity
  std::vector<float> c0(n_rot), y = x;
  ops_rope_cache(0, p, c0.data());
  ops_rope_head(y.data(), c0.data(), n_rot, true);
  for (int i = 0; i < head_dim; ++i) CHECK_EQ(y[i], x[i]);
}

TEST_CASE("ops: softmax_row sums to one, matches reference, survives large inputs") {
  auto x = random_vec(50, 6, -30.0f, 30.0f);
  x[7] = 1e30f;  // would overflow exp without max subtraction
  std::vector<float> y = x;
  ops_softmax_row(y.data(), 50, 0.25f);
  double sum = 0;
  for (float v : y) sum += v;
  CHECK_NEAR(sum, 1.0, 1e-5);
  CHECK_NEAR(y[7], 1.0, 1e-6);
  auto z = random_vec(33, 7);
  std::vector<float> s = z;
  ops_softmax_row(s.data(), 33, 0.5f);
  double m = -1e300, tot = 0;
  for (float v : z) m = std::max(m, 0.5 * v);
  for (float v : z) tot += std::exp(0.5 * v - m);
  for (int i = 0; i < 33; ++i) CHECK_NEAR(s[i], std::exp(0.5 * z[i] - m) / tot, 1e-6);
}

TEST_CASE("ops: silu, swiglu and add") {
  CHECK_NEAR(ops_silu(0.0f), 0.0, 0);
  CHECK_NEAR(ops_silu(2.0f), 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
  CHECK_NEAR(ops_silu(-100.0f), 0.0, 1e-30);
  CHECK_NEAR(ops_silu(100.0f), 100.0, 1e-4);
  auto g = random_vec(40, 8, -6, 6), u = random_vec(40, 9);
  std::vector<float> y(40), a(40);
  ops_swiglu(g.data(), u.data(), y.data(), 40);
  ops_add(g.data(), u.data(), a.data(), 40);
  for (int i = 0; i < 40; ++i) {
    CHECK_NEAR(y[i], g[i] / (1.0 + std::exp(-(double)g[i])) * u[i], 1e-5);
    CHECK_EQ(a[i], g[i] + u[i]);
  }
}

TEST_CASE("ops: attention_head matches a double reference (strided K/V)") {
  const int32_t dk = 8, dv = 6;
  const int64_t n_kv = 13, ks = 20, vs = 15;
  auto q = random_vec(dk, 10), k = random_vec(n_kv * ks, 11), v = random_vec(n_kv * vs, 12);
  std::vector<float> scores(n_kv), out(dv);
  const float scale = 1.0f / std::sqrt((float)dk);
  ops_attention_head(q.data(), k.data(), ks, v.data(), vs, n_kv, dk, dv, scale, scores.data(), out.data());
  std::vector<double> s(n_kv);
  double m = -1e300, tot = 0;
  for (int64_t j = 0; j < n_kv; ++j) {
    double d = 0;
    for (int i = 0; i < dk; ++i) d += (double)q[i] * k[j * ks + i];
    s[j] = d * scale;
    m = std::max(m, s[j]);
  }
  for (auto& e : s) tot += (e = std::exp(e - m));
  for (int d = 0; d < dv; ++d) {
    double ref = 0;
    for (int64_t j = 0; j < n_kv; ++j) ref += s[j] / tot * v[j * vs + d];
    CHECK_NEAR(out[d], ref, 1e-5);
  }
  // a single key: output is exactly that value row
  ops_attention_head(q.data(), k.data(), ks, v.data(), vs, 1, dk, dv, scale, scores.data(), out.data());
  for (int d = 0; d < dv; ++d) CHECK_EQ(out[d], v[d]);
}
