// Tests of the packed weight copies (repack.h) and kernels: the x8 layout is the documented byte permutation and
// a row copy the same bytes, packed matmuls give the row kernels' bits for every shape, token count and thread
// count, and the CPU backend (which packs a weight at its first matmul) gives the unpacked results.
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/repack.h"
#include "common/error.h"
#include "harness.h"
#include "kernels_util.h"

using namespace kernels_test;

namespace {

std::vector<ggml_type> packable_types(cpu_level level) {
  std::vector<ggml_type> out;
  for (ggml_type t : weight_types())
    if (cpu_packed_supported(level, t)) out.push_back(t);
  return out;
}

std::vector<float> matmul(cpu_level level, thread_pool& pool, ggml_type t, const std::vector<uint8_t>& w,
                          int64_t n_out, int64_t n_in, const float* x, int64_t n_tok, const packed_weight* pw) {
  std::vector<float> y(n_tok * n_out, -7.0f);
  cpu_matmul_at_level(level, pool, t, w.data(), n_out, n_in, x, n_tok, y.data(), pw);
  return y;
}

int count_differences(const std::vector<float>& a, const std::vector<float>& b) {
  int bad = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (!same_bits(a[i], b[i])) ++bad;
  return bad;
}

}  // namespace

TEST_CASE("kernels: q4_K x8 packing puts every byte of the 8 rows where repack.h says") {
  std::mt19937 rng(31);
  thread_pool pool(2);
  const int64_t n_out = 19, n_in = 3 * QK_K;  // 2 whole groups + 3 rows left unpacked
  const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, n_out, n_in, rng);
  const auto pw = cpu_pack_weight(cpu_level::avx2, pool, ggml_type::Q4_K, w.data(), n_out, n_in);
  if (!cpu_packed_supported(cpu_level::avx2, ggml_type::Q4_K)) {
    CHECK(pw == nullptr);
    SKIP("no q4_K x8 packing at the avx2 level in this build (that it is declined was checked)");
  }
  REQUIRE(pw != nullptr);
  CHECK_EQ(pw->n_groups(), (int64_t)2);
  CHECK_EQ(pw->bytes(), 2 * 8 * cpu_row_bytes(ggml_type::Q4_K, n_in));
  const size_t row_bytes = cpu_row_bytes(ggml_type::Q4_K, n_in);
  int bad = 0;
  for (int64_t g = 0; g < 2; ++g) {
    const block_q4_Kx8* pb = (const block_q4_Kx8*)(pw->data() + g * pw->group_bytes());
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
      for (int r = 0; r < 8; ++r) {
        const block_q4_K& src = ((const block_q4_K*)(w.data() + (g * 8 + r) * row_bytes))[b];
        if (pb[b].d[r] != src.d || pb[b].dmin[r] != src.dmin) ++bad;
        for (int i = 0; i < 12; ++i)
          if (((const uint8_t*)&pb[b].scales[i / 4][r])[i % 4] != src.scales[i]) ++bad;
        for (int i = 0; i < QK_K / 2; ++i)
          if (((const uint8_t*)&pb[b].qs[i / 4][r])[i % 4] != src.qs[i]) ++bad;
      }
    }
  }
  CHECK_EQ(bad, 0);
}

