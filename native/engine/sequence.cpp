// Postprocessing of each generated token: stop ids, detokenization, stop strings, length.
// Invariant: min_tokens suppresses EOG / stop ids (masked before sampling, so they cannot be drawn) and
// stop strings (not checked) until the output holds min_tokens tokens; the stop token's own text is never
// emitted (its id is reported in tokens and stop_token).
#include "engine/sequence.h"

#include <algorithm>

namespace spindle {

static bool contains(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

sequence::sequence(request r, const tokenizer& t, int32_t n_vocab_, int32_t max_model_len,
                   std::unique_ptr<output_constraint> constraint, const speculative_config& spec)
    : req(std::move(r)),
      tok(t),
      n_vocab(n_vocab_),
      drafts(spec, req.speculative && spec.ngram, req.speculative ? std::move(req.prediction) : std::vector<int32_t>{},
             req.speculative && spec.draft_model),
      smp_(req.params, n_vocab_, req.prompt),
      decoder_(t, req.params.skip_special),
      stops_(req.params.stop),
      constraint_(std::move(constraint)) {
  const int32_t room = max_model_len - int32_t(req.prompt.size());
  max_output = req.params.max_tokens < 0 ? room : std::min(req.params.max_tokens, room);
  if (!req.params.ignore_eos) {
    for (int32_t id : t.eog_ids()) {
      if (id >= 0 && id < n_vocab && !contains(min_tokens_mask_, id)) min_tokens_mask_.push_back(id);
    }
  }
  for (int32_t id : req.params.stop_token_ids) {
    if (!contains(min_tokens_mask_, id)) min_tokens_mask_.push_back(id);
  }
}

const std::vector<int32_t>& sequence::sampling_mask() const {
  static const std::vector<int32_t> no_mask;
  return int32_t(output.size()) < req.params.min_tokens ? min_tokens_mask_ : no_mask;
}

void sequence::sample_and_append(float* logits, request_output& out) {
  const bool want_logprobs = req.params.logprobs >= 0;
  if (want_logprobs) raw_logits_.assign(logits, logits + n_vocab);
  static const std::vector<int32_t> no_mask;
  int32_t token = 0;
  if (constraint_ && constraint_->active()) {
    // Draw first and check the draw; only a refused draw pays for the mask and is drawn again under it (as
    // llama.cpp does). Greedy, that is the masked argmax; sampled, the masked distribution (rejection sampling;
    // with top-k / top-p / min-p the first draw is truncated on the unmasked distribution, as in llama.cpp). The
    // draws do not depend on what the engine has cached, so a seeded request repeats exactly. End ids (EOG unless
    // ignore_eos, stop ids) pass the grammar only where it is complete.
    const std::vector<int32_t>& forbidden = sampling_mask();
    unmasked_logits_.assign(logits, logits + n_vocab);
    token = smp_.sample(logits, forbidden);
    if (!constraint_->allows(token, min_tokens_mask_, forbidden)) {
      std::copy(unmasked_logits_.begin(), unmasked_logits_.end(), logits);
      if (constraint_->apply(logits, n_vocab, min_tokens_mask_, forbidden) == 0) {
        if (constraint_->complete()) finish_with(finish_reason::stop, out);
        else fail("the grammar reached a dead end: no token of the vocabulary can continue the output", out);
        return;
      }
      token = smp_.sample(logits, no_mask);
    }
  } else {
    token = smp_.sample(logits, sampling_mask());
  }
  if (want_logprobs) out.logprobs.push_back(compute_logprobs(raw_logits_.data(), n_vocab, token, req.params.logprobs));
  append(token, out);
}

bool sequence::greedy_only() const {
  const sampling_params& p = req.params;
  const bool masked = int32_t(output.size()) < p.min_tokens && !min_tokens_mask_.empty();
  return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f && p.logit_bias.empty() && p.logprobs < 0 && !constraint_ && !masked;
}

bool sequence::plan_sample(sample_spec& spec, std::vector<logit_edit>& edits) {
  if (req.params.logprobs >= 0 || (constraint_ && constraint_->active())) return false;
  spec = smp_.plan(sampling_mask(), edits);
  return true;
}

void sequence::append(int32_t token, request_output& out) {
  const bool may_stop = int32_t(output.size()) >= req.params.min_tokens;
  output.push_back(token);
  smp_.accept(token);
  out.tokens.push_back(token);

  const bool stop_id = (!req.params.ignore_eos && tok.is_eog(token)) || contains(req.params.stop_token_ids, token);
  if (constraint_ && !constraint_->advance(token, stop_id && may_stop)) {
    fail(constraint_->error(), out);
    return;
  }
  if (stop_id && may_stop) {
    out.stop_token = token;
    finish_with(finish_reason::stop, out);
    return;
  }
  std::string piece = decoder_.push(token);
  if (int32_t(output.size()) >= req.params.min_tokens) {
    out.text += stops_.push(piece);
    if (stops_.stopped()) {
      out.stop_string = stops_.matched_string();
      finish = finish_reason::stop;
      return;
    }
  } else {
    out.text += piece;
  }
  if (int32_t(output.size()) >= max_output) finish_with(finish_reason::length, out);
}

void sequence::finish_with(finish_reason r, request_output& out) {
  std::string rest = drain_text();
  out.text += rest;
  if (stops_.stopped()) {  // the decoder's last bytes completed a stop string
    out.stop_string = stops_.matched_string();
    r = finish_reason::stop;
  }
  finish = r;
}

void sequence::fail(const std::string& why, request_output& out) {
  out.text += drain_text();
  out.error = why + " (after " + std::to_string(output.size()) + " output tokens)";
  finish = finish_reason::abort;
}

std::string sequence::drain_text() {
  std::string tail = decoder_.flush();
  std::string out;
  if (int32_t(output.size()) >= req.params.min_tokens) {
    out = stops_.push(tail);
  } else {
    out = tail;
  }
  return out + stops_.flush();
}

}  // namespace spindle
