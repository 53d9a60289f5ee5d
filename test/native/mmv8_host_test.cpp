// The eight-lane few-token matmul's row code (native/backend/cuda/matmul_mmv8_rows.cuh) on the host: its blocks run
// as std::threads with the device's shuffles and barriers (cuda_host_shim.h). For q2_K .. q6_K and iq4_xs, K in 1 and
// 4 segments, a row range starting mid-group (matmul_expert) whose row count is not a multiple of 4, and 1 and
// 8 tokens per thread, every output must have the bits of mmv_x32's reader (x32_types*.cuh) replayed lane by
// lane with the same K segments added in the same order: mmv8's contract (the GPU suite checks it on a device).
// What this cannot check: the kernel launch around mmv8_rows (grid, job table) and device memory.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/pack_x32.h"
#include "harness.h"
#include "kernels_util.h"

#include "cuda_host_shim.h"

#include "backend/cuda/matmul_mmv8_rows.cuh"
#include "x32_host_act.h"

using namespace spindle;

namespace {

// mmv8 for one job: warps = max(4, splits) per block, quads = warps / splits row quads per block, NT tokens per
// block row (blockIdx.y), as launch_mmv8 lays it out.
template <class L, int NT>
std::vector<float> run_mmv8(const mmv_shape& sh0, const mmv_act& a) {
  std::vector<float> y((size_t)(a.n_tok * sh0.n_out));
  mmv_shape sh = sh0;
  sh.y = y.data();
  sh.ldy = sh.n_out;
  const int warps = sh.splits > 4 ? sh.splits : 4, quads = warps / sh.splits;
  const int64_t blocks = (sh.n_out + 4 * quads - 1) / (4 * quads);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int by = 0; by * NT < a.n_tok; ++by) {
      float part[k_max_warps][NT][4] = {};
      cuda_host::run_block(warps * 32, (unsigned)b, (unsigned)by, [&] { mmv8_rows<L, NT>(sh, quads, b, a, part, by * NT); });
    }
  }
  return y;
}

template <class Q, class L>
void check_type(ggml_type type, std::mt19937& rng) {
  const int64_t n_units = 4, n_in = 256 * n_units, n_rows = 64, row0 = 30, n_out = 21, n_tok = 5;
  const packed_case pc = make_case(type, n_rows, n_in, n_tok, act_format::q8_256, true, rng);
  for (int splits : {1, 4}) {
    const std::vector<float> want = mmv_reference<Q>(pc.packed, pc.xs, row0, n_out, splits, pc.act.view);
    const mmv_shape sh{pc.packed.data(), pc.xs.n_units, row0, n_out, nullptr, n_out, splits, 0};
    const std::vector<float> y1 = run_mmv8<L, 1>(sh, pc.act.view);
    const std::vector<float> y8 = run_mmv8<L, 8>(sh, pc.act.view);  // 5 tokens: a ragged tile
    const size_t bytes = want.size() * sizeof(float);
    const bool same = std::memcmp(y1.data(), want.data(), bytes) == 0 && std::memcmp(y8.data(), want.data(), bytes) == 0;
    std::printf("  mmv8 %-5s K in %d segment(s): 1 / 8 tokens per thread %s mmv_x32's bits\n",
                ggml_type_info((uint32_t)type)->name, splits, same ? "==" : "!=");
    CHECK(same);
  }
}

}  // namespace

TEST_CASE("mmv8 rows on the host: every super-block type gives mmv_x32's bits for every K split and token count") {
  std::mt19937 rng(29);
  check_type<x32_q4_K, lanes8_q4_K>(ggml_type::Q4_K, rng);
  check_type<x32_q5_K, lanes8_q5_K>(ggml_type::Q5_K, rng);
  check_type<x32_q6_K, lanes8_q6_K>(ggml_type::Q6_K, rng);
  check_type<x32_q3_K, lanes8_q3_K>(ggml_type::Q3_K, rng);
  check_type<x32_q2_K, lanes8_q2_K>(ggml_type::Q2_K, rng);
  check_type<x32_iq4_xs, lanes8_iq4_xs>(ggml_type::IQ4_XS, rng);
}

