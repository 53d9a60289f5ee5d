// One engine step: schedule -> one forward_batch over every chunk -> sample the chunks that end their
// sequence's known tokens -> stop checks -> postprocess (finished sequences free their blocks now).
// Invariant: a chunk's logits row depends only on its own sequence (forward_batch is batch invariant) and
// each request samples from its own random stream, so a request's tokens do not depend on the batch; a failed
// forward fails exactly the requests of that step and leaves the scheduler consistent.
// Speculative decoding: a decode chunk with drafts forwards [last token, drafts...] and gets one logits row per
// token; verify_chunk samples them in order with the sequence's own sampler (penalties, grammar, stops and the
// random stream advance token by token, as in plain decoding) and stops at the first token that differs from
// its draft, so the emitted tokens are exactly those plain decoding would give. A model with recurrent state
// then rolls its state back to the last accepted position.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "model/model.h"

namespace spindle {

request_output& engine_output_for(std::vector<request_output>& outs, uint64_t id);  // engine.cpp

void engine::run_forward(const schedule_output& so) {
  inject_test_fault();  // no-op unless a test set SPINDLE_TEST_FAIL_FORWARD_AT_STEP
  std::vector<batch_sequence> batch;
  batch.reserve(so.chunks.size());
  chunk_tokens_.clear();
  chunk_tokens_.reserve(so.chunks.size());  // no reallocation below: batch keeps pointers into it
  int64_t n_rows = 0;
  for (const scheduled_chunk& c : so.chunks) n_rows += all_rows(c) ? c.n_tokens : c.sample ? 1 + int64_t(c.draft.size()) : 0;
  if (int64_t(chosen_ids_.size()) < n_rows) chosen_ids_.resize(size_t(n_rows));  // before pointers into them
  if (int64_t(sample_specs_.size()) < n_rows) sample_specs_.resize(size_t(n_rows));
  if (sample_edits_.size() < so.chunks.size()) sample_edits_.resize(so.chunks.size());
  chunk_chosen_.assign(so.chunks.size(), 0);
  chunk_hidden_.assign(so.chunks.size(), -1);
  chunk_all_rows_.assign(so.chunks.size(), 0);
  int64_t n_sample = 0, n_hidden = 0;
  for (const scheduled_chunk& c : so.chunks) {
    const std::vector<int32_t>& table = sched_->blocks().block_table(c.seq_id);
    batch_sequence b;
    b.tokens = c.seq->token_ids.data() + c.first_pos;
    if (!c.draft.empty()) {  // [last token, drafts...]
      chunk_tokens_.emplace_back(c.seq->token_ids.begin() + c.first_pos, c.seq->token_ids.end());
      chunk_tokens_.back().insert(chunk_tokens_.back().end(), c.draft.begin(), c.draft.end());
      b.tokens = chunk_tokens_.back().data();
      b.n_rollback = int32_t(c.draft.size());
    }
    b.n_tokens = c.n_tokens;
    b.first_pos = c.first_pos;
    b.block_table = table.data();
    b.n_table = int32_t(table.size());
    b.n_logits = c.sample ? 1 + int32_t(c.draft.size()) : 0;
    if (const sequence& seq = *seqs_.at(c.seq_id); seq.embeds()) {  // hidden rows instead of logits
      const pooling_type p = seq.req.pooling;
      b.n_logits = p == pooling_type::mean || (p == pooling_type::cls && c.first_pos == 0) ? c.n_tokens
                   : p == pooling_type::last && c.sample                               ? 1
                                                                                       : 0;
      if (b.n_logits > 0) chunk_hidden_[batch.size()] = n_hidden;
      n_hidden += b.n_logits;
    }
    const bool hidden_rows = chunk_hidden_[batch.size()] >= 0;  // its rows are no logits rows
    // prompt logprobs: a row at every position of a prompt chunk that scores a prompt token (its last row, when the
    // chunk ends the prompt, is the first output token's)
    if (all_rows(c)) {
      b.n_logits = c.n_tokens;
      chunk_all_rows_[batch.size()] = 1;
    }
    b.state_slot = c.seq->state_slot;  // recurrent state (models with recurrent layers)
    b.lora = seqs_.at(c.seq_id)->lora.get();  // null: the base model
    if (c.restore_block >= 0) model_->restore_from_block(*kv_, b.state_slot, c.restore_block, c.first_pos);
    if (sequence& seq = *seqs_.at(c.seq_id); seq.images) {  // encodes the images this chunk reaches first
      const int64_t before = seq.images->encoded_images();
      const auto t0 = std::chrono::steady_clock::now();
      b.embd = seq.images->chunk_embd(c.first_pos, c.n_tokens);
      b.bidir_spans = seq.images->spans().data();  // empty for a causal vision model
      b.n_bidir_spans = int32_t(seq.images->spans().size() / 2);
      if (seq.images->encoded_images() != before) {
        images_encoded_ += uint64_t(seq.images->encoded_images() - before);
        image_encode_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    if (b.n_logits > 0 && !hidden_rows && !chunk_all_rows_[batch.size()]) {  // the model picks the token: the argmax, or (one row, no drafts) a sample
      sequence& seq = *seqs_.at(c.seq_id);
      const size_t k = batch.size();
      const bool greedy = seq.greedy_only();
      if (greedy || (b.n_logits == 1 && seq.plan_sample(sample_specs_[size_t(n_sample)], sample_edits_[k]))) {
        b.argmax = chosen_ids_.data() + n_sample;
        b.argmax_n = n_vocab_;
        b.sample = greedy ? nullptr : &sample_specs_[size_t(n_sample)];
        chunk_chosen_[k] = 1;
      }
    }
    if (!hidden_rows) n_sample += b.n_logits;
    batch.push_back(b);
  }
  const int64_t n_embd = model_->hparams().n_embd;
  if (int64_t(hidden_.size()) < n_hidden * n_embd) hidden_.resize(size_t(n_hidden * n_embd));
  for (size_t k = 0; k < batch.size(); ++k) {
    if (chunk_hidden_[k] >= 0) batch[k].hidden = hidden_.data() + chunk_hidden_[k] * n_embd;
  }
  const int64_t rows = model_->hparams().n_vocab;
  if (int64_t(logits_.size()) < n_sample * rows) logits_.resize(size_t(n_sample * rows));
  model_->forward_batch(batch, *kv_, logits_.data());
  if (draft_) {  // the draft model's KV follows the target's: every chunk, no logits
    for (batch_sequence& b : batch) b.n_logits = 0, b.n_rollback = 0, b.lora = nullptr;  // adapters are the target's
    draft_->forward_batch(batch, *draft_kv_, nullptr);
  }
}

// Every request of the step fails with `message`; the scheduler drops them (their blocks are freed).
void engine::fail_step(const schedule_output& so, const std::string& message, std::vector<request_output>& outs) {
  failed_steps_++;
  for (const scheduled_chunk& c : so.chunks) {
    if (!seqs_.count(c.seq_id)) continue;
    request_output& out = engine_output_for(outs, c.seq_id);
    out.error = message.empty() ? "unknown error in the engine step" : message;
    out.finish = finish_reason::abort;
    sched_->abort(c.seq_id);
    finish_sequence(c.seq_id);
  }
  sched_->postprocess(so, {});  // every sequence of the step is gone: this only closes the step
}

void engine::propose_draft(const sched_sequence& s, int32_t max_draft, std::vector<int32_t>& draft) {
  sequence& seq = *seqs_.at(s.id);
  if (!seq.drafts.active()) return;
  // at most one token fewer than the output may still grow by (the token after the drafts is sampled anyway)
  max_draft = std::min(max_draft, seq.max_output - int32_t(seq.output.size()) - 1);
  seq.drafts.propose(s.token_ids.data(), s.num_tokens(), s.num_prompt_tokens, max_draft, draft);
  for (size_t i = 0; i < draft.size(); ++i) {  // ids only: an image placeholder (-1) ends the draft
    if (draft[i] < 0 || draft[i] >= n_vocab_) {
      draft.resize(i);
      break;
    }
  }
}

sampled_token engine::verify_chunk(const scheduled_chunk& c, sequence& seq, float* rows, const int32_t* chosen,
                                   request_output& out) {
  const int64_t n_rows = model_->hparams().n_vocab;
  const int32_t n_draft = int32_t(c.draft.size());
  const size_t before = out.tokens.size();
  for (int32_t i = 0; i <= n_draft; ++i) {
    if (chosen) seq.append(chosen[i], out);  // the token sample_and_append would take (argmax or planned draw)
    else seq.sample_and_append(rows + i * n_rows, out);
    if (out.tokens.size() == before + size_t(i)) break;  // ended without a token (grammar complete, failure)
    generated_tokens_++;
    if (seq.finished() || !out.error.empty() || i == n_draft || out.tokens.back() != c.draft[size_t(i)]) break;
  }
  const int32_t emitted = int32_t(out.tokens.size() - before);
  sampled_token t;
  t.seq_id = c.seq_id;
  t.token = emitted > 0 ? out.tokens.back() : 0;
  t.finished = seq.finished();
  t.n_accepted = std::max(emitted - 1, 0);
  if (n_draft > 0) {
    spec_drafts_++;
    spec_draft_tokens_ += uint64_t(n_draft);
    spec_accepted_tokens_ += uint64_t(t.n_accepted);
    out.draft_tokens += n_draft;
    out.accepted_draft_tokens += t.n_accepted;
  }
  seq.drafts.record(n_draft, t.n_accepted);
  return t;
}

void engine::record_phases(sequence& seq, request_output& out) {
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const clock::time_point now = clock::now();
  if (seq.first_token_at == clock::time_point{} && !out.tokens.empty()) {
    seq.first_token_at = now;
    out.queue_seconds = std::max(0.0, seconds(seq.req.submitted, seq.scheduled_at));
    out.prefill_seconds = seconds(seq.scheduled_at, now);
  }
  if (seq.finished() && seq.first_token_at != clock::time_point{}) {
    out.decode_seconds = seconds(seq.first_token_at, now);
    out.inference_seconds = seconds(seq.scheduled_at, now);
  }
}

bool engine::all_rows(const scheduled_chunk& c) const {
  const sequence& seq = *seqs_.at(c.seq_id);
  return !seq.embeds() && seq.wants_prompt_logprobs() && c.draft.empty() && c.first_pos + 1 < c.seq->num_prompt_tokens;
}

void engine::score_prompt_rows(const scheduled_chunk& c, sequence& seq, const float* rows) {
  const int64_t stride = model_->hparams().n_vocab;
  const int32_t n_prompt = c.seq->num_prompt_tokens;
  for (int32_t i = 0; i < c.n_tokens; ++i) {
    const int32_t p = c.first_pos + i;  // row i predicts position p + 1
    if (p + 1 >= n_prompt) break;
    seq.prompt_lps[size_t(p)] = compute_logprobs(rows + i * stride, n_vocab_, c.seq->token_ids[size_t(p + 1)],
                                                 seq.req.params.prompt_logprobs);
  }
}

void engine::pool_chunk(const scheduled_chunk& c, sequence& seq, const float* rows) {
  const int64_t n_embd = model_->hparams().n_embd;
  if (c.first_pos == 0 || seq.pooled.empty()) {  // a first chunk (again, after a preemption): start afresh
    seq.pooled.assign(size_t(n_embd), 0.0);
    seq.pooled_rows = 0;
  }
  const pooling_type p = seq.req.pooling;
  if (rows && p == pooling_type::mean) {
    for (int32_t t = 0; t < c.n_tokens; ++t, ++seq.pooled_rows)
      for (int64_t i = 0; i < n_embd; ++i) seq.pooled[size_t(i)] += rows[t * n_embd + i];
  } else if (rows) {  // cls: the chunk's first row (position 0); last: its one row (the prompt's last token)
    for (int64_t i = 0; i < n_embd; ++i) seq.pooled[size_t(i)] = rows[i];
    seq.pooled_rows = 1;
  }
}

void engine::finish_embedding(const scheduled_chunk& c, sequence& seq, request_output& out) {
  const int64_t n_embd = model_->hparams().n_embd;
  const pooling_type p = seq.req.pooling;
  out.embedding.resize(size_t(n_embd));
  const double scale = p == pooling_type::mean && seq.pooled_rows > 0 ? 1.0 / double(seq.pooled_rows) : 1.0;
  for (int64_t i = 0; i < n_embd; ++i) out.embedding[size_t(i)] = float(seq.pooled[size_t(i)] * scale);
  out.cached_tokens = c.seq->num_cached_tokens;
  seq.finish = finish_reason::stop;
  out.finish = finish_reason::stop;
  using clock = std::chrono::steady_clock;
  const clock::time_point now = clock::now();
  out.queue_seconds = std::max(0.0, std::chrono::duration<double>(seq.scheduled_at - seq.req.submitted).count());
  out.prefill_seconds = out.inference_seconds = std::chrono::duration<double>(now - seq.scheduled_at).count();
  out.decode_seconds = 0;
}

void engine::step(std::vector<request_output>& outs) {
  using clock = std::chrono::steady_clock;
  const auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const clock::time_point t_step = clock::now();
  schedule_output so = sched_->schedule();
  if (so.empty()) return;
  steps_++;
  try {
    const clock::time_point t_forward = clock::now();
    run_draft_model(so);  // fills draft tokens the draft model was asked for
    run_forward(so);
    forward_seconds_ += seconds_since(t_forward);
  } catch (const std::exception& e) {
    fail_step(so, e.what(), outs);
    step_seconds_ += seconds_since(t_step);
    return;
  }
  std::vector<sampled_token> sampled;
  std::vector<uint64_t> finished;
  const int64_t rows = model_->hparams().n_vocab;
  int64_t row = 0;
  size_t chunk = 0;
  for (const scheduled_chunk& c : so.chunks) {
    const bool chosen_by_model = chunk_chosen_[chunk++] != 0;
    computed_tokens_ += uint64_t(c.n_tokens);
    // prompt positions of the chunk (a prompt's last token may come alone, scheduled as a decode)
    prompt_tokens_ += uint64_t(std::max(0, std::min(c.first_pos + c.n_tokens, c.seq->num_prompt_tokens) - c.first_pos));
    sequence& seq = *seqs_.at(c.seq_id);
    if (seq.scheduled_at == clock::time_point{}) seq.scheduled_at = t_step;  // its first step: the end of its queue
    if (seq.embeds()) {
      const int64_t at = chunk_hidden_[chunk - 1];
      pool_chunk(c, seq, at >= 0 ? hidden_.data() + at * model_->hparams().n_embd : nullptr);
      if (c.sample) {
        request_output& out = engine_output_for(outs, c.seq_id);
        finish_embedding(c, seq, out);
        // done: postprocess commits its full blocks to the prefix cache, then frees them (the token is never read)
        sampled_token t;
        t.seq_id = c.seq_id;
        t.finished = true;
        sampled.push_back(t);
        finished.push_back(c.seq_id);
      }
      continue;
    }
    float* chunk_rows = logits_.data() + row * rows;
    if (chunk_all_rows_[chunk - 1]) {  // prompt logprobs: score the prompt tokens; the last row (if any) samples
      score_prompt_rows(c, seq, chunk_rows);
      row += c.n_tokens;
      chunk_rows += int64_t(c.n_tokens - 1) * rows;
    } else if (c.sample) {
      row += 1 + int64_t(c.draft.size());
    }
    if (!c.sample) continue;
    request_output& out = engine_output_for(outs, c.seq_id);
    out.cached_tokens = c.seq->num_cached_tokens;
    const int32_t* chosen = chosen_by_model ? chosen_ids_.data() + (chunk_rows - logits_.data()) / rows : nullptr;
    if (seq.req.params.prompt_logprobs >= 0 && !seq.prompt_lps_sent) {  // with the first token
      out.prompt_logprobs = std::move(seq.prompt_lps);
      seq.prompt_lps_sent = true;
    }
    sampled_token t;
    try {
      t = verify_chunk(c, seq, chunk_rows, chosen, out);
    } catch (const std::exception& e) {  // allocation failure while sampling: fail this request only
      out.error = e.what();
      seq.finish = finish_reason::abort;
    }
    if (!out.error.empty() || (seq.finished() && out.tokens.empty())) {  // failed, or no token
      out.finish = out.error.empty() ? seq.finish : finish_reason::abort;
      sched_->abort(c.seq_id);
      finished.push_back(c.seq_id);
      continue;
    }
    if (!seq.finished() && t.n_accepted < int32_t(c.draft.size())) {  // rejected drafts: back to the last accepted
      try {
        model_->rollback_state(*kv_, c.seq->state_slot, c.first_pos + 1 + t.n_accepted);
      } catch (const std::exception& e) {
        out.error = e.what();
        out.finish = finish_reason::abort;
        sched_->abort(c.seq_id);
        finished.push_back(c.seq_id);
        continue;
      }
    }
    sampled.push_back(t);
    record_phases(seq, out);
    if (seq.finished()) {
      out.finish = seq.finish;
      finished.push_back(c.seq_id);
    }
  }
  sched_->postprocess(so, sampled);  // frees the blocks of finished sequences
  for (uint64_t id : finished) finish_sequence(id);
  step_seconds_ += seconds_since(t_step);
}

}  // namespace spindle
