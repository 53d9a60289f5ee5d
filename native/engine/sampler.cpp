// Sampling steps (see sampler.h for the chain order).
// Invariant: each step keeps at least one candidate, and every draw consumes exactly one value of the
// request's own generator, so a seeded request is reproducible on its own.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "common/argmax.h"
#include "engine/softmax_draw.h"

namespace spindle {

// ---- generator ----

static uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

sampler_rng::sampler_rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t sampler_rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double sampler_rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

// ---- steps ----

void apply_repetition_penalty(float* logits, const std::vector<int32_t>& context_ids, float penalty) {
  if (penalty == 1.0f) return;
  for (int32_t id : context_ids) {
    float& l = logits[id];
    l = l > 0 ? l / penalty : l * penalty;
  }
}

void apply_presence_frequency_penalty(float* logits, const std::unordered_map<int32_t, int32_t>& output_counts,
                                      float presence, float frequency) {
  if (presence == 0.0f && frequency == 0.0f) return;
  for (const auto& [id, count] : output_counts) {
    logits[id] -= float(count) * frequency + (count > 0 ? presence : 0.0f);
  }
}

int32_t argmax(const float* logits, int32_t n) { return argmax_first(logits, n); }

static bool by_logit_desc(const token_candidate& a, const token_candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

void keep_top_k(std::vector<token_candidate>& c, int32_t k) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  std::partial_sort(c.begin(), c.begin() + k, c.end(), by_logit_desc);
  c.resize(size_t(k));
}

void keep_top_p(std::vector<token_candidate>& c, float p) {
  if (p >= 1.0f || c.size() <= 1) return;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const auto& t : c) max_logit = std::max(max_logit, t.logit);
  double sum = 0;
  for (const auto& t : c) sum += std::exp(double(t.logit - max_logit));
  // Most of the mass usually sits in a few hundred tokens: sort that prefix first; past it, bring the next best
  // (four times as many) to the front with nth_element and sort only them, so a wide nucleus sorts about what it
  // keeps instead of the whole vocabulary. The sorted prefix is the same either way (by_logit_desc orders ids).
  size_t sorted = std::min<size_t>(256, c.size());
  std::partial_sort(c.begin(), c.begin() + sorted, c.end(), by_logit_desc);
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == sorted) {
      const size_t next = std::min(c.size(), sorted * 4);
      if (next < c.size()) std::nth_element(c.begin() + sorted, c.begin() + next, c.end(), by_logit_desc);
      std::sort(c.begin() + sorted, c.begin() + next, by_logit_desc);
      sorted = next;
    }
    cum += std::exp(double(c[i].logit - max_logit)) / sum;
    if (cum >= p) {
      c.resize(i + 1);
      return;
    }
  }
}

void keep_min_p(std::vector<token_candidate>& c, float p) {
  if (p <= 0.0f || c.size() <= 1) return;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const auto& t : c) max_logit = std::max(max_logit, t.logit);
  const float min_logit = max_logit + std::log(p);
  size_t kept = 0;
  for (const auto& t : c) {
    if (t.logit >= min_logit) c[kept++] = t;
  }
  if (kept > 0) c.resize(kept);  // kept == 0 only when logits are NaN: leave c alone
}

int32_t sample_candidates(const std::vector<token_candidate>& c, float temperature, double u01) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const auto& t : c) max_logit = std::max(max_logit, t.logit);
  std::vector<double> weights(c.size());
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    weights[i] = std::exp(double(c[i].logit - max_logit) / double(temperature));
    sum += weights[i];
  }
  const double u = u01 * sum;
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += weights[i];
    if (u < cum) return c[i].id;
  }
  return c.front().id;  // only reached through rounding at the very end or non-finite logits
}

int32_t sample_candidates(const std::vector<token_candidate>& c, float temperature, sampler_rng& rng) {
  return sample_candidates(c, temperature, rng.uniform());
}

// log_z = max + log(sum exp(logits - max)): the weights from softmax_weights (about 1 ulp each; 0 below exp(-87)),
// added into four double sums in a fixed order, so ~1e-7 of the sum (the whole-vocabulary double exp of before
// took 0.8 ms a 128256-logit row, this ~0.1). Non-finite maxima (NaN, all -inf) take the plain double loop.
static double log_normalizer(const float* logits, int32_t n_vocab, float max_logit) {
  double sum[4] = {0, 0, 0, 0};
  if (std::isfinite(max_logit)) {
    thread_local std::vector<float> w;
    w.resize(size_t(n_vocab));
    softmax_weights(logits, n_vocab, max_logit, 1.0f, w.data());
    int32_t i = 0;
    for (; i + 4 <= n_vocab; i += 4)
      for (int k = 0; k < 4; ++k) sum[k] += double(w[size_t(i + k)]);
    for (; i < n_vocab; ++i) sum[0] += double(w[size_t(i)]);
  } else {
    for (int32_t i = 0; i < n_vocab; ++i) sum[0] += std::exp(double(logits[i] - max_logit));
  }
  return double(max_logit) + std::log((sum[0] + sum[1]) + (sum[2] + sum[3]));
}

