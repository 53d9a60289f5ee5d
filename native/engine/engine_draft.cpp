// The speculative draft model: a smaller model with the target's vocabulary that proposes draft tokens.
// Invariant: the draft model's KV holds, in the same block slots, every position the target's holds (each chunk
// of the target's forward pass also runs through the draft, run_forward), so a sequence can draft from its
// first decode on, after preemption, recompute or a prefix-cache hit alike. Its proposals are greedy (argmax),
// which keeps verification exact (engine_step.cpp): a draft only ever changes speed.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/sampler.h"
#include "engine/sequence.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

void engine::check_draft_model(const model& target, const model& draft) const {
  const tokenizer& a = target.vocab();
  const tokenizer& b = draft.vocab();
  if (draft.state_bytes_per_slot() > 0) {
    throw error("the draft model (" + draft.hparams().arch + ") keeps recurrent state; draft models must be "
                "attention-only (llama, qwen2, qwen3, qwen3moe) for now");
  }
  if (a.n_vocab() != b.n_vocab()) {
    throw error("the draft model's vocabulary has " + std::to_string(b.n_vocab()) + " tokens, the model's " +
                std::to_string(a.n_vocab()) + ": a draft model must use the same tokenizer");
  }
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    if (a.token_text(id) != b.token_text(id)) {
      throw error("the draft model's token " + std::to_string(id) + " is '" + b.token_text(id) + "', the model's is '" +
                  a.token_text(id) + "': a draft model must use the same tokenizer");
    }
  }
  if (draft.hparams().n_vocab < a.n_vocab()) {
    throw error("the draft model's output has " + std::to_string(draft.hparams().n_vocab) + " rows, fewer than its " +
                std::to_string(a.n_vocab()) + " tokens");
  }
}

// Chunks whose drafter asked the draft model hold placeholder drafts of the length wanted; draft step j forwards
// each such sequence's token at position first_pos + j (its last token, then its own proposals) into the slots
// the scheduler reserved for the drafts, and takes the argmax as draft token j.
void engine::run_draft_model(schedule_output& so) {
  if (!draft_) return;
  std::vector<scheduled_chunk*> drafting;
  int32_t steps = 0;
  for (scheduled_chunk& c : so.chunks) {
    if (c.draft.empty() || seqs_.at(c.seq_id)->drafts.last_source() != drafter::source::model) continue;
    drafting.push_back(&c);
    steps = std::max(steps, int32_t(c.draft.size()));
  }
  if (drafting.empty()) return;
  const int64_t rows = draft_->hparams().n_vocab;
  std::vector<int32_t> next(drafting.size());  // the token each sequence forwards in this draft step
  for (size_t i = 0; i < drafting.size(); ++i) next[i] = drafting[i]->seq->token_ids.back();
  std::vector<batch_sequence> batch;
  std::vector<size_t> who;
  for (int32_t j = 0; j < steps; ++j) {
    batch.clear();
    who.clear();
    for (size_t i = 0; i < drafting.size(); ++i) {
      const scheduled_chunk& c = *drafting[i];
      if (j >= int32_t(c.draft.size())) continue;
      const std::vector<int32_t>& table = sched_->blocks().block_table(c.seq_id);
      batch_sequence b;
      b.tokens = &next[i];
      b.n_tokens = 1;
      b.first_pos = c.first_pos + j;
      b.block_table = table.data();
      b.n_table = int32_t(table.size());
      b.n_logits = 1;
      batch.push_back(b);
      who.push_back(i);
    }
    if (int64_t(draft_logits_.size()) < int64_t(batch.size()) * rows) draft_logits_.resize(batch.size() * size_t(rows));
    draft_->forward_batch(batch, *draft_kv_, draft_logits_.data());
    for (size_t r = 0; r < who.size(); ++r) {
      const int32_t token = argmax(draft_logits_.data() + int64_t(r) * rows, n_vocab_);
      drafting[who[r]]->draft[size_t(j)] = token;
      next[who[r]] = token;
    }
  }
}

}  // namespace spindle