TEST_CASE("kernels: q6_K x8 packing puts every 6-bit value of the 8 rows where repack.h says") {
  std::mt19937 rng(35);
  const int64_t n_out = 21, n_in = 2 * QK_K;  // 2 whole groups + 5 rows left out
  const std::vector<uint8_t> w = random_rows(ggml_type::Q6_K, n_out, n_in, rng);
  const size_t row_bytes = cpu_row_bytes(ggml_type::Q6_K, n_in);
  std::vector<block_q6_Kx8> packed(2 * (n_in / QK_K));
  for (int64_t g = 0; g < 2; ++g)  // the plain packer, on every machine
    pack_group_q6_K(w.data() + g * 8 * row_bytes, row_bytes, n_in / QK_K, packed.data() + g * (n_in / QK_K));
  // q6_K_value against the dequantizer: value e of block b is (y / (d * scale) + 32)
  {
    const block_q6_K& b0 = *(const block_q6_K*)w.data();
    std::vector<float> deq(QK_K);
    dequantize_row_q6_K(&b0, deq.data(), QK_K);
    int bad = 0;
    for (int e = 0; e < QK_K; ++e)
      if (deq[e] != fp16_to_f32(b0.d) * b0.scales[e / 16] * (float)(q6_K_value(b0, e) - 32)) ++bad;
    CHECK_EQ(bad, 0);
  }
  int bad = 0;
  for (int64_t g = 0; g < 2; ++g) {
    const block_q6_Kx8* pb = packed.data() + g * (n_in / QK_K);
    for (int64_t b = 0; b < n_in / QK_K; ++b) {
      for (int r = 0; r < 8; ++r) {
        const block_q6_K& src = ((const block_q6_K*)(w.data() + (g * 8 + r) * row_bytes))[b];
        if (pb[b].d[r] != src.d) ++bad;
        for (int i = 0; i < QK_K / 16; ++i)
          if (((const int8_t*)&pb[b].scales[i / 4][r])[i % 4] != src.scales[i]) ++bad;
        // repack.h: A(j, l)[k] / B(j, l)[k] for even j in ql[16h + 2l] / ql[16h + 2l + 1] (j = 4h low nibble,
        // j = 4h + 2 high nibble) and their top bits in qh[8h + l] (bit pairs A(4h), B(4h), A(4h + 2), B(4h + 2))
        for (int h = 0; h < 2; ++h)
          for (int l = 0; l < 8; ++l)
            for (int k = 0; k < 4; ++k) {
              const uint8_t a = ((const uint8_t*)&pb[b].ql[16 * h + 2 * l][r])[k];
              const uint8_t bb = ((const uint8_t*)&pb[b].ql[16 * h + 2 * l + 1][r])[k];
              const uint8_t hb = ((const uint8_t*)&pb[b].qh[8 * h + l][r])[k];
              for (int jj = 0; jj < 2; ++jj) {  // chunk j = 4h + 2jj
                const int j = 4 * h + 2 * jj, e_a = 32 * j + (k >= 2 ? 32 : 0) + 4 * l + k % 2, e_b = e_a + 2;
                const int va = ((a >> (4 * jj)) & 15) | ((hb >> (4 * jj)) & 3) << 4;
                const int vb = ((bb >> (4 * jj)) & 15) | ((hb >> (4 * jj + 2)) & 3) << 4;
                if (va != q6_K_value(src, e_a) || vb != q6_K_value(src, e_b)) ++bad;
              }
            }
      }
    }
  }
  CHECK_EQ(bad, 0);
  thread_pool pool(2);  // where the level packs q6_K in x8 groups, cpu_pack_weight makes exactly these bytes
  if (cpu_packed_kernel(cpu_active_level(), ggml_type::Q6_K).fn != nullptr) {
    const auto pw = cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q6_K, w.data(), n_out, n_in);
    REQUIRE(pw != nullptr);
    CHECK(pw->layout() == pack_layout::x8);
    CHECK_EQ(pw->n_groups(), (int64_t)2);
    CHECK(pw->bytes() == packed.size() * sizeof(block_q6_Kx8) &&
          std::memcmp(pw->data(), packed.data(), pw->bytes()) == 0);
  }
}

TEST_CASE("kernels: pair_q8_K_row puts every activation where repack.h says") {
  std::mt19937 rng(36);
  std::vector<block_q8_K> x(2), paired(2), in_place;
  for (block_q8_K& b : x) {
    for (int8_t& q : b.qs) q = (int8_t)(rng() % 255 - 127);
    for (int16_t& s : b.bsums) s = (int16_t)(rng() % 4000);
    b.d = 0.5f + (float)(rng() % 100);
  }
  pair_q8_K_row(x.data(), paired.data(), 2);
  in_place = x;
  pair_q8_K_row_in_place(in_place.data(), 2);
  int bad = 0;
  for (int b = 0; b < 2; ++b) {
    if (paired[b].d != x[b].d || std::memcmp(paired[b].bsums, x[b].bsums, sizeof(x[b].bsums)) != 0) ++bad;
    if (std::memcmp(&paired[b], &in_place[b], sizeof(block_q8_K)) != 0) ++bad;
    for (int m = 0; m < 4; ++m)
      for (int l = 0; l < 8; ++l) {
        const int e = 64 * m + 4 * l;
        const int want[8] = {e, e + 1, e + 32, e + 33, e + 2, e + 3, e + 34, e + 35};
        for (int i = 0; i < 8; ++i)
          if (paired[b].qs[64 * m + 8 * l + i] != x[b].qs[want[i]]) ++bad;
      }
  }
  CHECK_EQ(bad, 0);
}

