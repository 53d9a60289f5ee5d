// The device sampling kernel's block code (native/backend/cuda/sample_rows.cuh) on the host: blocks run as
// std::threads with the device's barriers and atomics (cuda_host_shim.h), planned and finished by the same host
// functions cuda_backend::sample_rows uses. Every mode must give sample_row_host's token (backend/sample_rows.h)
// for the same rows: argmax and the whole-row draw bit for bit (softmax_draw's weights, block sums and search),
// top-k / top-p / min-p through the shortlist (radix select with ties, sorted), rows the shortlist cannot settle
// through the downloaded edited row; with edits of every op, a stride wider than the row, ties and -inf logits.
// What this cannot check: the launch (grid, shared memory, the result copies); the GPU suite checks those
// (cuda_ops_test "sample_rows").
#include <algorithm>
#include <cmath>
#include <vector>

#include "harness.h"

#include "cuda_host_shim.h"

#include "backend/cuda/sample_rows.cuh"
#include "engine/sampler.h"
#include "engine/softmax_draw.h"

using namespace spindle;

namespace {

constexpr int k_block_threads = 64;  // threads per emulated block (the kernel takes any multiple of 32 up to 1024)

std::vector<float> make_row(int64_t stride, int64_t n, uint64_t seed, float spread) {
  sampler_rng rng(seed);
  std::vector<float> x((size_t)stride);
  for (float& v : x) v = float((rng.uniform() * 2.0 - 1.0) * spread);
  if (n > 40) {
    x[3] = x[30] = 50.0f;  // a tie at the top: the smaller id ranks first
    x[11] = -INFINITY;
  }
  if (stride > n) x[(size_t)n] = 1e9f;  // past the row's ids: never chosen
  return x;
}

// The kernel's work for these rows and specs, then the host's finish: the tokens cuda_backend::sample_rows returns.
std::vector<int32_t> device_tokens(std::vector<float> x, int64_t rows, int64_t stride, int32_t n,
                                   const std::vector<sample_spec>& specs) {
  std::vector<device_sample_row> plan;
  std::vector<logit_edit> edits;
  int32_t n_cands = 0;
  bool any_draw = false;
  plan_device_rows(specs.data(), rows, n, plan, edits, &n_cands, &any_draw);
  std::vector<int32_t> ids((size_t)rows, -1), cand_ids((size_t)std::max(n_cands, 1), -1);
  std::vector<float> cand_logits((size_t)std::max(n_cands, 1));
  std::vector<double> sums((size_t)rows), prefix((size_t)(rows * ((n + 63) / 64)), -1.0);
  for (int64_t r = rows - 1; r >= 0; --r) {  // blocks in any order: each is its own row
    sample_smem sm;
    cuda_host::run_block(k_block_threads, (unsigned)r, 0, [&] {
      sample_row_block(x.data(), stride, n, plan.data(), edits.data(), ids.data(), cand_ids.data(), cand_logits.data(),
                       sums.data(), any_draw ? prefix.data() : nullptr, sm);
    }, dim3_host{(unsigned)rows, 1, 1});
  }
  std::vector<int32_t> out((size_t)rows, -1);
  std::vector<token_candidate> shortlist;
  sample_scratch scratch;
  for (int64_t r = 0; r < rows; ++r) {
    if (finish_device_row(plan[(size_t)r], specs[(size_t)r], n, r, ids.data(), cand_ids.data(), cand_logits.data(),
                          sums.data(), shortlist, scratch, &out[(size_t)r])) {
      continue;
    }
    std::vector<float> row(x.begin() + r * stride, x.begin() + r * stride + n);  // edited in place by the block
    sample_spec unedited = specs[(size_t)r];
    unedited.edits = nullptr, unedited.n_edits = 0;
    out[(size_t)r] = sample_row_host(row.data(), n, unedited, scratch);
  }
  return out;
}

std::vector<int32_t> host_tokens(const std::vector<float>& x, int64_t rows, int64_t stride, int32_t n,
                                 const std::vector<sample_spec>& specs) {
  std::vector<int32_t> out((size_t)rows);
  sample_scratch scratch;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(x.begin() + r * stride, x.begin() + r * stride + n);
    out[(size_t)r] = sample_row_host(row.data(), n, specs[(size_t)r], scratch);
  }
  return out;
}

}  // namespace

