// Tests of the block formats and scalar conversions: fp16 / bf16 rounding, dequantization of hand-built
// blocks with known values, and the activation quantizers' rounding rules (llama.cpp's x86 CPU backend).
#include <cmath>
#include <limits>

#include "backend/cpu/quants_avx2.h"
#include "harness.h"
#include "kernels_util.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KT_F16C 1
__attribute__((target("f16c"))) static uint16_t f16c_from_f32(float f) { return (uint16_t)_cvtss_sh(f, 0); }
__attribute__((target("f16c"))) static float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }
#endif

using namespace kernels_test;

TEST_CASE("kernels: fp16 conversions of known values round to nearest even") {
  CHECK_EQ(fp16_to_f32(0x3c00), 1.0f);
  CHECK_EQ(fp16_to_f32(0xc000), -2.0f);
  CHECK_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  CHECK_EQ(fp16_to_f32(0x7bff), 65504.0f);
  CHECK(std::isinf(fp16_to_f32(0x7c00)));
  CHECK(std::isnan(fp16_to_f32(0x7e00)));
  CHECK_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  CHECK_EQ(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  CHECK_EQ(f32_to_fp16(65519.0f), 0x7bff);
  CHECK_EQ(f32_to_fp16(65520.0f), 0x7c00);                          // rounds to inf
  CHECK_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);             // subnormal tie -> 0
  CHECK_EQ(f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  CHECK_EQ(f32_to_fp16(std::ldexp(2.5f, -24)), 0x0002);             // subnormal tie -> even
  CHECK_EQ(f32_to_fp16(-0.0f), 0x8000);
  const uint16_t nan = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0);
}

#if defined(KT_F16C)
TEST_CASE("kernels: fp16 conversions are bit-identical to F16C") {
  if (!cpu_detected_features().avx2) SKIP("F16C (part of the avx2 level) needs a CPU with AVX2");
  int mismatches = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = fp16_to_f32((uint16_t)h), b = f16c_to_f32((uint16_t)h);
    if (!(same_bits(a, b) || (std::isnan(a) && std::isnan(b)))) ++mismatches;
  }
  CHECK_EQ(mismatches, 0);
  std::mt19937 rng(7);
  const float edges[] = {0.0f, -0.0f, 1.0f, 65504.0f, 65519.99f, 65520.0f, 1e30f, -1e-30f, 6.1e-5f, 5.96e-8f,
                         2.98e-8f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()};
  for (float f : edges) CHECK_EQ(f32_to_fp16(f), f16c_from_f32(f));
  mismatches = 0;
  for (int i = 0; i < 1000000; ++i) {
    const float f = f32_from_bits((uint32_t)rng());
    if (std::isnan(f)) continue;
    if (f32_to_fp16(f) != f16c_from_f32(f)) ++mismatches;
  }
  CHECK_EQ(mismatches, 0);
}
#endif

TEST_CASE("kernels: bf16 conversions round to nearest even and quiet NaN") {
  CHECK_EQ(bf16_to_f32(0x3f80), 1.0f);
  CHECK_EQ(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);  // tie -> even
  CHECK_EQ(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);  // tie -> even
  CHECK_EQ(f32_to_bf16(f32_from_bits(0x3f808001)), 0x3f81);
  CHECK_EQ(f32_to_bf16(f32_from_bits(0x7f7fffff)), 0x7f80);  // rounds up to inf
  CHECK_EQ(f32_to_bf16(f32_from_bits(0x7f800001)), 0x7fc0);  // signalling NaN -> quiet
  CHECK_EQ(f32_to_bf16(-2.0f), 0xc000);
}

TEST_CASE("kernels: dequantize hand-built q4_0 and q8_0 blocks") {
  block_q4_0 q4{};
  q4.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) q4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
  float y[32];
  cpu_dequantize_row(ggml_type::Q4_0, &q4, y, 32);
  for (int j = 0; j < 16; ++j) {
    CHECK_EQ(y[j], (j - 8) * 0.5f);
    CHECK_EQ(y[j + 16], (7 - j) * 0.5f);
  }
  block_q8_0 q8{};
  q8.d = f32_to_fp16(0.25f);
  for (int j = 0; j < 32; ++j) q8.qs[j] = (int8_t)(j - 16);
  cpu_dequantize_row(ggml_type::Q8_0, &q8, y, 32);
  for (int j = 0; j < 32; ++j) CHECK_EQ(y[j], (j - 16) * 0.25f);
}

