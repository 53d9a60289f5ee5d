// 8-bit float K / V stores on the CPU (kv_type fp8_e4m3 / fp8_e5m2, vLLM's and SGLang's fp8 caches at scale 1):
// the conversions (fp8.h) against the formats' definitions (every code decoded; values rounded to the nearest code,
// ties to the even code, saturating at the largest finite one, as CUDA's SATFINITE conversion), the SIMD readers
// against the scalar one for every code, and attention over an fp8 store equal, bit for bit, to attention over an f32
// store holding its values on every path (paged on 1 and 2 threads, per-item portable and AVX2, contiguous).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_avx2_inl.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/fp8.h"
#include "kv_store_pair.h"

using namespace spindle;
using namespace kv_store_test;

namespace {

struct format {
  kv_type type;
  int man, bias;
  uint8_t max_code;  // the largest finite magnitude code
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
const format k_formats[] = {
    {kv_type::fp8_e4m3, 3, 7, 0x7e, f32_to_fp8_e4m3, fp8_e4m3_to_f32},
    {kv_type::fp8_e5m2, 2, 15, 0x7b, f32_to_fp8_e5m2, fp8_e5m2_to_f32},
};

// The code an f32 rounds to, by search: the nearest finite code (ties to the even code, i.e. the even mantissa),
// |x| beyond the largest finite value saturating to it; NaN is not asked.
uint8_t nearest_code(const format& f, float x) {
  const double a = std::fabs((double)x);
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  // saturation (and values so large that double distances no longer tell the codes apart)
  if (a >= fp8_by_definition(f.max_code, f.man, f.bias)) return f.max_code | sign;
  uint8_t best = 0;
  double best_d = INFINITY;
  for (int c = 0; c <= f.max_code; ++c) {
    const double d = std::fabs((double)fp8_by_definition((uint8_t)c, f.man, f.bias) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = (uint8_t)c;
      best_d = d;
    }
  }
  return best | sign;
}

#if SPINDLE_HAVE_X86_KERNELS
template <class E>
SPINDLE_AVX2 void widen8(const E* p, float* out) {
  _mm256_storeu_ps(out, load8(p));
}
#endif

}  // namespace

TEST_CASE("kvfp8: every code decodes to its value by definition (e4m3 0x7f / 0xff NaN, e5m2 0x7c inf, above NaN)") {
  for (const format& f : k_formats) {
    bool ok = true;
    for (int c = 0; c < 256; ++c) {
      const uint8_t x = (uint8_t)c;
      const float got = f.decode(x);
      const bool nan_code = f.type == kv_type::fp8_e4m3 ? (x & 0x7f) == 0x7f : (x & 0x7f) > 0x7c;
      if (nan_code) ok = ok && std::isnan(got);
      else if (f.type == kv_type::fp8_e5m2 && (x & 0x7f) == 0x7c) ok = ok && got == (x & 0x80 ? -INFINITY : INFINITY);
      else {
        const float want = fp8_by_definition(x, f.man, f.bias);
        ok = ok && std::memcmp(&got, &want, 4) == 0;
      }
    }
    CHECK(ok);
  }
  CHECK(fp8_e4m3_to_f32(0x7e) == 448.0f);
  CHECK(fp8_e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(fp8_e5m2_to_f32(0x7b) == 57344.0f);
  CHECK(fp8_e5m2_to_f32(0x01) == std::ldexp(1.0f, -16));
}

TEST_CASE("kvfp8: f32 -> fp8 is the nearest code, ties to even, saturating; NaN the canonical NaN") {
  std::mt19937 g(7);
  for (const format& f : k_formats) {
    std::vector<float> xs = {0.0f, -0.0f, 1e-30f, -1e-30f, INFINITY, -INFINITY, 1e30f, -3e38f};
    // every code's value, the midpoints between neighbours and a float either side of each midpoint
    for (int c = 0; c <= f.max_code; ++c) {
      const float v = fp8_by_definition((uint8_t)c, f.man, f.bias);
      xs.push_back(v);
      xs.push_back(-v);
      const float next = c < f.max_code ? fp8_by_definition((uint8_t)(c + 1), f.man, f.bias)
                                        : 2.0f * v;  // past the largest: saturation
      const float mid = (float)(((double)v + (double)next) / 2);
      for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        xs.push_back(m);
        xs.push_back(-m);
      }
    }
    const float top = fp8_by_definition(f.max_code, f.man, f.bias);
    std::uniform_real_distribution<float> lin(-1.5f * top, 1.5f * top);
    std::uniform_real_distribution<float> lg(-30.0f, std::log2(top) + 2);
    for (int i = 0; i < 20000; ++i) {
      xs.push_back(lin(g));
      xs.push_back((i & 1 ? -1.0f : 1.0f) * std::exp2(lg(g)));
    }
    bool ok = true;
    for (float x : xs) ok = ok && f.encode(x) == nearest_code(f, x);
    CHECK(ok);
    CHECK(f.encode(NAN) == 0x7f);  // the canonical NaN, as CUDA's conversion gives
    CHECK(f.encode(-NAN) == 0x7f);
    CHECK(std::isnan(f.decode(0x7f)));
    CHECK(f.decode(f.encode(INFINITY)) == top);  // saturating, as vLLM's stores (SATFINITE)
    CHECK(f.decode(f.encode(-1e9f)) == -top);
  }
  CHECK(f32_to_fp8_e4m3(0.5f * (1.0f + 1.125f)) == 0x38);  // tie between 1 (0x38) and 1.125 (0x39): the even code
  CHECK(f32_to_fp8_e4m3(0.5f * (1.125f + 1.25f)) == 0x3a);
  CHECK(f32_to_fp8_e4m3(464.0f) == 0x7e);  // halfway to a 480 e4m3 does not have: 448
}

TEST_CASE("kvfp8: the SIMD reader gives the scalar reader's value for every code") {
#if SPINDLE_HAVE_X86_KERNELS
  if (!cpu_level_supported(cpu_level::avx2)) return;
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = (uint8_t)c;
  float got[256];
  for (int c = 0; c < 256; c += 8) {
    widen8(reinterpret_cast<const kv_fp8_e4m3*>(codes + c), got + c);
  }
  bool ok = true;
  for (int c = 0; c < 256; ++c) {
    const float want = fp8_e4m3_to_f32((uint8_t)c);
    ok = ok && (std::isnan(want) ? std::isnan(got[c]) : std::memcmp(&got[c], &want, 4) == 0);
  }
  for (int c = 0; c < 256; c += 8) widen8(reinterpret_cast<const kv_fp8_e5m2*>(codes + c), got + c);
  for (int c = 0; c < 256; ++c) {
    const float want = fp8_e5m2_to_f32((uint8_t)c);
    ok = ok && (std::isnan(want) ? std::isnan(got[c]) : std::memcmp(&got[c], &want, 4) == 0);
  }
  CHECK(ok);
#endif
}

TEST_CASE("kvfp8: store_kv writes each value's code into its row") {
  cpu_backend be(1);
  const int64_t kd = 5, vd = 3, n = 2;
  const std::vector<float> k_new = {1.0f, 1.0625f, 448.0f, 70000.0f, -3.1415927f,
                                    1e-6f, -0.0f, 2.0f, 0.33333334f, 123.456f};
  const std::vector<float> v_new = {0.1f, -0.2f, 0.3f, 1e-8f, 5.5f, -7.25f};
  const std::vector<int64_t> rows = {3, 1};
  for (const format& f : k_formats) {
    CHECK(be.supports_kv(f.type));
    CHECK(kv_bytes(f.type, 12) == 12);
    std::vector<float> ks((size_t)kv_store_floats(f.type, 4 * kd), 0.0f), vs((size_t)kv_store_floats(f.type, 4 * vd), 0.0f);
    be.store_kv(ks.data(), vs.data(), rows.data(), k_new.data(), v_new.data(), n, kd, vd, f.type);
    const uint8_t* kb = reinterpret_cast<const uint8_t*>(ks.data());
    const uint8_t* vb = reinterpret_cast<const uint8_t*>(vs.data());
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t e = 0; e < kd; ++e) ok = ok && kb[rows[i] * kd + e] == f.encode(k_new[i * kd + e]);
      for (int64_t e = 0; e < vd; ++e) ok = ok && vb[rows[i] * vd + e] == f.encode(v_new[i * vd + e]);
    }
    for (int64_t e = 0; e < kd; ++e) ok = ok && kb[0 * kd + e] == 0 && kb[2 * kd + e] == 0;  // other rows untouched
    CHECK(ok);
  }
}

TEST_CASE("kvfp8: paged attention over an fp8 store equals the f32 store of its values bitwise") {
  check_paged_all(kv_type::fp8_e4m3, k_any_dim_shapes, 300);
  check_paged_all(kv_type::fp8_e5m2, k_any_dim_shapes, 310);
}

TEST_CASE("kvfp8: the per-item kernels (portable and AVX2) read fp8 rows as the f32 rows of their values") {
  check_per_item_all(kv_type::fp8_e4m3, k_any_dim_shapes, 350);
  check_per_item_all(kv_type::fp8_e5m2, k_any_dim_shapes, 360);
}

TEST_CASE("kvfp8: attention() over a contiguous fp8 cache (odd row strides) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 40, 20, 5, 11}, {4, 1, 36, 12, 2, 3}};
  // odd strides: rows start at any byte
  check_contiguous_all(kv_type::fp8_e4m3, shapes, 3, 5, 390);
  check_contiguous_all(kv_type::fp8_e5m2, shapes, 3, 5, 395);
}
