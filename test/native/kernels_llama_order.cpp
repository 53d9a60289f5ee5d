// Tests that the SIMD kernels follow the float arithmetic of llama.cpp's x86 AVX2 build bit for bit: Q4_0 / Q4_K
// its repacked gemm (CPU_REPACK q4_0_8x8 / q4_K_8x8: one f32 fma chain per output over exact integer block
// sums), Q8_0 / Q6_K its vec_dot (8 f32 lanes over exact lane sums, then ggml's lane sum); the row kernels and
// the packed kernels alike. The emulations are written from those descriptions with std::fma (correctly
// rounded, like the FMA unit).
#include <string>

#include "backend/cpu/repack.h"
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

// ggml's hsum_float_8: (l0 + l4) + (l2 + l6) + ((l1 + l5) + (l3 + l7)).
float hsum8(const float l[8]) {
  const float a = l[0] + l[4], b = l[1] + l[5], c = l[2] + l[6], d = l[3] + l[7];
  return (a + c) + (b + d);
}

// llama.cpp's AVX2 ggml_vec_dot_q8_0_q8_0 (and tinyBLAS): lane l of block b holds the int sum of elements
// 4l .. 4l + 4; acc_l = fma((float)int_l, dw_b * dx_b, acc_l); the result is hsum8(acc).
float q8_0_lanes(int64_t n, const block_q8_0* w, const block_q8_0* x) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float d = fp16_to_f32(w[b].d) * fp16_to_f32(x[b].d);
    for (int l = 0; l < 8; ++l) {
      int isum = 0;
      for (int k = 0; k < 4; ++k) isum += w[b].qs[4 * l + k] * x[b].qs[4 * l + k];
      acc[l] = std::fma((float)isum, d, acc[l]);
    }
  }
  return hsum8(acc);
}

// llama.cpp's AVX2 ggml_vec_dot_q6_K_q8_K: lane l of super-block b holds
//   sum_j scales[2j + (l >= 4)] * (q . x over elements 32j + 4l .. + 4) - 32 (scales[2l] bsums[2l] + scales[2l+1] bsums[2l+1]);
// acc_l = fma((float)int_l, dx * dw, acc_l); the result is hsum8(acc).
float q6_K_lanes(int64_t n, const block_q6_K* w, const block_q8_K* x) {
  float acc[8] = {};
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float d = x[b].d * fp16_to_f32(w[b].d);
    for (int l = 0; l < 8; ++l) {
      int isum = 0;
      for (int j = 0; j < 8; ++j) {
        int dot = 0;
        for (int k = 0; k < 4; ++k) dot += q6_K_value(w[b], 32 * j + 4 * l + k) * x[b].qs[32 * j + 4 * l + k];
        isum += w[b].scales[2 * j + (l >= 4)] * dot;
      }
      isum -= 32 * (w[b].scales[2 * l] * x[b].bsums[2 * l] + w[b].scales[2 * l + 1] * x[b].bsums[2 * l + 1]);
      acc[l] = std::fma((float)isum, d, acc[l]);
    }
  }
  return hsum8(acc);
}

float llama_order_dot(ggml_type t, int64_t n, const uint8_t* w, const uint8_t* x) {
  switch (t) {
    case ggml_type::Q4_0: return q4_0_chain(n, (const block_q4_0*)w, (const block_q8_0*)x);
    case ggml_type::Q4_K: return q4_K_chain(n, (const block_q4_K*)w, (const block_q8_K*)x);
    case ggml_type::Q8_0: return q8_0_lanes(n, (const block_q8_0*)w, (const block_q8_0*)x);
    default: return q6_K_lanes(n, (const block_q6_K*)w, (const block_q8_K*)x);
  }
}

}  // namespace

TEST_CASE("kernels: AVX2 Q8_0 / Q6_K matmuls are llama.cpp's 8-lane vec_dot sums bit for bit (tiles and packed)") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 kernels need a CPU with AVX2");
  std::mt19937 rng(22);
  thread_pool pool(2);
  for (ggml_type t : {ggml_type::Q8_0, ggml_type::Q6_K, ggml_type::Q4_0, ggml_type::Q4_K}) {
    const int64_t n = t == ggml_type::Q8_0 || t == ggml_type::Q4_0 ? 40 * QK8_0 : 5 * QK_K;
    const int64_t n_out = 21, n_tok = 6;  // 2 packed groups (where the type packs) + 5 rows from the file rows
    const std::vector<uint8_t> w = random_rows(t, n_out, n, rng);
    const std::vector<float> xf = random_activations(n_tok, n, rng);
    const std::vector<uint8_t> x = convert_activations(t, xf, n_tok, n);
    const size_t ws = cpu_row_bytes(t, n), xs = cpu_row_bytes(cpu_activation_type(t), n);
    const auto pw = cpu_pack_weight(cpu_level::avx2, pool, t, w.data(), n_out, n);
    int bad = 0;
    for (const packed_weight* p : std::vector<const packed_weight*>{nullptr, pw.get()}) {
      std::vector<float> y(n_tok * n_out);
      cpu_matmul_at_level(cpu_level::avx2, pool, t, w.data(), n_out, n, xf.data(), n_tok, y.data(), p);
      for (int64_t r = 0; r < n_out; ++r)
        for (int64_t tok = 0; tok < n_tok; ++tok)
          if (!same_bits(y[tok * n_out + r], llama_order_dot(t, n, w.data() + r * ws, x.data() + tok * xs))) ++bad;
    }
    if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for type " + std::to_string((int)t));
  }
}

TEST_CASE("kernels: SIMD Q4_0 / Q4_K outputs are llama.cpp's repacked-gemm fma chains bit for bit") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the SIMD kernels need a CPU with AVX2");
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
