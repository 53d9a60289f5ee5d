// Tests of the weight types of quants_more.h (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS) and the q8_1
// activation format against an independent double-precision decoder written here from ggml's byte layouts
// (raw byte offsets, its own fp16 decoding), on random blocks: dequantization, the reference dot products,
// the q8_1 quantizer, the backend's embedding lookup, and which kernel each level runs (the SIMD levels' kernels
// are checked against the reference dots in kernels_vec_dot.cpp).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/repack.h"
#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

namespace {

// IEEE half -> double, bit by bit (not fp16.h).
double half_at(const uint8_t* p) {
  const unsigned h = p[0] | (p[1] << 8);
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1.0 + m / 1024.0, e - 15);
  return (h & 0x8000) ? -v : v;
}

const int k_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Nibble of element p (0..31) of a 32-element run packed as q4_0: p < 16 low nibbles, p >= 16 high nibbles.
int nibble32(const uint8_t* qs, int p) { return p < 16 ? (qs[p] & 15) : (qs[p - 16] >> 4); }

// The 8 six-bit scales and mins of a q4_K / q5_K block, from ggml's 12-byte packing read as three
// little-endian 32-bit words (the kmask formulation of get_scale_min_k4).
void k4_scales(const uint8_t* s12, int sc[8], int mn[8]) {
  uint32_t w[3];
  std::memcpy(w, s12, 12);
  uint8_t b[16];
  const uint32_t lo6 = 0x3f3f3f3f, lo4 = 0x0f0f0f0f, top2 = 0x03030303;
  const uint32_t scales_lo = w[0] & lo6, mins_lo = w[1] & lo6;
  const uint32_t scales_hi = (w[2] & lo4) | (((w[0] >> 6) & top2) << 4);
  const uint32_t mins_hi = ((w[2] >> 4) & lo4) | (((w[1] >> 6) & top2) << 4);
  std::memcpy(b, &scales_lo, 4);
  std::memcpy(b + 4, &scales_hi, 4);
  std::memcpy(b + 8, &mins_lo, 4);
  std::memcpy(b + 12, &mins_hi, 4);
  for (int j = 0; j < 8; ++j) sc[j] = b[j], mn[j] = b[8 + j];
}

// The 16 six-bit scales of a q3_K block (before the -32), from its 12 bytes as words (ggml's kmask formulation).
void q3_scales(const uint8_t* s12, int out[16]) {
  uint32_t a[3], r[4];
  std::memcpy(a, s12, 12);
  const uint32_t m2 = 0x03030303, m4 = 0x0f0f0f0f;
  r[0] = (a[0] & m4) | ((a[2] & m2) << 4);
  r[1] = (a[1] & m4) | (((a[2] >> 2) & m2) << 4);
  r[2] = ((a[0] >> 4) & m4) | (((a[2] >> 4) & m2) << 4);
  r[3] = ((a[1] >> 4) & m4) | (((a[2] >> 6) & m2) << 4);
  uint8_t b[16];
  std::memcpy(b, r, 16);
  for (int g = 0; g < 16; ++g) out[g] = b[g];
}

struct decoded {
  double value;  // the weight
  double mag;    // sum of the magnitudes of its terms (the scale of f32 rounding errors)
};