TEST_CASE("mmv8 grouped experts on the host: each entry has the bits of its expert's rows alone at its input row") {
  std::mt19937 rng(31);
  const int64_t n_expert = 6, n_out = 20, n_in = 512, x_rows = 3;
  const packed_case pc = make_case(ggml_type::Q4_K, n_expert * n_out, n_in, x_rows, act_format::q8_256, true, rng);
  const std::vector<int32_t> ids = {5, 0, 3, 3, 1, 5, 2};  // entries; entry e reads input row e % x_rows
  const int64_t n_entries = (int64_t)ids.size();
  for (int splits : {1, 2}) {
    const mmv_shape expert{pc.packed.data(), pc.xs.n_units, 0, n_out, nullptr, n_out, splits, 0};
    std::vector<float> y((size_t)(n_entries * n_out), -1.0f);
    const int warps = splits > 4 ? splits : 4, quads = warps / splits;
    const int64_t blocks = (n_out + 4 * quads - 1) / (4 * quads);
    for (int64_t e = n_entries - 1; e >= 0; --e) {
      for (int64_t b = 0; b < blocks; ++b) {
        float part[k_max_warps][1][4] = {};
        cuda_host::run_block(warps * 32, (unsigned)b, (unsigned)e, [&] {
          mmv8_expert_rows<lanes8_q4_K>(expert, quads, b, pc.act.view, ids.data(), e, x_rows, y.data(), part);
        });
      }
    }
    bool same = true;
    for (int64_t e = 0; e < n_entries; ++e) {
      mmv_shape alone = expert;
      alone.row0 = ids[(size_t)e] * n_out;
      const std::vector<float> want = run_mmv8<lanes8_q4_K, 1>(alone, pc.act.view);  // every input row
      same = same && std::memcmp(y.data() + e * n_out, want.data() + (e % x_rows) * n_out, n_out * sizeof(float)) == 0;
    }
    CHECK(same);
  }
}

TEST_CASE("mmv8 sorted expert tiles on the host: each entry has the bits of its expert's rows alone") {
  std::mt19937 rng(37);
  const int64_t n_expert = 5, n_out = 20, n_in = 512, x_rows = 4;
  const packed_case pc = make_case(ggml_type::Q6_K, n_expert * n_out, n_in, x_rows, act_format::q8_256, true, rng);
  // 23 entries: expert 2 has 11 (two tiles of 8 and 3), expert 4 none
  std::vector<int32_t> ids;
  for (int i = 0; i < 23; ++i) ids.push_back(i < 11 ? 2 : (int32_t)(i % 4 == 0 ? 0 : i % 4 == 1 ? 1 : 3));
  std::shuffle(ids.begin(), ids.end(), rng);
  const int64_t n_entries = (int64_t)ids.size();
  std::vector<int32_t> order((size_t)n_entries);
  for (int32_t i = 0; i < (int32_t)n_entries; ++i) order[(size_t)i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ids[(size_t)a] < ids[(size_t)b]; });
  std::vector<float> gathered;
  for (int32_t e : order) {
    const float* row = pc.act.xf.data() + (e % x_rows) * n_in;
    gathered.insert(gathered.end(), row, row + n_in);
  }
  const host_act act = quantize_act(gathered, n_entries, n_in, act_format::q8_256, true);
  const mmv_shape expert{pc.packed.data(), pc.xs.n_units, 0, n_out, nullptr, n_out, 1, 0};
  std::vector<float> y_sorted((size_t)(n_entries * n_out), -1.0f);
  int64_t first = 0;
  while (first < n_entries) {  // tiles of up to 8 entries of one expert
    const int32_t e = ids[(size_t)order[(size_t)first]];
    int64_t count = 0;
    while (first + count < n_entries && count < 8 && ids[(size_t)order[(size_t)(first + count)]] == e) ++count;
    for (int64_t b = 0; b < (n_out + 15) / 16; ++b) {
      float part[k_max_warps][8][4] = {};
      cuda_host::run_block(128, (unsigned)b, 0, [&] {
        mmv8_tile_rows<lanes8_q6_K>(expert, 4, b, act.view, e, (int32_t)first, (int32_t)count, y_sorted.data(), part);
      });
    }
    first += count;
  }
  bool same = true;
  for (int64_t i = 0; i < n_entries; ++i) {
    const int32_t entry = order[(size_t)i];
    mmv_shape alone = expert;
    alone.row0 = ids[(size_t)entry] * n_out;
    const std::vector<float> want = run_mmv8<lanes8_q6_K, 1>(alone, pc.act.view);
    same = same && std::memcmp(y_sorted.data() + i * n_out, want.data() + (entry % x_rows) * n_out, n_out * sizeof(float)) == 0;
  }
  CHECK(same);
}
