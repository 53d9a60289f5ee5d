// The greedy argmax kernels' block code (native/backend/cuda/argmax_rows.cuh) on the host: blocks run as
// std::threads with the device's shuffles, barriers and atomics (cuda_host_shim.h), one block after another in a
// shuffled order. Both shapes (a block per row; a block per slice of a row, the last block of a row combining the
// slices) must give argmax_first's index (common/argmax.h) for rows with ties, NaNs first / later / everywhere,
// all -inf, values past the row's n (a prefix of a wider row), and must leave the per-row counters at 0.
// What this cannot check: the launches (grids, the scratch sizes) and device memory ordering; the GPU suite
// checks those (cuda_ops_test "argmax_rows").
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/argmax.h"
#include "harness.h"

#include "cuda_host_shim.h"

#include "backend/cuda/argmax_rows.cuh"

using namespace spindle;

namespace {

constexpr int k_threads = 64;  // threads per emulated block (the kernels take any multiple of 32)

// rows x stride values, n of each row read, with the edge cases of the GPU test in rows 0..5.
std::vector<float> make_rows(int64_t rows, int64_t stride, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x((size_t)(rows * stride));
  for (float& v : x) v = d(rng);
  float* r = x.data();
  if (n > 3 && rows >= 6) {
    r[0 * stride + n / 2] = 50.0f, r[0 * stride + n - 1] = 50.0f;  // a tie: the smaller index
    r[1 * stride + 0] = NAN;                                        // NaN first: index 0
    r[2 * stride + 1] = NAN, r[2 * stride + 2] = 60.0f;             // NaN later: never chosen
    for (int64_t i = 0; i < n; ++i) r[3 * stride + i] = -INFINITY;  // all -inf: index 0
    if (stride > n) r[4 * stride + n] = 1e9f;                       // past the prefix: not seen
    for (int64_t i = 0; i < n; ++i) r[5 * stride + i] = NAN;        // all NaN: index 0
  }
  return x;
}

std::vector<int32_t> expected(const std::vector<float>& x, int64_t rows, int64_t stride, int64_t n) {
  std::vector<int32_t> e((size_t)rows);
  for (int64_t r = 0; r < rows; ++r) e[(size_t)r] = argmax_first(x.data() + r * stride, n);
  return e;
}

}  // namespace

TEST_CASE("argmax kernels on the host: a block per row and a block per slice give argmax_first's index") {
  std::mt19937 rng(53);
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(100), int64_t(1000), int64_t(2500)}) {
    const int64_t rows = 7, stride = n + 3;
    const std::vector<float> x = make_rows(rows, stride, n, rng);
    const std::vector<int32_t> want = expected(x, rows, stride, n);
    // a block per row
    std::vector<int32_t> out((size_t)rows, -1);
    for (int64_t b = 0; b < rows; ++b) {
      float sv[32];
      int32_t si[32];
      cuda_host::run_block(k_threads, (unsigned)b, 0, [&] { argmax_row_block(x.data(), stride, n, out.data(), sv, si); },
                           dim3_host{(unsigned)rows, 1, 1});
    }
    CHECK(out == want);
    // a block per slice, the blocks in a shuffled order (any of them may be a row's last)
    for (const int64_t slice : {int64_t(64), int64_t(300)}) {
      const int64_t slices = (n + slice - 1) / slice;
      std::vector<float> part((size_t)(2 * rows * slices), -7.0f);
      std::vector<int32_t> done((size_t)rows, 0), got((size_t)rows, -1);
      std::vector<std::pair<unsigned, unsigned>> order;
      for (unsigned r = 0; r < rows; ++r)
        for (unsigned s = 0; s < slices; ++s) order.emplace_back(s, r);
      std::shuffle(order.begin(), order.end(), rng);
      bool only_final = true;  // a row's answer is written once, by its last block, and is final
      for (const auto& [s, r] : order) {
        float sv[32];
        int32_t si[32];
        int last = 0;
        cuda_host::run_block(k_threads, s, r, [&] {
          argmax_slice_block(x.data(), stride, n, slice, part.data(), done.data(), got.data(), sv, si, &last);
        }, dim3_host{(unsigned)slices, (unsigned)rows, 1});
        only_final = only_final && (got[r] == -1 || got[r] == want[r]);
      }
      CHECK(only_final);
      CHECK(got == want);
      CHECK(std::all_of(done.begin(), done.end(), [](int32_t c) { return c == 0; }));  // ready for the next launch
    }
  }
}
