// cuda_backend::sample_rows: a request's token from its logits row without the vocabulary crossing to the host.
// One launch for the rows of a call (sample_rows.cuh: edits, then argmax / draw / shortlist per row), one copy back
// of what the host needs (tokens; shortlists and normalizers of truncated chains, which the host finishes with
// finish_from_shortlist), then the host's part. A row the shortlist cannot settle (a top-k above
// k_shortlist_max; a top-p or min-p mass past the shortlist) is downloaded, edited, and sampled on the host.
// Invariant: the tokens are sample_row_host's for the same rows (see sample_rows.h for the top-p normalizer).
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/sample_rows.cuh"
#include "common/error.h"

namespace spindle {

namespace {

constexpr int k_sample_threads = 512;

__global__ void __launch_bounds__(k_sample_threads)
    sample_rows_kernel(float* x, int64_t stride, int64_t n, const device_sample_row* rows, const logit_edit* edits,
                       int32_t* out_ids, int32_t* cand_ids, float* cand_logits, double* sums, double* prefix) {
  pdl_begin();
  __shared__ sample_smem sm;
  sample_row_block(x, stride, n, rows, edits, out_ids, cand_ids, cand_logits, sums, prefix, sm);
}

int64_t doubles_for(int64_t n32) { return (n32 + 1) / 2; }  // 32-bit values -> 8-byte slots

}  // namespace

void cuda_backend::sample_rows(float* x, int64_t n_rows, int64_t stride, int64_t n, const sample_spec* specs,
                               int32_t* out) {
  if (n_rows <= 0) return;
  if (n <= 0 || n > 0x7fffffff || n_rows > 0x7fffffff) throw error("sample_rows: rows of 1 to 2^31 - 1 values");
  const int32_t n_ids = (int32_t)n;
  std::vector<device_sample_row> rows;
  std::vector<logit_edit> edits;
  int32_t n_cands = 0;
  bool any_draw = false;
  plan_device_rows(specs, n_rows, n_ids, rows, edits, &n_cands, &any_draw);
  leave_recording();  // the results go to the host now
  // one buffer: sums [n_rows] | ids [n_rows] | candidate ids [n_cands] | candidate logits [n_cands] (copied back),
  // then the draws' running block sums [n_rows, ceil(n / 64)] (device only)
  const int64_t at_ids = n_rows, at_cid = at_ids + doubles_for(n_rows), at_clogit = at_cid + doubles_for(n_cands),
                at_prefix = at_clogit + doubles_for(n_cands), n_blocks = (n + 63) / 64;
  double* buf = sample_buf_.reserve(at_prefix + (any_draw ? n_rows * n_blocks : 0));
  const device_sample_row* d_rows = stage(rows.data(), n_rows);
  const logit_edit* d_edits = edits.empty() ? nullptr : stage(edits.data(), (int64_t)edits.size());
  launch("sample_rows", sample_rows_kernel, dim3((unsigned)n_rows), dim3(k_sample_threads), x, stride, n, d_rows,
         d_edits, (int32_t*)(buf + at_ids), (int32_t*)(buf + at_cid), (float*)(buf + at_clogit), buf,
         any_draw ? buf + at_prefix : nullptr);
  sample_back_.resize((size_t)at_prefix);
  SPINDLE_CUDA_CHECK(
      cudaMemcpyAsync(sample_back_.data(), buf, (size_t)at_prefix * sizeof(double), cudaMemcpyDeviceToHost, stream_));
  SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  queue_drained();
  const double* sums = sample_back_.data();
  const int32_t* ids = (const int32_t*)(sample_back_.data() + at_ids);
  const int32_t* cid = (const int32_t*)(sample_back_.data() + at_cid);
  const float* clogit = (const float*)(sample_back_.data() + at_clogit);
  for (int64_t r = 0; r < n_rows; ++r) {
    if (finish_device_row(rows[(size_t)r], specs[r], n_ids, r, ids, cid, clogit, sums, sample_host_.shortlist,
                          sample_host_.scratch, &out[r])) {
      continue;
    }
    // the whole row: its edits are already applied on the device
    sample_host_.scratch.row.resize((size_t)n);
    download(sample_host_.scratch.row.data(), x + r * stride, n);
    sample_spec unedited = specs[r];
    unedited.edits = nullptr;
    unedited.n_edits = 0;
    out[r] = sample_row_host(sample_host_.scratch.row.data(), n_ids, unedited, sample_host_.scratch);
  }
}

}  // namespace spindle
