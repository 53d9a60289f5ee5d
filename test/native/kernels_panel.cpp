// Tests of the panel path for F32 / F16 / BF16 weights (panel.h): the SIMD packers give the reference packer's
// bytes, the layout is the documented slot order, the F16C rounding is the scalar one, and every output of a
// panel matmul has the bits of the level's tile kernel and of a plain C++ model of its lane arithmetic, for every
// shape, token count, thread count and row subset, at every level this CPU runs.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/panel.h"
#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

namespace {

const ggml_type k_float_types[] = {ggml_type::F32, ggml_type::F16, ggml_type::BF16};

std::string label(cpu_level l, ggml_type t) {
  return std::string(cpu_level_name(l)) + " type " + std::to_string((int)t);
}

// The levels with a panel kernel for t (none at the scalar level).
std::vector<cpu_level> panel_levels(ggml_type t) {
  std::vector<cpu_level> out;
  for (cpu_level l : supported_levels())
    if (cpu_panel_kernel(l, t).fn != nullptr) out.push_back(l);
  return out;
}

// Exact f32 values of n elements of a weight row.
std::vector<float> weight_values(ggml_type t, const uint8_t* row, int64_t n) {
  std::vector<float> out(n);
  cpu_dequantize_row(t, row, out.data(), n);
  return out;
}

// The tile kernels' arithmetic in plain C++: lane sums over k = j, j + L, ... with std::fma (zero-padded to a
// multiple of L when `padded`), the lane-sum tree of hsum_avx512 (L = 16: h_i = l_i + l_i+8 first) and
// hsum_avx2 ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), then the tail elements as fma steps.
// With pairs (group 2: vdpbf16ps), lane j sums the pairs (32i + 2j, 32i + 2j + 1) as Intel documents the
// instruction: the odd element's product first, each step one fma with subnormals flushed to zero.
float flush(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

float lanes_model(const panel_shape& s, const std::vector<float>& w, const std::vector<float>& x) {
  const int lanes = s.lanes, g = s.group;
  const int64_t n = (int64_t)w.size(), steps = s.steps(n);
  auto at = [&](const std::vector<float>& v, int64_t k) { return k < n ? flush(v[k]) : 0.0f; };
  float l[16] = {};
  for (int64_t i = 0; i < steps; ++i)
    for (int j = 0; j < lanes; ++j) {
      const int64_t k = (i * lanes + j) * g;
      if (g == 2) l[j] = flush(std::fma(at(w, k + 1), at(x, k + 1), l[j]));
      l[j] = g == 2 ? flush(std::fma(at(w, k), at(x, k), l[j]))
                    : std::fma(k < n ? w[k] : 0.0f, k < n ? x[k] : 0.0f, l[j]);
    }
  if (lanes == 16)
    for (int i = 0; i < 8; ++i) l[i] = l[i] + l[i + 8];
  const float s0 = l[0] + l[4], s1 = l[1] + l[5], s2 = l[2] + l[6], s3 = l[3] + l[7];
  float sum = (s0 + s2) + (s1 + s3);
  if (!s.padded)
    for (int64_t k = steps * lanes; k < n; ++k) sum = std::fma(w[k], x[k], sum);
  return sum;
}

std::vector<float> matmul(cpu_level level, thread_pool& pool, ggml_type t, const uint8_t* w, int64_t n_out,
                          int64_t n_in, const float* x, int64_t n_tok) {
  std::vector<float> y(n_tok * n_out, -7.0f);
  cpu_matmul_at_level(level, pool, t, w, n_out, n_in, x, n_tok, y.data());
  return y;
}

std::vector<float> panels(cpu_level level, thread_pool& pool, ggml_type t, const uint8_t* w, int64_t n_out,
                          int64_t n_in, const float* x, int64_t n_tok) {
  std::vector<float> y(n_tok * n_out, -7.0f);
  cpu_matmul_panels(level, pool, t, w, n_out, n_in, x, n_tok, y.data());
  return y;
}

}  // namespace

TEST_CASE("kernels: panel slots follow the documented order, padding slots are zero") {
  const panel_shape padded{64, 16, true}, tail{16, 8, false}, pairs{64, 16, true, 2};
  CHECK_EQ(pairs.n_slots(40), (int64_t)32);          // 2 steps of 16 pairs
  CHECK_EQ(pairs.offset(40, 3, 0), (int64_t)(2 * 64 * 2 + 1));  // pair 1 = lane 1, step 0: slot 2, odd half
  CHECK_EQ(pairs.offset(40, 32, 5), (int64_t)(1 * 64 * 2 + 5 * 2));  // pair 16 = lane 0, step 1: slot 1, row 5
  CHECK_EQ(padded.n_slots(20), (int64_t)32);  // 2 steps of 16
  CHECK_EQ(padded.slot(20, 0), (int64_t)0);
  CHECK_EQ(padded.slot(20, 1), (int64_t)2);    // lane 1, step 0
  CHECK_EQ(padded.slot(20, 16), (int64_t)1);   // lane 0, step 1
  CHECK_EQ(padded.slot(20, 19), (int64_t)7);   // lane 3, step 1
  CHECK_EQ(tail.n_slots(21), (int64_t)21);     // 2 steps of 8 + 5 tail slots
  CHECK_EQ(tail.slot(21, 9), (int64_t)3);      // lane 1, step 1
  CHECK_EQ(tail.slot(21, 16), (int64_t)16);    // tail slots keep their index
  for (const panel_shape& s : {padded, tail, pairs}) {
    for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 100}) {
      std::vector<int> hits(s.n_slots(n) * s.group, 0);  // per slot position of row 0
      for (int64_t k = 0; k < n; ++k) ++hits[s.offset(n, k, 0) - s.slot(n, k) * (s.rows - 1) * s.group];
      int bad = 0;
      for (int h : hits) bad += h > 1;
      CHECK_EQ(bad, 0);  // no two elements share a slot
      std::vector<uint8_t> row(n * 2, 0xff), panel(s.n_elements(n) * 2, 0x55);
      pack_panel_ref(s, 2, n, row.data(), row.size(), 1, panel.data());
      const uint16_t* e = (const uint16_t*)panel.data();
      for (int64_t slot = 0; slot < s.n_slots(n); ++slot) {
        for (int h = 0; h < s.group; ++h) {
          CHECK_EQ(e[slot * s.rows * s.group + h], (uint16_t)(hits[slot * s.group + h] ? 0xffff : 0));  // or padding
          CHECK_EQ(e[(slot * s.rows + 1) * s.group + h], (uint16_t)0);  // rows past nr are zero
        }
      }
    }
  }
}

