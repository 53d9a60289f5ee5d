// The scheduler (see scheduler.h for the rule). Invariant: every sequence is in exactly one of running_
// (holding blocks, sorted by arrival) and waiting_ (holding none), and owned by seqs_; the only ways out are
// postprocess() of a finished sequence and abort(), both of which free its blocks at once.
#include "engine/scheduler.h"

#include <algorithm>
#include <climits>
#include <string>

#include "common/error.h"

namespace spindle {

namespace {

std::string seq_name(uint64_t id) { return "sequence " + std::to_string(id); }

}  // namespace

scheduler::scheduler(scheduler_config config, block_manager blocks)
    : config_(config), blocks_(std::move(blocks)), slots_(std::max(config.max_num_seqs, 1)) {
  const scheduler_config& c = config_;
  if (c.max_num_batched_tokens <= 0) {
    throw error("scheduler: max_num_batched_tokens must be > 0, got " + std::to_string(c.max_num_batched_tokens));
  }
  if (c.max_num_seqs <= 0) throw error("scheduler: max_num_seqs must be > 0, got " + std::to_string(c.max_num_seqs));
  if (c.max_model_len <= 0) throw error("scheduler: max_model_len must be > 0, got " + std::to_string(c.max_model_len));
  if (c.chunked_prefill_size == 0 || c.chunked_prefill_size < -1) {
    throw error("scheduler: chunked_prefill_size must be -1 (off) or >= 1, got " +
                std::to_string(c.chunked_prefill_size));
  }
  if (c.chunked_prefill_size == -1 && c.max_num_batched_tokens < c.max_model_len) {
    throw error("scheduler: with chunked prefill off (chunked_prefill_size -1), max_num_batched_tokens (" +
                std::to_string(c.max_num_batched_tokens) + ") must be >= max_model_len (" +
                std::to_string(c.max_model_len) + "): a whole prompt must fit in one step");
  }
  blocks_.set_prefix_caching(c.enable_prefix_caching);
  int32_t per_seq = blocks_.blocks_for_tokens(c.max_model_len);
  if (blocks_.num_blocks() < per_seq) {
    throw error("scheduler: the KV cache has " + std::to_string(blocks_.num_blocks()) + " blocks, but one sequence " +
                "of max_model_len " + std::to_string(c.max_model_len) + " needs " + std::to_string(per_seq));
  }
}

void scheduler::add(uint64_t id, std::vector<int32_t> prompt, bool use_prefix_cache, bool scores_prompt,
                    uint64_t cache_salt, std::vector<int32_t> whole_spans) {
  if (seqs_.count(id) != 0) throw error("scheduler: " + seq_name(id) + " already exists");
  const int32_t step_limit = scores_prompt ? std::min(config_.max_num_batched_tokens, k_max_scored_rows)
                                           : config_.max_num_batched_tokens;
  for (size_t k = 0; k < whole_spans.size(); k += 2) {
    const int32_t b = whole_spans[k], e = k + 1 < whole_spans.size() ? whole_spans[k + 1] : -1;
    if (b < 0 || e <= b || e > int32_t(prompt.size()) || (k > 0 && b < whole_spans[k - 1])) {
      throw error("scheduler: the whole spans of " + seq_name(id) + " must be sorted [begin, end) pairs inside the prompt");
    }
    if (e - b > step_limit) {
      throw error("an image's " + std::to_string(e - b) + " embeddings attend to each other, so they go through the model "
                  "in one step, but a step takes at most " + std::to_string(step_limit) +
                  (scores_prompt ? " prompt tokens with prompt logprobs" : " tokens (max_num_batched_tokens)"));
    }
  }
  if (prompt.empty()) throw error("scheduler: " + seq_name(id) + " has an empty prompt");
  if (prompt.size() > size_t(config_.max_model_len)) {
    throw error("scheduler: the prompt of " + seq_name(id) + " has " + std::to_string(prompt.size()) +
                " tokens, more than max_model_len " + std::to_string(config_.max_model_len));
  }
  auto s = std::make_unique<sched_sequence>();
  s->id = id;
  s->arrival = next_arrival_++;
  s->num_prompt_tokens = int32_t(prompt.size());
  s->token_ids = std::move(prompt);
  s->use_prefix_cache = use_prefix_cache;
  s->scores_prompt = scores_prompt;
  s->cache_salt = cache_salt;
  s->whole_spans = std::move(whole_spans);
  if (blocks_.prefix_caching()) s->prompt_block_hashes = blocks_.chain_hashes(s->token_ids.data(), s->num_prompt_tokens, cache_salt);
  waiting_.push_back(s.get());
  seqs_.emplace(id, std::move(s));
}

bool scheduler::abort(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  remove(it->second.get());
  return true;
}

void scheduler::remove(sched_sequence* s) {
  blocks_.deallocate(s->id);
  slots_.release(s->id);
  auto r = std::find(running_.begin(), running_.end(), s);
  if (r != running_.end()) running_.erase(r);
  auto w = std::find(waiting_.begin(), waiting_.end(), s);
  if (w != waiting_.end()) waiting_.erase(w);
  seqs_.erase(s->id);  // destroys *s
}

schedule_output scheduler::schedule() {
  if (step_pending_) {
    throw error("scheduler: schedule() called before postprocess() of step " + std::to_string(step_));
  }
  schedule_output out;
  int32_t budget = config_.max_num_batched_tokens;
  scored_rows_left_ = k_max_scored_rows;
  schedule_span_waiting(out, budget);
  schedule_running(out, budget, /*decodes=*/true);
  schedule_running(out, budget, /*decodes=*/false);
  if (out.preempted.empty()) schedule_waiting(out, budget);
  if (out.chunks.empty()) return out;
  // decodes first, as the runner expects (a whole span scheduled first took its budget first, not its place)
  std::stable_partition(out.chunks.begin(), out.chunks.end(), [](const scheduled_chunk& c) { return c.is_decode; });
  out.step = ++step_;
  step_pending_ = true;
  for (const scheduled_chunk& c : out.chunks) {
    (c.is_decode ? out.num_decodes : out.num_prefills) += 1;
    out.num_batched_tokens += c.n_tokens;
  }
  return out;
}

// One pass over running_, oldest first: decodes (one token left) or partly prefilled prompts.
// Preemption only removes running_.back(), so indexes below i stay valid; if s itself was the newest and got
// preempted, running_.size() == i and the loop ends.
void scheduler::schedule_running(schedule_output& out, int32_t& budget, bool decodes) {
  int32_t decodes_left = 0;  // decodes not yet scheduled: drafts leave one budget token for each
  if (decodes) {
    for (const sched_sequence* s : running_) decodes_left += s->num_uncomputed_tokens() == 1 ? 1 : 0;
  }
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    sched_sequence* s = running_[i];
    bool is_decode = s->num_uncomputed_tokens() == 1;
    if (is_decode != decodes) continue;
    if (decodes) {
      schedule_decode(out, budget, *s, --decodes_left);
      continue;
    }
    if (s->span_waiting || went_first(s->id)) continue;  // scheduled (or not) first this step
    int32_t n = prefill_chunk(*s, budget);
    const bool scoring = s->scoring();
    const int32_t limit = std::min(budget, scoring ? scored_rows_left_ : INT32_MAX);
    const int32_t cut = std::min(n, limit);
    n = whole_span_chunk(*s, s->num_computed_tokens, cut, limit);
    if (n == 0) {
      s->span_waiting = cut > 0;  // a whole span did not fit what this step had left: first in line next step
      continue;
    }
    if (reserve_or_preempt(*s, n, out, budget)) {
      push_chunk(out, budget, *s, n, is_decode);
      if (scoring) scored_rows_left_ -= n;
    }
  }
}

