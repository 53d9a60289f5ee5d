// Scheduler: decodes first, exact budget, chunked prefill, -1 never splits, max_num_seqs, preemption of
// the newest with recompute, abort, postprocess validation. The randomized simulation is in
// scheduler_sim_test.cpp.
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/scheduler.h"
#include "harness.h"

using namespace spindle;

namespace {

scheduler make_sched(int32_t budget, int32_t max_seqs, int32_t chunk, int32_t max_len, int32_t n_blocks,
                     int32_t block_size = 16) {
  scheduler_config c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.chunked_prefill_size = chunk;
  c.max_model_len = max_len;
  return scheduler(c, block_manager(n_blocks, block_size));
}

std::vector<int32_t> tokens(int32_t n, int32_t base = 0) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(base + i);
  return t;
}

// Postprocesses `out`: each sampling chunk gets token 1000 + its index; ids in `finish` stop.
void finish_step(scheduler& s, const schedule_output& out, const std::set<uint64_t>& finish = {}) {
  std::vector<sampled_token> sampled;
  for (const scheduled_chunk& c : out.chunks) {
    if (c.sample) sampled.push_back({c.seq_id, 1000 + c.seq->num_tokens(), finish.count(c.seq_id) != 0});
  }
  s.postprocess(out, sampled);
  s.check_invariants();
}

// Budget 64 tokens, 4 sequences, blocks of 4, prefix caching on.
scheduler caching_sched(int32_t chunk, int32_t max_len, int32_t n_blocks) {
  scheduler_config c;
  c.max_num_batched_tokens = 64;
  c.max_num_seqs = 4;
  c.chunked_prefill_size = chunk;
  c.max_model_len = max_len;
  c.enable_prefix_caching = true;
  return scheduler(c, block_manager(n_blocks, 4));
}

schedule_output run_step(scheduler& s, const std::set<uint64_t>& finish = {}) {
  schedule_output out = s.schedule();
  s.check_invariants();
  std::set<uint64_t> ids;  // a step holds each sequence at most once
  for (const scheduled_chunk& c : out.chunks) CHECK(ids.insert(c.seq_id).second);
  finish_step(s, out, finish);
  return out;
}

}  // namespace

TEST_CASE("scheduler: rejects bad configs and prompts") {
  CHECK_THROWS_WITH(make_sched(0, 4, 16, 64, 8), "max_num_batched_tokens must be > 0");
  CHECK_THROWS_WITH(make_sched(64, 0, 16, 64, 8), "max_num_seqs must be > 0");
  CHECK_THROWS_WITH(make_sched(64, 4, 16, 0, 8), "max_model_len must be > 0");
  CHECK_THROWS_WITH(make_sched(64, 4, 0, 64, 8), "chunked_prefill_size must be -1");
  CHECK_THROWS_WITH(make_sched(64, 4, -2, 64, 8), "chunked_prefill_size must be -1");
  CHECK_THROWS_WITH(make_sched(63, 4, -1, 64, 8), "must be >= max_model_len");
  CHECK_THROWS_WITH(make_sched(64, 4, 16, 65, 4), "needs 5");
  scheduler s = make_sched(64, 4, 16, 64, 8);
  s.add(1, tokens(3));
  CHECK_THROWS_WITH(s.add(1, tokens(3)), "sequence 1 already exists");
  CHECK_THROWS_WITH(s.add(2, {}), "empty prompt");
  CHECK_THROWS_WITH(s.add(3, tokens(65)), "more than max_model_len 64");
  CHECK_EQ(s.stats().waiting, 1);
  s.check_invariants();
}

TEST_CASE("scheduler: decodes go first and share a step with prefill chunks") {
  scheduler s = make_sched(64, 8, 16, 128, 32);
  s.add(1, tokens(4));
  schedule_output out = run_step(s);
  REQUIRE(out.chunks.size() == 1);
  CHECK(!out.chunks[0].is_decode);
  CHECK(out.chunks[0].sample);
  CHECK_EQ(s.find(1)->num_tokens(), 5);
  CHECK_EQ(s.find(1)->num_computed_tokens, 4);

  s.add(2, tokens(40));
  out = run_step(s);
  REQUIRE(out.chunks.size() == 2);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(1));
  CHECK(out.chunks[0].is_decode);
  CHECK_EQ(out.chunks[0].first_pos, 4);
  CHECK_EQ(out.chunks[0].n_tokens, 1);
  CHECK(out.chunks[0].sample);
  CHECK_EQ(out.chunks[1].seq_id, uint64_t(2));
  CHECK(!out.chunks[1].is_decode);
  CHECK_EQ(out.chunks[1].n_tokens, 16);
  CHECK(!out.chunks[1].sample);
  CHECK_EQ(out.num_decodes, 1);
  CHECK_EQ(out.num_prefills, 1);
  CHECK_EQ(out.num_batched_tokens, 17);
  CHECK_EQ(s.find(2)->num_tokens(), 40);  // no token appended for a mid-prompt chunk
  CHECK_EQ(s.find(2)->num_computed_tokens, 16);
  CHECK_EQ(s.find(1)->num_tokens(), 6);
  // KV slots reserved: 1 through position 4 (its decode), 2 through its first chunk.
  CHECK_EQ(s.blocks().num_tokens(1), 5);
  CHECK_EQ(s.blocks().num_tokens(2), 16);
}

