// Validation of requests before they reach the engine thread.
// Invariant: every message names the field (camelCase, as users write it) and the allowed range.
#include "engine/request.h"

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

void validate_sampling_params(const sampling_params& p) {
  check_limit(k_temperature, p.temperature);
  check_limit(k_top_p, p.top_p);
  check_limit(k_top_k, p.top_k);
  check_limit(k_min_p, p.min_p);
  check_limit(k_repetition_penalty, p.repetition_penalty);
  check_limit(k_repeat_last_n, p.repeat_last_n);
  check_limit(k_presence_penalty, p.presence_penalty);
  check_limit(k_frequency_penalty, p.frequency_penalty);
  if (p.max_tokens != -1) check_limit(k_max_tokens, p.max_tokens);  // -1: until the context is full
  check_limit(k_min_tokens, p.min_tokens);
  if (p.max_tokens != -1 && p.min_tokens > p.max_tokens) {
    throw error("minTokens (" + std::to_string(p.min_tokens) + ") must not exceed maxTokens (" +
                std::to_string(p.max_tokens) + ")");
  }
  if (p.logprobs != -1) check_limit(k_logprobs, p.logprobs);  // -1: none
  if (p.prompt_logprobs != -1) check_limit(k_prompt_logprobs, p.prompt_logprobs);
  if (p.stop.size() > size_t(max_stop_strings)) {
    throw error("stop must hold at most " + std::to_string(max_stop_strings) + " strings (got " +
                std::to_string(p.stop.size()) + ")");
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) throw error("stop strings must not be empty");
    if (s.size() > size_t(max_stop_string_bytes)) {
      throw error("each stop string must be at most " + std::to_string(max_stop_string_bytes) + " bytes (got " +
                  std::to_string(s.size()) + ")");
    }
  }
  if (p.stop_token_ids.size() > size_t(max_stop_token_ids)) {
    throw error("stopTokenIds must hold at most " + std::to_string(max_stop_token_ids) + " ids (got " +
                std::to_string(p.stop_token_ids.size()) + ")");
  }
}

static void validate_constraints(const sampling_params& p) {
  if (p.grammar.size() > size_t(max_grammar_bytes)) {
    throw error("grammar must be at most " + std::to_string(max_grammar_bytes) + " bytes (got " +
                std::to_string(p.grammar.size()) + ")");
  }
  if (p.grammar_triggers.size() > size_t(max_grammar_triggers)) {
    throw error("grammarTriggers must hold at most " + std::to_string(max_grammar_triggers) + " triggers (got " +
                std::to_string(p.grammar_triggers.size()) + ")");
  }
  if (!p.grammar_triggers.empty() && p.grammar.empty()) throw error("grammarTriggers need a grammar");
  for (const grammar_trigger& t : p.grammar_triggers) {
    if (t.text.empty()) throw error("grammar trigger texts must not be empty");
    if (t.text.size() > size_t(max_stop_string_bytes)) {
      throw error("each grammar trigger must be at most " + std::to_string(max_stop_string_bytes) + " bytes");
    }
  }
  const reasoning_block& gr = p.grammar_reasoning;
  if (!gr.start_tag.empty() || !gr.end_tag.empty() || gr.in_block) {
    if (p.grammar_triggers.empty()) throw error("grammarReasoning applies to a lazy grammar (one with grammarTriggers)");
    if (gr.start_tag.empty() || gr.end_tag.empty()) throw error("grammarReasoning needs both startTag and endTag");
    if (gr.start_tag.size() > size_t(max_stop_string_bytes) || gr.end_tag.size() > size_t(max_stop_string_bytes)) {
      throw error("grammarReasoning tags must be at most " + std::to_string(max_stop_string_bytes) + " bytes");
    }
  }
  if (p.logit_bias.size() > size_t(max_logit_bias)) {
    throw error("logitBias must hold at most " + std::to_string(max_logit_bias) + " entries (got " +
                std::to_string(p.logit_bias.size()) + ")");
  }
  for (const auto& [id, bias] : p.logit_bias) check_limit(k_logit_bias, bias);
}

void validate_request(const request& r, int32_t n_vocab, int32_t max_model_len) {
  validate_constraints(r.params);
  validate_sampling_params(r.params);
  if (r.prompt.empty()) throw error("the prompt is empty (it must hold at least one token)");
  if (r.params.prompt_logprobs != -1 && !r.images.empty()) {
    throw error("promptLogprobs cannot be combined with images (an image's positions have no token to score)");
  }
  if (r.pooling != pooling_type::none && r.prompt.size() > size_t(max_model_len)) {
    throw error("the input has " + std::to_string(r.prompt.size()) + " tokens; maxModelLen is " +
                std::to_string(max_model_len));
  }
  if (r.pooling == pooling_type::none && r.prompt.size() >= size_t(max_model_len)) {
    throw error("the prompt has " + std::to_string(r.prompt.size()) + " tokens; maxModelLen is " +
                std::to_string(max_model_len) + " and at least one generated token must fit");
  }
  for (size_t i = 0; i < r.prompt.size(); ++i) {
    int32_t id = r.prompt[i];
    if (id == -1 && !r.images.empty()) continue;  // an image placeholder: validate_request_images checks it
    if (id < 0 || id >= n_vocab) {
      throw error("prompt token id " + std::to_string(id) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
    }
  }
  for (const auto& [id, bias] : r.params.logit_bias) {
    if (id < 0 || id >= n_vocab) {
      throw error("logitBias token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(n_vocab) + ")");
    }
  }
  if (r.prediction.size() > size_t(max_prediction_tokens)) {
    throw error("prediction must hold at most " + std::to_string(max_prediction_tokens) + " tokens (got " +
                std::to_string(r.prediction.size()) + ")");
  }
  for (int32_t id : r.prediction) {
    if (id < 0 || id >= n_vocab) {
      throw error("prediction token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(n_vocab) + ")");
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
