// The limits table (see limits.h).
#include "engine/limits.h"

#include <cmath>
#include <sstream>

#include "common/error.h"

namespace spindle {

namespace {

constexpr double inf = INFINITY;
constexpr double i32_max = 2147483647.0;

std::string num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string((long long)v);
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

//                                      name                 lo     hi       lo_open hi_open int    special
const param_limit k_temperature       = {"temperature",       0,     inf,     false, false, false, false, 0, nullptr};
const param_limit k_top_p             = {"topP",              0,     1,       true,  false, false, false, 0, nullptr};
const param_limit k_top_k             = {"topK",              -1,    i32_max, false, false, true,  false, 0, nullptr};
const param_limit k_min_p             = {"minP",              0,     1,       false, false, false, false, 0, nullptr};
const param_limit k_repetition_penalty = {"repetitionPenalty", 0,    inf,     true,  false, false, false, 0, nullptr};
const param_limit k_repeat_last_n     = {"repeatLastN",       -1,    i32_max, false, false, true,  false, 0, nullptr};
const param_limit k_presence_penalty  = {"presencePenalty",   -2,    2,       false, false, false, false, 0, nullptr};
const param_limit k_frequency_penalty = {"frequencyPenalty",  -2,    2,       false, false, false, false, 0, nullptr};
const param_limit k_max_tokens        = {"maxTokens",         1,     i32_max, false, false, true,  false, 0, nullptr};
const param_limit k_min_tokens        = {"minTokens",         0,     i32_max, false, false, true,  false, 0, nullptr};
const param_limit k_logprobs          = {"logprobs",          0,     max_logprobs, false, false, true, false, 0, nullptr};
const param_limit k_prompt_logprobs   = {"promptLogprobs",    0,     max_logprobs, false, false, true, false, 0, nullptr};
const param_limit k_seed              = {"seed",              0,     4294967295.0, false, false, true, false, 0, nullptr};
const param_limit k_logit_bias        = {"logitBias",         -100,  100,          false, false, false, false, 0, nullptr};
const param_limit k_max_model_len     = {"maxModelLen",       2,     i32_max, false, false, true,  false, 0, nullptr};
const param_limit k_max_num_seqs      = {"maxNumSeqs",        1,     4096,    false, false, true,  false, 0, nullptr};
const param_limit k_max_num_batched_tokens = {"maxNumBatchedTokens", 1, i32_max, false, false, true, false, 0, nullptr};
const param_limit k_chunked_prefill_size = {"chunkedPrefillSize", 1, i32_max, false, false, true, true, -1, "off"};
const param_limit k_num_speculative_tokens = {"numSpeculativeTokens", 1, 64, false, false, true, false, 0, nullptr};
const param_limit k_prompt_lookup = {"promptLookupMin / promptLookupMax", 1, 64, false, false, true, false, 0, nullptr};
const param_limit k_threads           = {"threads",           1,     1024,    false, false, true,  false, 0, nullptr};

const param_limit* const k_all_limits[] = {
    &k_temperature, &k_top_p, &k_top_k, &k_min_p, &k_repetition_penalty, &k_repeat_last_n, &k_presence_penalty,
    &k_frequency_penalty, &k_max_tokens, &k_min_tokens, &k_logprobs, &k_prompt_logprobs, &k_seed, &k_logit_bias, &k_max_model_len, &k_max_num_seqs,
    &k_max_num_batched_tokens, &k_chunked_prefill_size, &k_num_speculative_tokens, &k_prompt_lookup, &k_threads, nullptr};

bool in_range(const param_limit& l, double v) {
  if (std::isnan(v)) return false;
  if (l.has_special && v == l.special) return true;
  if (l.integer && v != std::floor(v)) return false;
  const bool lo_ok = l.lo_open ? v > l.lo : v >= l.lo;
  const bool hi_ok = l.hi_open ? v < l.hi : v <= l.hi;
  return lo_ok && hi_ok;
}

std::string range_text(const param_limit& l) {
  std::string r;
  if (std::isinf(l.hi)) {
    r = std::string(l.lo_open ? "> " : ">= ") + num(l.lo);
  } else if (l.integer && l.hi == i32_max) {
    r = ">= " + num(l.lo);
  } else {
    r = std::string("in ") + (l.lo_open ? "(" : "[") + num(l.lo) + ", " + num(l.hi) + (l.hi_open ? ")" : "]");
  }
  if (l.integer) r = "an integer " + r;
  if (l.has_special) r = num(l.special) + " (" + l.special_meaning + ") or " + r;
  return r;
}

std::string limit_refusal(const param_limit& l, double v) {
  if (in_range(l, v)) return "";
  std::ostringstream os;
  os << l.name << " must be " << range_text(l) << " (got " << v << ")";
  return os.str();
}

void check_limit(const param_limit& l, double v) {
  const std::string refusal = limit_refusal(l, v);
  if (!refusal.empty()) throw error(refusal);
}

}  // namespace spindle
