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

#include "backend/cpu/cpu_features.h"
#include "kv_store_pair.h"

using namespace spindle;
using namespace kv_store_test;

namespace {

const shape k_shapes[] = {
    {32, 8, 64, 64, 0, 40},     // llama-1B-like prompt
    {32, 8, 64, 64, 300, 1},    // decode over more than one V block (256 positions)
    {16, 8, 128, 128, 17, 9},   // qwen3-like chunk after a prefix
    {4, 2, 96, 32, 7, 23},      // dv 32: one 32-wide V chunk
    {4, 1, 32, 64, 2, 3},       // MQA, dk 32
};

}  // namespace

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
  cpu_backend one(1), two(2);
  uint32_t seed = 1;
  for (const shape& s : k_shapes) check_paged(one, two, paged_pair(one, s, kv_type::q8_0, seed++), s);
}

TEST_CASE("kvq8: the per-item kernels (portable and AVX2) read q8_0 rows as the f32 rows of their values") {
  uint32_t seed = 50;
  cpu_backend be(1);
  for (const shape& s : k_shapes) {
    const paged_pair pp(be, s, kv_type::q8_0, seed++);
    check_per_item(pp, [](const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t dk, int32_t dv,
                          float scale, float* scratch, float* out) {
      ops_attention_head_kv(q, k, v, n_kv, dk, dv, scale, scratch, out);
    });
    if (cpu_level_supported(cpu_level::avx2)) check_per_item(pp, ops_attention_head_kv_avx2);
  }
}

TEST_CASE("kvq8: attention() over a contiguous q8_0 cache (padded rows) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 96, 32, 5, 11}};
  cpu_backend one(1), two(2);
  uint32_t seed = 90;
  for (const shape& s : shapes) check_contiguous(one, two, s, kv_type::q8_0, 32, 64, seed++);  // padded by whole blocks
}

TEST_CASE("kvq8: a paged q8_0 store needs whole blocks per head and row; the encoder refuses it by name") {
  cpu_backend be(1);
  paged_attention_params p;
  p.attn = params_of({4, 2, 40, 40, 0, 1});
  p.attn.kv = kv_type::q8_0;
  int32_t table[1] = {0};
  p.block_table = table;
  p.n_table = 1;
  p.block_size = 16;
  p.n_blocks = 1;
  std::vector<float> q(160), kv(1024), out(160);
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()), "multiples of 32");
  attention_params a = params_of({1, 1, 32, 32, 0, 2});
  a.causal = false;
  a.kv = kv_type::q8_0;
  CHECK_THROWS_WITH(be.attention(a, q.data(), kv.data(), kv.data(), out.data()), "float32");
}