TEST_CASE("kernels: each level's panel packer gives the reference packer's bytes") {
  std::mt19937 rng(41);
  for (ggml_type t : k_float_types) {
    for (cpu_level level : panel_levels(t)) {
      const panel_kernel k = cpu_panel_kernel(level, t);
      int bad = 0;
      for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 257}) {
        for (int nr = 1; nr <= k.shape.rows; nr += (nr < 18 ? 1 : 7)) {
          const size_t rb = k.element_bytes * (n + 3);  // rows with a gap between them
          std::vector<uint8_t> rows(rb * nr);
          for (auto& b : rows) b = (uint8_t)rng();
          const size_t bytes = k.shape.n_elements(n) * k.element_bytes;
          std::vector<uint8_t> got(bytes, 0xaa), want(bytes, 0x55);
          k.pack(n, rows.data(), rb, nr, got.data());
          pack_panel_ref(k.shape, k.element_bytes, n, rows.data(), rb, nr, want.data());
          if (got != want) ++bad;
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " panels differ for " + label(level, t));
    }
  }
}

TEST_CASE("kernels: panel activations rounded by F16C have the scalar converter's bits") {
  std::mt19937 rng(42);
  std::vector<float> x;
  for (uint32_t bits : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                        0x477fefffu, 0x477ff000u, 0x477ff001u, 0x38800000u, 0x387fffffu, 0x33000000u, 0x33000001u,
                        0x32ffffffu, 0x00000001u, 0x3f801000u, 0x3f803000u, 0xb3800000u})
    x.push_back(f32_from_bits(bits));
  for (int i = 0; i < 4000; ++i) x.push_back(f32_from_bits((uint32_t)rng()));  // every exponent, NaNs included
  std::normal_distribution<float> normal;
  for (int i = 0; i < 4000; ++i) x.push_back(normal(rng) * std::ldexp(1.0f, (int)(rng() % 40) - 30));
  std::vector<float> got(x.size()), want(x.size());
  panel_round_f16_f16c(x.data(), got.data(), (int64_t)x.size());
  panel_round_f16(x.data(), want.data(), (int64_t)x.size());
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) bad += !same_bits(got[i], want[i]);
  CHECK_EQ(bad, 0);
  for (size_t i = 0; i < x.size(); ++i) CHECK(same_bits(want[i], fp16_to_f32(f32_to_fp16(x[i]))));
}

