// Tests of the tile kernels of every SIMD level this CPU runs against the scalar reference dot products:
// random data within a stated tolerance, integer-exact data bit for bit, and tile-shape invariance.
#include <string>

#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

static std::vector<int64_t> row_lengths(ggml_type t) {
  const int64_t b = cpu_block_size(t);
  if (b == 1) return {1, 7, 8, 15, 16, 17, 33, 256, 1000};
  if (b == 32) return {32, 64, 96, 256, 512};  // 1, 2, 3, 8, 16 blocks
  return {256, 512, 768, 2048};                 // 1, 2, 3, 8 super-blocks
}

static std::string label(cpu_level l, ggml_type t, int64_t n) {
  return std::string(cpu_level_name(l)) + " type " + std::to_string((int)t) + " n " + std::to_string(n);
}

static float tile_1x1(const tile_kernel& k, int64_t n, const uint8_t* w, const uint8_t* x) {
  float y = 0;
  k.fn(n, w, 0, 1, x, 0, 1, &y, 1);
  return y;
}

// Tolerance: |fast - ref| <= 1e-5 * sum_i |w_i x_i| (both sum the same exact block products in f32,
// only the summation order differs; a single wrong integer product is far above this for these sizes).
TEST_CASE("kernels: every level's dot matches the reference within 1e-5 of sum|w*x|") {
  std::mt19937 rng(1);
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const tile_kernel k = cpu_tile_kernel(level, t);
      REQUIRE(k.fn != nullptr);
      for (int64_t n : row_lengths(t)) {
        const std::vector<uint8_t> w = random_rows(t, 3, n, rng);
        const std::vector<float> xf = random_activations(2, n, rng);
        const std::vector<uint8_t> x = convert_activations(t, xf, 2, n);
        const size_t ws = cpu_row_bytes(t, n), xs = cpu_row_bytes(cpu_activation_type(t), n);
        int bad = 0;
        for (int r = 0; r < 3; ++r) {
          for (int tok = 0; tok < 2; ++tok) {
            std::vector<float> wv(n);
            cpu_dequantize_row(t, w.data() + r * ws, wv.data(), n);
            const std::vector<float> xv = activation_values(cpu_activation_type(t), x.data() + tok * xs, n);
            const double scale = abs_dot(wv, xv) + 1e-30;
            const float ref = vec_dot_ref_for(t)(n, w.data() + r * ws, x.data() + tok * xs);
            const float fast = tile_1x1(k, n, w.data() + r * ws, x.data() + tok * xs);
            if (std::fabs((double)fast - ref) > 1e-5 * scale) ++bad;
            const double want = reference_dot(t, w.data() + r * ws, x.data() + tok * xs, wv, xv);
            if (std::fabs(ref - want) > 1e-5 * scale) ++bad;
          }
        }
        if (bad) harness::fail(__FILE__, __LINE__, "mismatch for " + label(level, t, n));
      }
    }
  }
}

