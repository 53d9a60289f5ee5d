// Validation of requests before they reach the engine thread.
// Invariant: every message names the field (camelCase, as users write it) and the allowed range.
#include "engine/request.h"

#include <cmath>
#include <sstream>
#include <string>

#include "common/error.h"

namespace spindle {

const char* finish_reason_name(finish_reason r) {
  switch (r) {
    case finish_reason::stop: return "stop";
    case finish_reason::length: return "length";
    case finish_reason::abort: return "abort";
    case finish_reason::none: break;
  }
  return "";
}

static void check_range(const char* field, double v, bool ok, const char* range) {
  if (!std::isfinite(v) || !ok) {
    std::ostringstream os;
    os << field << " must be " << range << " (got " << v << ")";
    throw error(os.str());
  }
}

void validate_sampling_params(const sampling_params& p) {
  check_range("temperature", p.temperature, p.temperature >= 0, ">= 0");
  check_range("topP", p.top_p, p.top_p > 0 && p.top_p <= 1, "in (0, 1]");
  check_range("topK", p.top_k, p.top_k >= -1, "-1, 0 (disabled) or >= 1");
  check_range("minP", p.min_p, p.min_p >= 0 && p.min_p <= 1, "in [0, 1]");
  check_range("repetitionPenalty", p.repetition_penalty, p.repetition_penalty > 0, "> 0");
  check_range("presencePenalty", p.presence_penalty, p.presence_penalty >= -2 && p.presence_penalty <= 2,
              "in [-2, 2]");
  check_range("frequencyPenalty", p.frequency_penalty, p.frequency_penalty >= -2 && p.frequency_penalty <= 2,
              "in [-2, 2]");
  check_range("maxTokens", p.max_tokens, p.max_tokens == -1 || p.max_tokens >= 1, ">= 1");
  check_range("minTokens", p.min_tokens, p.min_tokens >= 0, ">= 0");
  if (p.max_tokens != -1 && p.min_tokens > p.max_tokens) {
    throw error("minTokens (" + std::to_string(p.min_tokens) + ") must not exceed maxTokens (" +
                std::to_string(p.max_tokens) + ")");
  }
  check_range("logprobs", p.logprobs, p.logprobs >= -1 && p.logprobs <= max_logprobs, "in [0, 20]");
  if (p.stop.size() > size_t(max_stop_strings)) {
    throw error("stop must hold at most 16 strings (got " + std::to_string(p.stop.size()) + ")");
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) throw error("stop strings must not be empty");
    if (s.size() > size_t(max_stop_string_bytes)) {
      throw error("each stop string must be at most 256 bytes (got " + std::to_string(s.size()) + ")");
    }
  }
  if (p.stop_token_ids.size() > size_t(max_stop_token_ids)) {
    throw error("stopTokenIds must hold at most 1024 ids (got " + std::to_string(p.stop_token_ids.size()) + ")");
  }
}

void validate_request(const request& r, int32_t n_vocab, int32_t max_model_len) {
  validate_sampling_params(r.params);
  if (r.prompt.empty()) throw error("the prompt is empty (it must hold at least one token)");
  if (r.prompt.size() >= size_t(max_model_len)) {
    throw error("the prompt has " + std::to_string(r.prompt.size()) + " tokens; maxModelLen is " +
                std::to_string(max_model_len) + " and at least one generated token must fit");
  }
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    int32_t id = r.prompt[i];
    if (id < 0 || id >= n_vocab) {
      throw error("prompt token id " + std::to_string(id) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  for (int32_t id : r.params.stop_token_ids) {
    if (id < 0 || id >= n_vocab) {
      throw error("stopTokenIds entry " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(n_vocab) + ")");
    }
  }
}

}  // namespace spindle