// A decode, with the drafter's tokens when their slots fit (drafts never preempt; without room the decode goes
// plain and may preempt as before). Positions of the drafts stay below max_model_len, and drafts leave one token
// of the budget for each of the `later` decodes still to schedule, so drafting never crowds a decode out.
void scheduler::schedule_decode(schedule_output& out, int32_t& budget, sched_sequence& s, int32_t later) {
  draft_.clear();
  const int32_t room = std::min(budget - 1 - later, config_.max_model_len - s.num_tokens());
  if (drafter_ && room > 0) {
    drafter_(s, room, draft_);
    if (int32_t(draft_.size()) > room) draft_.resize(size_t(room));
    if (!draft_.empty() && !can_reserve(s, s.num_tokens() + int32_t(draft_.size()))) draft_.clear();
  }
  const int32_t n = 1 + int32_t(draft_.size());
  if (!reserve_or_preempt(s, n, out, budget)) return;
  push_chunk(out, budget, s, n, /*is_decode=*/true);
  out.chunks.back().draft = draft_;
  s.num_draft_tokens = int32_t(draft_.size());
}

// Admits waiting sequences from the front while a sequence slot, budget and free blocks last.
// Whether waiting sequence s, whose first `hit` prompt blocks are cached, should wait a step because a running
// sequence is still computing s's next block of prompt (same tokens after the same prefix, same namespace): admitted
// now, s would compute that block again; a step or more later the cache holds it. In-batch prefix sharing (SGLang's):
// n samples of one prompt, or requests that arrive together with one long system prompt, compute it once.
bool scheduler::waits_for_shared_prefix(const sched_sequence& s, size_t hit) const {
  if (!s.use_prefix_cache || hit >= s.prompt_block_hashes.size()) return false;
  if (int64_t(hit + 1) * blocks_.block_size() > s.num_tokens() - 1) return false;  // the last token is always computed
  const uint64_t h = s.prompt_block_hashes[hit];
  const int32_t bs = blocks_.block_size();
  for (const sched_sequence* r : running_) {
    // r is at that block now (not still computing blocks s has cached: a recompute, or a sequence that does not read
    // the cache), and will commit it when its chunk ends
    if (r->prompt_block_hashes.size() > hit && r->prompt_block_hashes[hit] == h &&
        r->num_computed_tokens >= int32_t(hit) * bs && r->num_computed_tokens < int32_t(hit + 1) * bs) {
      return true;
    }
  }
  return false;
}

