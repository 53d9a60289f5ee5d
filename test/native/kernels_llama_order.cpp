// Tests that the SIMD Q4_0 / Q4_K kernels follow the float arithmetic of llama.cpp's repacked x86 gemm
// (CPU_REPACK q4_0_8x8 / q4_K_8x8) bit for bit: one f32 fma chain per output over exact integer block sums.
// The emulation below is written from that description with std::fma (correctly rounded, like the FMA unit).
#include <string>

#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

namespace {

// acc = fma((float)isum_b, dw_b * dx_b, acc) over the 32-blocks.
float q4_0_chain(int64_t n, const block_q4_0* w, const block_q8_0* x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / QK4_0; ++b) {
    int isum = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      isum += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];
      isum += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + QK4_0 / 2];
    }
    acc = std::fma((float)isum, fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d), acc);
  }
  return acc;
}

// Per 64-element pair of sub-blocks s: acc = fma(sc-weighted dot, d*dx, acc), accm = fma(m-weighted sums,
// dmin*dx, accm); the result acc - accm.
float q4_K_chain(int64_t n, const block_q4_K* w, const block_q8_K* x) {
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float sd = fp16_to_f32(w[b].d) * x[b].d, sm = fp16_to_f32(w[b].dmin) * x[b].d;
    for (int s = 0; s < 4; ++s) {
      int isum = 0, msum = 0;
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * s + h;  // sub-block: elements 32j .. 32j + 32
        uint8_t sc, m;
        q4_K_scale_min(j, w[b].scales, &sc, &m);
        int dot = 0, xsum = 0;
        for (int l = 0; l < 32; ++l) {
          dot += ((w[b].qs[32 * s + l] >> (4 * h)) & 0x0f) * x[b].qs[32 * j + l];
          xsum += x[b].qs[32 * j + l];
        }
        isum += sc * dot;
        msum += m * xsum;
      }
      acc = std::fma((float)isum, sd, acc);
      accm = std::fma((float)msum, sm, accm);
    }
  }
  return acc - accm;
}

}  // namespace

TEST_CASE("kernels: SIMD Q4_0 / Q4_K outputs are llama.cpp's repacked-gemm fma chains bit for bit") {
  std::mt19937 rng(21);
  for (cpu_level level : supported_levels()) {
    if (level == cpu_level::scalar) continue;  // the scalar level keeps the plain reference sums
    for (ggml_type t : {ggml_type::Q4_0, ggml_type::Q4_K}) {
      const tile_kernel k = cpu_tile_kernel(level, t);
      REQUIRE(k.fn != nullptr);
      const int64_t n = t == ggml_type::Q4_0 ? 8 * QK4_0 : 3 * QK_K;
      const int R = k.max_rows, T = k.max_tokens;
      const std::vector<uint8_t> w = random_rows(t, R, n, rng);
      const std::vector<uint8_t> x = convert_activations(t, random_activations(T, n, rng), T, n);
      const size_t ws = cpu_row_bytes(t, n), xs = cpu_row_bytes(cpu_activation_type(t), n);
      std::vector<float> y(R * T);
      k.fn(n, w.data(), ws, R, x.data(), xs, T, y.data(), R);
      int bad = 0;
      for (int r = 0; r < R; ++r) {
        for (int tok = 0; tok < T; ++tok) {
          const float want = t == ggml_type::Q4_0
                                 ? q4_0_chain(n, (const block_q4_0*)(w.data() + r * ws), (const block_q8_0*)(x.data() + tok * xs))
                                 : q4_K_chain(n, (const block_q4_K*)(w.data() + r * ws), (const block_q8_K*)(x.data() + tok * xs));
          if (!same_bits(y[tok * R + r], want)) ++bad;
        }
      }
      if (bad)
        harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ from the chain for " +
                                              cpu_level_name(level) + " type " + std::to_string((int)t));
    }
  }
}