// ggml's 6-bit packing of 8 scales and 8 mins into 12 bytes (as quantize_row_q4_K_ref writes it).
static void pack_q4_K_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    out[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

TEST_CASE("kernels: q4_K scale packing round-trips and a hand-built block dequantizes") {
  std::mt19937 rng(3);
  for (int it = 0; it < 1000; ++it) {
    uint8_t sc[8], m[8], packed[12];
    for (int j = 0; j < 8; ++j) sc[j] = rng() % 64, m[j] = rng() % 64;
    pack_q4_K_scales(sc, m, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s2, m2;
      q4_K_scale_min(j, packed, &s2, &m2);
      CHECK(s2 == sc[j] && m2 == m[j]);
    }
  }
  const uint8_t sc[8] = {1, 2, 3, 4, 5, 37, 7, 63}, m[8] = {0, 2, 4, 6, 8, 10, 50, 33};
  block_q4_K b{};
  b.d = f32_to_fp16(2.0f);
  b.dmin = f32_to_fp16(1.0f);
  pack_q4_K_scales(sc, m, b.scales);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) b.qs[32 * c + l] = (uint8_t)((l % 16) | ((15 - l % 16) << 4));
  float y[256];
  cpu_dequantize_row(ggml_type::Q4_K, &b, y, 256);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      CHECK_EQ(y[64 * c + l], 2.0f * sc[2 * c] * (l % 16) - 1.0f * m[2 * c]);
      CHECK_EQ(y[64 * c + 32 + l], 2.0f * sc[2 * c + 1] * (15 - l % 16) - 1.0f * m[2 * c + 1]);
    }
  }
}

TEST_CASE("kernels: dequantize a hand-built q6_K block") {
  block_q6_K b{};
  b.d = f32_to_fp16(0.5f);
  for (int g = 0; g < 16; ++g) b.scales[g] = (int8_t)(g - 8);
  for (int i = 0; i < 256; ++i) {  // element i holds q = 7i mod 64
    const int q = (7 * i) % 64, h = i / 128, c = (i % 128) / 32, l = i % 32;
    uint8_t& lo = b.ql[64 * h + 32 * (c % 2) + l];
    lo |= (uint8_t)(c < 2 ? (q & 0x0f) : (q & 0x0f) << 4);
    b.qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * c));
  }
  float y[256];
  cpu_dequantize_row(ggml_type::Q6_K, &b, y, 256);
  for (int i = 0; i < 256; ++i) CHECK_EQ(y[i], 0.5f * (i / 16 - 8) * ((7 * i) % 64 - 32));
}

TEST_CASE("kernels: quantize_row_q8_0 uses 127/amax and ties to even") {
  float x[96] = {};
  x[0] = 127, x[1] = 2.5f, x[2] = 3.5f, x[3] = -2.5f, x[4] = -127, x[5] = 0.49f;
  x[64] = 254, x[65] = 5, x[66] = 7, x[67] = -3;  // id = 0.5: 2.5, 3.5, -1.5
  block_q8_0 y[3];
  quantize_row_q8_0(x, y, 96);
  CHECK_EQ(y[0].d, 0x3c00);
  const int want0[6] = {127, 2, 4, -2, -127, 0};
  for (int j = 0; j < 6; ++j) CHECK_EQ((int)y[0].qs[j], want0[j]);
  CHECK_EQ(y[1].d, 0);
  for (int j = 0; j < 32; ++j) CHECK_EQ((int)y[1].qs[j], 0);
  CHECK_EQ(y[2].d, f32_to_fp16(2.0f));
  const int want2[4] = {127, 2, 4, -2};
  for (int j = 0; j < 4; ++j) CHECK_EQ((int)y[2].qs[j], want2[j]);
}

TEST_CASE("kernels: quantize_row_q8_0 matches an independent nearbyint oracle") {
  std::mt19937 rng(11);
  const std::vector<float> x = random_activations(1, 32 * 64, rng);
  std::vector<block_q8_0> y(64);
  quantize_row_q8_0(x.data(), y.data(), 32 * 64);
  int bad = 0;
  for (int b = 0; b < 64; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    if (y[b].d != f32_to_fp16(amax / 127.f)) ++bad;
    for (int j = 0; j < 32; ++j)
      if (y[b].qs[j] != (int)std::nearbyint(x[32 * b + j] * (127.f / amax))) ++bad;
  }
  CHECK_EQ(bad, 0);
}