// FCFS over the waiting queue; a sequence whose next prompt block a running one is computing is passed over for this
// step, and keeps its place: the ones behind it may go only with a running slot and the KV blocks of its first chunk
// still left for each sequence passed over (so it starts as soon as the cache holds its block, never behind them).
void scheduler::schedule_waiting(schedule_output& out, int32_t& budget) {
  int32_t held_slots = 0;   // sequences passed over this step
  int64_t held_blocks = 0;  // the blocks their first chunks would take
  for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0 && int32_t(running_.size()) + held_slots < config_.max_num_seqs;) {
    sched_sequence* s = *it;
    // the cached prefix (whole blocks, leaving at least one token to compute); waiting sequences hold no KV,
    // so they start from 0 or from that prefix
    std::vector<int32_t> shared;
    if (blocks_.prefix_caching() && s->use_prefix_cache) {
      shared = blocks_.cached_prefix(s->token_ids.data(), (s->num_tokens() - 1) / blocks_.block_size(), s->cache_salt);
    }
    int32_t hit = int32_t(shared.size()) * blocks_.block_size();
    if (s->num_preemptions == 0 && waits_for_shared_prefix(*s, shared.size())) {
      held_slots += 1;
      held_blocks += blocks_.blocks_for_tokens(chunk_of(s->num_tokens() - hit, INT32_MAX));
      ++it;
      continue;
    }
    const bool scoring = s->scoring();
    const int32_t limit = std::min(budget, scoring ? scored_rows_left_ : INT32_MAX);
    const auto first_chunk = [&] { return std::min(chunk_of(s->num_tokens() - hit, budget), limit); };
    int32_t n = whole_span_chunk(*s, hit, first_chunk(), limit);
    if (n == 0 && !shared.empty() && first_chunk() > 0) {
      // the cache ends where an image's embeddings start and they do not fit this step: one cached block less, so
      // the first chunk is that block (the embeddings then go first in line once it runs), not a queue blocked here
      shared.pop_back();
      hit -= blocks_.block_size();
      n = whole_span_chunk(*s, hit, first_chunk(), limit);
    }
    if (n == 0 || !blocks_.can_allocate_shared(shared, int64_t(hit) + n)) break;
    if (held_blocks > 0 && blocks_.num_free_blocks() - blocks_.blocks_for_tokens(int64_t(hit) + n) < held_blocks) break;
    s->state_slot = slots_.acquire(s->id);  // one is free: running_.size() < max_num_seqs slots
    try {
      blocks_.allocate_shared(s->id, shared, hit + n);
    } catch (...) {
      slots_.release(s->id);
      s->state_slot = -1;
      throw;
    }
    s->num_computed_tokens = hit;
    if (s->num_preemptions == 0) s->num_cached_tokens = hit;
    if (blocks_.prefix_caching()) {
      prefix_queries_ += uint64_t(s->num_tokens());
      prefix_hits_ += uint64_t(hit);
    }
    it = waiting_.erase(it);
    s->status = sched_status::running;
    insert_running(s);
    push_chunk(out, budget, *s, n, /*is_decode=*/false);
    if (scoring) scored_rows_left_ -= n;
    if (!shared.empty()) out.chunks.back().restore_block = shared.back();
  }
}