TEST_CASE("scheduler: the token budget is respected exactly") {
  scheduler s = make_sched(16, 8, 512, 256, 64);
  for (uint64_t id = 1; id <= 3; ++id) s.add(id, tokens(2));
  run_step(s);  // three 2-token prompts: 6 tokens
  s.add(4, tokens(100));
  schedule_output out = run_step(s);
  CHECK_EQ(out.num_decodes, 3);
  CHECK_EQ(out.num_prefills, 1);
  CHECK_EQ(out.num_batched_tokens, 16);
  CHECK_EQ(out.chunks.back().n_tokens, 13);
  int32_t total = 0;
  for (const scheduled_chunk& c : out.chunks) total += c.n_tokens;
  CHECK_EQ(total, 16);

  // More decodes than budget: the oldest 16 decode, the rest wait a step.
  scheduler t = make_sched(16, 32, 512, 64, 64);
  for (uint64_t id = 1; id <= 20; ++id) t.add(id, tokens(1));
  out = run_step(t);  // 16 one-token prompts fit
  CHECK_EQ(out.num_batched_tokens, 16);
  out = run_step(t);  // 16 decodes; the other 4 prompts get no budget
  CHECK_EQ(out.num_decodes, 16);
  CHECK_EQ(out.num_prefills, 0);
  CHECK_EQ(out.chunks.front().seq_id, uint64_t(1));
  CHECK_EQ(out.chunks.back().seq_id, uint64_t(16));
}

TEST_CASE("scheduler: chunked prefill splits a 300-token prompt") {
  scheduler s = make_sched(2048, 8, 128, 512, 64);
  s.add(1, tokens(300));
  std::vector<int32_t> firsts, sizes;
  for (int i = 0; i < 3; ++i) {
    schedule_output out = s.schedule();
    REQUIRE(out.chunks.size() == 1);
    firsts.push_back(out.chunks[0].first_pos);
    sizes.push_back(out.chunks[0].n_tokens);
    CHECK_EQ(out.chunks[0].sample, i == 2);
    CHECK_EQ(s.blocks().num_tokens(1), out.chunks[0].first_pos + out.chunks[0].n_tokens);
    finish_step(s, out);
  }
  CHECK(firsts == std::vector<int32_t>({0, 128, 256}));
  CHECK(sizes == std::vector<int32_t>({128, 128, 44}));
  CHECK_EQ(s.find(1)->num_tokens(), 301);
  CHECK_EQ(s.find(1)->token_ids[300], 1300);

  // A budget smaller than the chunk size cuts the chunks instead.
  scheduler t = make_sched(100, 8, 512, 512, 64);
  t.add(1, tokens(300));
  for (int i = 0; i < 3; ++i) CHECK_EQ(run_step(t).chunks[0].n_tokens, 100);
  CHECK_EQ(t.find(1)->num_tokens(), 301);
}

TEST_CASE("scheduler: chunked_prefill_size -1 never splits a prompt") {
  scheduler s = make_sched(256, 8, -1, 256, 64);
  s.add(1, tokens(200));
  schedule_output out = run_step(s);
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].n_tokens, 200);
  CHECK(out.chunks[0].sample);

  s.add(2, tokens(256));  // only fits an otherwise empty step
  s.add(3, tokens(2));    // behind 2 in arrival order: waits too
  for (int i = 0; i < 3; ++i) {
    out = run_step(s, i == 2 ? std::set<uint64_t>{1} : std::set<uint64_t>{});
    REQUIRE(out.chunks.size() == 1);
    CHECK(out.chunks[0].is_decode);
    CHECK_EQ(s.stats().waiting, 2);
  }
  out = run_step(s, {2});  // 1 finished: 2 goes whole (and, at max_model_len, stops)
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(2));
  CHECK_EQ(out.chunks[0].n_tokens, 256);
  CHECK(out.chunks[0].sample);
  out = run_step(s);
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(3));
  CHECK_EQ(out.chunks[0].n_tokens, 2);
}

