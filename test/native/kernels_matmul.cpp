// Tests of cpu_matmul: agreement with a naive dequantize + f64 loop on the original f32 activations within
// the activation-rounding bound, batch invariance (token count, neighbouring rows, threads), and errors.
#include <mutex>
#include <string>

#include "common/error.h"
#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

static std::string label(cpu_level l, ggml_type t) {
  return std::string(cpu_level_name(l)) + " type " + std::to_string((int)t);
}

// A priori bound on |x_hat_i - x_i| for the activation format of t, per element of one token row.
static std::vector<double> activation_error_bound(ggml_type t, const float* x, int64_t n) {
  const ggml_type act = cpu_activation_type(t);
  std::vector<double> e(n, 0.0);
  const int64_t bs = act == ggml_type::Q8_0 || act == ggml_type::Q8_1 ? 32 : act == ggml_type::Q8_K ? 256 : 1;
  for (int64_t b0 = 0; b0 < n; b0 += bs) {
    double amax = 0;
    for (int64_t i = b0; i < b0 + bs; ++i) amax = std::max(amax, (double)std::fabs(x[i]));
    for (int64_t i = b0; i < b0 + bs; ++i) {
      const double ax = std::fabs(x[i]);
      switch (act) {
        case ggml_type::Q8_0: e[i] = amax * (1.0 / 254 + 1.0 / 2048); break;  // rounding + fp16 scale
        // as q8_0, plus the fp16 rounding of s = d * sum(q) that the weight offset m multiplies (|s| <= 32 amax:
        // at most 32 amax / 2048 per block, spread over its 32 elements; assumes |w_i| >= |m| / 2 on average)
        case ggml_type::Q8_1: e[i] = amax * (1.0 / 254 + 1.0 / 2048 + 1.0 / 1024); break;
        case ggml_type::Q8_K: e[i] = amax * (1.0 / 254 + 1e-6); break;
        case ggml_type::F16: e[i] = ax / 2048 + 3e-8; break;
        case ggml_type::BF16: e[i] = ax / 256; break;
        default: e[i] = 0; break;
      }
    }
  }
  return e;
}

// |y - sum_i w_i x_i| <= sum_i |w_i| e_i + 1e-5 * sum_i |w_i x_i|  (activation rounding + f32 summation).
TEST_CASE("kernels: cpu_matmul matches a naive dequantize + f64 loop within the stated bound") {
  std::mt19937 rng(5);
  thread_pool pool(2);
  const int64_t n_out = 13, n_in = 512, n_tok = 5;
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
      const std::vector<float> x = random_activations(n_tok, n_in, rng);
      std::vector<float> y(n_tok * n_out, -1.0f);
      cpu_matmul_at_level(level, pool, t, w.data(), n_out, n_in, x.data(), n_tok, y.data());
      int bad = 0;
      std::vector<float> wr(n_in);
      for (int64_t o = 0; o < n_out; ++o) {
        cpu_dequantize_row(t, w.data() + o * cpu_row_bytes(t, n_in), wr.data(), n_in);
        for (int64_t tok = 0; tok < n_tok; ++tok) {
          const float* xt = x.data() + tok * n_in;
          const std::vector<double> e = activation_error_bound(t, xt, n_in);
          double want = 0, bound = 0;
          for (int64_t i = 0; i < n_in; ++i) {
            want += (double)wr[i] * xt[i];
            bound += std::fabs(wr[i]) * e[i] + 1e-5 * std::fabs((double)wr[i] * xt[i]);
          }
          if (!(std::fabs(y[tok * n_out + o] - want) <= bound + 1e-6)) ++bad;
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs off for " + label(level, t));
    }
  }
}

static std::vector<float> run_matmul(cpu_level level, thread_pool& pool, ggml_type t, const uint8_t* w,
                                     int64_t n_out, int64_t n_in, const float* x, int64_t n_tok) {
  std::vector<float> y(n_tok * n_out);
  cpu_matmul_at_level(level, pool, t, w, n_out, n_in, x, n_tok, y.data());
  return y;
}