// Element i (< the block size) of one block of `type` starting at p, in double.
decoded decode(ggml_type type, const uint8_t* p, int i) {
  switch (type) {
    case ggml_type::Q4_1: {
      const double d = half_at(p), m = half_at(p + 2), a = d * nibble32(p + 4, i);
      return {a + m, std::fabs(a) + std::fabs(m)};
    }
    case ggml_type::Q5_0: {
      const uint32_t qh = p[2] | (p[3] << 8) | (p[4] << 16) | ((uint32_t)p[5] << 24);
      const int q = nibble32(p + 6, i) + 16 * ((qh >> i) & 1) - 16;
      return {half_at(p) * q, std::fabs(half_at(p) * q)};
    }
    case ggml_type::Q5_1: {
      const uint32_t qh = p[4] | (p[5] << 8) | (p[6] << 16) | ((uint32_t)p[7] << 24);
      const double a = half_at(p) * (nibble32(p + 8, i) + 16 * ((qh >> i) & 1)), m = half_at(p + 2);
      return {a + m, std::fabs(a) + std::fabs(m)};
    }
    case ggml_type::Q2_K: {
      const int h = i / 128, c = (i % 128) / 32, l = i % 32, sc = p[i / 16];
      const int q = (p[16 + 32 * h + l] >> (2 * c)) & 3;
      const double a = half_at(p + 80) * (sc & 15) * q, m = half_at(p + 82) * (sc >> 4);
      return {a - m, std::fabs(a) + std::fabs(m)};
    }
    case ggml_type::Q3_K: {
      int sc[16];
      q3_scales(p + 96, sc);
      const int h = i / 128, c = (i % 128) / 32, l = i % 32;
      const bool high = (p[l] >> (4 * h + c)) & 1;
      const int q = ((p[32 + 32 * h + l] >> (2 * c)) & 3) - (high ? 0 : 4);
      const double v = half_at(p + 108) * (sc[i / 16] - 32) * q;
      return {v, std::fabs(v)};
    }
    case ggml_type::Q5_K: {
      int sc[8], mn[8];
      k4_scales(p + 4, sc, mn);
      const int j = i / 32, l = i % 32;
      const uint8_t byte = p[48 + 32 * (i / 64) + l];
      const int q = ((i % 64) < 32 ? (byte & 15) : (byte >> 4)) + 16 * ((p[16 + l] >> j) & 1);
      const double a = half_at(p) * sc[j] * q, m = half_at(p + 2) * mn[j];
      return {a - m, std::fabs(a) + std::fabs(m)};
    }
    case ggml_type::IQ4_NL: {
      const double v = half_at(p) * k_levels[nibble32(p + 2, i)];
      return {v, std::fabs(v)};
    }
    case ggml_type::IQ4_XS: {
      const int j = i / 32, sh = p[2] | (p[3] << 8);
      const int ls = ((p[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4);
      const double v = half_at(p) * (ls - 32) * k_levels[nibble32(p + 8 + 16 * j, i % 32)];
      return {v, std::fabs(v)};
    }
    default: return {NAN, 0};
  }
}

// Activation element i of a row in `act` format, in double (q8_0 / q8_1: fp16 d * q; q8_K: f32 d * q).
double activation_at(ggml_type act, const uint8_t* row, int64_t i) {
  if (act == ggml_type::Q8_K) {
    const uint8_t* b = row + (i / 256) * 292;
    float d;
    std::memcpy(&d, b, 4);
    return (double)d * (int8_t)b[4 + i % 256];
  }
  const int bytes = act == ggml_type::Q8_1 ? 36 : 34, off = act == ggml_type::Q8_1 ? 4 : 2;
  const uint8_t* b = row + (i / 32) * bytes;
  return half_at(b) * (int8_t)b[off + i % 32];
}

std::string name_of(ggml_type t) { return ggml_type_info((uint32_t)t)->name; }

}  // namespace

TEST_CASE("quants more: every dequantizer matches the double decoder on random blocks") {
  std::mt19937 rng(101);
  for (ggml_type t : quants_more_types()) {
    const int64_t bs = cpu_block_size(t), n = 8 * 256;
    const size_t bb = cpu_row_bytes(t, bs);
    const std::vector<uint8_t> w = random_rows(t, 3, n, rng);
    std::vector<float> y(3 * n);
    for (int r = 0; r < 3; ++r) cpu_dequantize_row(t, w.data() + r * cpu_row_bytes(t, n), y.data() + r * n, n);
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < 3 * n; ++i) {
      const decoded want = decode(t, w.data() + (i / bs) * bb, (int)(i % bs));
      const double err = std::fabs(y[i] - want.value);
      worst = std::max(worst, err / (want.mag + 1e-30));
      if (!(err <= 4e-7 * want.mag)) ++bad;
    }
    std::printf("  dequantize %-7s max |f32 - f64| / sum|terms| = %.2e\n", name_of(t).c_str(), worst);
    if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " elements off for " + name_of(t));
  }
}