TEST_CASE("scheduler: max_num_seqs caps the sequences holding KV") {
  scheduler s = make_sched(64, 2, 16, 64, 16);
  for (uint64_t id = 1; id <= 4; ++id) s.add(id, tokens(20));
  schedule_output out = run_step(s);  // 16 + 16: both partial, both count
  CHECK_EQ(out.chunks.size(), size_t(2));
  CHECK(s.running_ids() == std::vector<uint64_t>({1, 2}));
  CHECK(s.waiting_ids() == std::vector<uint64_t>({3, 4}));
  out = run_step(s);  // the rest of 1 and 2, still only two sequences
  CHECK_EQ(out.chunks.size(), size_t(2));
  CHECK_EQ(s.stats().running, 2);
  out = run_step(s, {1});  // decodes; 1 finishes
  CHECK_EQ(out.num_decodes, 2);
  CHECK_EQ(out.num_prefills, 0);
  out = run_step(s);  // 2 decodes, 3 is admitted
  CHECK_EQ(out.num_decodes, 1);
  CHECK_EQ(out.num_prefills, 1);
  CHECK_EQ(out.chunks[1].seq_id, uint64_t(3));
  CHECK(s.running_ids() == std::vector<uint64_t>({2, 3}));
}

TEST_CASE("scheduler: out of blocks preempts the newest, which is later recomputed") {
  // 4 blocks of 4 tokens; two 6-token prompts take 2 blocks each.
  scheduler s = make_sched(64, 4, 16, 16, 4, 4);
  s.add(1, tokens(6, 100));
  s.add(2, tokens(6, 200));
  run_step(s);  // both prefilled: 7 tokens each
  run_step(s);  // decode position 6: 8 tokens each
  run_step(s);  // decode position 7 fits the second block: 9 tokens each
  CHECK_EQ(s.blocks().num_free_blocks(), 0);
  schedule_output out = s.schedule();  // 1 needs a 3rd block for position 8: 2 is preempted
  CHECK(out.preempted == std::vector<uint64_t>({2}));
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(1));
  CHECK_EQ(out.chunks[0].first_pos, 8);
  const sched_sequence* two = s.find(2);
  CHECK(two->status == sched_status::waiting);
  CHECK_EQ(two->num_computed_tokens, 0);
  CHECK_EQ(two->num_tokens(), 9);
  CHECK_EQ(two->num_preemptions, 1);
  CHECK(!s.blocks().has(2));
  CHECK_EQ(s.stats().preemptions, uint64_t(1));
  s.check_invariants();
  finish_step(s, out);
  std::vector<int32_t> two_tokens = two->token_ids;

  out = run_step(s);  // 2 needs 3 blocks to recompute 9 tokens; 1 holds 3 of 4: 2 waits
  CHECK_EQ(out.chunks.size(), size_t(1));
  CHECK_EQ(s.stats().waiting, 1);
  out = run_step(s, {1});
  CHECK_EQ(out.chunks.size(), size_t(1));
  CHECK_EQ(s.blocks().num_free_blocks(), 4);

  out = run_step(s);  // recompute covers prompt + the 3 generated tokens and samples the 4th
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(2));
  CHECK_EQ(out.chunks[0].first_pos, 0);
  CHECK_EQ(out.chunks[0].n_tokens, 9);
  CHECK(out.chunks[0].sample);
  CHECK(!out.chunks[0].is_decode);
  REQUIRE(two->num_tokens() == 10);
  CHECK(std::vector<int32_t>(two->token_ids.begin(), two->token_ids.begin() + 9) == two_tokens);
  CHECK_EQ(two->token_ids[9], 1009);
  CHECK_EQ(two->num_computed_tokens, 9);
}

TEST_CASE("scheduler: a partial prefill preempts a newer decode and takes back its budget") {
  // 5 blocks of 4 tokens, budget 12, chunks of 8. 1 (prompt 20) is chunked; 2 (prompt 5) is newer.
  scheduler s = make_sched(12, 4, 8, 20, 5, 4);
  s.add(1, tokens(20));
  s.add(2, tokens(5));
  schedule_output out = run_step(s);  // 1: [0,8) 2 blocks; 2: [0,4) 1 block (budget spent)
  REQUIRE(out.chunks.size() == 2);
  CHECK_EQ(s.blocks().num_used_blocks(), 3);
  // 2 has one token left: a decode, scheduled first (takes a 4th block). 1's chunk [8,16) then needs 2
  // more blocks, 1 is free: 2, the newest, is preempted and its scheduled decode taken back.
  out = s.schedule();
  CHECK(out.preempted == std::vector<uint64_t>({2}));
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(1));
  CHECK_EQ(out.chunks[0].first_pos, 8);
  CHECK_EQ(out.chunks[0].n_tokens, 8);
  CHECK_EQ(out.num_decodes, 0);
  CHECK_EQ(out.num_batched_tokens, 8);
  CHECK(s.waiting_ids() == std::vector<uint64_t>({2}));  // not readmitted in a step that preempted
  s.check_invariants();
  finish_step(s, out);
  out = run_step(s, {1});  // 1: [16,20) takes the last block; 2 does not fit yet
  REQUIRE(out.chunks.size() == 1);
  CHECK(out.chunks[0].sample);
  out = run_step(s);
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(2));
  CHECK_EQ(out.chunks[0].n_tokens, 5);
  CHECK(out.chunks[0].sample);
}