TEST_CASE("sample_rows kernel on the host: every mode gives sample_row_host's token") {
  const logit_edit edits[] = {{5, logit_edit_op::repetition, 1.3f},  {6, logit_edit_op::repetition, 1.3f},
                              {5, logit_edit_op::add_penalty, -0.75f}, {9, logit_edit_op::add_bias, 4.0f},
                              {9, logit_edit_op::add_bias, 4.5f},     {3, logit_edit_op::mask, 0.0f},
                              {3, logit_edit_op::mask, 0.0f}};
  struct cfg {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
  };
  const cfg cfgs[] = {
      {0.0f, -1, 1.0f, 0.0f},    // argmax
      {1.0f, -1, 1.0f, 0.0f},    // the whole-row draw
      {0.6f, -1, 1.0f, 0.0f},    // the draw at another temperature
      {0.8f, 40, 1.0f, 0.0f},    // top-k
      {1.0f, 1, 1.0f, 0.0f},     // top-k 1
      {0.9f, 50, 0.9f, 0.05f},   // top-k + top-p + min-p
      {1.0f, -1, 0.9f, 0.0f},    // top-p alone: the normalizer
      {1.0f, -1, 1.0f, 0.2f},    // min-p alone
      {1.0f, -1, 0.999f, 0.0f},  // top-p past the shortlist on a flat row: the whole row
      {1.0f, 1500, 1.0f, 0.0f},  // top-k beyond the shortlist: the whole row
  };
  for (const int32_t n : {int32_t(37), int32_t(1000), int32_t(3001)}) {
    for (const float spread : {2.0f, 12.0f}) {
      const int64_t rows = (int64_t)(sizeof cfgs / sizeof cfgs[0]), stride = n + 5;
      std::vector<float> x;
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<float> row = make_row(stride, n, uint64_t(n * 7 + r), spread);
        x.insert(x.end(), row.begin(), row.end());
      }
      std::vector<sample_spec> specs((size_t)rows);
      for (int64_t r = 0; r < rows; ++r) {
        sample_spec& s = specs[(size_t)r];
        s.temperature = cfgs[r].temperature, s.top_k = cfgs[r].top_k, s.top_p = cfgs[r].top_p, s.min_p = cfgs[r].min_p;
        s.u01 = (double(r) + 0.37) / double(rows);
        if (n > 10 && r % 2 == 1) s.edits = edits, s.n_edits = int32_t(sizeof edits / sizeof edits[0]);
      }
      const std::vector<int32_t> want = host_tokens(x, rows, stride, n, specs);
      const std::vector<int32_t> got = device_tokens(x, rows, stride, n, specs);
      for (int64_t r = 0; r < rows; ++r) {
        if (got[(size_t)r] != want[(size_t)r]) {
          std::printf("  n %d spread %g row %lld: device %d, host %d\n", n, spread, (long long)r, got[(size_t)r],
                      want[(size_t)r]);
        }
      }
      CHECK(got == want);
    }
  }
}

TEST_CASE("sample_rows kernel on the host: the shortlist is the best ids in order, ties by id, -inf and all") {
  const int32_t n = 2000;
  std::vector<float> x((size_t)n, 1.0f);  // every logit tied: the smallest ids win
  x[1500] = 2.0f;
  x[7] = -INFINITY;
  std::vector<device_sample_row> plan(1);
  plan[0].mode = k_sample_shortlist;
  plan[0].n_keep = 300;
  plan[0].want_sum = 1;
  std::vector<int32_t> ids(1), cand_ids(300);
  std::vector<float> cand_logits(300);
  std::vector<double> sums(1);
  sample_smem sm;
  cuda_host::run_block(k_block_threads, 0, 0, [&] {
    sample_row_block(x.data(), n, n, plan.data(), nullptr, ids.data(), cand_ids.data(), cand_logits.data(), sums.data(),
                     nullptr, sm);
  });
  CHECK_EQ(cand_ids[0], 1500);
  for (int j = 1; j < 300; ++j) CHECK_EQ(cand_ids[(size_t)j], j - 1 + (j - 1 >= 7 ? 1 : 0));  // 0.., skipping 7
  double sum = 0;
  for (float v : x) sum += std::exp(double(v - 2.0f));
  CHECK(std::fabs(sums[0] - sum) <= 1e-12 * sum);
}

TEST_CASE("sample_rows kernel on the host: the draw's weights are softmax_draw's bit for bit, and so are 600 draws") {
  // every weight the draw computes, against softmax_weights (engine/softmax_draw.h) on the same differences
  std::vector<float> d;
  for (float v = -90.0f; v <= 0.0f; v += 0.0137f) d.push_back(v);
  for (float v : {-87.0f, -86.99999f, -87.00001f, 0.0f, -0.0f, -1e-30f, -INFINITY, NAN}) d.push_back(v);
  std::vector<float> want(d.size());
  softmax_weights(d.data(), int32_t(d.size()), 0.0f, 1.0f, want.data());
  int same = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const float got = draw_exp(__fmul_rn(__fsub_rn(d[i], 0.0f), 1.0f));
    same += __float_as_uint(got) == __float_as_uint(want[i]);
  }
  CHECK_EQ(same, int(d.size()));
  // one row drawn at 600 points of [0, 1): the same token as softmax_draw at each
  const int32_t n = 3001;
  const std::vector<float> row = make_row(n, n, 17, 3.0f);
  const int64_t draws = 600;
  std::vector<float> x;
  std::vector<sample_spec> specs((size_t)draws);
  for (int64_t k = 0; k < draws; ++k) {
    x.insert(x.end(), row.begin(), row.end());
    specs[(size_t)k].temperature = 0.7f;
    specs[(size_t)k].u01 = (double(k) + 0.5) / double(draws);
  }
  CHECK(device_tokens(x, draws, n, n, specs) == host_tokens(x, draws, n, n, specs));
}
