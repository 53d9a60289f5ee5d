// q4_0 K / V stores on the CPU (kv_type q4_0: llama.cpp's block_q4_0, 18 bytes per 32 values, its -ctk / -ctv q4_0
// and Ollama's OLLAMA_KV_CACHE_TYPE=q4_0): store_kv quantizes each 32 values as llama.cpp's quantize_row_q4_0_ref
// does (d = the value of largest magnitude / -8 as f16, q = min(15, trunc(x / d + 8.5))), and attention over a q4_0
// store gives, bit for bit, attention over an f32 store holding the dequantized values (f16 d x (q - 8), exact), on
// every path: the active level's tiled or per-item kernels through attention_paged and attention() over a contiguous
// cache with 1 and 2 threads, the AVX2 per-item kernel, the portable kernel; the plain reference reads it too.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv_store_pair.h"

using namespace spindle;
using namespace kv_store_test;

namespace {

// Value j of a q4_0 block, by the layout's definition.
float q4_value(const kv_q4& b, int j) {
  const int q = j < 16 ? b.qs[j] % 16 : b.qs[j - 16] / 16;
  return fp16_to_f32(b.d) * (float)(q - 8);
}

}  // namespace

TEST_CASE("kvq4: store_kv writes quantize_row_q4_0's blocks (llama.cpp's reference quantizer): d = max / -8, truncated x / d + 8.5") {
  std::vector<float> x(128, 0.0f);
  // block 0: the value of largest magnitude is -16 (first wins over +16): d = 2, x / d + 8.5 truncated
  const float first[] = {-16.0f, 16.0f, 3.0f, 2.9f, -3.0f, -3.1f, 0.99f, 1.0f, -0.99f, -1.0f, 14.0f, 15.0f};
  for (int i = 0; i < 12; ++i) x[i] = first[i];
  x[20] = 13.0f;  // a value in the block's second half (a high nibble)
  std::mt19937 g(4);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int i = 64; i < 128; ++i) x[i] = d(g);  // block 1 stays zero
  std::vector<kv_q4> b(4);
  quantize_row_q4_0(x.data(), b.data(), 128);
  CHECK_EQ(b[0].d, f32_to_fp16(2.0f));
  // x / 2 + 8.5 = 0.5, 16.5 (-> 15), 10, 9.95, 7, 6.95, 9.0, 9.0, 8.0, 8.0, 15.5, 16 (-> 15); x[20]: 15
  const int want[] = {0, 15, 10, 9, 7, 6, 8, 9, 8, 8, 15, 15};
  bool ok = true;
  for (int i = 0; i < 12; ++i) ok = ok && (b[0].qs[i] & 0x0f) == want[i];
  ok = ok && (b[0].qs[4] >> 4) == 15;  // value 20 = the high nibble of byte 4
  CHECK(ok);
  CHECK(fp16_to_f32(b[1].d) == 0.0f);  // 0 / -8: -0, as llama.cpp's
  bool eights = true;  // an all-zero block: q = 8 everywhere (value 0)
  for (int i = 0; i < 16; ++i) eights = eights && b[1].qs[i] == 0x88;
  CHECK(eights);
  float amax = 0;
  for (int i = 64; i < 96; ++i) amax = std::max(amax, std::fabs(x[i]));
  double worst = 0;
  for (int i = 0; i < 32; ++i) worst = std::max(worst, (double)std::fabs(q4_value(b[2], i) - x[64 + i]));
  CHECK(worst <= amax / 8 * 1.001 + 1e-6);  // truncation after + 8.5: within a step (the f16 scale moves it slightly)

  // store_kv: token i's 64 values into row rows[i] (2 blocks a row), other rows untouched, K and V alike
  cpu_backend be(1);
  const std::vector<int64_t> rows = {2, 0};
  std::vector<float> ks((size_t)kv_store_floats(kv_type::q4_0, 3 * 64), 0.0f), vs = ks;
  be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 2, 64, 64, kv_type::q4_0);
  for (const std::vector<float>* s : {&ks, &vs}) {
    const kv_q4* kb = reinterpret_cast<const kv_q4*>(s->data());
    CHECK(std::memcmp(&kb[4], &b[0], 2 * sizeof(kv_q4)) == 0);  // row 2 = token 0 = blocks 0, 1
    CHECK(std::memcmp(&kb[0], &b[2], 2 * sizeof(kv_q4)) == 0);  // row 0 = token 1 = blocks 2, 3
    const kv_q4 zero{};
    CHECK(std::memcmp(&kb[2], &zero, sizeof(kv_q4)) == 0);      // row 1 untouched
    CHECK(std::memcmp(&kb[3], &zero, sizeof(kv_q4)) == 0);
  }
  CHECK_EQ(kv_bytes(kv_type::q4_0, 64), 36);
  CHECK(be.supports_kv(kv_type::q4_0));
  CHECK_THROWS_WITH(be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 1, 48, 48, kv_type::q4_0),
                    "q4_0 K / V row needs a multiple of 32");
  // NaN and infinite values have no meaning in a block: stored without undefined casts. An infinity makes d
  // infinite and 1 / d zero, so every finite value is 8 (zero); a NaN (x / d NaN) is 8 too.
  std::vector<float> bad(32, 1.0f);
  bad[3] = NAN;
  bad[7] = INFINITY;
  kv_q4 nb;
  quantize_row_q4_0(bad.data(), &nb, 32);
  CHECK_EQ(nb.d, f32_to_fp16(-INFINITY));
  bool all8 = true;
  for (int i = 0; i < 16; ++i) all8 = all8 && nb.qs[i] == 0x88;
  CHECK(all8);
}

TEST_CASE("kvq4: paged attention over a q4_0 store equals the f32 store of its values bitwise") {
  check_paged_all(kv_type::q4_0, k_block_shapes, 1);
}

TEST_CASE("kvq4: the per-item kernels (portable and AVX2) read q4_0 rows as the f32 rows of their values") {
  check_per_item_all(kv_type::q4_0, k_block_shapes, 50);
}

TEST_CASE("kvq4: attention() over a contiguous q4_0 cache (padded rows) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 96, 32, 5, 11}};
  check_contiguous_all(kv_type::q4_0, shapes, 32, 64, 90);  // padded by whole blocks
}

TEST_CASE("kvq4: a paged q4_0 store needs whole blocks per head and row") { check_whole_blocks_refused(kv_type::q4_0); }