TEST_CASE("scheduler: abort of a waiting or running sequence frees every block") {
  scheduler s = make_sched(26, 8, 16, 64, 16, 4);
  s.add(1, tokens(10));
  s.add(2, tokens(40));
  s.add(3, tokens(5));
  run_step(s);  // 1 whole (10), 2 partial (16), 3 waits: budget spent
  CHECK_EQ(s.stats().running, 2);
  CHECK_EQ(s.stats().waiting, 1);
  CHECK(s.abort(3));
  CHECK(s.abort(2));
  CHECK(!s.blocks().has(2));
  CHECK(!s.abort(2));
  CHECK(!s.abort(99));
  s.check_invariants();
  CHECK(s.abort(1));
  CHECK_EQ(s.blocks().num_free_blocks(), 16);
  CHECK(!s.has_unfinished());
  CHECK(s.schedule().empty());

  // Abort between schedule() and postprocess(): the chunk is skipped, with or without its sampled token.
  s.add(4, tokens(3));
  s.add(5, tokens(3));
  s.add(6, tokens(3));
  schedule_output out = s.schedule();
  REQUIRE(out.chunks.size() == 3);
  CHECK(s.abort(4));
  CHECK(s.abort(5));
  s.check_invariants();
  s.postprocess(out, {{5, 7, false}, {6, 8, false}});
  CHECK_EQ(s.find(6)->num_tokens(), 4);
  CHECK(s.abort(6));
  CHECK_EQ(s.blocks().num_free_blocks(), 16);
  s.check_invariants();
}

TEST_CASE("scheduler: postprocess validates before changing anything") {
  scheduler s = make_sched(32, 8, 16, 8, 4, 4);
  s.add(1, tokens(3));
  s.add(2, tokens(8));  // = max_model_len: must finish at its first token
  schedule_output out = s.schedule();
  CHECK_THROWS_WITH(s.schedule(), "before postprocess");
  CHECK_THROWS_WITH(s.postprocess(out, {{1, 5, false}}), "expects a sampled token for sequence 2");
  CHECK_THROWS_WITH(s.postprocess(out, {{2, 5, false}, {1, 5, false}}), "sequence 1");
  CHECK_THROWS_WITH(s.postprocess(out, {{1, 5, false}, {2, 5, true}, {3, 5, false}}), "got 3 sampled tokens");
  CHECK_THROWS_WITH(s.postprocess(out, {{1, 5, false}, {2, 5, false}}), "reached max_model_len 8");
  schedule_output stale = out;
  stale.step += 1;
  CHECK_THROWS_WITH(s.postprocess(stale, {{1, 5, false}, {2, 5, true}}), "pending step");
  CHECK_EQ(s.find(1)->num_computed_tokens, 0);
  CHECK_EQ(s.find(1)->num_tokens(), 3);
  s.check_invariants();
  s.postprocess(out, {{1, 5, false}, {2, 5, true}});
  CHECK(s.find(2) == nullptr);
  CHECK_EQ(s.find(1)->num_tokens(), 4);
  CHECK_THROWS_WITH(s.postprocess(out, {{1, 5, false}}), "pending step is none");
  s.check_invariants();
}

