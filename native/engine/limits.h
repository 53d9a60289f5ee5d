// The one table of request and engine limits. The engine's checks (request.cpp), the addon's conversions
// (napi/engine_wrap_convert.cpp) and the TypeScript normalizers (lib/sampling-params.ts, lib/engine-options.ts,
// which read it from the addon's `limits` export) all use these entries, and every error message states a range
// with range_text() of the same entry, so a message can never disagree with its check.
#pragma once
#include <cstdint>
#include <string>

namespace spindle {

// A numeric parameter's allowed values: [lo, hi] (an open end excludes the bound), integers only when
// `integer`, plus `special` (when has_special) as one extra allowed value with its own meaning.
struct param_limit {
  const char* name;  // camelCase, as users write it (the TypeScript layer maps other spellings to it)
  double lo, hi;
  bool lo_open, hi_open;
  bool integer;
  bool has_special;
  double special;
  const char* special_meaning;  // e.g. "off"; shown in range_text
};

// "an integer in [1, 4096]", "in (0, 1]", ">= 0", "-1 (off) or an integer >= 1", ...
std::string range_text(const param_limit& l);
bool in_range(const param_limit& l, double v);
// "" when v is allowed, else "<name> must be <range_text> (got <v>)".
std::string limit_refusal(const param_limit& l, double v);
// Throws spindle::error with limit_refusal's message when v is outside.
void check_limit(const param_limit& l, double v);

// Sampling parameters (request.h's sampling_params).
extern const param_limit k_temperature, k_top_p, k_top_k, k_min_p, k_repetition_penalty, k_repeat_last_n,
    k_presence_penalty, k_frequency_penalty, k_max_tokens, k_min_tokens, k_logprobs, k_prompt_logprobs, k_seed,
    k_logit_bias;  // each value of the logit_bias map
// Engine options (engine.h's engine_options; threads and maxModelLen of the addon's options).
extern const param_limit k_max_model_len, k_max_num_seqs, k_max_num_batched_tokens, k_chunked_prefill_size,
    k_threads, k_num_speculative_tokens,
    k_prompt_lookup;  // promptLookupMin and promptLookupMax (speculative n-gram sizes)

// Counts.
constexpr int32_t max_stop_strings = 16;
constexpr int32_t max_stop_string_bytes = 256;
constexpr int32_t max_stop_token_ids = 1024;
constexpr int32_t max_logprobs = 20;
constexpr int32_t max_logit_bias = 1024;       // entries of a logit_bias map
constexpr int32_t max_grammar_triggers = 16;
constexpr int32_t max_grammar_bytes = 1 << 22; // GBNF text
constexpr int32_t max_prediction_tokens = 1 << 20;  // token ids of a request's prediction

// Every param_limit above, for the addon's export; null-terminated.
extern const param_limit* const k_all_limits[];

}  // namespace spindle
