// q8_0 K / V stores on the CPU (kv_type q8_0: llama.cpp's block_q8_0, 34 bytes per 32 values): store_kv quantizes
// each 32 values as llama.cpp's x86 quantize_row_q8_0 does (d = amax / 127 as f16, q = round-half-even(x * 127 /
// amax)), and attention over a q8_0 store gives, bit for bit, attention over an f32 store holding the dequantized
// values (f16 d x q, exact), on every path: the active level's tiled or per-item kernels through attention_paged
// and attention() over a contiguous cache with 1 and 2 threads, the AVX2 per-item kernel, the portable kernel; the
// plain reference reads the q8_0 store too.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv_store_pair.h"

using namespace spindle;
using namespace kv_store_test;

TEST_CASE("kvq8: store_kv writes quantize_row_q8_0's blocks (llama.cpp's x86 quantizer): scale amax / 127, ties to even") {
  std::vector<float> x(128, 0.0f);
  const float first[] = {127.0f, 2.5f, 3.5f, -2.5f, -127.0f, 63.5f, 0.49f, -0.5f};
  for (int i = 0; i < 8; ++i) x[i] = first[i];  // amax 127: id = 1, so q = round-half-even(x)
  std::mt19937 g(4);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int i = 64; i < 96; ++i) x[i] = d(g);  // block 1 stays zero
  for (int i = 96; i < 128; ++i) x[i] = d(g);
  std::vector<kv_q8> b(4);
  quantize_row_q8_0(x.data(), b.data(), 128);
  CHECK_EQ(b[0].d, f32_to_fp16(1.0f));
  const int8_t want[] = {127, 2, 4, -2, -127, 64, 0, 0};
  CHECK(std::memcmp(b[0].qs, want, 8) == 0);
  CHECK_EQ(b[1].d, 0);
  bool zeros = true;
  for (int i = 0; i < 32; ++i) zeros = zeros && b[1].qs[i] == 0;
  CHECK(zeros);
  float amax = 0;
  for (int i = 64; i < 96; ++i) amax = std::max(amax, std::fabs(x[i]));
  double worst = 0;
  for (int i = 0; i < 32; ++i) worst = std::max(worst, (double)std::fabs(fp16_to_f32(b[2].d) * b[2].qs[i] - x[64 + i]));
  CHECK(worst <= 0.5 * amax / 127 * 1.001 + 1e-6);  // half a step (the f16 scale moves it by at most 2^-11)

  // store_kv: token i's 64 values into row rows[i] (2 blocks a row), other rows untouched, K and V alike
  cpu_backend be(1);
  const std::vector<int64_t> rows = {2, 0};
  std::vector<float> ks((size_t)kv_store_floats(kv_type::q8_0, 3 * 64), 0.0f), vs = ks;
  be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 2, 64, 64, kv_type::q8_0);
  for (const std::vector<float>* s : {&ks, &vs}) {
    const kv_q8* kb = reinterpret_cast<const kv_q8*>(s->data());
    CHECK(std::memcmp(&kb[4], &b[0], 2 * sizeof(kv_q8)) == 0);  // row 2 = token 0 = blocks 0, 1
    CHECK(std::memcmp(&kb[0], &b[2], 2 * sizeof(kv_q8)) == 0);  // row 0 = token 1 = blocks 2, 3
    const kv_q8 zero{};
    CHECK(std::memcmp(&kb[2], &zero, sizeof(kv_q8)) == 0);      // row 1 untouched
    CHECK(std::memcmp(&kb[3], &zero, sizeof(kv_q8)) == 0);
  }
  CHECK_EQ(kv_bytes(kv_type::q8_0, 64), 68);
  CHECK_THROWS_WITH(be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 1, 48, 48, kv_type::q8_0),
                    "multiple of 32");
}

TEST_CASE("kvq8: paged attention over a q8_0 store equals the f32 store of its values bitwise") {
  check_paged_all(kv_type::q8_0, k_block_shapes, 1);
}

TEST_CASE("kvq8: the per-item kernels (portable and AVX2) read q8_0 rows as the f32 rows of their values") {
  check_per_item_all(kv_type::q8_0, k_block_shapes, 50);
}

TEST_CASE("kvq8: attention() over a contiguous q8_0 cache (padded rows) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 96, 32, 5, 11}};
  check_contiguous_all(kv_type::q8_0, shapes, 32, 64, 90);  // padded by whole blocks
}

TEST_CASE("kvq8: a paged q8_0 store needs whole blocks per head and row") { check_whole_blocks_refused(kv_type::q8_0); }
