// Tests of the test-model quantizers (test_quantize.h): for every type test_quantize::quantize handles, random
// normal rows quantized by it and dequantized by the CPU reference dequantizer come back close to the input
// (relative RMS error under a per-type bound), finite, and of ggml's row size; an all-zero row comes back all zero.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "gguf/ggml_type.h"
#include "harness.h"
#include "test_quantize.h"

using spindle::ggml_type;

namespace {

// Bound on the relative RMS error ||dequant(quant(x)) - x|| / ||x|| over N(0, 1) rows of 512; 0 for a type the
// quantizers do not handle. Measured (4 rows; min..max over 20 seeds, libstdc++): q8_0 0.51..0.55%,
// q6_K 1.9..2.0%, q5_1 3.6..3.9%, q5_K 3.7..3.9%, q5_0 4.4..4.7%, q4_1 7.6..8.0%, q4_K 7.5..8.1%,
// iq4_nl 7.7..8.5%, iq4_xs 7.8..8.5%, q4_0 9.3..10.0%, q3_K 15.1..15.7%, q2_K 31.7..33.5%. Bounds: about 1.2-1.8x
// the worst measured.
double error_bound(ggml_type t) {
  switch (t) {
    case ggml_type::Q8_0: return 0.01;
    case ggml_type::Q6_K: return 0.03;
    case ggml_type::Q5_0: case ggml_type::Q5_1: case ggml_type::Q5_K: return 0.06;
    case ggml_type::Q4_0: case ggml_type::Q4_1: case ggml_type::Q4_K:
    case ggml_type::IQ4_NL: case ggml_type::IQ4_XS: return 0.12;
    case ggml_type::Q3_K: return 0.20;
    case ggml_type::Q2_K: return 0.40;
    default: return 0;
  }
}

}  // namespace

TEST_CASE("test_quantize: every handled type round-trips through the CPU dequantizer") {
  constexpr int64_t n = 512;
  constexpr int rows = 4;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> inputs(rows, std::vector<float>(n));
  for (auto& row : inputs)
    for (auto& v : row) v = normal(rng);

  int handled = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    if (spindle::ggml_type_info(id) == nullptr) continue;
    const ggml_type t = (ggml_type)id;
    std::vector<uint8_t> q;
    if (!test_quantize::quantize(t, inputs[0], q)) {
      CHECK(error_bound(t) == 0);  // a type with a bound must be handled
      continue;
    }
    ++handled;
    const double bound = error_bound(t);
    if (bound == 0) {
      harness::fail(__FILE__, __LINE__, std::string("no error bound for handled type ") + spindle::ggml_type_info(id)->name);
      continue;
    }
    double err2 = 0, ref2 = 0;
    bool finite = true;
    std::vector<float> out(n);
    for (const auto& x : inputs) {
      REQUIRE(test_quantize::quantize(t, x, q));
      CHECK_EQ((uint64_t)q.size(), spindle::ggml_row_size(t, n));
      spindle::cpu_dequantize_row(t, q.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        finite = finite && std::isfinite(out[i]);
        err2 += (double)(out[i] - x[i]) * (out[i] - x[i]);
        ref2 += (double)x[i] * x[i];
      }
    }
    const double rel = std::sqrt(err2 / ref2);
    if (!finite || !(rel < bound)) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "%s: relative RMS error %.4f (bound %.2f), finite %d", spindle::ggml_type_info(id)->name,
                    rel, bound, (int)finite);
      harness::fail(__FILE__, __LINE__, msg);
    }

    const std::vector<float> zeros(n, 0.0f);
    REQUIRE(test_quantize::quantize(t, zeros, q));
    std::fill(out.begin(), out.end(), 1.0f);
    spindle::cpu_dequantize_row(t, q.data(), out.data(), n);
    int nonzero = 0;
    for (float v : out) nonzero += v != 0.0f;
    if (nonzero) harness::fail(__FILE__, __LINE__, std::string(spindle::ggml_type_info(id)->name) + ": zero row dequantizes to non-zero");
  }
  CHECK_EQ(handled, 12);  // q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl q2_K q3_K q4_K q5_K q6_K iq4_xs
}