token_logprob compute_logprobs(const float* logits, int32_t n_vocab, int32_t chosen, int32_t n_top) {
  const double log_z = log_normalizer(logits, n_vocab, logits[argmax(logits, n_vocab)]);
  token_logprob r;
  r.id = chosen;
  r.logprob = float(double(logits[chosen]) - log_z);
  const float lc = logits[chosen];
  int32_t above = 0;
  for (int32_t i = 0; i < n_vocab; ++i) above += logits[i] > lc;
  for (int32_t i = 0; i < chosen; ++i) above += logits[i] == lc;
  r.rank = 1 + above;
  // the n_top largest in one pass: a sorted shortlist (by_logit_desc); a later id with an equal logit never enters
  n_top = std::min(n_top, n_vocab);
  if (n_top > 0) {
    std::vector<token_candidate> top;
    top.reserve(size_t(n_top) + 1);
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (int32_t(top.size()) == n_top && !(logits[i] > top.back().logit)) continue;
      const token_candidate c{i, logits[i]};
      top.insert(std::upper_bound(top.begin(), top.end(), c, by_logit_desc), c);
      if (int32_t(top.size()) > n_top) top.pop_back();
    }
    for (const token_candidate& c : top) {
      r.top_ids.push_back(c.id);
      r.top_logprobs.push_back(float(double(c.logit) - log_z));
    }
  }
  return r;
}

// ---- sampler ----

static uint64_t request_seed(const sampling_params& p) {
  if (p.has_seed) return p.seed;
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

sampler::sampler(const sampling_params& params, int32_t n_vocab, const std::vector<int32_t>& prompt)
    : params_(params), n_vocab_(n_vocab), rng_(request_seed(params)) {
  if (params_.repeat_last_n < 0) in_context_.assign(size_t(n_vocab), 0);
  for (int32_t id : prompt)
    if (id >= 0) remember(id);  // image placeholders (-1) are not tokens
}

void sampler::remember(int32_t token) {
  const int32_t last_n = params_.repeat_last_n;
  if (last_n < 0) {  // the whole prompt + output
    if (!in_context_[size_t(token)]) {
      in_context_[size_t(token)] = 1;
      context_ids_.push_back(token);
    }
  } else if (last_n > 0) {  // a sliding window of the last N tokens
    window_.push_back(token);
    window_count_[token]++;
    if (window_.size() > size_t(last_n)) {
      const int32_t old = window_.front();
      window_.pop_front();
      if (--window_count_[old] == 0) window_count_.erase(old);
    }
  }
}

const std::vector<int32_t>& sampler::penalty_ids() {
  if (params_.repeat_last_n < 0) return context_ids_;
  window_ids_.clear();
  for (const auto& kv : window_count_) window_ids_.push_back(kv.first);
  return window_ids_;
}

void sampler::accept(int32_t token) {
  remember(token);
  output_counts_[token]++;
}

sample_spec sampler::plan(const std::vector<int32_t>& masked, std::vector<logit_edit>& edits) {
  edits.clear();
  if (params_.repetition_penalty != 1.0f) {
    for (int32_t id : penalty_ids()) edits.push_back({id, logit_edit_op::repetition, params_.repetition_penalty});
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    for (const auto& [id, count] : output_counts_) {  // l -= x is l + (-x), bit for bit
      const float x = float(count) * params_.frequency_penalty + (count > 0 ? params_.presence_penalty : 0.0f);
      edits.push_back({id, logit_edit_op::add_penalty, -x});
    }
  }
  for (const auto& [id, bias] : params_.logit_bias) edits.push_back({id, logit_edit_op::add_bias, bias});
  if (!masked.empty() && masked.size() < size_t(n_vocab_)) {
    for (int32_t id : masked) edits.push_back({id, logit_edit_op::mask, 0.0f});
  }
  sample_spec s;
  s.temperature = params_.temperature;
  s.top_k = params_.top_k;
  s.top_p = params_.top_p;
  s.min_p = params_.min_p;
  if (s.temperature != 0.0f) s.u01 = rng_.uniform();  // the one value this token's draw consumes
  s.edits = edits.data();
  s.n_edits = int32_t(edits.size());
  return s;
}

int32_t sampler::sample(float* logits, const std::vector<int32_t>& masked) {
  const sample_spec s = plan(masked, edits_);
  return sample_row_host(logits, n_vocab_, s, scratch_);
}

}  // namespace spindle