int32_t scheduler::prefill_chunk(const sched_sequence& s, int32_t budget) const {
  return chunk_of(s.num_uncomputed_tokens(), budget);
}

int32_t scheduler::chunk_of(int32_t remaining, int32_t budget) const {
  if (config_.chunked_prefill_size < 0) return remaining <= budget ? remaining : 0;
  return std::min({remaining, config_.chunked_prefill_size, budget});
}

int32_t scheduler::whole_span_chunk(const sched_sequence& s, int32_t start, int32_t n, int32_t limit) const {
  const int32_t end = start + n;
  for (size_t k = 0; n > 0 && k + 1 < s.whole_spans.size(); k += 2) {
    const int32_t b = s.whole_spans[k], e = s.whole_spans[k + 1];
    if (e <= start || e <= end) continue;  // behind the chunk, or ends inside it
    if (b >= end) break;                   // this span and the later ones start after the chunk
    if (b > start) return b - start;       // stop before the span
    // the chunk starts at the span (never inside: no cached prefix reaches a placeholder's block, and no chunk
    // ends inside one): all of it, or not this step
    return e - start <= limit ? e - start : 0;
  }
  return n;
}

void scheduler::schedule_span_waiting(schedule_output& out, int32_t& budget) {
  went_first_.clear();
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    sched_sequence* s = running_[i];
    if (!s->span_waiting) continue;
    const bool scoring = s->scoring();
    const int32_t limit = std::min(budget, scoring ? scored_rows_left_ : INT32_MAX);
    const int32_t n = whole_span_chunk(*s, s->num_computed_tokens, std::min(prefill_chunk(*s, budget), limit), limit);
    if (n == 0) continue;  // still too big for what is left: stays first in line
    s->span_waiting = false;
    went_first_.push_back(s->id);  // its chunk is this one: the prefill pass passes it over
    if (reserve_or_preempt(*s, n, out, budget)) {
      push_chunk(out, budget, *s, n, /*is_decode=*/false);
      if (scoring) scored_rows_left_ -= n;
    }
  }
}

bool scheduler::went_first(uint64_t id) const {
  return std::find(went_first_.begin(), went_first_.end(), id) != went_first_.end();
}

bool scheduler::can_reserve(const sched_sequence& s, int32_t n_slots) const {
  int32_t have = blocks_.num_tokens(s.id);
  if (n_slots <= have) return true;
  return blocks_.has(s.id) ? blocks_.can_append(s.id, n_slots - have) : blocks_.can_allocate(n_slots);
}

void scheduler::reserve(const sched_sequence& s, int32_t n_slots) {
  int32_t have = blocks_.num_tokens(s.id);
  if (n_slots <= have) return;
  if (blocks_.has(s.id)) {
    blocks_.append(s.id, n_slots - have);
  } else {
    blocks_.allocate(s.id, n_slots);
  }
}

bool scheduler::reserve_or_preempt(sched_sequence& s, int32_t n_tokens, schedule_output& out, int32_t& budget) {
  int32_t n_slots = s.num_computed_tokens + n_tokens;
  while (!can_reserve(s, n_slots)) {
    bool self = running_.back() == &s;
    preempt_newest(out, budget);
    if (self) return false;
  }
  reserve(s, n_slots);
  return true;
}

