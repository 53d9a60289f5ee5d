// The tensor-core matmuls on the host: the pipelined one of the super-block types (matmul_mmq_k_tile.cuh) and the
// one of the 32-value block types (matmul_mma_tile.cuh), their blocks as std::threads with mma.sync and cp.async
// emulated (cuda_host_shim.h). For every type they take, with K in 1 to 3 segments, 70 rows (a ragged second row
// tile, a group past the matrix) and 20 tokens (a ragged token tile), the segments added in each block or in
// separate blocks (the tile's last to finish adds them), every output must have the bits of mmv_x32's
// reader (x32_types*.cuh): the kernels' contract, which the GPU suite checks on a device. q4_K, q6_K, q8_0 and
// q4_0 passed that suite on an H100 with these kernels, so their passing here also checks the emulation of
// mma.sync's fragment layout that the other types rely on.
// What this cannot check: the launch (grid, dynamic shared memory size), cp.async's asynchrony, device memory.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backend/pack_x32.h"
#include "harness.h"
#include "kernels_util.h"

#include "cuda_host_shim.h"

#include "backend/cuda/matmul_mma_tile.cuh"
#include "backend/cuda/matmul_mmq_k_tile.cuh"
#include "x32_host_act.h"

using namespace spindle;

namespace {

// A tensor-core matmul's grid on the host: 64-row x 64-token tiles, and with `split` the K segments in separate
// blocks (blockIdx.z) that run in a shuffled order, the tile's last one adding the segments (mmq_store.cuh); its
// counters must be back at 0 afterwards and y untouched until a tile's last block runs. block(shape, split, last)
// runs one block.
template <class Block>
std::vector<float> run_grid(const mmv_shape& sh0, const mmv_act& a, bool split, std::mt19937& rng, Block block) {
  std::vector<float> y((size_t)(a.n_tok * sh0.n_out));
  mmv_shape sh = sh0;
  sh.y = y.data();
  sh.ldy = sh.n_out;
  const unsigned gx = (unsigned)((sh.n_out + 63) / 64), gy = (unsigned)((a.n_tok + 63) / 64);
  const unsigned gz = split ? (unsigned)sh.splits : 1u;
  std::vector<float> part(split ? (size_t)sh.splits * a.n_tok * sh.n_out : 0, std::nanf(""));
  std::vector<int32_t> done((size_t)gx * gy, 0);
  const mmq_split sp{split ? part.data() : nullptr, split ? done.data() : nullptr};
  std::vector<dim3_host> blocks;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned by = 0; by < gy; ++by)
      for (unsigned bx = 0; bx < gx; ++bx) blocks.push_back({bx, by, z});
  std::shuffle(blocks.begin(), blocks.end(), rng);
  // with split: every tile's blocks but the last to run first; y must still be untouched (no block but a tile's
  // last adds its segments), then the last ones
  std::vector<dim3_host> finals;
  if (split) {
    std::vector<bool> seen((size_t)gx * gy, false);
    for (size_t i = blocks.size(); i-- > 0;) {
      const size_t tile = (size_t)blocks[i].y * gx + blocks[i].x;
      if (seen[tile]) continue;
      seen[tile] = true;
      finals.push_back(blocks[i]);
      blocks.erase(blocks.begin() + (std::ptrdiff_t)i);
    }
  }
  const auto run = [&](const dim3_host& b) {
    int last = -1;
    cuda_host::run_block(128, b.x, b.y, [&] { block(sh, sp, &last); }, dim3_host{gx, gy, gz}, b.z);
  };
  std::fill(y.begin(), y.end(), -7.0f);
  for (const auto& b : blocks) run(b);
  if (split) {
    CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == -7.0f; }));
    for (const auto& b : finals) run(b);
  }
  for (int32_t c : done) CHECK(c == 0);
  return y;
}

// mmq_kq (the super-block types).
template <class W>
std::vector<float> run_mmq(const mmv_shape& sh, const mmv_act& a, int64_t n_groups, bool split, std::mt19937& rng) {
  std::vector<uint8_t> smem(kq::k_stages * sizeof(kq::kq_stage<W>) + 16);
  uint8_t* aligned = smem.data() + (16 - (uintptr_t)smem.data() % 16) % 16;
  return run_grid(sh, a, split, rng, [&](const mmv_shape& s, mmq_split sp, int* last) {
    kq::mmq_kq_block<W>(s, a, n_groups, sp, aligned, last);
  });
}

