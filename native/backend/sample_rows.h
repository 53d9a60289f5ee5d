// Sampling a token where the logits are (backend::sample_rows): the sampler's chain (engine/sampler.h) split into
// what a request decides before the forward pass, a sample_spec (its penalties, logit bias and min_tokens mask as
// edits of its logits row, its truncation, and the one uniform value its generator gives this token), and what
// the row then decides (sample_row_host). A GPU backend runs the same chain on the device and, for truncated
// chains, finishes on the host from a shortlist of the row's best candidates (finish_from_shortlist) instead of
// downloading the vocabulary.
// Invariant: sample_row_host(row, spec) is the token sampler::sample picks for the same request state (the
// sampler plans a spec and calls it: one code path), and finish_from_shortlist, when it decides, picks the same
// token from the row's best candidates (for top-p without top-k: given the same normalizer sum).
#pragma once
#include <cstdint>
#include <vector>

namespace spindle {

struct token_candidate {
  int32_t id;
  float logit;
};

// Scratch of softmax_draw (engine/softmax_draw.h), kept between draws (grows to the vocabulary once).
struct softmax_draw_scratch {
  std::vector<float> weights;      // exp((logit - max) / temperature), zero-padded to a multiple of 64
  std::vector<double> block_sums;  // sums of 64 weights
};

// Edits of a logits row, applied in op order (every repetition edit, then every penalty, bias and mask edit):
//   repetition:  l = l > 0 ? l / value : l * value  (llama.cpp's repetition penalty; ids distinct)
//   add_penalty: l = l + value   (value = -(count * frequency + presence), OpenAI's penalties; ids distinct)
//   add_bias:    l = l + value   (logit_bias, in the request's order: an id may repeat)
//   mask:        l = -inf        (min_tokens: EOG and stop ids)
enum class logit_edit_op : int32_t { repetition = 0, add_penalty = 1, add_bias = 2, mask = 3 };
constexpr int k_logit_edit_ops = 4;

struct logit_edit {
  int32_t id = 0;
  logit_edit_op op = logit_edit_op::mask;
  float value = 0.0f;
};

// One logits row's sampling.
struct sample_spec {
  float temperature = 0.0f;  // 0: the argmax of the edited row (no draw)
  int32_t top_k = -1;        // <= 0 or >= n: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  double u01 = 0.0;          // the request generator's value for this token, in [0, 1) (temperature > 0)
  const logit_edit* edits = nullptr;  // host [n_edits], sorted by op
  int32_t n_edits = 0;
};

struct sample_scratch {
  std::vector<token_candidate> candidates;
  softmax_draw_scratch draw;
  std::vector<float> row;  // backend::sample_rows' downloaded row
};

// row[id] per edit, in op order.   row: host [> every edit's id]
void apply_logit_edits(float* row, const sample_spec& s);
// Whether top-k, top-p or min-p truncate the distribution of a row of n ids (else a draw over all of them).
bool sample_truncated(const sample_spec& s, int32_t n);
// The edits, then the argmax (temperature 0), the whole-row draw, or top-k -> top-p -> min-p -> the draw.
// row: host [n], modified in place.
int32_t sample_row_host(float* row, int32_t n, const sample_spec& s, sample_scratch& scratch);

// --- the shortlist path (truncated chains on a device) ---
// The longest shortlist a device builds; top_k above it (or none, with a top-p or min-p that the shortlist cannot
// settle) falls back to the whole row.
constexpr int32_t k_shortlist_max = 1024;
// Candidates a shortlist of a truncated chain holds: top_k when it is on (0 when top_k > k_shortlist_max: the
// whole row is needed), else min(n, k_shortlist_max).
int32_t shortlist_size(const sample_spec& s, int32_t n);
// Whether the chain needs the row's normalizer sum(exp(l - max)) over all n ids (top-p without top-k).
bool shortlist_needs_sum(const sample_spec& s, int32_t n);
// The chain's token from the edited row's best n_c candidates c (by logit descending, then id ascending; n_c =
// shortlist_size) and, where shortlist_needs_sum, sum_exp = sum over the row of exp(double(l - max)). True with
// *token set when they settle it: always with top-k; with top-p when the mass is reached inside the shortlist;
// with min-p when the shortlist ends below the threshold. False: the whole row is needed.
bool finish_from_shortlist(const token_candidate* c, int32_t n_c, int32_t n, double sum_exp, const sample_spec& s,
                           sample_scratch& scratch, int32_t* token);

}  // namespace spindle
