// Prompt-lookup and prediction drafts (see drafter.h). Invariant: a proposal is a pure function of the
// sequence's tokens and this drafter's history, and never longer than max_draft.
#include "engine/drafter.h"

#include <algorithm>
#include <cstdlib>

namespace spindle {

namespace {

constexpr int32_t k_max_backoff = 32;       // decodes waited at most after repeated misses
constexpr int32_t k_align_check = 3;        // output tokens compared to confirm the prediction's position
constexpr int32_t k_prediction_min_n = 2;   // n-gram sizes used to find the output's place in the prediction again
constexpr int32_t k_prediction_max_n = 6;

bool same(const int32_t* a, const int32_t* b, int64_t n) { return std::equal(a, a + n, b); }

}  // namespace

int64_t ngram_find(const int32_t* tokens, int64_t n, int32_t min_n, int32_t max_n, int32_t* matched) {
  for (int32_t m = std::min<int64_t>(max_n, n - 1); m >= std::max(min_n, 1); --m) {
    const int32_t* tail = tokens + n - m;
    for (int64_t i = n - m - 1; i >= 0; --i) {  // latest occurrence first; it must leave a token after it
      if (same(tokens + i, tail, m)) {
        if (matched) *matched = m;
        return i + m;
      }
    }
  }
  return -1;
}

drafter::drafter(const speculative_config& cfg, bool ngram, std::vector<int32_t> prediction, bool draft_model)
    : cfg_(cfg),
      ngram_(ngram),
      model_(draft_model),
      prediction_(std::move(prediction)),
      limit_(std::clamp(cfg.num_speculative_tokens, 1, 4)) {}

void drafter::propose(const int32_t* tokens, int64_t n_tokens, int64_t n_prompt, int32_t max_draft,
                      std::vector<int32_t>& out) {
  out.clear();
  last_ = source::none;
  if (!active() || max_draft <= 0 || cfg_.num_speculative_tokens <= 0) return;
  if (wait_ > 0) {
    --wait_;
    return;
  }
  const int32_t k = std::min({max_draft, limit_, cfg_.num_speculative_tokens});
  if (!prediction_.empty() && propose_prediction(tokens + n_prompt, n_tokens - n_prompt, k, out)) {
    last_ = source::prediction;
    return;
  }
  if (ngram_) {
    int32_t m = 0;
    const int64_t at = ngram_find(tokens, n_tokens, cfg_.prompt_lookup_min, cfg_.prompt_lookup_max, &m);
    if (at >= 0) {
      out.assign(tokens + at, tokens + std::min<int64_t>(at + k, n_tokens));
      last_ = source::ngram;
      return;
    }
  }
  if (model_) {
    out.assign(size_t(k), 0);
    last_ = source::model;
  }
}

// The prediction's tokens after the output's place in it: where the last proposal left it if the output's tail
// still agrees, else after the occurrence of the output's longest tail (2..6 tokens) nearest to that place, else
// (the output's last token replaced the predicted one) where it was.
bool drafter::propose_prediction(const int32_t* output, int64_t n_output, int32_t max_draft, std::vector<int32_t>& out) {
  const int64_t n_pred = int64_t(prediction_.size());
  const int64_t check = std::min<int64_t>({k_align_check, n_output, pred_next_});
  bool aligned = pred_next_ <= n_pred && (n_output == 0 ? pred_next_ == 0
                                          : check > 0 && same(output + n_output - check,
                                                              prediction_.data() + pred_next_ - check, check));
  if (!aligned) {
    int64_t best = -1;
    for (int32_t m = int32_t(std::min<int64_t>(k_prediction_max_n, n_output)); m >= k_prediction_min_n && best < 0; --m) {
      const int32_t* tail = output + n_output - m;
      for (int64_t i = 0; i + m < n_pred; ++i) {  // leaves at least one predicted token after the match
        if (!same(prediction_.data() + i, tail, m)) continue;
        if (best < 0 || std::llabs(i + m - pred_next_) < std::llabs(best - pred_next_)) best = i + m;
      }
    }
    if (best >= 0) {
      pred_next_ = best;
    } else {  // a substitution? the output before its last token still agrees: go on after the replaced token
      const int64_t c = std::min<int64_t>({k_align_check, n_output - 1, pred_next_ - 1});
      if (c <= 0 || pred_next_ > n_pred || !same(output + n_output - 1 - c, prediction_.data() + pred_next_ - 1 - c, c)) {
        return false;
      }
    }
  }
  if (pred_next_ >= n_pred) return false;
  out.assign(prediction_.begin() + pred_next_, prediction_.begin() + std::min<int64_t>(pred_next_ + max_draft, n_pred));
  return true;
}

void drafter::record(int32_t proposed, int32_t accepted) {
  pred_next_ += accepted + 1;  // the output grew by accepted + 1 tokens; propose() checks the alignment
  if (proposed <= 0) return;
  if (accepted >= proposed) {
    limit_ = std::min(std::max(limit_, 1) * 2, std::max(cfg_.num_speculative_tokens, 1));
  } else {
    limit_ = accepted + 1;
  }
  if (accepted == 0) {
    backoff_ = backoff_ == 0 ? 1 : std::min(backoff_ * 2, k_max_backoff);
    wait_ = backoff_;
  } else {
    backoff_ = 0;
  }
}

}  // namespace spindle