TEST_CASE("scheduler: prefix caching starts a sequence after its cached blocks, and frees leave ref counts right") {
  scheduler s = caching_sched(16, 64, 16);
  const int32_t free0 = s.blocks().num_free_blocks();
  s.add(1, tokens(22, 500));  // 5 full blocks + 2
  run_step(s);                // 16 prompt tokens: blocks 0..3 committed
  run_step(s, {1});           // the rest, samples, finishes: its blocks go to the cache
  CHECK(s.find(1) == nullptr);
  CHECK_EQ(s.stats().blocks_cached, 5);
  CHECK_EQ(s.blocks().num_free_blocks(), free0);
  // the same 20 first tokens: 5 blocks are cached, but at most num_tokens - 1 = 20 tokens hit: 5 blocks? no,
  // (21 - 1) / 4 = 5 blocks of the 21-token prompt, all cached
  std::vector<int32_t> p2 = tokens(20, 500);
  p2.push_back(9);
  s.add(2, p2);
  schedule_output out = s.schedule();
  REQUIRE(out.chunks.size() == size_t(1));
  CHECK_EQ(out.chunks[0].first_pos, 20);
  CHECK_EQ(out.chunks[0].n_tokens, 1);
  CHECK_EQ(s.find(2)->num_cached_tokens, 20);
  CHECK_EQ(s.stats().prefix_cache_queries, uint64_t(22 + 21));
  CHECK_EQ(s.stats().prefix_cache_hits, uint64_t(20));
  s.check_invariants();
  finish_step(s, out);
  // a third one shares the first 3 blocks with sequence 2 (ref counts 2), then both are aborted
  std::vector<int32_t> p3 = tokens(12, 500);
  p3.push_back(77);
  s.add(3, p3);
  out = s.schedule();
  const std::vector<int32_t>& t2 = s.blocks().block_table(2);
  const std::vector<int32_t>& t3 = s.blocks().block_table(3);
  CHECK_EQ(t2[0], t3[0]);
  CHECK_EQ(s.blocks().ref_count(t3[0]), 2);
  CHECK_EQ(s.find(3)->num_cached_tokens, 12);
  s.check_invariants();
  CHECK(s.abort(3));  // mid-step: the step's chunks of both are skipped (their sequences are gone)
  CHECK(s.abort(2));
  s.postprocess(out, {});
  s.check_invariants();
  CHECK_EQ(s.blocks().num_free_blocks(), free0);
  for (int32_t b = 0; b < s.blocks().num_blocks(); ++b) CHECK_EQ(s.blocks().ref_count(b), 0);
  s.check_invariants();
}

TEST_CASE("scheduler: a sequence whose next prompt block a running one is computing waits for the cache; others go by") {
  scheduler s = caching_sched(8, 64, 32);  // blocks of 4, 8-token chunks, budget 64
  s.add(1, tokens(20, 500));               // 5 full blocks
  s.add(2, tokens(20, 500));               // the same prompt (n = 2 of one request)
  s.add(3, tokens(10, 900));               // another prompt, behind them in the queue
  schedule_output out = run_step(s);
  std::set<uint64_t> admitted;
  for (const scheduled_chunk& c : out.chunks) admitted.insert(c.seq_id);
  CHECK(admitted == std::set<uint64_t>({1, 3}));  // 2 waits: 1 computes its blocks; 3 is not held up
  CHECK(s.find(2)->status == sched_status::waiting);
  out = run_step(s);                       // 1: tokens 8..15 (blocks 2, 3); 2 still waits (1 computes its block 2)
  for (const scheduled_chunk& c : out.chunks) CHECK(c.seq_id != uint64_t(2));
  out = s.schedule();                      // the 4 blocks 2 can take ((20 - 1) / 4) are cached: it starts after them
  bool found = false;
  for (const scheduled_chunk& c : out.chunks) {
    if (c.seq_id != 2) continue;
    found = true;
    CHECK_EQ(c.first_pos, 16);
    CHECK_EQ(c.n_tokens, 4);
  }
  CHECK(found);
  CHECK_EQ(s.find(2)->num_cached_tokens, 16);
  finish_step(s, out, {3});
  run_step(s, {1, 2});
  // a different salt (another adapter / cache_salt) never waits on it
  s.add(4, tokens(20, 700), true, false, 0);
  s.add(5, tokens(20, 700), true, false, 77);
  out = run_step(s);
  admitted.clear();
  for (const scheduled_chunk& c : out.chunks) admitted.insert(c.seq_id);
  CHECK(admitted.count(4) == 1);
  CHECK(admitted.count(5) == 1);
}

TEST_CASE("scheduler: sequences passed over keep their running slots; later ones do not take them") {
  scheduler s = caching_sched(16, 64, 64);  // 4 sequences at most
  for (uint64_t id = 1; id <= 4; ++id) s.add(id, tokens(40, 500));  // n = 4 samples of one prompt
  for (uint64_t id = 5; id <= 7; ++id) s.add(id, tokens(8, 900 + int32_t(id) * 10));
  schedule_output out = run_step(s);
  CHECK_EQ(out.chunks.size(), size_t(1));  // 1 computes; 2..4 wait for its blocks and hold 3 slots: 5..7 wait too
  for (int i = 0; i < 3; ++i) run_step(s);
  CHECK(s.running_ids() == std::vector<uint64_t>({1, 2, 3, 4}));
  CHECK(s.waiting_ids() == std::vector<uint64_t>({5, 6, 7}));
  CHECK(s.find(2)->num_cached_tokens == 36);
}

