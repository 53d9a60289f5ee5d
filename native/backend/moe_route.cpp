// MoE routing on the host (moe_route.h).
#include "backend/moe_route.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace spindle {

namespace {

// Index of the best of the experts not yet taken: highest score, lower id on ties, NaN lowest.
int32_t best_remaining(const float* score, const std::vector<char>& taken, int32_t n_expert) {
  int32_t best = -1;
  float best_score = 0.0f;
  for (int32_t e = 0; e < n_expert; ++e) {
    if (taken[e]) continue;
    const float s = std::isnan(score[e]) ? -INFINITY : score[e];
    if (best < 0 || s > best_score) {
      best = e;
      best_score = s;
    }
  }
  return best;
}

}  // namespace

void route_experts(const moe_route_params& p, const float* probs, const float* bias, int64_t n, int32_t* ids,
                   float* weights) {
  const int32_t ne = p.n_expert, k = p.k;
  std::vector<float> score((size_t)ne);
  std::vector<char> taken((size_t)ne);
  for (int64_t t = 0; t < n; ++t) {
    const float* pr = probs + t * ne;
    for (int32_t e = 0; e < ne; ++e) score[e] = bias ? pr[e] + bias[e] : pr[e];
    std::fill(taken.begin(), taken.end(), 0);
    int32_t* id = ids + t * k;
    float* wt = weights + t * k;
    for (int32_t j = 0; j < k; ++j) {
      id[j] = best_remaining(score.data(), taken, ne);
      taken[id[j]] = 1;
      wt[j] = pr[id[j]];  // the unbiased probability
    }
    if (p.norm_weights) {
      double s = 0.0;  // ggml_sum_rows: a double sum in slot order
      for (int32_t j = 0; j < k; ++j) s += (double)wt[j];
      float sum = (float)s;
      sum = sum < INFINITY ? sum : INFINITY;  // ggml_clamp: MAX(MIN(x, max), min)
      sum = sum > k_moe_min_weight_sum ? sum : k_moe_min_weight_sum;
      for (int32_t j = 0; j < k; ++j) wt[j] = wt[j] / sum;
    }
    if (p.weights_scale != 0.0f && p.weights_scale != 1.0f) {
      for (int32_t j = 0; j < k; ++j) wt[j] = wt[j] * p.weights_scale;
    }
  }
}

}  // namespace spindle
