// 16-bit K / V stores on the CPU (kv_type f16 / bf16): store_kv rounds each value to nearest even (fp16.h's
// bits), and attention over a 16-bit store gives, bit for bit, attention over an f32 store holding the same
// rounded values, on every path (the active level's tiled or per-item kernels through attention_paged and
// attention() over a contiguous cache with 1 and 2 threads, the AVX2 per-item kernel, the portable kernel), for head
// dims the fast kernels cover and ones they leave to fallbacks; and the plain reference reads the 16-bit store too.
#include <cstring>
#include <vector>

#include "kv_store_pair.h"

using namespace spindle;
using namespace kv_store_test;

namespace {

uint16_t round16(kv_type t, float x) { return t == kv_type::f16 ? f32_to_fp16(x) : f32_to_bf16(x); }

}  // namespace

TEST_CASE("kv16: store_kv rounds each value to nearest even into its row; f32 rows are copies") {
  cpu_backend be(1);
  const int64_t kd = 5, vd = 3, n = 2;
  const std::vector<float> k_new = {1.0f, 1.0009766f, 65504.0f, 70000.0f, -3.1415927f,
                                    1e-6f, -0.0f, 2.0f, 0.33333334f, 123.456f};
  const std::vector<float> v_new = {0.1f, -0.2f, 0.3f, 1e-8f, 5.5f, -7.25f};
  const std::vector<int64_t> rows = {3, 1};
  for (kv_type t : {kv_type::f16, kv_type::bf16}) {
    std::vector<float> ks((size_t)kv_store_floats(t, 4 * kd), 0.0f), vs((size_t)kv_store_floats(t, 4 * vd), 0.0f);
    be.store_kv(ks.data(), vs.data(), rows.data(), k_new.data(), v_new.data(), n, kd, vd, t);
    const uint16_t* kb = reinterpret_cast<const uint16_t*>(ks.data());
    const uint16_t* vb = reinterpret_cast<const uint16_t*>(vs.data());
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t e = 0; e < kd; ++e) ok = ok && kb[rows[i] * kd + e] == round16(t, k_new[i * kd + e]);
      for (int64_t e = 0; e < vd; ++e) ok = ok && vb[rows[i] * vd + e] == round16(t, v_new[i * vd + e]);
    }
    for (int64_t e = 0; e < kd; ++e) ok = ok && kb[0 * kd + e] == 0 && kb[2 * kd + e] == 0;  // other rows untouched
    CHECK(ok);
  }
  CHECK(fp16_to_f32(f32_to_fp16(70000.0f)) == INFINITY);  // past half's range: inf, as F16C
  std::vector<float> ks(4 * kd, 0.0f), vs(4 * vd, 0.0f);
  be.store_kv(ks.data(), vs.data(), rows.data(), k_new.data(), v_new.data(), n, kd, vd, kv_type::f32);
  CHECK(std::memcmp(&ks[3 * kd], &k_new[0], kd * sizeof(float)) == 0);
  CHECK(std::memcmp(&vs[1 * vd], &v_new[vd], vd * sizeof(float)) == 0);
  CHECK(be.supports_kv(kv_type::f16) && be.supports_kv(kv_type::bf16) && be.supports_kv(kv_type::f32));
}

TEST_CASE("kv16: paged attention over a 16-bit store equals the f32 store of the same values bitwise") {
  check_paged_all(kv_type::f16, k_any_dim_shapes, 1);
  check_paged_all(kv_type::bf16, k_any_dim_shapes, 7);
}

TEST_CASE("kv16: the per-item kernels (portable and AVX2) read 16-bit rows as the f32 rows of the same values") {
  check_per_item_all(kv_type::f16, k_any_dim_shapes, 50);
  check_per_item_all(kv_type::bf16, k_any_dim_shapes, 56);
}

TEST_CASE("kv16: attention() over a contiguous 16-bit cache (padded, odd row strides) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 40, 20, 5, 11}, {4, 1, 36, 12, 2, 3},
                          {8, 2, 80, 80, 300, 1}};
  // odd strides: 16-bit rows start at any 2-byte boundary
  check_contiguous_all(kv_type::f16, shapes, 3, 5, 90);
  check_contiguous_all(kv_type::bf16, shapes, 3, 5, 95);
}