TEST_CASE("scheduler: no wait on a running sequence that is still computing blocks the waiting one has cached") {
  scheduler s = caching_sched(8, 80, 64);
  s.add(9, tokens(33, 500));
  for (int i = 0; i < 5; ++i) run_step(s, {9});  // its 8 full blocks go to the cache
  CHECK(s.find(9) == nullptr);
  s.add(1, tokens(64, 500), /*use_prefix_cache=*/false);  // computes from 0 (as prompt logprobs do)
  s.add(2, tokens(64, 500));
  schedule_output out = s.schedule();
  bool two = false;
  for (const scheduled_chunk& c : out.chunks) {
    if (c.seq_id != 2) continue;
    two = true;
    CHECK_EQ(c.first_pos, 32);
  }
  CHECK(two);
  finish_step(s, out);
}

TEST_CASE("scheduler: a preempted sequence finds its own blocks in the prefix cache") {
  scheduler s = caching_sched(64, 32, 9);
  s.add(1, tokens(12, 1));
  s.add(2, tokens(12, 100));
  run_step(s);                                // both prefilled: 3 blocks each, 13 tokens each
  for (int i = 0; i < 4; ++i) run_step(s);    // decodes of slots 12..15: 4 blocks each, 8 of 9 used
  schedule_output out = s.schedule();         // slot 16 needs a 5th block each: one is free
  REQUIRE(out.preempted.size() == size_t(1));
  CHECK_EQ(out.preempted[0], uint64_t(2));   // the newest goes
  s.check_invariants();
  finish_step(s, out, {1});                   // and the other finishes: its blocks go to the cache too
  out = s.schedule();                         // sequence 2 comes back: its 4 full blocks are still cached
  REQUIRE(out.chunks.size() == size_t(1));
  CHECK_EQ(out.chunks[0].seq_id, uint64_t(2));
  CHECK_EQ(out.chunks[0].first_pos, 16);
  CHECK_EQ(out.chunks[0].n_tokens, 1);
  CHECK_EQ(s.find(2)->num_cached_tokens, 0);  // reported for its first admission only
  CHECK_EQ(s.stats().prefix_cache_hits, uint64_t(16));
  s.check_invariants();
  finish_step(s, out, {2});
  CHECK_EQ(s.blocks().num_free_blocks(), 9);
  s.check_invariants();
}

TEST_CASE("scheduler: a decode carries the drafter's tokens; postprocess keeps the accepted ones and gives back slots") {
  scheduler s = make_sched(64, 4, 16, 40, 16, 4);
  std::vector<int32_t> next_draft = {7, 8, 9, 10, 11};
  int32_t asked_max = -1;
  s.set_drafter([&](const sched_sequence& q, int32_t max_draft, std::vector<int32_t>& draft) {
    CHECK_EQ(q.num_uncomputed_tokens(), 1);
    asked_max = max_draft;
    draft = next_draft;
  });
  s.add(1, tokens(6));
  run_step(s);  // prefill: no drafts asked
  CHECK_EQ(asked_max, -1);
  REQUIRE(s.find(1)->num_tokens() == 7);
  schedule_output out = s.schedule();
  s.check_invariants();
  REQUIRE(out.chunks.size() == 1);
  const scheduled_chunk& c = out.chunks[0];
  CHECK(c.is_decode);
  CHECK(c.sample);
  CHECK_EQ(c.first_pos, 6);
  CHECK_EQ(c.n_tokens, 6);
  CHECK(c.draft == next_draft);
  CHECK_EQ(asked_max, 33);  // min(budget 64 - 1, max_model_len 40 - 7 tokens)
  CHECK_EQ(s.blocks().num_tokens(1), 12);  // slots for positions 0 .. 11
  // 2 of 5 accepted, then 42: the sequence gains 7 8 42, computes 6 .. 8, and keeps slots for 10 tokens
  s.postprocess(out, {{1, 42, false, 2}});
  s.check_invariants();
  const sched_sequence* q = s.find(1);
  CHECK(q->token_ids == std::vector<int32_t>({0, 1, 2, 3, 4, 5, 1006, 7, 8, 42}));
  CHECK_EQ(q->num_computed_tokens, 9);
  CHECK_EQ(s.blocks().num_tokens(1), 10);
  CHECK_EQ(int32_t(s.blocks().block_table(1).size()), 3);
  // every draft accepted: 5 + 1 tokens in one step
  out = s.schedule();
  s.postprocess(out, {{1, 50, false, 5}});
  s.check_invariants();
  CHECK_EQ(s.find(1)->num_tokens(), 16);
  CHECK_EQ(s.find(1)->num_computed_tokens, 15);
  // a bad acceptance count is refused without changing anything
  out = s.schedule();
  CHECK_THROWS_WITH(s.postprocess(out, {{1, 50, false, 6}}), "accepted 6 of 5 draft tokens");
  s.postprocess(out, {{1, 50, true, 1}});  // finished after one accepted draft: gone, blocks freed
  CHECK(s.find(1) == nullptr);
  CHECK_EQ(s.blocks().num_free_blocks(), 16);
  s.check_invariants();
}

