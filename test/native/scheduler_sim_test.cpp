// Randomized scheduler simulation: many sequences of random lengths, random finishes and aborts (between
// steps and inside a step), tiny KV caches. A fake runner writes (sequence, position, token) into the KV slot
// each block table names and reads back every position a chunk attends to, so a block owned by two live
// sequences, a missing recompute or a lost generated token shows up as a wrong slot. Every step also checks
// the budget, chunk shape and all scheduler / block manager invariants; at the end every block is free. With
// speculative drafts, decodes carry random drafts (mostly the true next tokens, some wrong), the runner accepts
// the leading correct ones, and the KV written for rejected drafts must never be read. With whole spans (image
// placeholders), no chunk starts or ends inside one and every sequence still finishes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "harness.h"

using namespace spindle;

namespace {

// What a KV slot holds: the position and a hash of the tokens up to it (KV depends on exactly that, so a slot
// shared through the prefix cache is right for every sequence with the same prefix).
struct kv_slot {
  int32_t pos = -1;
  uint64_t prefix = 0;
};

struct sim_params {
  uint32_t seed;
  int32_t block_size, extra_blocks, budget, max_seqs, chunk, max_len, n_seqs;
  bool caching = false;  // prefix caching on, and prompts that share prefixes
  bool drafts = false;   // speculative drafts on decodes
  bool spans = false;    // prompts hold whole spans (image placeholders, -1): no chunk may start or end inside one
};

struct sim_totals {
  uint64_t preemptions = 0, mid_step_aborts = 0, finished = 0, steps = 0, cache_hits = 0, drafted = 0, accepted = 0;
  uint64_t span_chunks = 0;  // chunks that hold a whole span past the chunk size
};

int32_t fake_token(uint64_t id, int32_t index) { return int32_t((id * 7919 + uint64_t(index) * 31) % 50000); }

// Token `index` of sequence `id`; with shared prefixes, the first tokens come from one of three "documents".
int32_t sim_token(uint64_t id, int32_t index, bool shared) {
  const int32_t share_len = 3 + int32_t(id % 7) * 3;
  return shared && index < share_len ? fake_token(100000 + id % 3, index) : fake_token(id, index);
}

uint64_t prefix_hash(uint64_t h, int32_t token) { return (h ^ uint64_t(uint32_t(token))) * 0x100000001B3ull + 1; }

int32_t slot_of(const block_manager& bm, uint64_t id, int32_t pos) {
  const std::vector<int32_t>& table = bm.block_table(id);
  size_t b = size_t(pos / bm.block_size());
  if (b >= table.size()) return -1;
  return table[b] * bm.block_size() + pos % bm.block_size();
}

// Token at position p of a chunk: the sequence's own, then the chunk's drafts.
int32_t chunk_token(const scheduled_chunk& c, int32_t p) {
  const int32_t n = c.seq->num_tokens();
  return p < n ? c.seq->token_ids[size_t(p)] : c.draft[size_t(p - n)];
}

// Checks the step's shape, then writes its KV and reads back every position each chunk attends to.
void run_fake_model(const scheduler& s, const schedule_output& out, std::vector<kv_slot>& kv, sim_totals& totals) {
  const scheduler_config& cfg = s.config();
  CHECK(out.num_batched_tokens <= cfg.max_num_batched_tokens);
  CHECK(int32_t(out.chunks.size()) <= cfg.max_num_seqs);
  int32_t total = 0;
  bool seen_prefill = false;
  std::set<uint64_t> ids;
  for (const scheduled_chunk& c : out.chunks) {
    const sched_sequence& q = *c.seq;
    total += c.n_tokens;
    CHECK(ids.insert(c.seq_id).second);
    CHECK_EQ(q.id, c.seq_id);
    CHECK_EQ(c.first_pos, q.num_computed_tokens);
    CHECK(c.n_tokens >= 1);
    const int32_t known = c.first_pos + c.n_tokens - int32_t(c.draft.size());
    CHECK(known <= q.num_tokens());
    CHECK_EQ(c.sample, known == q.num_tokens());
    CHECK(c.draft.empty() || c.is_decode);
    CHECK(c.first_pos + c.n_tokens <= cfg.max_model_len);
    bool whole_span = false;  // exactly one whole span, which may be longer than a chunk
    for (size_t k = 0; k + 1 < q.whole_spans.size(); k += 2) {
      whole_span = whole_span || (c.first_pos == q.whole_spans[k] && c.first_pos + c.n_tokens == q.whole_spans[k + 1]);
    }
    if (cfg.chunked_prefill_size > 0) CHECK(c.n_tokens <= cfg.chunked_prefill_size || c.is_decode || whole_span);
    if (whole_span && c.n_tokens > cfg.chunked_prefill_size) ++totals.span_chunks;
    if (cfg.chunked_prefill_size < 0 && !c.is_decode) CHECK_EQ(c.first_pos + c.n_tokens, q.num_tokens());  // the rest
    if (c.is_decode) CHECK(!seen_prefill);
    for (size_t k = 0; k + 1 < q.whole_spans.size(); k += 2) {
      const int32_t b = q.whole_spans[k], e = q.whole_spans[k + 1], end = c.first_pos + c.n_tokens;
      CHECK(!(c.first_pos > b && c.first_pos < e));  // never starts inside a span
      CHECK(!(end > b && end < e));                   // never ends inside one
    }
    seen_prefill = seen_prefill || !c.is_decode;
    CHECK(s.blocks().num_tokens(c.seq_id) >= c.first_pos + c.n_tokens);
    uint64_t h = 0;
    for (int32_t p = 0; p < c.first_pos + c.n_tokens; ++p) {
      h = prefix_hash(h, chunk_token(c, p));
      if (p < c.first_pos) continue;
      int32_t slot = slot_of(s.blocks(), c.seq_id, p);
      REQUIRE(slot >= 0);
      kv[size_t(slot)] = {p, h};
    }
  }
  CHECK_EQ(total, out.num_batched_tokens);
  for (const scheduled_chunk& c : out.chunks) {
    uint64_t h = 0;
    for (int32_t p = 0; p < c.first_pos + c.n_tokens; ++p) {
      h = prefix_hash(h, chunk_token(c, p));
      const kv_slot& k = kv[size_t(slot_of(s.blocks(), c.seq_id, p))];
      if (k.pos != p || k.prefix != h) {
        harness::fail(__FILE__, __LINE__, "KV slot of sequence " + std::to_string(c.seq_id) + " position " +
                                              std::to_string(p) + " holds another value");
        throw harness::stop_test{};
      }
    }
  }
}

// Picks a random live id (or 0 when none) from `live`.
uint64_t pick(std::mt19937& rng, const std::map<uint64_t, int32_t>& live) {
  if (live.empty()) return 0;
  auto it = live.begin();
  std::advance(it, rng() % live.size());
  return it->first;
}

void simulate(const sim_params& p, sim_totals& totals) {
  std::mt19937 rng(p.seed);
  scheduler_config cfg;
  cfg.max_num_batched_tokens = p.budget;
  cfg.max_num_seqs = p.max_seqs;
  cfg.chunked_prefill_size = p.chunk;
  cfg.max_model_len = p.max_len;
  cfg.enable_prefix_caching = p.caching;
  int32_t n_blocks = (p.max_len + p.block_size - 1) / p.block_size + p.extra_blocks;
  scheduler s(cfg, block_manager(n_blocks, p.block_size));
  std::vector<kv_slot> kv(size_t(n_blocks) * size_t(p.block_size));
  if (p.drafts) {  // up to 4 drafts, each the true next token with probability 3/4
    s.set_drafter([&](const sched_sequence& q, int32_t max_draft, std::vector<int32_t>& draft) {
      const int32_t d = std::min<int32_t>(max_draft, int32_t(rng() % 5));
      for (int32_t i = 0; i < d; ++i) {
        draft.push_back(rng() % 4 != 0 ? fake_token(q.id, q.num_tokens() + i) : fake_token(q.id, q.num_tokens() + i) + 1);
      }
      totals.drafted += uint64_t(d);
    });
  }
  std::map<uint64_t, int32_t> live;  // id -> num_tokens at which it finishes
  std::map<uint64_t, std::vector<int32_t>> prompts;
  uint64_t next_id = 1;
  int32_t steps = 0;
  while (int32_t(next_id) <= p.n_seqs || s.has_unfinished()) {
    REQUIRE(++steps < 50000);
    for (uint32_t a = rng() % 4; a > 0 && int32_t(next_id) <= p.n_seqs; --a, ++next_id) {
      int32_t len = 1 + int32_t(rng() % uint32_t(p.max_len));
      std::vector<int32_t> prompt;
      for (int32_t i = 0; i < len; ++i) prompt.push_back(sim_token(next_id, i, p.caching));
      std::vector<int32_t> spans;  // up to 2, each at most the step budget, of -1 tokens (the prefix cache stops there)
      for (uint32_t n = p.spans ? rng() % 3 : 0, at = 0; n > 0; --n) {
        const int32_t room = len - int32_t(at), span = 1 + int32_t(rng() % uint32_t(std::min(p.budget, 6)));
        if (room <= span) break;
        const int32_t b = int32_t(at) + int32_t(rng() % uint32_t(room - span));
        spans.insert(spans.end(), {b, b + span});
        for (int32_t i = b; i < b + span; ++i) prompt[size_t(i)] = -1;
        at = uint32_t(b + span);
      }
      prompts[next_id] = prompt;
      s.add(next_id, prompt, true, false, 0, spans);
      live[next_id] = len + 1 + int32_t(rng() % uint32_t(p.max_len - len + 1));
    }
    if (rng() % 100 < 3) {
      uint64_t id = pick(rng, live);
      if (id != 0) CHECK(s.abort(id));
      live.erase(id);
    }
    bool had_work = s.has_unfinished();
    schedule_output out = s.schedule();
    s.check_invariants();
    REQUIRE(had_work == !out.empty());
    totals.preemptions += out.preempted.size();
    run_fake_model(s, out, kv, totals);
    uint64_t aborted = 0;
    if (!out.empty() && rng() % 100 < 2) {
      aborted = out.chunks[rng() % out.chunks.size()].seq_id;
      CHECK(s.abort(aborted));
      live.erase(aborted);
      ++totals.mid_step_aborts;
    }
    std::vector<sampled_token> sampled;
    for (const scheduled_chunk& c : out.chunks) {
      if (!c.sample || (c.seq_id == aborted && rng() % 2 == 0)) continue;
      int32_t n = c.first_pos + c.n_tokens - int32_t(c.draft.size());  // the new token's index (c.seq may be aborted)
      int32_t a = 0;  // leading drafts that are the true tokens
      while (a < int32_t(c.draft.size()) && c.draft[size_t(a)] == fake_token(c.seq_id, n + a)) ++a;
      auto target = live.find(c.seq_id);  // absent when aborted inside this step
      bool fin = target == live.end() || n + a + 1 >= target->second || rng() % 50 == 0;
      sampled.push_back({c.seq_id, fake_token(c.seq_id, n + a), fin, a});
      totals.accepted += uint64_t(a);
    }
    s.postprocess(out, sampled);
    s.check_invariants();
    for (const sampled_token& t : sampled) {
      if (t.seq_id == aborted) continue;
      const sched_sequence* q = s.find(t.seq_id);
      if (t.finished) {
        CHECK(q == nullptr);
        CHECK(!s.blocks().has(t.seq_id));
        live.erase(t.seq_id);
        ++totals.finished;
        continue;
      }
      REQUIRE(q != nullptr);
      CHECK_EQ(q->num_computed_tokens, q->num_tokens() - 1);
      for (int32_t i = 0; i < q->num_prompt_tokens; ++i) CHECK_EQ(q->token_ids[size_t(i)], prompts[q->id][size_t(i)]);
      for (int32_t i = q->num_prompt_tokens; i < q->num_tokens(); ++i) CHECK_EQ(q->token_ids[size_t(i)], fake_token(q->id, i));
    }
    CHECK_EQ(s.blocks().num_free_blocks() + s.blocks().num_used_blocks(), n_blocks);
  }
  CHECK(live.empty());
  CHECK_EQ(s.blocks().num_free_blocks(), n_blocks);
  CHECK_EQ(s.stats().running, 0);
  CHECK_EQ(s.stats().waiting, 0);
  totals.steps += uint64_t(steps);
  totals.cache_hits += s.stats().prefix_cache_hits;
}

}  // namespace

