// Draft tokens for speculative decoding: prompt lookup (n-gram: the tokens that followed the latest earlier
// occurrence of the sequence's last n tokens), the request's prediction (OpenAI's Predicted Outputs: token ids the
// output is expected to repeat, followed position by position and re-found by n-gram lookup after an edit), and a
// draft model (the engine runs it; propose() only says how many tokens to ask it for). A prediction goes first,
// then n-gram lookup, then the draft model. The target model verifies every draft (engine_step.cpp), so a draft only ever
// changes speed, never tokens.
// Invariant: propose() returns at most max_draft ids and depends only on this sequence's own tokens and history,
// so speculation keeps the engine batch-invariant. Drafts that keep missing cost little: after a step with no
// draft accepted the sequence waits 1, 2, 4 .. 32 decodes before it drafts again, and each draft is at most one
// token longer than what the last one got accepted (doubling again after a fully accepted one, from 4 at first).
#pragma once
#include <cstdint>
#include <vector>

namespace spindle {

// Engine-wide speculative decoding (vLLM's speculative_config, SGLang's --speculative-*).
struct speculative_config {
  bool ngram = false;                 // method "ngram": prompt lookup for every request
  bool draft_model = false;           // a draft model proposes when nothing else does (engine_options::draft_loader)
  int32_t num_speculative_tokens = 16; // draft tokens per step at most (also for predictions)
  int32_t prompt_lookup_min = 2;      // n-gram sizes tried, longest first
  int32_t prompt_lookup_max = 4;
};

// Searches tokens[0, n - m) for the latest occurrence of the last m tokens (m from max_n down to min_n, so the
// longest match wins) that is followed by at least one token; returns the position right after that occurrence
// and its size in *matched, or -1. O(n * max_n).
int64_t ngram_find(const int32_t* tokens, int64_t n, int32_t min_n, int32_t max_n, int32_t* matched);

// One sequence's drafting state.
class drafter {
 public:
  // prediction: token ids the output is expected to repeat (empty: none); ngram: prompt lookup on; draft_model:
  // the engine's draft model may propose.
  drafter(const speculative_config& cfg, bool ngram, std::vector<int32_t> prediction, bool draft_model = false);

  enum class source : uint8_t { none, prediction, ngram, model };
  bool active() const { return ngram_ || model_ || !prediction_.empty(); }
  // Draft for the sequence `tokens` (prompt + output, the last one not yet forwarded), of which the first
  // n_prompt are the prompt. Fills `out` with at most max_draft ids; empty: decode plainly this step. When the
  // draft model is to propose, `out` holds that many placeholder zeros for the engine to replace (last_source()).
  void propose(const int32_t* tokens, int64_t n_tokens, int64_t n_prompt, int32_t max_draft, std::vector<int32_t>& out);
  source last_source() const { return last_; }
  // The verification of the last proposal: `accepted` of its `proposed` drafts were kept, then one more token
  // was sampled (emitted = accepted + 1 tokens appended to the sequence).
  void record(int32_t proposed, int32_t accepted);

 private:
  bool propose_prediction(const int32_t* output, int64_t n_output, int32_t max_draft, std::vector<int32_t>& out);

  speculative_config cfg_;
  bool ngram_;
  bool model_;
  source last_ = source::none;
  std::vector<int32_t> prediction_;
  int64_t pred_next_ = 0;  // index in prediction_ of the token expected after the output so far
  int32_t limit_;          // draft length allowed next (adapts to acceptance)
  int32_t backoff_ = 0;    // decodes to wait after the last miss
  int32_t wait_ = 0;       // decodes left before drafting again
};

}  // namespace spindle
