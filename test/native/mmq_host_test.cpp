// The tensor-core matmuls on the host: the pipelined one of the super-block types (matmul_mmq_k_tile.cuh) and the
// one of the 32-value block types (matmul_mma_tile.cuh), their blocks as std::threads with mma.sync and cp.async
// emulated (cuda_host_shim.h). For every type they take, with K in 1 and 2 segments, 70 rows (a ragged second row
// tile, a group past the matrix) and 20 tokens (a ragged token tile), every output must have the bits of mmv_x32's
// reader (x32_types*.cuh): the kernels' contract, which the GPU suite checks on a device. q4_K, q6_K, q8_0 and
// q4_0 passed that suite on an H100 with these kernels, so their passing here also checks the emulation of
// mma.sync's fragment layout that the other types rely on.
// What this cannot check: the launch (grid, dynamic shared memory size), cp.async's asynchrony, device memory.
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

// mmq_kq's grid: 64-row tiles x 64-token tiles, K segments added inside each block (no partial-sum buffer).
template <class W>
std::vector<float> run_mmq(const mmv_shape& sh0, const mmv_act& a, int64_t n_groups) {
  std::vector<float> y((size_t)(a.n_tok * sh0.n_out));
  mmv_shape sh = sh0;
  sh.y = y.data();
  sh.ldy = sh.n_out;
  std::vector<uint8_t> smem(kq::k_stages * sizeof(kq::kq_stage<W>) + 16);
  uint8_t* aligned = smem.data() + (16 - (uintptr_t)smem.data() % 16) % 16;
  for (int64_t bx = 0; bx * kq::k_rows < sh.n_out; ++bx)
    for (int by = 0; by * kq::k_tok < a.n_tok; ++by)
      cuda_host::run_block(kq::k_threads, (unsigned)bx, (unsigned)by,
                           [&] { kq::mmq_kq_block<W>(sh, a, n_groups, nullptr, aligned); });
  return y;
}

// mmq_x32's grid (the 32-value block types): the same tiles.
template <class S>
std::vector<float> run_mmq32(const mmv_shape& sh0, const mmv_act& a, int64_t n_groups) {
  std::vector<float> y((size_t)(a.n_tok * sh0.n_out));
  mmv_shape sh = sh0;
  sh.y = y.data();
  sh.ldy = sh.n_out;
  auto sm = std::make_unique<mq::mmq_smem<S>>();
  for (int64_t bx = 0; bx * mq::k_tile_rows < sh.n_out; ++bx)
    for (int by = 0; by * mq::k_tile_tok < a.n_tok; ++by)
      cuda_host::run_block(128, (unsigned)bx, (unsigned)by, [&] { mq::mmq_x32_block<S>(sh, a, n_groups, nullptr, *sm); });
  return y;
}

// Q's rows (n_in values) through a kernel runner vs mmv_x32's reader, K in 1 and 2 segments: 70 rows (a ragged
// second row tile, a group past the matrix), 20 tokens (a ragged token tile).
template <class Q, class Run>
void check(ggml_type type, int64_t n_in, act_format fmt, Run run, std::mt19937& rng) {
  const int64_t n_out = 70, n_tok = 20;
  const packed_case pc = make_case(type, n_out, n_in, n_tok, fmt, true, rng);
  for (int splits : {1, 2}) {
    const std::vector<float> want = mmv_reference<Q>(pc.packed, pc.xs, 0, n_out, splits, pc.act.view);
    const mmv_shape sh{pc.packed.data(), pc.xs.n_units, 0, n_out, nullptr, n_out, splits, 0};
    const std::vector<float> got = run(sh, pc.act.view, pc.xs.n_groups);
    const bool same = std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0;
    std::printf("  mmq %-6s K in %d segment(s): %s mmv_x32's bits\n", ggml_type_info((uint32_t)type)->name, splits,
                same ? "==" : "!=");
    CHECK(same);
  }
}
template <class Q, class S>
void check_block32(ggml_type type, std::mt19937& rng) {  // 11 units: a full stage of 8 and a partial one
  check<Q>(type, 32 * 11, act_format::q8_32, run_mmq32<S>, rng);
}
template <class Q, class W>
void check_type(ggml_type type, std::mt19937& rng) {  // 2 units
  check<Q>(type, 512, act_format::q8_256, run_mmq<W>, rng);
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
