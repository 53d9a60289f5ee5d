// The CPU backend's lora_add (rank-one updates over a transposed b, lora_kernel.h) against a double-precision
// reference of y + scale * (b . round(a . x)) and against the backend's default (matmul, matmul, scale, add): the same
// products summed in another order; every row as alone, whatever the thread count (bit for bit).
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fp16.h"
#include "harness.h"

using namespace spindle;

namespace {

struct lora_case {
  ggml_type type;
  int64_t n_in, rank, n_out;
};

// Weights of `type` holding the values v (rounded as stored); v is updated to the stored values.
std::vector<uint8_t> store(ggml_type type, std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * (type == ggml_type::F32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (type == ggml_type::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
      continue;
    }
    const uint16_t h = type == ggml_type::F16 ? f32_to_fp16(v[i]) : f32_to_bf16(v[i]);
    v[i] = type == ggml_type::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

float round_as(ggml_type t, float v) {
  return t == ggml_type::F16 ? fp16_to_f32(f32_to_fp16(v)) : t == ggml_type::BF16 ? bf16_to_f32(f32_to_bf16(v)) : v;
}

}  // namespace

TEST_CASE("cpu lora_add: the reference, the default ops, rows alone, threads") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const lora_case c : {lora_case{ggml_type::F32, 64, 8, 1000}, lora_case{ggml_type::F16, 96, 16, 2050},
                            lora_case{ggml_type::BF16, 64, 7, 300}}) {
    const int64_t n_rows = 19;  // a task of 16 rows (passes of 4) and one of 3
    std::vector<float> av(size_t(c.rank * c.n_in)), bv(size_t(c.n_out * c.rank)), x(size_t(n_rows * c.n_in)), y0(size_t(n_rows * c.n_out));
    for (auto* v : {&av, &bv, &x, &y0}) for (float& f : *v) f = u(rng);
    const std::vector<uint8_t> a_bytes = store(c.type, av), b_bytes = store(c.type, bv);
    cpu_backend one(1), two(2);
    const float scale = 1.75f;
    const auto run = [&](cpu_backend& be, bool fallback, int64_t row0, int64_t rows) {
      const backend_weight a = be.upload_weight(c.type, a_bytes.data(), c.n_in, c.rank);
      const backend_weight b = be.upload_weight(c.type, b_bytes.data(), c.rank, c.n_out);
      std::vector<float> y(y0.begin() + row0 * c.n_out, y0.begin() + (row0 + rows) * c.n_out);
      std::vector<float> low(size_t(rows * c.rank)), delta(size_t(rows * c.n_out));
      if (fallback) be.backend::lora_add(a, b, scale, x.data() + row0 * c.n_in, rows, y.data(), low.data(), delta.data());
      else be.lora_add(a, b, scale, x.data() + row0 * c.n_in, rows, y.data(), low.data(), delta.data());
      return y;
    };
    const std::vector<float> fast = run(two, false, 0, n_rows), plain = run(two, true, 0, n_rows);
    double max_ref = 0, max_plain = 0;
    for (int64_t t = 0; t < n_rows; ++t) {
      std::vector<double> low(size_t(c.rank));
      for (int64_t j = 0; j < c.rank; ++j) {
        double s = 0;
        // a's matmul takes x in its vec_dot type (f16 / bf16 rounded), as ggml's
        for (int64_t i = 0; i < c.n_in; ++i) s += double(av[size_t(j * c.n_in + i)]) * round_as(c.type, x[size_t(t * c.n_in + i)]);
        low[size_t(j)] = round_as(c.type, float(s));
      }
      for (int64_t o = 0; o < c.n_out; ++o) {
        double d = 0;
        for (int64_t j = 0; j < c.rank; ++j) d += double(bv[size_t(o * c.rank + j)]) * low[size_t(j)];
        const double ref = y0[size_t(t * c.n_out + o)] + scale * d;
        max_ref = std::max(max_ref, std::fabs(fast[size_t(t * c.n_out + o)] - ref));
        max_plain = std::max(max_plain, std::fabs(double(fast[size_t(t * c.n_out + o)]) - plain[size_t(t * c.n_out + o)]));
      }
    }
    CHECK_NEAR(max_ref, 0.0, c.type == ggml_type::F32 ? 1e-4 : 1e-2);  // f16 / bf16: a rounding of low may flip
    CHECK_NEAR(max_plain, 0.0, c.type == ggml_type::F32 ? 1e-5 : 1e-5);
    CHECK(run(one, false, 0, n_rows) == fast);  // thread count
    for (const auto [row0, rows] : {std::pair<int64_t, int64_t>{3, 1}, {5, 2}, {17, 2}, {9, 3}}) {  // rows alone, in 1..3-row passes
      const std::vector<float> part = run(two, false, row0, rows);
      CHECK(std::equal(part.begin(), part.end(), fast.begin() + row0 * c.n_out));
    }
  }
}