// |dot - reference| <= 2e-6 * sum |terms|: the reference sums exact products in double; the dot rounds each
// block's scale product and its running f32 sum (at most 16 blocks here).
TEST_CASE("quants more: every reference dot matches the double decoder on random blocks") {
  std::mt19937 rng(102);
  for (ggml_type t : quants_more_types()) {
    const ggml_type act = cpu_activation_type(t);
    double worst = 0;
    for (int64_t n : {256, 512, 2048}) {
      const int64_t bs = cpu_block_size(t);
      const size_t bb = cpu_row_bytes(t, bs);
      const std::vector<uint8_t> w = random_rows(t, 4, n, rng);
      const std::vector<uint8_t> x = convert_activations(t, random_activations(3, n, rng), 3, n);
      const size_t ws = cpu_row_bytes(t, n), xs = cpu_row_bytes(act, n);
      int bad = 0;
      for (int r = 0; r < 4; ++r) {
        for (int tok = 0; tok < 3; ++tok) {
          const uint8_t* wr = w.data() + r * ws;
          const uint8_t* xr = x.data() + tok * xs;
          double want = 0, scale = 0;
          for (int64_t i = 0; i < n; ++i) {
            decoded wi = decode(t, wr + (i / bs) * bb, (int)(i % bs));
            const double xi = activation_at(act, xr, i);
            if (act == ggml_type::Q8_1) {  // the offset m multiplies q8_1's stored s, once per block
              const double m = half_at(wr + (i / bs) * bb + 2);
              wi.value -= m;
              if (i % bs == 0) {
                const double s = half_at(xr + (i / 32) * 36 + 2);
                want += m * s;
                scale += std::fabs(m * s);
              }
            }
            want += wi.value * xi;
            scale += std::fabs(wi.value * xi);
          }
          const float got = vec_dot_ref_for(t)(n, wr, xr);
          worst = std::max(worst, std::fabs(got - want) / (scale + 1e-30));
          if (!(std::fabs(got - want) <= 2e-6 * scale + 1e-30)) ++bad;
        }
      }
      if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " dots off for " + name_of(t) + " n " +
                                                     std::to_string(n));
    }
    std::printf("  dot %-7s x %-4s max |f32 - f64| / sum|terms| = %.2e\n", name_of(t).c_str(),
                ggml_type_info((uint32_t)act)->name, worst);
  }
}

TEST_CASE("quants more: quantize_row_q8_1 matches an independent nearbyint oracle and fills s") {
  std::mt19937 rng(103);
  const int64_t nb = 64;
  std::vector<float> x = random_activations(1, 32 * nb, rng);
  std::fill(x.begin() + 32 * 5, x.begin() + 32 * 6, 0.0f);  // an all-zero block
  for (int j = 0; j < 32; ++j) x[32 * 7 + j] = (float)((int)(rng() % 255) - 127) * 0.5f;  // many exact ties
  x[32 * 7] = 63.5f;
  std::vector<block_q8_1> y(nb);
  quantize_row_q8_1(x.data(), y.data(), 32 * nb);
  int bad = 0;
  for (int64_t b = 0; b < nb; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d = amax / 127.f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = amax == 0 ? 0 : (int)std::nearbyint(x[32 * b + j] * (127.f / amax));
      if (y[b].qs[j] != q) ++bad;
      sum += q;
    }
    if (y[b].d != f32_to_fp16(d) || y[b].s != f32_to_fp16(d * (float)sum)) ++bad;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(y[5].d, 0);
  CHECK_EQ(y[5].s, 0);
}

TEST_CASE("quants more: the scalar level runs the reference kernels, the SIMD levels their own (iq4_nl, q5_0, iq4_xs also packed)") {
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : quants_more_types()) {
      CHECK(cpu_supports_type(t));
      const tile_kernel k = cpu_tile_kernel(level, t);
      REQUIRE(k.fn != nullptr);
      if (level == cpu_level::scalar) CHECK(k.fn == tile_kernel_scalar(t).fn);
      else CHECK(k.fn != tile_kernel_scalar(t).fn);
      // a packed (x8) layout for iq4_nl (q4_0's), q5_0 and iq4_xs at the SIMD levels only; none for the others
      const bool packs = t == ggml_type::IQ4_NL || t == ggml_type::Q5_0 || t == ggml_type::IQ4_XS;
      CHECK(cpu_packed_supported(level, t) == (level != cpu_level::scalar && packs));
    }
  }
}

TEST_CASE("quants more: the CPU backend's embedding lookup returns the dequantized rows") {
  auto be = make_cpu_backend(2);
  std::mt19937 rng(104);
  for (ggml_type t : quants_more_types()) {
    const int64_t n_in = 512, n_rows = 9;
    const std::vector<uint8_t> table = random_rows(t, n_rows, n_in, rng);
    const backend_weight bw = be->upload_weight(t, table.data(), n_in, n_rows);
    const int32_t ids[4] = {8, 0, 3, 8};
    std::vector<float> got(4 * n_in), want(n_in);
    be->get_rows(bw, ids, 4, got.data());
    int bad = 0;
    for (int k = 0; k < 4; ++k) {
      cpu_dequantize_row(t, table.data() + ids[k] * cpu_row_bytes(t, n_in), want.data(), n_in);
      for (int64_t i = 0; i < n_in; ++i)
        if (!same_bits(got[k * n_in + i], want[i]) || !std::isfinite(want[i])) ++bad;
    }
    if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " values differ for " + name_of(t));
  }
}