// mmq_x32 (the 32-value block types).
template <class S>
std::vector<float> run_mmq32(const mmv_shape& sh, const mmv_act& a, int64_t n_groups, bool split, std::mt19937& rng) {
  auto sm = std::make_unique<mq::mmq_smem<S>>();
  return run_grid(sh, a, split, rng, [&](const mmv_shape& s, mmq_split sp, int* last) {
    mq::mmq_x32_block<S>(s, a, n_groups, sp, *sm, last);
  });
}

// Q's rows (n_in values) through a kernel runner vs mmv_x32's reader, K in 1, 2 and 3 segments (added in each block,
// and in separate blocks): 70 rows (a ragged second row tile, a group past the matrix), 20 tokens (a ragged token
// tile).
template <class Q, class Run>
void check(ggml_type type, int64_t n_in, act_format fmt, Run run, std::mt19937& rng) {
  const int64_t n_out = 70, n_tok = 20;
  const packed_case pc = make_case(type, n_out, n_in, n_tok, fmt, true, rng);
  for (int splits : {1, 2, 3}) {
    if (splits > pc.xs.n_units) continue;
    const std::vector<float> want = mmv_reference<Q>(pc.packed, pc.xs, 0, n_out, splits, pc.act.view);
    const mmv_shape sh{pc.packed.data(), pc.xs.n_units, 0, n_out, nullptr, n_out, splits, 0};
    for (bool split : {false, true}) {
      if (split && splits == 1) continue;
      const std::vector<float> got = run(sh, pc.act.view, pc.xs.n_groups, split, rng);
      const bool same = std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0;
      std::printf("  mmq %-6s K in %d segment(s)%s: %s mmv_x32's bits\n", ggml_type_info((uint32_t)type)->name, splits,
                  split ? ", separate blocks" : "", same ? "==" : "!=");
      CHECK(same);
    }
  }
}
template <class Q, class S>
void check_block32(ggml_type type, std::mt19937& rng) {  // 11 units: a full stage of 8 and a partial one
  check<Q>(type, 32 * 11, act_format::q8_32, run_mmq32<S>, rng);
}
template <class Q, class W>
void check_type(ggml_type type, std::mt19937& rng) {  // 3 units
  check<Q>(type, 768, act_format::q8_256, run_mmq<W>, rng);
}

}  // namespace

TEST_CASE("mmq (tensor cores) on the host: every 32-value block type gives mmv_x32's bits") {
  std::mt19937 rng(37);
  check_block32<x32_q8_0, mq::stage_q8_0>(ggml_type::Q8_0, rng);
  check_block32<x32_q4_0, mq::stage_q4_0>(ggml_type::Q4_0, rng);
  check_block32<x32_q4_1, mq::stage_q4_1>(ggml_type::Q4_1, rng);
  check_block32<x32_q5_0, mq::stage_q5_0>(ggml_type::Q5_0, rng);
  check_block32<x32_q5_1, mq::stage_q5_1>(ggml_type::Q5_1, rng);
  check_block32<x32_iq4_nl, mq::stage_iq4_nl>(ggml_type::IQ4_NL, rng);
}

TEST_CASE("mmq (tensor cores) on the host: every super-block type gives mmv_x32's bits") {
  std::mt19937 rng(31);
  check_type<x32_q4_K, kq::kq_q4_K>(ggml_type::Q4_K, rng);
  check_type<x32_q6_K, kq::kq_q6_K>(ggml_type::Q6_K, rng);
  check_type<x32_q5_K, kq::kq_q5_K>(ggml_type::Q5_K, rng);
  check_type<x32_q3_K, kq::kq_q3_K>(ggml_type::Q3_K, rng);
  check_type<x32_q2_K, kq::kq_q2_K>(ggml_type::Q2_K, rng);
  check_type<x32_iq4_xs, kq::kq_iq4_xs>(ggml_type::IQ4_XS, rng);
}