TEST_CASE("scheduler: drafts stop below max_model_len, and are dropped when their slots do not fit") {
  const auto fill = [](const sched_sequence&, int32_t max_draft, std::vector<int32_t>& draft) {
    draft.assign(size_t(max_draft), 3);
  };
  scheduler s = make_sched(8, 4, 16, 12, 4, 4);  // 4 blocks of 4 slots
  s.set_drafter(fill);
  s.add(1, tokens(9));
  run_step(s);  // 8 prompt tokens (the budget)
  schedule_output out = s.schedule();  // the prompt's last token, with drafts for the first output tokens
  REQUIRE(out.chunks.size() == 1);
  CHECK_EQ(out.chunks[0].first_pos, 8);
  CHECK_EQ(out.chunks[0].draft.size(), size_t(3));  // positions 8 .. 11 < max_model_len 12
  s.postprocess(out, {{1, 5, false, 1}});
  s.check_invariants();
  CHECK_EQ(s.find(1)->num_tokens(), 11);
  CHECK_EQ(s.blocks().num_tokens(1), 11);
  out = s.schedule();
  CHECK_EQ(out.chunks[0].draft.size(), size_t(1));
  s.postprocess(out, {{1, 5, true, 0}});

  scheduler t = make_sched(8, 4, 16, 16, 4, 4);
  t.set_drafter(fill);
  t.add(1, tokens(3));
  t.add(2, tokens(5));
  run_step(t);  // both prompts: 1 holds 1 block, 2 holds 2, one is free
  out = t.schedule();
  REQUIRE(out.chunks.size() == 2);
  CHECK(out.chunks[0].draft.empty());               // 1 would need 2 more blocks for 7 drafts: plain decode
  CHECK_EQ(out.chunks[1].draft.size(), size_t(6));  // 2 fits 6 (the budget's rest) in the free block
  CHECK(out.preempted.empty());
  t.postprocess(out, {{1, 5, false, 0}, {2, 6, false, 0}});
  t.check_invariants();
  CHECK_EQ(t.blocks().num_free_blocks(), 1);  // 2's rejected drafts gave their block back
}

TEST_CASE("scheduler: drafts leave one budget token for every decode after them") {
  scheduler s = make_sched(6, 4, 16, 64, 32, 4);
  s.set_drafter([](const sched_sequence&, int32_t max_draft, std::vector<int32_t>& draft) { draft.assign(size_t(max_draft), 3); });
  for (uint64_t id = 1; id <= 3; ++id) s.add(id, tokens(2, int32_t(id) * 10));
  run_step(s);  // the three prompts (2 tokens each)
  schedule_output out = s.schedule();
  REQUIRE(out.chunks.size() == 3);  // every decode fits
  CHECK_EQ(out.chunks[0].draft.size(), size_t(3));  // budget 6: 1 + 3 drafts, then 1 + 1 for the other two
  CHECK(out.chunks[1].draft.empty());
  CHECK(out.chunks[2].draft.empty());
  CHECK_EQ(out.num_batched_tokens, 6);
  s.postprocess(out, {{1, 5, false, 0}, {2, 5, false, 0}, {3, 5, false, 0}});
  s.check_invariants();
}

TEST_CASE("scheduler: a chunk never ends inside a whole span (bidirectional image embeddings)") {
  // chunks of 10, budget 64; the span [14, 30) (16 tokens) of a 40-token prompt
  scheduler s = make_sched(64, 4, 10, 128, 64);
  s.add(1, tokens(40), true, false, 0, {14, 30});
  schedule_output o = run_step(s);  // [0, 10): before the span
  REQUIRE(o.chunks.size() == 1);
  CHECK(o.chunks[0].first_pos == 0 && o.chunks[0].n_tokens == 10);
  o = run_step(s);  // [10, 20) would end inside it: stops at its start
  CHECK(o.chunks[0].first_pos == 10 && o.chunks[0].n_tokens == 4);
  o = run_step(s);  // starts at the span: the whole span, past the chunk size
  CHECK(o.chunks[0].first_pos == 14 && o.chunks[0].n_tokens == 16);
  o = run_step(s);
  CHECK(o.chunks[0].first_pos == 30 && o.chunks[0].n_tokens == 10 && o.chunks[0].sample);
}