TEST_CASE("kernels: quantize_row_q8_K scales by -127/max, ties to even, fills bsums") {
  std::vector<float> x(512, 0.0f);
  x[0] = -127, x[1] = 2.5f, x[2] = 3.5f, x[3] = 127, x[4] = -0.5f, x[17] = 9;
  x[256] = 254, x[257] = 5, x[258] = -3;  // iscale = -0.5: -127, -2.5 -> -2, 1.5 -> 2
  block_q8_K y[2];
  quantize_row_q8_K(x.data(), y, 512);
  CHECK_EQ(y[0].d, 1.0f);
  const int want0[5] = {-127, 2, 4, 127, 0};
  for (int j = 0; j < 5; ++j) CHECK_EQ((int)y[0].qs[j], want0[j]);
  CHECK_EQ(y[0].bsums[0], 6);
  CHECK_EQ(y[0].bsums[1], 9);
  CHECK_EQ(y[1].d, -2.0f);
  const int want1[3] = {-127, -2, 2};
  for (int j = 0; j < 3; ++j) CHECK_EQ((int)y[1].qs[j], want1[j]);
  CHECK_EQ(y[1].bsums[0], -127);
}

TEST_CASE("kernels: quantize_row_q8_K matches an independent nearbyint oracle") {
  std::mt19937 rng(12);
  const std::vector<float> x = random_activations(1, 256 * 8, rng);
  std::vector<block_q8_K> y(8);
  quantize_row_q8_K(x.data(), y.data(), 256 * 8);
  int bad = 0;
  for (int b = 0; b < 8; ++b) {
    float amax = 0, max = 0;
    for (int j = 0; j < 256; ++j)
      if (std::fabs(x[256 * b + j]) > amax) amax = std::fabs(x[256 * b + j]), max = x[256 * b + j];
    const float iscale = -127.f / max;
    if (!same_bits(y[b].d, 1 / iscale)) ++bad;
    for (int j = 0; j < 256; ++j)
      if (y[b].qs[j] != std::min(127, (int)std::nearbyint(iscale * x[256 * b + j]))) ++bad;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += y[b].qs[16 * g + j];
      if (y[b].bsums[g] != s) ++bad;
    }
  }
  CHECK_EQ(bad, 0);
}

// Rows with ties (x.5 after scaling), zero blocks, a repeated largest magnitude of both signs (the first one
// gives q8_K's sign), outliers and subnormals: the AVX2 quantizers must give the scalar ones' bytes.
TEST_CASE("kernels: the AVX2 q8_0 / q8_K quantizers give the scalar quantizers' bits") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 quantizers need a CPU with AVX2");
  std::mt19937 rng(41);
  const int64_t n = 8 * QK_K;
  for (int rep = 0; rep < 40; ++rep) {
    std::vector<float> x = random_activations(1, n, rng);
    if (rep % 4 == 1) std::fill(x.begin() + QK_K, x.begin() + 2 * QK_K, 0.0f);  // an all-zero block
    if (rep % 4 == 2) {
      for (int64_t i = 0; i < n; ++i) x[i] = (float)((int)(rng() % 255) - 127) * 0.5f;  // many exact ties
      x[5] = -63.5f, x[9] = 63.5f;  // same magnitude, negative first
    }
    if (rep % 4 == 3) x[17] = 1e-40f, x[300] = -3e-39f, x[301] = 1e30f;
    std::vector<block_q8_0> a(n / QK8_0), b(n / QK8_0);
    quantize_row_q8_0(x.data(), a.data(), n);
    quantize_row_q8_0_avx2(x.data(), b.data(), n);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(block_q8_0)) == 0);
    std::vector<block_q8_K> c(n / QK_K), d(n / QK_K);
    quantize_row_q8_K(x.data(), c.data(), n);
    quantize_row_q8_K_avx2(x.data(), d.data(), n);
    CHECK(std::memcmp(c.data(), d.data(), c.size() * sizeof(block_q8_K)) == 0);
  }
}

TEST_CASE("kernels: row sizes, supported types and their errors") {
  CHECK_EQ(cpu_row_bytes(ggml_type::Q4_K, 512), (size_t)288);
  CHECK_EQ(cpu_row_bytes(ggml_type::Q8_0, 64), (size_t)68);
  CHECK_EQ(cpu_row_bytes(ggml_type::BF16, 7), (size_t)14);
  CHECK_THROWS_WITH(cpu_row_bytes(ggml_type::Q4_K, 100), "not a multiple of the block size");
  CHECK_THROWS_WITH(cpu_row_bytes(ggml_type::F32, INT64_MAX), "overflow");
  for (ggml_type t : weight_types()) CHECK(cpu_supports_type(t));
  CHECK(!cpu_supports_type(ggml_type::IQ2_XXS));
  CHECK(!cpu_supports_type(ggml_type::Q8_1));
  CHECK(!cpu_supports_type(ggml_type::Q8_K));
  float y[32];
  block_q4_0 b{};
  CHECK_THROWS_WITH(cpu_dequantize_row(ggml_type::IQ2_XXS, &b, y, 256), "unsupported");
  CHECK_THROWS_WITH(cpu_dequantize_row(ggml_type::Q4_0, &b, y, 31), "not a multiple");
  CHECK(cpu_level_supported(cpu_active_level()));
}