TEST_CASE("kernels: packed matmul gives the row kernels' bits for every shape, token count and thread count") {
  std::mt19937 rng(32);
  thread_pool one(1), two(2);
  for (cpu_level level : supported_levels()) {
    for (ggml_type t : packable_types(level)) {
      const int64_t bs = cpu_block_size(t);
      for (int64_t n_out : {8, 16, 13, 67}) {
        for (int64_t n_in : {bs == 32 ? (int64_t)64 : (int64_t)QK_K, (int64_t)3 * QK_K}) {
          const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
          const auto pw = cpu_pack_weight(level, two, t, w.data(), n_out, n_in);
          REQUIRE(pw != nullptr);
          const int64_t n_tok = 11;
          const std::vector<float> x = random_activations(n_tok, n_in, rng);
          const std::vector<float> want = matmul(level, two, t, w, n_out, n_in, x.data(), n_tok, nullptr);
          int bad = count_differences(want, matmul(level, two, t, w, n_out, n_in, x.data(), n_tok, pw.get()));
          bad += count_differences(want, matmul(level, one, t, w, n_out, n_in, x.data(), n_tok, pw.get()));
          for (int64_t nt : {1, 2, 3, 4, 5, 6, 7, 8, 9}) {  // any leading token count: tile tails of every size
            const std::vector<float> part = matmul(level, two, t, w, n_out, n_in, x.data(), nt, pw.get());
            bad += count_differences(std::vector<float>(want.begin(), want.begin() + nt * n_out), part);
          }
          if (bad)
            harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for " + cpu_level_name(level) +
                                                  " type " + std::to_string((int)t) + " n_out " +
                                                  std::to_string(n_out) + " n_in " + std::to_string(n_in));
        }
      }
    }
  }
}

TEST_CASE("kernels: cpu_pack_weight declines what it cannot pack and rejects bad input") {
  std::mt19937 rng(33);
  thread_pool pool(2);
  const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, 8, QK_K, rng);
  CHECK(cpu_pack_weight(cpu_level::scalar, pool, ggml_type::Q4_K, w.data(), 8, QK_K) == nullptr);
  CHECK(cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q4_K, w.data(), 7, QK_K) == nullptr);  // no group
  CHECK(cpu_pack_weight(cpu_active_level(), pool, ggml_type::F32, w.data(), 8, 64) == nullptr);
  const std::vector<uint8_t> w6 = random_rows(ggml_type::Q6_K, 7, QK_K, rng);
  if (cpu_packed_kernel(cpu_active_level(), ggml_type::Q6_K).fn != nullptr) {  // x8 groups: none in 7 rows
    CHECK(cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q6_K, w6.data(), 7, QK_K) == nullptr);
  } else if (cpu_packed_supported(cpu_active_level(), ggml_type::Q6_K)) {  // a row copy: any row count, same bytes
    const auto p6 = cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q6_K, w6.data(), 7, QK_K);
    REQUIRE(p6 != nullptr);
    CHECK(p6->layout() == pack_layout::rows);
    CHECK_EQ(p6->n_rows(), (int64_t)7);
    CHECK(p6->bytes() == w6.size() && std::memcmp(p6->data(), w6.data(), w6.size()) == 0);
  }
  if (cpu_packed_supported(cpu_active_level(), ggml_type::Q4_K)) {
    CHECK_THROWS_WITH(cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q4_K, w.data(), 8, 100), "multiple");
    CHECK_THROWS_WITH(cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q4_K, nullptr, 8, QK_K), "null");
    const auto pw = cpu_pack_weight(cpu_active_level(), pool, ggml_type::Q4_K, w.data(), 8, QK_K);
    REQUIRE(pw != nullptr);
    std::vector<float> x(2 * QK_K, 0.5f), y(16);
    // a packed copy of another shape is refused, never read out of bounds
    CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::Q4_K, w.data(), 4, QK_K, x.data(), 1, y.data(), pw.get()),
                      "packed weight");
    CHECK_THROWS_WITH(cpu_matmul(pool, ggml_type::Q6_K, w.data(), 8, QK_K, x.data(), 1, y.data(), pw.get()),
                      "packed weight");
  }
}

TEST_CASE("kernels: the CPU backend's matmul (packing on first use) equals cpu_matmul on the file rows") {
  std::mt19937 rng(34);
  auto be = make_cpu_backend(2);
  thread_pool pool(2);
  for (ggml_type t : weight_types()) {
    const int64_t n_out = 24, n_in = 2 * QK_K, n_tok = 6;
    const std::vector<uint8_t> w = random_rows(t, n_out, n_in, rng);
    const backend_weight bw = be->upload_weight(t, w.data(), n_in, n_out);
    const std::vector<float> x = random_activations(n_tok, n_in, rng);
    std::vector<float> want(n_tok * n_out);
    cpu_matmul(pool, t, w.data(), n_out, n_in, x.data(), n_tok, want.data());
    int bad = 0;
    for (int rep = 0; rep < 2; ++rep) {  // the first call packs, the second reuses the packed copy
      std::vector<float> y(n_tok * n_out);
      be->matmul(bw, x.data(), n_tok, y.data());
      bad += count_differences(want, y);
      std::vector<float> y1(n_out);
      be->matmul(bw, x.data() + 3 * n_in, 1, y1.data());
      bad += count_differences(std::vector<float>(want.begin() + 3 * n_out, want.begin() + 4 * n_out), y1);
    }
    if (bad) harness::fail(__FILE__, __LINE__, std::to_string(bad) + " outputs differ for type " + std::to_string((int)t));
  }
}