TEST_CASE("kernels: panel matmuls give the tile kernels' bits and the lane model's, every shape") {
  std::mt19937 rng(43);
  thread_pool pool(2);
  for (ggml_type t : k_float_types) {
    for (cpu_level level : panel_levels(t)) {
      const panel_shape s = cpu_panel_kernel(level, t).shape;
      int bad = 0, bad_model = 0;
      for (int64_t n_in : {1, 7, 8, 9, 15, 16, 17, 100, 264, 1000}) {
        for (int64_t n_out : {1, 15, 17, 63, 65, 130}) {
          const int64_t n_tok = 1 + (int64_t)(rng() % 14);
          const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
          const std::vector<float> x = random_activations(n_tok, n_in, rng);
          const std::vector<float> y = panels(level, pool, t, w.data(), n_out, n_in, x.data(), n_tok);
          const size_t ws = cpu_row_bytes(t, n_in);
          std::vector<uint8_t> xa(cpu_row_bytes(cpu_activation_type(t), n_in));
          for (int64_t tok = 0; tok < n_tok; ++tok) {
            const std::vector<float> y1 = matmul(level, pool, t, w.data(), n_out, n_in, x.data() + tok * n_in, 1);
            cpu_convert_activation(cpu_activation_type(t), x.data() + tok * n_in, xa.data(), n_in);
            const std::vector<float> xv = activation_values(cpu_activation_type(t), xa.data(), n_in);
            for (int64_t o = 0; o < n_out; ++o) {
              const float v = y[tok * n_out + o];
              bad += !same_bits(v, y1[o]);
              const std::vector<float> wv = weight_values(t, w.data() + o * ws, n_in);
              bad_model += !same_bits(v, lanes_model(s, wv, xv));
            }
          }
        }
      }
      if (bad)
        harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs off the tile kernel, " + label(level, t));
      if (bad_model)
        harness::fail(__FILE__, __LINE__, std::to_string(bad_model) + " outputs off the model, " + label(level, t));
    }
  }
}

TEST_CASE("kernels: panel matmuls are batch invariant across token count, rows, threads and chunks") {
  std::mt19937 rng(44);
  thread_pool one(1), two(2), three(3);
  for (ggml_type t : k_float_types) {
    for (cpu_level level : panel_levels(t)) {
      const int64_t n_out = 70, n_in = 200, n_tok = 41;  // ragged panels and token tiles
      const size_t ws = cpu_row_bytes(t, n_in);
      const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
      const std::vector<float> x = random_activations(n_tok, n_in, rng);
      REQUIRE(cpu_panel_pays(level, t, n_tok));
      const std::vector<float> y = matmul(level, two, t, w.data(), n_out, n_in, x.data(), n_tok);
      const std::vector<float> y_one = matmul(level, one, t, w.data(), n_out, n_in, x.data(), n_tok);
      const std::vector<float> y_three = matmul(level, three, t, w.data(), n_out, n_in, x.data(), n_tok);
      const std::vector<float> y_part = panels(level, two, t, w.data(), n_out, n_in, x.data() + 5 * n_in, 13);
      // rows 9..69 alone: other panel boundaries
      const std::vector<float> y_rows = matmul(level, three, t, w.data() + 9 * ws, n_out - 9, n_in, x.data(), n_tok);
      int bad = 0;
      for (int64_t tok = 0; tok < n_tok; ++tok) {
        const std::vector<float> y1 = matmul(level, one, t, w.data(), n_out, n_in, x.data() + tok * n_in, 1);
        for (int64_t o = 0; o < n_out; ++o) {
          const float v = y[tok * n_out + o];
          bad += !same_bits(v, y1[o]) || !same_bits(v, y_one[tok * n_out + o]) ||
                 !same_bits(v, y_three[tok * n_out + o]);
          if (tok >= 5 && tok < 18) bad += !same_bits(v, y_part[(tok - 5) * n_out + o]);
          if (o >= 9) bad += !same_bits(v, y_rows[tok * (n_out - 9) + o - 9]);
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for " + label(level, t));
    }
  }
}

TEST_CASE("kernels: panel matmuls over several activation chunks keep the tile kernels' bits") {
  std::mt19937 rng(45);
  thread_pool pool(2);
  const int64_t n_out = 20, n_in = 4096, n_tok = 1100;  // 16 MiB chunks of f32 tiles: two chunks
  for (ggml_type t : k_float_types) {
    for (cpu_level level : panel_levels(t)) {
      const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
      const std::vector<float> x = random_activations(n_tok, n_in, rng);
      const std::vector<float> y = matmul(level, pool, t, w.data(), n_out, n_in, x.data(), n_tok);
      int bad = 0;
      for (int64_t tok = 0; tok < n_tok; tok += 7) {
        const std::vector<float> y1 = matmul(level, pool, t, w.data(), n_out, n_in, x.data() + tok * n_in, 1);
        for (int64_t o = 0; o < n_out; ++o) bad += !same_bits(y[tok * n_out + o], y1[o]);
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for " + label(level, t));
    }
  }
}

TEST_CASE("kernels: the panel path is taken from its token threshold for the float types only") {
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const bool float_type = t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16;
      const bool has = cpu_panel_kernel(level, t).fn != nullptr;
      CHECK(has == (float_type && level != cpu_level::scalar));
      const int64_t min = cpu_panel_min_tokens(level, t);
      CHECK(!cpu_panel_pays(level, t, min - 1));
      CHECK(cpu_panel_pays(level, t, min) == has);
    }
  }
}