// Frees the newest running sequence for recompute; a chunk it already got this step is taken back.
void scheduler::preempt_newest(schedule_output& out, int32_t& budget) {
  sched_sequence* v = running_.back();
  running_.pop_back();
  blocks_.deallocate(v->id);
  slots_.release(v->id);
  v->state_slot = -1;
  v->num_computed_tokens = 0;
  v->num_draft_tokens = 0;
  v->span_waiting = false;
  v->status = sched_status::waiting;
  ++v->num_preemptions;
  ++preemptions_;
  waiting_.push_front(v);
  out.preempted.push_back(v->id);
  for (auto it = out.chunks.begin(); it != out.chunks.end();) {
    if (it->seq_id == v->id) {
      budget += it->n_tokens;
      it = out.chunks.erase(it);
    } else {
      ++it;
    }
  }
}

void scheduler::push_chunk(schedule_output& out, int32_t& budget, sched_sequence& s, int32_t n_tokens,
                           bool is_decode) {
  scheduled_chunk c;
  c.seq = &s;
  c.seq_id = s.id;
  c.first_pos = s.num_computed_tokens;
  c.n_tokens = n_tokens;
  c.is_decode = is_decode;
  c.sample = c.first_pos + n_tokens >= s.num_tokens();  // > with draft tokens
  out.chunks.push_back(c);
  budget -= n_tokens;
}

void scheduler::insert_running(sched_sequence* s) {
  auto pos = std::upper_bound(running_.begin(), running_.end(), s,
                              [](const sched_sequence* a, const sched_sequence* b) { return a->arrival < b->arrival; });
  running_.insert(pos, s);
}

void scheduler::validate_postprocess(const schedule_output& out, const std::vector<sampled_token>& sampled) const {
  if (!step_pending_ || out.step != step_) {
    throw error("scheduler: postprocess() of step " + std::to_string(out.step) + ", but the pending step is " +
                (step_pending_ ? std::to_string(step_) : std::string("none")));
  }
  size_t k = 0;
  for (const scheduled_chunk& c : out.chunks) {
    auto it = seqs_.find(c.seq_id);
    if (it == seqs_.end()) {  // aborted during the step: its sampled token may be present or left out
      if (c.sample && k < sampled.size() && sampled[k].seq_id == c.seq_id) ++k;
      continue;
    }
    const sched_sequence& s = *it->second;
    const int32_t known = c.first_pos + c.n_tokens - int32_t(c.draft.size());  // end of the token_ids it computes
    if (s.status != sched_status::running || s.num_computed_tokens != c.first_pos || known > s.num_tokens() ||
        (c.sample && known != s.num_tokens())) {
      throw error("scheduler: the chunk of " + seq_name(c.seq_id) + " does not match its state");
    }
    if (!c.sample) continue;
    if (k >= sampled.size() || sampled[k].seq_id != c.seq_id) {
      throw error("scheduler: postprocess() expects a sampled token for " + seq_name(c.seq_id) + " at index " +
                  std::to_string(k));
    }
    if (sampled[k].n_accepted < 0 || sampled[k].n_accepted > int32_t(c.draft.size())) {
      throw error("scheduler: " + seq_name(c.seq_id) + " accepted " + std::to_string(sampled[k].n_accepted) +
                  " of " + std::to_string(c.draft.size()) + " draft tokens");
    }
    if (!sampled[k].finished && s.num_tokens() + sampled[k].n_accepted + 1 > config_.max_model_len) {
      throw error("scheduler: " + seq_name(c.seq_id) + " reached max_model_len " +
                  std::to_string(config_.max_model_len) + " without finishing");
    }
    ++k;
  }
  if (k != sampled.size()) {
    throw error("scheduler: postprocess() got " + std::to_string(sampled.size()) + " sampled tokens, expected " +
                std::to_string(k));
  }
}

