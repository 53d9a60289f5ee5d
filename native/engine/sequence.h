// One request as the engine thread runs it: sampler, detokenizer and stop conditions (its KV blocks and token
// ids live in the scheduler).
// Invariant: after append(), `finish` says whether the sequence is done (a grammar dead end finishes it as
// abort with out.error set); a finished sequence has emitted all
// of its text except stop strings (and what followed them), and its output never exceeds max_output tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/drafter.h"
#include "engine/output_constraint.h"
#include "engine/request_images.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

struct sequence {
  // n_vocab: ids that may be sampled, the first n_vocab entries of each logits row (a row may be longer when
  // the model has padding rows the tokenizer does not know); max_model_len bounds prompt + output tokens.
  // constraint: the request's grammar state (null when unconstrained); spec: the engine's speculative decoding
  // (drafts also come from req.prediction; none when req.speculative is false).
  sequence(request r, const tokenizer& tok, int32_t n_vocab, int32_t max_model_len,
           std::unique_ptr<output_constraint> constraint = nullptr, const speculative_config& spec = {});

  // Samples the next token from `logits` [n_vocab] (modified in place), appends it and records the new
  // token, text, logprobs and finish in `out`.
  void sample_and_append(float* logits, request_output& out);
  // Appends an already chosen token (tests, the sampling path above, and greedy tokens the model chose).
  void append(int32_t token, request_output& out);
  // Whether sample_and_append would take the plain argmax of the logits (temperature 0, no penalty, bias, mask,
  // grammar or logprobs) for the next token: the model may then choose it (batch_sequence::argmax).
  bool greedy_only() const;
  // The next token's sample_spec (backend/sample_rows.h), for the model to sample it where the logits are
  // (batch_sequence::sample): false, planning nothing, when the request wants logprobs or an active grammar
  // constrains it (sample_and_append then samples from the downloaded row). Draws the token's generator value
  // now, as sample_and_append would; the chosen token then goes to append. edits: storage the spec points into.
  bool plan_sample(sample_spec& spec, std::vector<logit_edit>& edits);
  // Positions the KV cache must hold: prompt + output - 1 (the last sampled token is never forwarded).
  int64_t kv_capacity() const { return int64_t(req.prompt.size()) + max_output - 1; }
  bool finished() const { return finish != finish_reason::none; }

  request req;
  const tokenizer& tok;
  int32_t n_vocab;
  int32_t max_output;                       // tokens this sequence may generate (maxTokens, context room)
  std::vector<int32_t> output;              // generated ids
  finish_reason finish = finish_reason::none;
  std::unique_ptr<request_images> images;   // the request's images and encoder cache (null: text only)
  drafter drafts;                           // speculative decoding's proposals for this sequence
  // Phases (request_output's queue / prefill / decode seconds): the start of the first step that scheduled it
  // and the time of its first token (epoch: not yet).
  std::chrono::steady_clock::time_point scheduled_at{}, first_token_at{};
  // Embedding requests (req.pooling != none): the pooled hidden rows so far ([n_embd] sums for mean pooling, the
  // chosen row for cls / last) and how many rows were added.
  std::vector<double> pooled;
  int64_t pooled_rows = 0;
  bool embeds() const { return req.pooling != pooling_type::none; }
  // Prompt logprobs (req.params.prompt_logprobs >= 0): entry p - 1 for prompt position p >= 1, filled as the
  // prompt's chunks are computed (again after a preemption) and handed out with the first token.
  std::vector<token_logprob> prompt_lps;
  bool prompt_lps_sent = false;
  // The LoRA adapter the request runs with (req.lora's, taken when it started; an unload leaves it to finish).
  std::shared_ptr<const lora_adapter> lora;
  bool wants_prompt_logprobs() const { return req.params.prompt_logprobs >= 0 && !prompt_lps_sent; }

 private:
  void finish_with(finish_reason r, request_output& out);
  void fail(const std::string& why, request_output& out);  // ends the request with out.error
  std::string drain_text();  // decoder + stop-checker leftovers at the end

  sampler smp_;
  incremental_decoder decoder_;
  stop_checker stops_;
  std::unique_ptr<output_constraint> constraint_;
  std::vector<int32_t> min_tokens_mask_;  // distinct EOG (unless ignore_eos) and stop ids
  // The ids masked for the next token: min_tokens_mask_ while the output is shorter than min_tokens, else none.
  const std::vector<int32_t>& sampling_mask() const;
  std::vector<float> raw_logits_;         // copy for logprobs, [n_vocab] when requested
  std::vector<float> unmasked_logits_;    // [n_vocab] kept while a draw is checked against the grammar
};

}  // namespace spindle
