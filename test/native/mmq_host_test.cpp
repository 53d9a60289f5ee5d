// The pipelined tensor-core matmul of the super-block types (native/backend/cuda/matmul_mmq_k_tile.cuh) on the host:
// its blocks run as std::threads with mma.sync and cp.async emulated (cuda_host_shim.h). For every type it takes,
// with K in 1 and 2 segments, 70 rows (a ragged second row tile, a group past the matrix) and 20 tokens (a ragged
// token tile), every output must have the bits of mmv_x32's reader (x32_types*.cuh): the kernel's contract, which
// the GPU suite checks on a device. q4_K and q6_K passed that suite on an H100 with this kernel, so their passing
// here also checks the emulation of mma.sync's fragment layout that the other types rely on.
// What this cannot check: the launch (grid, dynamic shared memory size), cp.async's asynchrony, device memory.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/pack_x32.h"
#include "harness.h"
#include "kernels_util.h"

#include "cuda_host_shim.h"

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

template <class Q, class W>
void check_type(ggml_type type, std::mt19937& rng) {
  const int64_t n_units = 2, n_in = 256 * n_units, n_out = 70, n_tok = 20;
  const std::vector<uint8_t> w = kernels_test::random_rows(type, n_out, n_in, rng);
  std::vector<uint8_t> packed;
  x32_pack(type, w.data(), n_in, n_out, packed);
  const x32_shape xs = x32_shape_of(type, n_in, n_out);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x((size_t)(n_tok * n_in));
  for (float& v : x) v = normal(rng);
  const host_act act = quantize_act(x, n_tok, n_in, act_format::q8_256, true);
  for (int splits : {1, 2}) {
    const std::vector<float> want = mmv_reference<Q>(packed, xs, 0, n_out, splits, act.view);
    const mmv_shape sh{packed.data(), xs.n_units, 0, n_out, nullptr, n_out, splits, 0};
    const std::vector<float> got = run_mmq<W>(sh, act.view, xs.n_groups);
    const bool same = std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0;
    std::printf("  mmq %-6s K in %d segment(s): %s mmv_x32's bits\n", ggml_type_info((uint32_t)type)->name, splits,
                same ? "==" : "!=");
    CHECK(same);
  }
}

}  // namespace

TEST_CASE("mmq (tensor cores) on the host: every super-block type gives mmv_x32's bits") {
  std::mt19937 rng(31);
  check_type<x32_q4_K, kq::kq_q4_K>(ggml_type::Q4_K, rng);
  check_type<x32_q6_K, kq::kq_q6_K>(ggml_type::Q6_K, rng);
  check_type<x32_q5_K, kq::kq_q5_K>(ggml_type::Q5_K, rng);
  check_type<x32_q3_K, kq::kq_q3_K>(ggml_type::Q3_K, rng);
  check_type<x32_q2_K, kq::kq_q2_K>(ggml_type::Q2_K, rng);
  check_type<x32_iq4_xs, kq::kq_iq4_xs>(ggml_type::IQ4_XS, rng);
}
