// Recurrent-state slots: the pool (lowest free slot first, all-or-nothing, invariants) and the scheduler's use
// of it: a slot is taken when a sequence is admitted, kept across its chunks and decodes, and given back on
// preemption, finish and abort; max_num_seqs slots always suffice; the randomized scheduler simulation
// (scheduler_sim_test.cpp) checks the same invariants through check_invariants().
#include <cstdint>
#include <set>
#include <vector>

#include "engine/scheduler.h"
#include "engine/state_slots.h"
#include "harness.h"

using namespace spindle;

namespace {

scheduler make_sched(int32_t budget, int32_t max_seqs, int32_t chunk, int32_t max_len, int32_t n_blocks) {
  scheduler_config c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.chunked_prefill_size = chunk;
  c.max_model_len = max_len;
  return scheduler(c, block_manager(n_blocks, 16));
}

std::vector<int32_t> tokens(int32_t n) { return std::vector<int32_t>(size_t(n), 7); }

schedule_output run_step(scheduler& s, const std::set<uint64_t>& finish = {}) {
  schedule_output out = s.schedule();
  s.check_invariants();
  std::vector<sampled_token> sampled;
  for (const scheduled_chunk& c : out.chunks) {
    if (c.sample) sampled.push_back({c.seq_id, 9, finish.count(c.seq_id) != 0});
  }
  s.postprocess(out, sampled);
  s.check_invariants();
  return out;
}

int32_t slot(const scheduler& s, uint64_t id) { return s.find(id) ? s.find(id)->state_slot : -2; }

}  // namespace

TEST_CASE("state slots: lowest free slot first, release and reuse, errors") {
  state_slot_pool p(3);
  CHECK_EQ(p.acquire(10), 0);
  CHECK_EQ(p.acquire(11), 1);
  CHECK_EQ(p.acquire(12), 2);
  CHECK_THROWS_WITH(p.acquire(13), "all 3 slots are held");
  CHECK_THROWS_WITH(p.acquire(11), "already holds slot 1");
  CHECK(p.release(10));
  CHECK(!p.release(10));
  CHECK(p.release(12));
  CHECK_EQ(p.num_free(), 2);
  CHECK_EQ(p.acquire(14), 0);
  CHECK_EQ(p.slot_of(14), 0);
  CHECK_EQ(p.slot_of(10), -1);
  CHECK_EQ(p.acquire(15), 2);
  p.check_invariants();
  CHECK_THROWS_WITH(state_slot_pool(0), "at least one slot");
}

TEST_CASE("scheduler: a sequence holds one state slot exactly while running") {
  scheduler s = make_sched(64, 2, 8, 64, 16);
  s.add(1, tokens(20));
  s.add(2, tokens(3));
  s.add(3, tokens(3));
  run_step(s);  // 1 and 2 admitted (max_num_seqs 2), 3 waits
  CHECK_EQ(slot(s, 1), 0);
  CHECK_EQ(slot(s, 2), 1);
  CHECK_EQ(slot(s, 3), -1);
  run_step(s, {2});  // 2 decodes and finishes: its slot is free again
  CHECK_EQ(s.state_slots().num_held(), 1);
  run_step(s);       // 3 admitted into the freed slot; 1 keeps its slot across chunks
  CHECK_EQ(slot(s, 1), 0);
  CHECK_EQ(slot(s, 3), 1);
  CHECK(s.abort(1));
  CHECK_EQ(s.state_slots().num_held(), 1);
  CHECK_EQ(s.state_slots().slot_of(1), -1);
  s.check_invariants();
}

TEST_CASE("scheduler: preemption gives the slot back; the recompute takes one again") {
  // 4 blocks of 16 slots: two sequences of 32 tokens fill the cache, so the newest is preempted on growth
  scheduler s = make_sched(128, 4, -1, 64, 4);
  s.add(1, tokens(32));
  s.add(2, tokens(32));
  run_step(s);  // both prefilled (2 blocks each), both sample
  CHECK_EQ(slot(s, 1), 0);
  CHECK_EQ(slot(s, 2), 1);
  schedule_output out = run_step(s);  // decodes need a third block each: 2 is preempted
  REQUIRE(out.preempted.size() == 1);
  CHECK_EQ(out.preempted[0], uint64_t(2));
  CHECK_EQ(slot(s, 2), -1);
  CHECK_EQ(s.state_slots().num_held(), 1);
  run_step(s, {1});  // 1 finishes; 2 is readmitted later with a slot
  for (int i = 0; i < 4 && slot(s, 2) < 0; ++i) run_step(s);
  CHECK(slot(s, 2) >= 0);
  CHECK_EQ(s.find(2)->num_preemptions, 1);
}
