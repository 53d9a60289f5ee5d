// Token sampling for one sequence: penalties and logit_bias, then (unless greedy) top-k -> top-p -> min-p -> temperature ->
// a draw from the seeded per-request generator. This is llama.cpp's default chain order, so top-p and min-p
// see the temperature-1 distribution.
// Invariant: the same params, seed, prompt and logits give the same tokens, whatever else the engine runs;
// sample() always returns an id in [0, n_vocab) that is not masked.
#pragma once
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "backend/sample_rows.h"  // token_candidate, sample_spec, logit_edit
#include "engine/request.h"

namespace spindle {

// xoshiro256** seeded through splitmix64: small, fast, identical on every platform.
class sampler_rng {
 public:
  explicit sampler_rng(uint64_t seed);
  uint64_t next();
  double uniform();  // in [0, 1), 53 random bits
 private:
  uint64_t s_[4];
};

// --- the steps, each usable on its own (tests call them directly) ---

// llama.cpp: for every token present in `context_ids` (distinct ids), logit /= penalty if logit > 0, else
// logit *= penalty.
void apply_repetition_penalty(float* logits, const std::vector<int32_t>& context_ids, float penalty);
// OpenAI: logit -= count * frequency + (count > 0) * presence, over the output tokens' counts.
void apply_presence_frequency_penalty(float* logits, const std::unordered_map<int32_t, int32_t>& output_counts,
                                      float presence, float frequency);
// Highest logit; ties go to the lowest id. n >= 1.
int32_t argmax(const float* logits, int32_t n);
// Keeps the k highest logits, sorted descending. k <= 0 or k >= size keeps everything (order unchanged).
void keep_top_k(std::vector<token_candidate>& c, int32_t k);
// Keeps the smallest descending prefix whose softmax mass reaches p (at least one token); sorts c.
void keep_top_p(std::vector<token_candidate>& c, float p);
// Keeps tokens with probability >= p * max probability, i.e. logit >= max_logit + log(p).
void keep_min_p(std::vector<token_candidate>& c, float p);
// Draws from softmax(logit / temperature) over c (temperature > 0, c non-empty) with the uniform value u01 in
// [0, 1): the first candidate whose cumulative weight passes u01 * the total; the rng form draws u01 first.
int32_t sample_candidates(const std::vector<token_candidate>& c, float temperature, double u01);
int32_t sample_candidates(const std::vector<token_candidate>& c, float temperature, sampler_rng& rng);
// Raw logprobs of `chosen`: its log-softmax, rank and the n_top most likely ids.
token_logprob compute_logprobs(const float* logits, int32_t n_vocab, int32_t chosen, int32_t n_top);

class sampler {
 public:
  // `prompt` seeds the repetition-penalty context. A random seed is drawn when params.has_seed is false.
  sampler(const sampling_params& params, int32_t n_vocab, const std::vector<int32_t>& prompt);

  // Picks the next token. `logits` [n_vocab] is modified in place (penalties, masks). `masked` ids get
  // -inf first (min_tokens: EOG and stop ids); if every token would be masked the mask is ignored.
  // The same as sample_row_host(logits, n_vocab, plan(masked, ...)).
  int32_t sample(float* logits, const std::vector<int32_t>& masked);
  // The next token's sample_spec (backend/sample_rows.h): its edits (written to `edits`, which the spec points
  // into), truncation and, unless greedy, one value of the request's generator (drawn now, as sample would).
  sample_spec plan(const std::vector<int32_t>& masked, std::vector<logit_edit>& edits);
  // Records a generated token for the penalties.
  void accept(int32_t token);

 private:
  void remember(int32_t token);  // adds a prompt or output token to the repetition-penalty context
  const std::vector<int32_t>& penalty_ids();  // distinct ids the repetition penalty applies to
  sampling_params params_;
  int32_t n_vocab_;
  sampler_rng rng_;
  std::vector<uint8_t> in_context_;                     // [n_vocab] 1 if the id is in prompt + output
  std::vector<int32_t> context_ids_;                    // distinct ids of prompt + output (repeat_last_n -1)
  std::deque<int32_t> window_;                          // the last repeat_last_n tokens (repeat_last_n > 0)
  std::unordered_map<int32_t, int32_t> window_count_;   // id -> occurrences in window_
  std::vector<int32_t> window_ids_;                     // distinct ids of window_ (rebuilt per sample)
  std::unordered_map<int32_t, int32_t> output_counts_;  // id -> times generated
  std::vector<logit_edit> edits_;                       // sample's plan
  sample_scratch scratch_;                              // sample_row_host's candidates and draw scratch
};

}  // namespace spindle
