// The scheduler's view of one sequence: its token ids (prompt + generated) and how many of them have their
// KV written. It knows nothing about sampling, text or memory layout.
// Invariant (between steps): 0 <= num_computed_tokens < num_tokens(); a waiting sequence holds no KV blocks;
// a running one holds slots for at least num_computed_tokens tokens (and at most num_tokens()) and one
// recurrent-state slot (state_slot >= 0; -1 while waiting).
#pragma once
#include <cstdint>
#include <vector>

namespace spindle {

enum class sched_status : uint8_t { waiting, running };

struct sched_sequence {
  uint64_t id = 0;
  uint64_t arrival = 0;            // order of scheduler::add(); lower is older
  std::vector<int32_t> token_ids;  // prompt + generated
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // positions [0, num_computed_tokens) have KV written
  int32_t num_preemptions = 0;      // times this sequence lost its blocks and was recomputed
  int32_t num_cached_tokens = 0;    // prompt tokens found in the prefix cache at its first admission
  int32_t num_draft_tokens = 0;     // speculative drafts of the pending step (their slots are reserved)
  int32_t state_slot = -1;          // recurrent-state slot while running (state_slot_pool); -1 while waiting
  bool use_prefix_cache = true;     // false: always computed from position 0 (embeddings pooled over every row)
  // Prefix-cache namespace: cached blocks are shared only between sequences of one salt (0: the base model; a
  // LoRA adapter's KV differs for the same tokens)
  uint64_t cache_salt = 0;
  // Prompt logprobs: its prompt chunks get a logits row per token, so they count against the step's scored rows
  bool scores_prompt = false;
  // Chain hashes (block_manager::chain_hash from cache_salt) of the prompt's full blocks a later sequence could
  // take from the cache (up to an image placeholder); empty when prefix caching is off
  std::vector<uint64_t> prompt_block_hashes;
  // [begin, end) pairs of prompt positions no chunk may end inside (bidirectional image embeddings: each span's
  // queries must see its last row); sorted, disjoint, each at most max_num_batched_tokens long
  std::vector<int32_t> whole_spans;
  // A running prefill whose next chunk is a whole span that did not fit a step's budget: the next step schedules
  // it before the decodes (with the step's whole budget), so other work never starves it
  bool span_waiting = false;
  sched_status status = sched_status::waiting;

  int32_t num_tokens() const { return int32_t(token_ids.size()); }
  int32_t num_generated_tokens() const { return num_tokens() - num_prompt_tokens; }
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  bool scoring() const { return scores_prompt && num_computed_tokens + 1 < num_prompt_tokens; }
};

}  // namespace spindle
