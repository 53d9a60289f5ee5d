// The scheduler: one rule, no modes. Each step has a token budget (max_num_batched_tokens) and a cap on
// sequences holding KV (max_num_seqs). Running sequences that need exactly one token (decodes) go first,
// oldest first; the rest of the budget goes to prompts, a chunk at a time: first running sequences whose
// prompt (or recompute) is partly done, oldest first, then the waiting queue from its front. A waiting
// sequence is admitted only if its chunk's blocks are free (it never preempts) and no preemption happened
// this step; the first one that does not fit stops admission (strict arrival order).
// When a running sequence's chunk lacks KV blocks, the newest running sequence is preempted (blocks freed,
// num_computed_tokens reset to 0, pushed to the front of the waiting queue, later recomputed over prompt +
// generated tokens) until the chunk fits or the sequence itself was the one preempted.
//
// Invariants (check_invariants() verifies them): running sequences are sorted by arrival and reserve KV
// slots for at least num_computed_tokens and at most num_tokens tokens; waiting ones hold none; running.size() <= max_num_seqs; a step's
// chunks sum to at most max_num_batched_tokens, hold each sequence at most once, and start at the sequence's
// num_computed_tokens; a sequence whose remaining tokens are all in one chunk samples exactly one token.
// Progress: while any sequence is unfinished, schedule() returns a non-empty step (the oldest running
// sequence always fits, since the cache holds one max_model_len sequence and it is never the newest victim
// while others run). The scheduler never touches memory layout: the runner reads block tables from blocks().
// Prefix caching (config.enable_prefix_caching): on admission a sequence's computed tokens start at its cached
// prefix (shared blocks); after each step the full blocks of every chunk are committed. Preemption and finish
// free blocks into the cache, so a recomputed sequence finds its own blocks again while they are not evicted.
// Speculative decoding (set_drafter): a decode chunk may carry draft tokens after the sequence's last token; the
// chunk forwards all of them (n_tokens = 1 + drafts, slots reserved for each) and the runner verifies them in
// order. postprocess() appends the accepted drafts and the token sampled after them, counts only their positions
// as computed and gives back the slots of rejected drafts (block_manager::truncate), so the invariants above hold
// between steps. A draft is dropped (plain decode) when its slots do not fit; it never preempts anyone.
// Recurrent state: a sequence holds one of max_num_seqs state slots exactly while it is running (taken on
// admission, given back on preemption, finish and abort), so admission never waits for a slot; a preempted
// sequence is recomputed from position 0, where the model starts its recurrent state afresh.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sched_sequence.h"
#include "engine/state_slots.h"