void scheduler::postprocess(const schedule_output& out, const std::vector<sampled_token>& sampled) {
  if (out.empty()) {
    if (!sampled.empty()) throw error("scheduler: postprocess() of an empty step got sampled tokens");
    return;
  }
  validate_postprocess(out, sampled);
  size_t k = 0;
  for (const scheduled_chunk& c : out.chunks) {
    auto it = seqs_.find(c.seq_id);
    if (it == seqs_.end()) {
      if (c.sample && k < sampled.size() && sampled[k].seq_id == c.seq_id) ++k;
      continue;
    }
    sched_sequence* s = it->second.get();
    if (!c.sample) {
      s->num_computed_tokens += c.n_tokens;
      blocks_.commit_full_blocks(s->id, s->token_ids.data(), s->num_computed_tokens, s->cache_salt);  // no-op without caching
      continue;
    }
    const sampled_token& t = sampled[k++];
    s->num_draft_tokens = 0;
    const int32_t rejected = int32_t(c.draft.size()) - t.n_accepted;
    s->num_computed_tokens += c.n_tokens - rejected;
    s->token_ids.insert(s->token_ids.end(), c.draft.begin(), c.draft.begin() + t.n_accepted);
    s->token_ids.push_back(t.token);
    blocks_.commit_full_blocks(s->id, s->token_ids.data(), s->num_computed_tokens, s->cache_salt);
    if (t.finished) {
      remove(s);
      continue;
    }
    if (blocks_.num_tokens(s->id) > s->num_tokens()) blocks_.truncate(s->id, s->num_tokens());  // rejected drafts
  }
  step_pending_ = false;
}

const sched_sequence* scheduler::find(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

std::vector<uint64_t> scheduler::running_ids() const {
  std::vector<uint64_t> ids;
  for (const sched_sequence* s : running_) ids.push_back(s->id);
  return ids;
}

std::vector<uint64_t> scheduler::waiting_ids() const {
  std::vector<uint64_t> ids;
  for (const sched_sequence* s : waiting_) ids.push_back(s->id);
  return ids;
}

scheduler_stats scheduler::stats() const {
  scheduler_stats st;
  st.running = int32_t(running_.size());
  st.waiting = int32_t(waiting_.size());
  st.blocks_total = blocks_.num_blocks();
  st.blocks_used = blocks_.num_used_blocks();
  st.blocks_free = blocks_.num_free_blocks();
  st.preemptions = preemptions_;
  st.steps = step_;
  st.prefix_cache_queries = prefix_queries_;
  st.prefix_cache_hits = prefix_hits_;
  st.blocks_cached = blocks_.num_cached_blocks();
  return st;
}

void scheduler::check_invariants() const {
  blocks_.check_invariants();
  slots_.check_invariants();
  auto broken = [](const std::string& what) { return error("scheduler invariant: " + what); };
  if (running_.size() > size_t(config_.max_num_seqs)) throw broken("more running sequences than max_num_seqs");
  if (running_.size() + waiting_.size() != seqs_.size()) throw broken("a sequence is lost or queued twice");
  if (size_t(slots_.num_held()) != running_.size()) throw broken("state slots held != running sequences");
  for (size_t i = 0; i < running_.size(); ++i) {
    const sched_sequence* s = running_[i];
    if (find(s->id) != s || s->status != sched_status::running) throw broken(seq_name(s->id) + " not running");
    if (i > 0 && running_[i - 1]->arrival >= s->arrival) throw broken("running sequences out of arrival order");
    int32_t have = blocks_.num_tokens(s->id);
    if (!blocks_.has(s->id) || have < s->num_computed_tokens || have > s->num_tokens() + s->num_draft_tokens) {
      throw broken(seq_name(s->id) + " reserves " + std::to_string(have) + " slots for " +
                   std::to_string(s->num_computed_tokens) + " computed of " + std::to_string(s->num_tokens()));
    }
    if (s->num_computed_tokens >= s->num_tokens()) throw broken(seq_name(s->id) + " has nothing left to compute");
    if (s->state_slot < 0 || slots_.slot_of(s->id) != s->state_slot) {
      throw broken("running " + seq_name(s->id) + " does not hold its state slot " + std::to_string(s->state_slot));
    }
  }
  for (const sched_sequence* s : waiting_) {
    if (find(s->id) != s || s->status != sched_status::waiting) throw broken(seq_name(s->id) + " not waiting");
    if (s->state_slot != -1 || slots_.slot_of(s->id) != -1) throw broken("waiting " + seq_name(s->id) + " holds a state slot");
    if (blocks_.has(s->id)) throw broken("waiting " + seq_name(s->id) + " holds blocks");
    if (s->num_computed_tokens >= s->num_tokens()) throw broken(seq_name(s->id) + " has nothing left to compute");
  }
}

}  // namespace spindle
