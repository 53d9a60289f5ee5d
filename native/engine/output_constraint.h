// Grammar-constrained output for one sequence: a matcher over the request's grammar, optionally lazy (free
// text until a trigger string appears in the output, then the grammar from the trigger's first byte on). A lazy
// grammar of a reasoning model looks for its triggers only in the answer, after the thinking block
// (reasoning_block): a trigger written while thinking starts nothing.
// Invariant: while active, a token is allowed exactly when the matcher accepts its bytes, and an end token
// (EOG, stop id) exactly when the output so far is a complete sentence; every sampled token is fed to the
// matcher, so its state is always the output since the grammar started. Per request, so batches never mix.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar_token_cache.h"
#include "engine/request.h"

namespace spindle {

class output_constraint {
 public:
  // No triggers: the grammar holds from the first output token. reasoning (lazy only): where the answer starts.
  output_constraint(std::shared_ptr<grammar_token_cache> cache, std::vector<grammar_trigger> triggers,
                    reasoning_block reasoning = {});

  bool active() const { return matcher_ != nullptr; }
  bool complete() const { return matcher_ && matcher_->is_complete(); }

  // Active only. Sets logits [n_vocab] of every token the grammar does not allow to -inf; `end_ids` stay as
  // they were where the grammar is complete, unless listed in `forbidden`. Returns how many ids remain.
  int32_t apply(float* logits, int32_t n_vocab, const std::vector<int32_t>& end_ids, const std::vector<int32_t>& forbidden);

  // Active only. Whether `token` may come next, exactly as apply() would decide it (the sequence draws first
  // and masks only when the draw is refused).
  bool allows(int32_t token, const std::vector<int32_t>& end_ids, const std::vector<int32_t>& forbidden) const;

  // After `token` was appended (`is_end`: an EOG / stop id, which has no bytes for the grammar). Returns false
  // when the grammar cannot take the token (error() says why): a lazy trigger whose token carries text the
  // grammar refuses, or a token the mask did not allow (tests feed tokens directly).
  bool advance(int32_t token, bool is_end);
  const std::string& error() const { return error_; }

 private:
  bool start_at_trigger();  // looks for a trigger in pending_; on a match starts the matcher there
  bool look_for_triggers(const std::string& bytes);  // answer bytes: pending_ and the trigger search
  // Reasoning bytes before the answer: false while the block goes on; true once the answer starts (its first
  // bytes are then in `answer`).
  bool past_reasoning(const std::string& bytes, std::string& answer);

  std::shared_ptr<grammar_token_cache> cache_;
  std::vector<grammar_trigger> triggers_;
  std::unique_ptr<grammar_matcher> matcher_;  // null while waiting for a trigger
  reasoning_block reasoning_;
  enum class gate : uint8_t { answer, undecided, thinking } gate_ = gate::answer;  // where the output is (lazy only)
  std::string gate_buf_;       // output bytes not yet known to be in the answer (the tail an end tag may start in)
  std::string pending_;        // output bytes not yet ruled out as the start of a trigger (lazy only)
  bool only_space_ = true;     // the output before pending_ is whitespace only (for at_start triggers)
  size_t searched_ = 0;        // pending_ positions already known not to start a trigger
  std::vector<uint64_t> allowed_;  // scratch token bitset
  std::string error_;
};

}  // namespace spindle