namespace spindle {

struct scheduler_config {
  int32_t max_num_batched_tokens = 2048;  // tokens per step, decodes + prefill chunks
  int32_t max_num_seqs = 256;             // sequences holding KV at once (decoding or partly prefilled)
  int32_t chunked_prefill_size = 512;     // prompt tokens per sequence per step; -1 = never split a prompt
  int32_t max_model_len = 0;              // tokens per sequence, prompt + generated; > 0
  // Automatic prefix caching: an admitted sequence starts from the longest run of cached full blocks of its
  // tokens (at most num_tokens - 1 tokens, so at least one is computed), and full blocks are committed to the
  // cache as their KV is written (block_manager). Models with recurrent state need the state checkpoint of
  // the block a hit ends with (scheduled_chunk::restore_block).
  bool enable_prefix_caching = false;
};

// One sequence's share of a step: tokens [first_pos, first_pos + n_tokens) of seq->token_ids are forwarded
// and their KV written into the slots of blocks().block_table(seq_id).
struct scheduled_chunk {
  const sched_sequence* seq = nullptr;  // valid until postprocess(), or abort() of this sequence
  uint64_t seq_id = 0;
  int32_t first_pos = 0;  // == seq->num_computed_tokens when scheduled
  int32_t n_tokens = 0;   // >= 1
  bool is_decode = false;  // a running sequence with exactly one token left to compute
  bool sample = false;     // first_pos + n_tokens == num_tokens: the runner returns the last token's logits
  int32_t restore_block = -1;  // admitted after a cached prefix ending with this block: models with recurrent
                               // state restore the block's checkpoint into the sequence's slot first
  std::vector<int32_t> draft;  // decode chunks only: speculative tokens after the last one; n_tokens = 1 + size
};

struct schedule_output {
  uint64_t step = 0;                    // 0 for an empty step
  std::vector<scheduled_chunk> chunks;  // decodes first (oldest first), then prefill chunks (schedule order)
  int32_t num_decodes = 0;
  int32_t num_prefills = 0;
  int32_t num_batched_tokens = 0;   // sum of n_tokens, <= max_num_batched_tokens
  std::vector<uint64_t> preempted;  // ids preempted while building this step (now waiting, no blocks)
  bool empty() const { return chunks.empty(); }
};

// What the engine sampled for one chunk with sample == true; finished: the sequence stops (EOS, stop, length)
// after this token, and its blocks are freed in postprocess().
// With draft tokens: the first n_accepted drafts of the chunk were accepted, and `token` follows them.
struct sampled_token {
  uint64_t seq_id = 0;
  int32_t token = 0;
  bool finished = false;
  int32_t n_accepted = 0;  // <= the chunk's draft.size()
};

// Proposes draft tokens for a sequence about to decode: fills `draft` with at most max_draft ids (left empty:
// no speculation this step). Called by schedule() on the engine thread.
using drafter_fn = std::function<void(const sched_sequence& s, int32_t max_draft, std::vector<int32_t>& draft)>;

struct scheduler_stats {
  int32_t running = 0;
  int32_t waiting = 0;
  int32_t blocks_total = 0;
  int32_t blocks_used = 0;
  int32_t blocks_free = 0;
  uint64_t preemptions = 0;  // since construction
  uint64_t steps = 0;        // non-empty steps scheduled
  uint64_t prefix_cache_queries = 0;  // tokens of sequences admitted with prefix caching on (vLLM's metric)
  uint64_t prefix_cache_hits = 0;     // of those, tokens found in the cache
  int32_t blocks_cached = 0;          // committed blocks (in use or free)
};

class scheduler {
 public:
  // Throws spindle::error on a bad config: any size <= 0, chunked_prefill_size not -1 or >= 1,
  // chunked_prefill_size == -1 with max_num_batched_tokens < max_model_len (a whole prompt or recompute
  // could never fit a step), or a cache smaller than one max_model_len sequence.
  scheduler(scheduler_config config, block_manager blocks);

  // Queues a new sequence at the back of the waiting queue. Throws on a duplicate id, an empty prompt or
  // one longer than max_model_len.
  // use_prefix_cache false: the sequence never starts from a cached prefix (its blocks are still committed).
  // scores_prompt: the sequence wants a logits row at every prompt position (prompt logprobs); such chunks take at
  // most k_max_scored_rows tokens of a step together (their rows are [tokens, vocabulary] floats on the host).
  // cache_salt: the prefix-cache namespace (sched_sequence::cache_salt). whole_spans: sched_sequence::whole_spans
  // (throws when one is not sorted, disjoint and inside the prompt, or too long for one step).
  void add(uint64_t id, std::vector<int32_t> prompt, bool use_prefix_cache = true, bool scores_prompt = false,
           uint64_t cache_salt = 0, std::vector<int32_t> whole_spans = {});
  static constexpr int32_t k_max_scored_rows = 256;
  // Removes a waiting or running sequence and frees its blocks; false when the id is unknown. Safe between
  // schedule() and postprocess(): the sequence's chunks are then skipped.
  bool abort(uint64_t id);

  // Speculative decoding: `f` is asked for drafts of every decode it schedules (null: none).
  void set_drafter(drafter_fn f) { drafter_ = std::move(f); }

