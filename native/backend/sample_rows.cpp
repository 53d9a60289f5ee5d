// The sampling chain of one row on the host (sample_rows.h), the shortlist finish a device uses for truncated
// chains, and backend::sample_rows' default: each row downloaded, then sampled here.
#include "backend/sample_rows.h"

#include <algorithm>
#include <cmath>

#include "backend/backend.h"
#include "engine/sampler.h"       // the chain's steps
#include "engine/softmax_draw.h"

namespace spindle {

void apply_logit_edits(float* row, const sample_spec& s) {
  for (int32_t e = 0; e < s.n_edits; ++e) {
    const logit_edit& d = s.edits[e];
    float& l = row[d.id];
    switch (d.op) {
      case logit_edit_op::repetition: l = l > 0 ? l / d.value : l * d.value; break;
      case logit_edit_op::add_penalty:
      case logit_edit_op::add_bias: l = l + d.value; break;
      case logit_edit_op::mask: l = -std::numeric_limits<float>::infinity(); break;
    }
  }
}

static bool top_k_on(const sample_spec& s, int32_t n) { return s.top_k > 0 && s.top_k < n; }

bool sample_truncated(const sample_spec& s, int32_t n) {
  return top_k_on(s, n) || s.top_p < 1.0f || s.min_p > 0.0f;
}

int32_t sample_row_host(float* row, int32_t n, const sample_spec& s, sample_scratch& scratch) {
  apply_logit_edits(row, s);
  if (s.temperature == 0.0f) return argmax(row, n);
  if (!sample_truncated(s, n)) {  // the whole vocabulary (the OpenAI default): one vectorized pass
    return softmax_draw(row, n, s.temperature, s.u01, scratch.draw);
  }
  std::vector<token_candidate>& c = scratch.candidates;
  c.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i) c[size_t(i)] = {i, row[i]};
  keep_top_k(c, s.top_k);
  keep_top_p(c, s.top_p);
  keep_min_p(c, s.min_p);
  return sample_candidates(c, s.temperature, s.u01);
}

int32_t shortlist_size(const sample_spec& s, int32_t n) {
  if (top_k_on(s, n)) return s.top_k <= k_shortlist_max ? s.top_k : 0;
  return std::min(n, k_shortlist_max);
}

bool shortlist_needs_sum(const sample_spec& s, int32_t n) { return !top_k_on(s, n) && s.top_p < 1.0f && n > 1; }

bool finish_from_shortlist(const token_candidate* c, int32_t n_c, int32_t n, double sum_exp, const sample_spec& s,
                           sample_scratch& scratch, int32_t* token) {
  if (n_c <= 0 || n_c != shortlist_size(s, n)) return false;
  std::vector<token_candidate>& v = scratch.candidates;
  if (top_k_on(s, n)) {  // keep_top_k's list itself; top-p and min-p then see only it
    v.assign(c, c + n_c);
    keep_top_p(v, s.top_p);
    keep_min_p(v, s.min_p);
  } else if (shortlist_needs_sum(s, n)) {  // keep_top_p over the whole row: c[0] is its max, sum_exp its sum
    const float max_logit = c[0].logit;
    double cum = 0;
    int32_t keep = 0;
    for (int32_t i = 0; i < n_c && keep == 0; ++i) {
      cum += std::exp(double(c[i].logit - max_logit)) / sum_exp;
      if (cum >= s.top_p) keep = i + 1;
    }
    if (keep == 0) {
      if (n_c < n) return false;  // the mass lies past the shortlist
      keep = n_c;                 // the whole (sorted) row, as keep_top_p leaves it when rounding never reaches p
    }
    v.assign(c, c + keep);
    keep_min_p(v, s.min_p);
  } else {  // min-p alone: keep_min_p over the row in id order
    const float min_logit = c[0].logit + std::log(s.min_p);
    int32_t keep = 0;
    while (keep < n_c && c[keep].logit >= min_logit) ++keep;
    if (keep == 0 || (keep == n_c && n_c < n)) return false;  // NaN logits, or more may lie past the shortlist
    v.assign(c, c + keep);
    std::sort(v.begin(), v.end(), [](const token_candidate& a, const token_candidate& b) { return a.id < b.id; });
  }
  *token = sample_candidates(v, s.temperature, s.u01);
  return true;
}

void backend::sample_rows(float* x, int64_t n_rows, int64_t stride, int64_t n, const sample_spec* specs,
                          int32_t* out) {
  static thread_local sample_scratch scratch;  // the engine thread's, reused step after step
  scratch.row.resize((size_t)n);
  for (int64_t r = 0; r < n_rows; ++r) {
    download(scratch.row.data(), x + r * stride, n);
    out[r] = sample_row_host(scratch.row.data(), (int32_t)n, specs[r], scratch);
  }
}

}  // namespace spindle