TEST_CASE("kernels: cpu_matmul is batch invariant across token count, rows and threads") {
  std::mt19937 rng(6);
  thread_pool one(1), two(2);
  const int64_t n_out = 11, n_in = 512, n_tok = 7;
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const size_t ws = cpu_row_bytes(t, n_in);
      const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
      const std::vector<float> x = random_activations(n_tok, n_in, rng);
      const std::vector<float> y7 = run_matmul(level, two, t, w.data(), n_out, n_in, x.data(), n_tok);
      const std::vector<float> y7_one = run_matmul(level, one, t, w.data(), n_out, n_in, x.data(), n_tok);
      const std::vector<float> y3 = run_matmul(level, two, t, w.data(), n_out, n_in, x.data() + 2 * n_in, 3);
      // rows 3..10 alone (8 rows: different tile boundaries than in the 11-row call)
      const std::vector<float> rows = run_matmul(level, two, t, w.data() + 3 * ws, 8, n_in, x.data(), n_tok);
      int bad = 0;
      for (int64_t tok = 0; tok < n_tok; ++tok) {
        const std::vector<float> y1 = run_matmul(level, one, t, w.data(), n_out, n_in, x.data() + tok * n_in, 1);
        for (int64_t o = 0; o < n_out; ++o) {
          const float v = y7[tok * n_out + o];
          if (!same_bits(v, y1[o]) || !same_bits(v, y7_one[tok * n_out + o])) ++bad;
          if (tok >= 2 && tok < 5 && !same_bits(v, y3[(tok - 2) * n_out + o])) ++bad;
          if (o >= 3 && !same_bits(v, rows[tok * 8 + (o - 3)])) ++bad;
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for " + label(level, t));
    }
  }
}

TEST_CASE("kernels: cpu_matmul through the active level agrees with cpu_matmul_at_level") {
  std::mt19937 rng(8);
  thread_pool pool(2);
  const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, 9, 256, rng);
  const std::vector<float> x = random_activations(3, 256, rng);
  std::vector<float> y(27);
  cpu_matmul(pool, ggml_type::Q4_K, w.data(), 9, 256, x.data(), 3, y.data());
  const std::vector<float> want = run_matmul(cpu_active_level(), pool, ggml_type::Q4_K, w.data(), 9, 256, x.data(), 3);
  for (int i = 0; i < 27; ++i) CHECK(same_bits(y[i], want[i]));
}

TEST_CASE("kernels: cpu_matmul rejects bad arguments and handles empty shapes") {
  thread_pool pool(2);
  std::vector<uint8_t> w(4096);
  std::vector<float> x(1024, 1.0f), y(64, -1.0f);
  CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::IQ2_XXS, w.data(), 2, 256, x.data(), 1, y.data()), "unsupported");
  CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::Q4_K, w.data(), 2, 100, x.data(), 1, y.data()), "multiple");
  CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::F32, w.data(), -1, 4, x.data(), 1, y.data()), "negative");
  CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::F32, nullptr, 2, 4, x.data(), 1, y.data()), "null");
  cpu_matmul(pool, ggml_type::Q8_0, w.data(), 0, 64, x.data(), 1, y.data());  // nothing to do
  CHECK_EQ(y[0], -1.0f);
  cpu_matmul(pool, ggml_type::F16, w.data(), 4, 0, x.data(), 2, y.data());  // empty sums
  for (int i = 0; i < 8; ++i) CHECK_EQ(y[i], 0.0f);
  CHECK_EQ(y[8], -1.0f);
}

TEST_CASE("kernels: thread_pool rethrows a worker's exception after every thread finished") {
  thread_pool pool(2);
  std::vector<int> done(2, 0);
  CHECK_THROWS_WITH(pool.run([&](int ith, int) {
    if (ith == 1) throw spindle::error("worker failed");
    done[ith] = 1;
  }), "worker failed");
  CHECK_EQ(done[0], 1);
  CHECK_THROWS_WITH(pool.run([&](int ith, int) {
    done[ith] = 2;
    if (ith == 0) throw spindle::error("caller failed");
  }), "caller failed");
  CHECK_EQ(done[1], 2);  // the worker finished before run() rethrew
  int64_t sum = 0;       // and the pool still works afterwards
  std::mutex m;
  pool.run([&](int ith, int) { std::lock_guard<std::mutex> l(m); sum += ith + 1; });
  CHECK_EQ(sum, 3);
}