  // Builds the next step and reserves its KV slots. Throws if the previous non-empty step was not
  // postprocessed. An empty step means nothing is unfinished.
  schedule_output schedule();
  // Ends step `out`: advances num_computed_tokens by each chunk (a decode with drafts: by 1 + n_accepted),
  // appends the accepted drafts and the sampled token of each chunk with sample == true and frees the blocks of
  // finished sequences. `sampled` holds one entry per sampling chunk
  // of a still known sequence, in chunk order (entries for aborted sequences may be left out). Validates
  // everything first (wrong step, ids, count, an unfinished sequence growing past max_model_len) and throws
  // without changing state.
  void postprocess(const schedule_output& out, const std::vector<sampled_token>& sampled);

  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  const sched_sequence* find(uint64_t id) const;  // null when unknown (never added, finished or aborted)
  std::vector<uint64_t> running_ids() const;      // arrival order
  std::vector<uint64_t> waiting_ids() const;      // queue order, front first
  const block_manager& blocks() const { return blocks_; }
  // Drops every cached prefix block no sequence holds (block_manager::drop_cached); returns how many.
  int32_t drop_cached_prefixes() { return blocks_.drop_cached(); }
  const state_slot_pool& state_slots() const { return slots_; }
  const scheduler_config& config() const { return config_; }
  scheduler_stats stats() const;
  // Throws spindle::error naming the first broken invariant (includes blocks().check_invariants()).
  void check_invariants() const;

 private:
  void schedule_running(schedule_output& out, int32_t& budget, bool decodes);
  void schedule_waiting(schedule_output& out, int32_t& budget);
  bool waits_for_shared_prefix(const sched_sequence& s, size_t hit) const;
  int32_t prefill_chunk(const sched_sequence& s, int32_t budget) const;  // 0: does not fit this step
  int32_t scored_rows_left_ = 0;  // of k_max_scored_rows, in the step being scheduled
  int32_t chunk_of(int32_t remaining, int32_t budget) const;             // prefill_chunk of `remaining` tokens
  // n (a chunk of s from `start`) cut so it does not end inside a whole span, or grown to the end of the span it
  // would end in when that span starts at or before `start` and the grown chunk is within `limit` (else 0)
  int32_t whole_span_chunk(const sched_sequence& s, int32_t start, int32_t n, int32_t limit) const;
  // The running prefills blocked on a whole span last step (sched_sequence::span_waiting), oldest first, ahead of
  // everything else in this step.
  void schedule_span_waiting(schedule_output& out, int32_t& budget);
  bool went_first(uint64_t id) const;  // scheduled by schedule_span_waiting this step
  std::vector<uint64_t> went_first_;
  bool can_reserve(const sched_sequence& s, int32_t n_slots) const;
  void reserve(const sched_sequence& s, int32_t n_slots);
  bool reserve_or_preempt(sched_sequence& s, int32_t n_tokens, schedule_output& out, int32_t& budget);
  void preempt_newest(schedule_output& out, int32_t& budget);
  void push_chunk(schedule_output& out, int32_t& budget, sched_sequence& s, int32_t n_tokens, bool is_decode);
  // with drafts if any fit, keeping one budget token for each of the `later` decodes
  void schedule_decode(schedule_output& out, int32_t& budget, sched_sequence& s, int32_t later);
  void insert_running(sched_sequence* s);
  void remove(sched_sequence* s);  // from running_ / waiting_ and seqs_, freeing its blocks
  void validate_postprocess(const schedule_output& out, const std::vector<sampled_token>& sampled) const;

  scheduler_config config_;
  drafter_fn drafter_;
  std::vector<int32_t> draft_;  // scratch for drafter_
  block_manager blocks_;
  state_slot_pool slots_;  // max_num_seqs recurrent-state slots, one per running sequence
  std::map<uint64_t, std::unique_ptr<sched_sequence>> seqs_;  // every unfinished sequence, by id
  std::vector<sched_sequence*> running_;                      // holding blocks; sorted by arrival
  std::deque<sched_sequence*> waiting_;                       // no blocks; front is scheduled first
  uint64_t next_arrival_ = 0;
  uint64_t step_ = 0;          // id of the last non-empty step
  bool step_pending_ = false;  // step_ was scheduled and not yet postprocessed
  uint64_t preemptions_ = 0;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace spindle
