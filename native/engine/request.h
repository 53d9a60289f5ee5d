// What a request asks for (prompt ids + sampling parameters) and what the engine reports back per step.
// Invariant: a request reaches the engine thread only after validate_request() accepted it, so the loop can
// index the vocabulary with every prompt id and stop id without further checks.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <memory>
#include <utility>

#include "engine/grammar.h"
#include "engine/limits.h"
#include "vision/image_resize.h"

namespace spindle {

enum class finish_reason : uint8_t { none, stop, length, abort };

// How an embedding request pools its prompt's hidden states (after the output norm), llama.cpp's
// LLAMA_POOLING_TYPE numbering: none = a generation request.
enum class pooling_type : uint8_t { none = 0, mean = 1, cls = 2, last = 3 };
const char* finish_reason_name(finish_reason r);  // "stop" | "length" | "abort" ("" for none)

// Text that switches a lazy grammar on: the grammar then matches the output from the trigger's first byte.
struct grammar_trigger {
  std::string text;      // non-empty
  bool at_start = false; // only when nothing but whitespace precedes it in the output
};

// A reasoning model's thinking block before its answer (lazy grammars only): triggers written inside the block are
// not calls, so a lazy grammar looks for its triggers only in the answer, which starts after end_tag. in_block: the
// output starts inside the block (the prompt opened it); else the block is the output's own, when it begins (after
// whitespace) with start_tag. An at_start trigger is then at the start of the answer.
struct reasoning_block {
  std::string start_tag;  // e.g. "<think>"; empty: no reasoning block (the triggers count from the first token)
  std::string end_tag;    // e.g. "</think>"
  bool in_block = false;
};

// Ranges: engine/limits.h (one entry per field).
struct sampling_params {
  float temperature = 1.0f;        // >= 0; 0 = greedy
  float top_p = 1.0f;              // (0, 1]
  int32_t top_k = -1;              // <= 0 disables
  float min_p = 0.0f;              // [0, 1]
  float repetition_penalty = 1.0f; // > 0, over prompt + output tokens (llama.cpp semantics)
  int32_t repeat_last_n = -1;      // tokens the repetition penalty looks back: -1 all, 0 none, N the last N
  float presence_penalty = 0.0f;   // [-2, 2], over output tokens (OpenAI semantics)
  float frequency_penalty = 0.0f;  // [-2, 2]
  int32_t max_tokens = -1;         // -1 = until the context (max_model_len) is full; else >= 1
  int32_t min_tokens = 0;          // EOG / stop ids / stop strings ignored before this many output tokens
  std::vector<std::string> stop;   // stop strings, never emitted
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool has_seed = false;
  uint32_t seed = 0;
  int32_t logprobs = -1;           // -1 = none; else 0..max_logprobs alternatives per token
  // -1 = none; else the prompt's logprobs (vLLM's prompt_logprobs): for each prompt token after the first, its
  // logprob given the tokens before it and 0..max_logprobs alternatives (raw logits, as logprobs)
  int32_t prompt_logprobs = -1;
  std::string grammar;             // GBNF the output must match; empty = unconstrained
  std::vector<grammar_trigger> grammar_triggers;       // non-empty: the grammar is lazy (see grammar_trigger)
  reasoning_block grammar_reasoning;                 // lazy grammars: where the answer (and the triggers) start
  std::vector<std::pair<int32_t, float>> logit_bias;   // (id, added to its logit), OpenAI's logit_bias
  bool skip_special = true;        // control tokens add no text (their text is shown, and grammar-visible, if false)
};

// Throws spindle::error naming the field and the allowed range (range_text of its limits.h entry).
void validate_sampling_params(const sampling_params& p);

// An image of a request (vision models): its decoded pixels and where its part of the prompt starts; it owns
// the k_embedding_token placeholders from there up to the next image's position (vision_model::layout gives the
// canonical positions: marker ids and one placeholder per embedding).
struct request_image {
  rgb_image pixels;
  int32_t position = 0;
};

struct request {
  uint64_t id = 0;
  std::vector<int32_t> prompt;  // token ids; k_embedding_token (-1) at image placeholders
  std::vector<request_image> images;  // in prompt order, not overlapping
  sampling_params params;
  std::shared_ptr<const grammar> compiled_grammar;  // params.grammar parsed (null: parse when the request starts)
  // Speculative decoding: token ids the output is expected to repeat (OpenAI's Predicted Outputs), drafted and
  // verified; empty: none. speculative false: no drafts of any kind (the engine's n-gram method included).
  std::vector<int32_t> prediction;
  bool speculative = true;
  // != none: an embedding request: the prompt is computed, nothing is generated, and the finish output carries
  // the pooled hidden state (request_output::embedding); sampling parameters are not used.
  pooling_type pooling = pooling_type::none;
  // A LoRA adapter: an engine adapter slot (engine_options::loras first, then runtime loads; -1: the base model).
  int32_t lora = -1;
  // vLLM's cache_salt: a request reuses cached prefix blocks only of requests with the same salt (and adapter).
  std::string cache_salt;
  std::chrono::steady_clock::time_point submitted{};  // when engine::add took it (the start of its queue time)
};

// Throws spindle::error when the prompt is empty, too long for max_model_len, or holds an id (prompt,
// stop_token_ids, logit_bias, prediction) outside [0, n_vocab); also runs validate_sampling_params.
void validate_request(const request& r, int32_t n_vocab, int32_t max_model_len);

// Logprob record of one generated token, computed from the raw model logits (before penalties / masks).
struct token_logprob {
  int32_t id = 0;
  float logprob = 0;            // log softmax of the chosen token
  int32_t rank = 0;             // 1 = most likely
  std::vector<int32_t> top_ids; // [logprobs] most likely ids, descending
  std::vector<float> top_logprobs;
};

// Everything new about one request in one engine step.
struct request_output {
  uint64_t id = 0;
  std::vector<int32_t> tokens;          // new token ids this step
  std::string text;                     // new text this step (complete UTF-8, stop strings held back)
  std::vector<token_logprob> logprobs;  // one per new token when requested
  // With the first token, when requested: one per prompt token after the first (entry i: prompt token i + 1)
  std::vector<token_logprob> prompt_logprobs;
  finish_reason finish = finish_reason::none;
  std::string stop_string;              // the stop string that matched (finish == stop)
  int32_t stop_token = -1;              // the EOG / stop id that matched (finish == stop)
  std::string error;                    // non-empty when the request failed inside the engine
  int32_t cached_tokens = 0;            // prompt tokens whose KV came from the prefix cache (OpenAI's
                                        // usage.prompt_tokens_details.cached_tokens); set with each sampled token
  int32_t draft_tokens = 0;             // speculative draft tokens verified this step
  int32_t accepted_draft_tokens = 0;    // of those, accepted (their tokens are among `tokens`)
  // The request's phases (vLLM's request_queue_time / prefill_time / decode_time / inference_time), in seconds, -1
  // when not known this step: queue (submitted until its first scheduled step began) and prefill (that step's start
  // until its first token) with the first token; decode (first token until the last) and inference (prefill +
  // decode) with the finish.
  double queue_seconds = -1, prefill_seconds = -1, decode_seconds = -1, inference_seconds = -1;
  // Embedding requests, with the finish: the pooled hidden state [n_embd] (not normalized).
  std::vector<float> embedding;
};

}  // namespace spindle
