// Tests of the AVX2 float kernels (backend/cpu/ops_avx2.cpp): golden outputs of llama.cpp's prebuilt x86
// "haswell" CPU backend (node-llama-cpp 3.22.1, ggml_vec_swiglu_f32 / ggml_vec_soft_max_f32 / ggml_vec_dot_f32
// called directly on the inputs below), the stated FMA forms of rope, and attention against its stated
// reduction order and a double reference. Skipped (no checks run) on CPUs without AVX2.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops.h"
#include "harness.h"

using namespace spindle;

namespace {

// Exact multiples of 1/2048 in [-4.9, 4.9] from an integer hash (the golden generator used the same).
float test_value(uint32_t i, uint32_t seed) {
  uint32_t h = (i + 1) * 2654435761u ^ seed * 40503u;
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  return (float)((int)(h % 20001u) - 10000) / 2048.0f;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

int count_mismatches(const float* got, const uint32_t* want, int n) {
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += bits(got[i]) != want[i];
  return bad;
}

bool have_avx2() { return cpu_level_supported(cpu_level::avx2); }

}  // namespace

TEST_CASE("ops avx2: swiglu, softmax and dot_f32 give llama.cpp haswell's bits (golden values)") {
  if (!have_avx2()) SKIP("the AVX2 ops need a CPU with AVX2");
  // swiglu: gate 2 * v(i, 1) with gate[7] = -95, up v(i, 2); 24 elements = 3 whole groups of 8
  static const uint32_t swiglu_want[24] = {
      0x3da2fccdu, 0xc0ee0e3eu, 0xbc6864deu, 0xbfb34253u, 0xbf4395cdu, 0xc1b78553u, 0x40978266u, 0x00000000u,
      0xc1959b84u, 0x40acb22bu, 0x3c9fab17u, 0xbaba8537u, 0x3e063950u, 0x41d5b791u, 0xc127c5fau, 0xbecb0648u,
      0xbb8046b2u, 0xbc4c79cfu, 0x419958e0u, 0xc194a46fu, 0x3db3f40eu, 0xc14acee4u, 0xbb36a948u, 0x3f87019cu};
  std::vector<float> g(24), u(24), y(24);
  for (int i = 0; i < 24; ++i) g[i] = 2.0f * test_value(i, 1), u[i] = test_value(i, 2);
  g[7] = -95.0f;
  ops_swiglu_avx2(g.data(), u.data(), y.data(), 24);
  CHECK_EQ(count_mismatches(y.data(), swiglu_want, 24), 0);

  // softmax (scale 1) of 8 * v(i, 3) with x[4] = -60 (expf's scaled path), x[6] = -100 (underflow), x[11] = -inf
  static const uint32_t softmax_want[16] = {
      0x2038ef78u, 0x13a20652u, 0x3c2527e7u, 0x0d108e26u, 0x000003d5u, 0x31180865u, 0x00000000u, 0x3a5d2feeu,
      0x1e9b5415u, 0x39813dffu, 0x0994a1cbu, 0x00000000u, 0x3f7d23edu, 0x253a0dbau, 0x178d0236u, 0x2c0b37a8u};
  std::vector<float> s(16);
  for (int i = 0; i < 16; ++i) s[i] = 8.0f * test_value(i, 3);
  s[4] = -60.0f;
  s[6] = -100.0f;
  s[11] = -INFINITY;
  ops_softmax_row_avx2(s.data(), 16, 1.0f);
  CHECK_EQ(count_mismatches(s.data(), softmax_want, 16), 0);

  // dot of v(i, 4) and v(i, 5) over the first n: every path (32-steps, 8-chunks, a 4-chunk, fma tail)
  static const uint32_t dot_want[4] = {0xc0830ba8u, 0x42a531fcu, 0x42eb7896u, 0xc1b16191u};
  const int ns[4] = {16, 45, 64, 7};
  std::vector<float> a(64), b(64);
  for (int i = 0; i < 64; ++i) a[i] = test_value(i, 4), b[i] = test_value(i, 5);
  for (int k = 0; k < 4; ++k) {
    const float d = ops_dot_f32_avx2(a.data(), b.data(), ns[k]);
    if (bits(d) != dot_want[k]) harness::fail(__FILE__, __LINE__, "dot n " + std::to_string(ns[k]) + " differs");
  }
}

TEST_CASE("ops avx2: rope pairs are fma(x0, c, -(x1 s)) and fma(x0, s, x1 c), normal and neox") {
  if (!have_avx2()) SKIP("the AVX2 ops need a CPU with AVX2");
  rope_params p;
  p.n_rot = 32;
  p.freq_base = 500000.0f;
  std::vector<float> cache(32);
  ops_rope_cache(37, p, cache.data());
  for (bool neox : {false, true}) {
    std::vector<float> x(40);
    for (int i = 0; i < 40; ++i) x[i] = test_value(i, neox ? 7 : 6);
    std::vector<float> want = x;
    for (int j = 0; j < 16; ++j) {
      const int a = neox ? j : 2 * j, b = neox ? j + 16 : 2 * j + 1;
      const float c = cache[2 * j], s = cache[2 * j + 1], x0 = x[a], x1 = x[b];
      const float x1s = x1 * s, x1c = x1 * c;
      want[a] = std::fma(x0, c, -x1s);
      want[b] = std::fma(x0, s, x1c);
    }
    ops_rope_head_avx2(x.data(), cache.data(), 32, neox);
    int bad = 0;
    for (int i = 0; i < 40; ++i) bad += bits(x[i]) != bits(want[i]);  // dims 32..39 untouched
    CHECK_EQ(bad, 0);
  }
}

// kq = dot_f32_avx2(k_j, q) * scale; softmax over the row padded with -inf to a multiple of 8; out[d] from 8
// lane accumulators acc[j % 8] = fma(v_j[d], p_j, acc), summed (a0 + a4) + (a2 + a6) + ((a1 + a5) + (a3 + a7)).
TEST_CASE("ops avx2: attention_head follows llama.cpp's reduction order and matches a double reference") {
  if (!have_avx2()) SKIP("the AVX2 ops need a CPU with AVX2");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t n_kv : {1, 7, 8, 13, 40, 101}) {
    const bool wide = n_kv >= 40;  // head dims of real models: several 8-dimension blocks, no tail
    const int32_t dk = wide ? 64 : 16, dv = wide ? 64 : 12;
    const int64_t ks = dk + 4, vs = dv + 2;
    std::vector<float> q(dk), k(n_kv * ks), v(n_kv * vs);
    for (auto* vec : {&q, &k, &v})
      for (auto& e : *vec) e = dist(rng);
    const float scale = 1.0f / std::sqrt((float)dk);
    std::vector<float> scratch(ops_attention_scratch(n_kv, dv)), out(dv);
    ops_attention_head_avx2(q.data(), k.data(), ks, v.data(), vs, n_kv, dk, dv, scale, scratch.data(), out.data());

    const int64_t n_pad = (n_kv + 7) / 8 * 8;
    std::vector<float> p(n_pad, -INFINITY);
    for (int64_t j = 0; j < n_kv; ++j) p[j] = ops_dot_f32_avx2(k.data() + j * ks, q.data(), dk);
    ops_softmax_row_avx2(p.data(), n_pad, scale);
    std::vector<double> s(n_kv);
    double m = -1e300, tot = 0;
    for (int64_t j = 0; j < n_kv; ++j) {
      double d = 0;
      for (int i = 0; i < dk; ++i) d += (double)q[i] * k[j * ks + i];
      s[j] = d * scale;
      m = std::max(m, s[j]);
    }
    for (auto& e : s) tot += (e = std::exp(e - m));
    int bad = 0;
    for (int d = 0; d < dv; ++d) {
      float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      double ref = 0;
      for (int64_t j = 0; j < n_kv; ++j) {
        a[j % 8] = std::fma(v[j * vs + d], p[j], a[j % 8]);
        ref += s[j] / tot * v[j * vs + d];
      }
      const float want = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
      bad += bits(out[d]) != bits(want);
      CHECK_NEAR(out[d], ref, 1e-5);
    }
    if (bad) harness::fail(__FILE__, __LINE__, "order differs for n_kv " + std::to_string(n_kv));
  }
}