TEST_CASE("scheduler: randomized simulation keeps every invariant") {
  const int32_t block_sizes[] = {1, 2, 4, 16};
  const int32_t max_lens[] = {8, 24, 64};
  const int32_t chunks[] = {-1, 1, 3, 16};
  const int32_t max_seqs[] = {1, 2, 3, 8};
  sim_totals totals;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    std::mt19937 rng(seed * 101);
    sim_params p;
    p.seed = seed;
    p.block_size = block_sizes[rng() % 4];
    p.max_len = max_lens[rng() % 3];
    p.extra_blocks = int32_t(rng() % 4);
    p.chunk = chunks[rng() % 4];
    p.budget = p.chunk < 0 ? p.max_len + int32_t(rng() % 8) : 1 + int32_t(rng() % 40);
    p.max_seqs = max_seqs[rng() % 4];
    p.n_seqs = 120;
    simulate(p, totals);
    p.caching = true;  // the same run with prefix caching and shared prompt prefixes
    simulate(p, totals);
    p.drafts = true;  // and with speculative drafts
    simulate(p, totals);
    p.spans = true;  // and with whole spans in the prompts
    simulate(p, totals);
  }
  CHECK(totals.cache_hits > 0);
  // The tiny caches must actually exercise preemption, finishes and aborts inside a step.
  CHECK(totals.preemptions > 0);
  CHECK(totals.mid_step_aborts > 0);
  CHECK(totals.finished > 0);
  CHECK(totals.accepted > 0 && totals.accepted < totals.drafted);
  CHECK(totals.span_chunks > 0);
  std::printf("  sim: %llu steps, %llu preemptions, %llu finished, %llu mid-step aborts, %llu cached tokens, "
              "%llu of %llu drafts accepted, %llu spans past the chunk size\n",
              (unsigned long long)totals.steps, (unsigned long long)totals.preemptions,
              (unsigned long long)totals.finished, (unsigned long long)totals.mid_step_aborts,
              (unsigned long long)totals.cache_hits, (unsigned long long)totals.accepted,
              (unsigned long long)totals.drafted, (unsigned long long)totals.span_chunks);
}