// Weights and activations whose every product and partial sum is exact in f32: all levels must give the
// reference's bits (so the integer parts are exactly right, not merely close).
static void make_exact(ggml_type t, int64_t n, std::vector<uint8_t>& w, std::vector<uint8_t>& x,
                       std::mt19937& rng) {
  w = random_rows(t, 1, n, rng);
  const ggml_type act = cpu_activation_type(t);
  x.assign(cpu_row_bytes(act, n), 0);
  auto small = [&rng]() { return (int)(rng() % 17) - 8; };
  const int64_t nb = n / cpu_block_size(t);
  for (int64_t i = 0; i < nb; ++i) {
    switch (t) {
      case ggml_type::F32: ((float*)w.data())[i] = (float)small(), ((float*)x.data())[i] = (float)small(); break;
      case ggml_type::F16:
        ((uint16_t*)w.data())[i] = f32_to_fp16((float)small());
        ((uint16_t*)x.data())[i] = f32_to_fp16((float)small());
        break;
      case ggml_type::BF16:
        ((uint16_t*)w.data())[i] = f32_to_bf16((float)small());
        ((uint16_t*)x.data())[i] = f32_to_bf16((float)small());
        break;
      case ggml_type::Q8_0: ((block_q8_0*)w.data())[i].d = f32_to_fp16(1.0f); break;
      case ggml_type::Q4_0: ((block_q4_0*)w.data())[i].d = f32_to_fp16(0.5f); break;
      case ggml_type::Q4_K:
        ((block_q4_K*)w.data())[i].d = f32_to_fp16(1.0f);
        ((block_q4_K*)w.data())[i].dmin = f32_to_fp16(0.5f);
        break;
      case ggml_type::Q6_K:
        ((block_q6_K*)w.data())[i].d = f32_to_fp16(0.25f);
        for (int g = 0; g < 16; ++g) ((block_q6_K*)w.data())[i].scales[g] = (int8_t)(2 * small());
        break;
      case ggml_type::Q4_1:
        ((block_q4_1*)w.data())[i].d = f32_to_fp16(1.0f);
        ((block_q4_1*)w.data())[i].m = f32_to_fp16(-0.5f);
        break;
      case ggml_type::Q5_0: ((block_q5_0*)w.data())[i].d = f32_to_fp16(0.5f); break;
      case ggml_type::Q5_1:
        ((block_q5_1*)w.data())[i].d = f32_to_fp16(0.5f);
        ((block_q5_1*)w.data())[i].m = f32_to_fp16(-2.0f);
        break;
      case ggml_type::Q2_K:
        ((block_q2_K*)w.data())[i].d = f32_to_fp16(1.0f);
        ((block_q2_K*)w.data())[i].dmin = f32_to_fp16(0.5f);
        break;
      case ggml_type::Q3_K: ((block_q3_K*)w.data())[i].d = f32_to_fp16(0.25f); break;
      case ggml_type::Q5_K:
        ((block_q5_K*)w.data())[i].d = f32_to_fp16(1.0f);
        ((block_q5_K*)w.data())[i].dmin = f32_to_fp16(0.5f);
        break;
      case ggml_type::IQ4_NL: ((block_iq4_nl*)w.data())[i].d = f32_to_fp16(0.5f); break;
      case ggml_type::IQ4_XS: ((block_iq4_xs*)w.data())[i].d = f32_to_fp16(0.125f); break;
      default: break;
    }
  }
  if (act == ggml_type::Q8_0) {
    for (int64_t i = 0; i < n / QK8_0; ++i) {
      block_q8_0& b = ((block_q8_0*)x.data())[i];
      b.d = f32_to_fp16(0.25f);
      for (int j = 0; j < QK8_0; ++j) b.qs[j] = (int8_t)small();
    }
  } else if (act == ggml_type::Q8_1) {
    for (int64_t i = 0; i < n / QK8_1; ++i) {
      block_q8_1& b = ((block_q8_1*)x.data())[i];
      int sum = 0;
      for (int j = 0; j < QK8_1; ++j) sum += (b.qs[j] = (int8_t)small());
      b.d = f32_to_fp16(0.25f);
      b.s = f32_to_fp16(0.25f * (float)sum);  // |sum| <= 256: exact in fp16
    }
  } else if (act == ggml_type::Q8_K) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
      block_q8_K& b = ((block_q8_K*)x.data())[i];
      b.d = 0.125f;
      for (int j = 0; j < QK_K; ++j) b.qs[j] = (int8_t)small();
      for (int g = 0; g < 16; ++g) {
        int s = 0;
        for (int j = 0; j < 16; ++j) s += b.qs[16 * g + j];
        b.bsums[g] = (int16_t)s;
      }
    }
  }
}

TEST_CASE("kernels: on f32-exact data every level gives the reference's bits") {
  std::mt19937 rng(2);
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const tile_kernel k = cpu_tile_kernel(level, t);
      for (int64_t n : row_lengths(t)) {
        std::vector<uint8_t> w, x;
        make_exact(t, n, w, x, rng);
        const float ref = vec_dot_ref_for(t)(n, w.data(), x.data());
        const float fast = tile_1x1(k, n, w.data(), x.data());
        if (!same_bits(ref, fast))
          harness::fail(__FILE__, __LINE__, "not exact for " + label(level, t, n) + ": " + std::to_string(fast) +
                                                " vs " + std::to_string(ref));
      }
    }
  }
}

// Every nr x nt tile shape must reproduce the 1x1 results bit for bit (the batch-invariance foundation).
TEST_CASE("kernels: every tile shape gives the bits of a 1x1 tile") {
  std::mt19937 rng(4);
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : weight_types()) {
      const tile_kernel k = cpu_tile_kernel(level, t);
      const int64_t n = cpu_block_size(t) == 1 ? 83 : 3 * cpu_block_size(t);
      const int R = k.max_rows, T = k.max_tokens;
      const std::vector<uint8_t> w = random_rows(t, R, n, rng);
      const std::vector<uint8_t> x = convert_activations(t, random_activations(T, n, rng), T, n);
      const size_t ws = cpu_row_bytes(t, n), xs = cpu_row_bytes(cpu_activation_type(t), n);
      int bad = 0;
      for (int nr = 1; nr <= R; ++nr) {
        for (int nt = 1; nt <= T; ++nt) {
          std::vector<float> y(nt * nr);
          k.fn(n, w.data(), ws, nr, x.data(), xs, nt, y.data(), nr);
          for (int r = 0; r < nr; ++r)
            for (int tok = 0; tok < nt; ++tok)
              if (!same_bits(y[tok * nr + r], tile_1x1(k, n, w.data() + r * ws, x.data() + tok * xs))) ++bad;
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, "tile shapes differ for " + label(level, t, n));
    }
  }
}