TEST_CASE("scheduler: a whole span that does not fit goes first the next step; one longer than a step is refused") {
  // budget 12: sequence 2's span [0, 12) fills a step; sequence 1's decode leaves 11 the first time
  scheduler s = make_sched(12, 4, 4, 128, 64);
  s.add(1, tokens(3), true, false);
  run_step(s);  // sequence 1's prompt; it decodes from now on
  s.add(2, tokens(14, 100), true, false, 0, {2, 14});
  schedule_output o = run_step(s);  // 1 decodes; 2 is admitted with [0, 2), the part before its span
  REQUIRE(o.chunks.size() == 2);
  CHECK(o.chunks[1].seq_id == 2 && o.chunks[1].n_tokens == 2);
  o = run_step(s);  // 1 decodes first; 2's span (12) does not fit the 11 left
  REQUIRE(o.chunks.size() == 1);
  CHECK(o.chunks[0].seq_id == 1);
  s.add(3, tokens(5, 200), true, false);
  o = run_step(s);  // 2 goes first, with the whole budget; 1's decode and 3 wait for the next step
  REQUIRE(o.chunks.size() == 1);
  CHECK(o.chunks[0].seq_id == 2 && o.chunks[0].first_pos == 2 && o.chunks[0].n_tokens == 12);
  o = run_step(s);  // then everyone again: 1 and 2 decode, 3's prompt
  CHECK(o.chunks.size() == 3);
  bool threw = false;
  try { s.add(4, tokens(20), true, false, 0, {2, 15}); } catch (const spindle::error& e) {
    threw = std::string(e.what()).find("a step takes at most 12 tokens") != std::string::npos;
  }
  CHECK(threw);
  threw = false;
  try { s.add(5, tokens(20), true, false, 0, {5, 3}); } catch (const spindle::error& e) {
    threw = std::string(e.what()).find("sorted [begin, end) pairs inside the prompt") != std::string::npos;
  }
  CHECK(threw);
}

TEST_CASE("scheduler: a sequence that goes first with its span is not scheduled again in the same step") {
  // budget 40, chunks of 16: sequences 1 and 3 (34 tokens each) leave 8, so sequence 2's span [4, 20) waits a step;
  // then it goes first, and 1 and 3 finish their prompts with room left that the span would fit again
  scheduler s = make_sched(40, 4, 16, 128, 64);
  s.add(1, tokens(34), true, false);
  s.add(3, tokens(34, 50), true, false);
  s.add(2, tokens(40, 100), true, false, 0, {4, 20});
  run_step(s);  // 1: [0, 16); 3: [0, 16); 2: [0, 4)
  schedule_output o = run_step(s);  // 1 and 3: [16, 32); 2's span does not fit the 8 left
  REQUIRE(o.chunks.size() == 2);
  o = run_step(s);  // 2 first: [4, 20); 1 and 3: [32, 34), 20 tokens still left in the step
  REQUIRE(o.chunks.size() == 3);
  CHECK(o.chunks[0].seq_id == 2 && o.chunks[0].first_pos == 4 && o.chunks[0].n_tokens == 16);
  for (int i = 0; i < 6; ++i) run_step(s);  // run_step checks that no step holds a sequence twice
  const sched_sequence* two = s.find(2);
  REQUIRE(two != nullptr);
  CHECK(two->num_computed_tokens >= 16);
}

TEST_CASE("scheduler: steady decodes and arrivals never starve a sequence waiting at a whole span") {
  // budget 16, spans of 16: without the first-in-line rule a decode every step kept it waiting for ever
  scheduler s = make_sched(16, 8, 16, 256, 128);
  s.add(1, tokens(2), true, false);
  run_step(s);
  s.add(2, tokens(40, 300), true, false, 0, {4, 20, 22, 38});
  uint64_t next = 10;
  const auto done = [&] { return s.find(2) != nullptr && s.find(2)->num_computed_tokens >= 40; };
  for (int step = 0; step < 30 && !done(); ++step) {
    if (step % 3 == 0) s.add(next++, tokens(3, 500 + step), true, false);  // a new short request every few steps
    run_step(s);
  }
  CHECK(done());
}

TEST_CASE("scheduler: a cached prefix that ends where an image starts gives a block back instead of blocking the queue") {
  // blocks of 4, budget 64 (caching_sched): a first request caches [0, 16); the second's span [16, 80) of 64 tokens
  // does not fit beside a decode, so it starts one block earlier, and a request behind it is admitted too
  scheduler s = caching_sched(64, 256, 128);
  std::vector<int32_t> prompt = tokens(100);
  s.add(1, std::vector<int32_t>(prompt.begin(), prompt.begin() + 17), true, false);
  run_step(s);  // 1: its 17-token prompt, blocks [0, 16) committed; it decodes from now on
  s.add(2, prompt, true, false, 0, {16, 80});
  s.add(3, tokens(5, 900), true, false);
  schedule_output o = run_step(s);
  bool two = false, three = false;
  for (const scheduled_chunk& c : o.chunks) {
    if (c.seq_id == 2) { two = true; CHECK(c.first_pos == 12); CHECK(c.n_tokens == 4); }
    three = three || c.seq_id == 3;
  }
  CHECK(two);
  CHECK(three);
}
