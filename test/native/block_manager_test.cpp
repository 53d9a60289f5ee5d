// Block manager: allocation, append, free, ref counts through fork, all-or-nothing failures, and the KV
// sizing helpers. Every case ends with check_invariants() on the state it built.
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/block_manager.h"
#include "harness.h"

using spindle::block_manager;

TEST_CASE("block_manager: rejects bad sizes") {
  CHECK_THROWS_WITH(block_manager(0, 16), "num_blocks must be > 0");
  CHECK_THROWS_WITH(block_manager(-3, 16), "num_blocks must be > 0");
  CHECK_THROWS_WITH(block_manager(8, 0), "block_size must be > 0");
  block_manager bm(8, 4);
  CHECK_THROWS_WITH(bm.allocate(1, -1), "negative token count");
  CHECK_THROWS_WITH(bm.blocks_for_tokens(-1), "negative token count");
  CHECK(!bm.can_allocate(-1));
  CHECK_THROWS_WITH(bm.append(7, 1), "unknown sequence 7");
  CHECK_THROWS_WITH(bm.can_append(7, 1), "unknown sequence 7");
  CHECK_THROWS_WITH(bm.block_table(7), "unknown sequence 7");
  CHECK_THROWS_WITH(bm.ref_count(8), "out of range");
  CHECK_THROWS_WITH(bm.ref_count(-1), "out of range");
  bm.check_invariants();
}

TEST_CASE("block_manager: allocate, append and deallocate") {
  block_manager bm(8, 4);
  CHECK_EQ(bm.num_blocks(), 8);
  CHECK_EQ(bm.num_free_blocks(), 8);
  CHECK_EQ(bm.blocks_for_tokens(0), 0);
  CHECK_EQ(bm.blocks_for_tokens(4), 1);
  CHECK_EQ(bm.blocks_for_tokens(5), 2);
  CHECK(bm.can_allocate(32));
  CHECK(!bm.can_allocate(33));

  bm.allocate(1, 9);  // 3 blocks
  CHECK(bm.has(1));
  CHECK_EQ(bm.num_tokens(1), 9);
  CHECK(bm.block_table(1) == std::vector<int32_t>({0, 1, 2}));
  CHECK_EQ(bm.num_used_blocks(), 3);
  CHECK_EQ(bm.num_free_blocks(), 5);
  CHECK_EQ(bm.ref_count(1), 1);
  CHECK_EQ(bm.ref_count(3), 0);

  CHECK(bm.can_append(1, 3));
  bm.append(1, 3);  // 12 tokens: still 3 blocks
  CHECK_EQ(bm.num_used_blocks(), 3);
  bm.append(1, 1);  // 13 tokens: a 4th block
  CHECK(bm.block_table(1) == std::vector<int32_t>({0, 1, 2, 3}));
  bm.append(1, 0);
  CHECK_EQ(bm.num_tokens(1), 13);

  bm.allocate(2, 0);  // an empty table is allowed and holds no block
  CHECK(bm.has(2));
  CHECK(bm.block_table(2).empty());
  CHECK(!bm.can_append(2, 17));  // 5 blocks, 4 free
  bm.append(2, 16);               // 4 blocks: takes every free one
  CHECK_EQ(bm.num_free_blocks(), 0);
  bm.check_invariants();
  bm.deallocate(1);
  CHECK_EQ(bm.num_free_blocks(), 4);
  CHECK(!bm.has(1));
  CHECK_EQ(bm.num_tokens(1), 0);
  bm.deallocate(2);
  CHECK_EQ(bm.num_free_blocks(), 8);
  bm.check_invariants();
}

TEST_CASE("block_manager: out of blocks is all-or-nothing") {
  block_manager bm(4, 4);
  bm.allocate(1, 6);  // 2 blocks
  std::vector<int32_t> before = bm.block_table(1);
  CHECK(!bm.can_allocate(9));  // 3 blocks, 2 free
  CHECK_THROWS_WITH(bm.allocate(2, 9), "out of KV blocks");
  CHECK(!bm.has(2));
  CHECK_EQ(bm.num_free_blocks(), 2);

  CHECK(!bm.can_append(1, 11));  // 17 tokens = 5 blocks: 3 more, 2 free
  CHECK_THROWS_WITH(bm.append(1, 11), "out of KV blocks");
  CHECK(bm.block_table(1) == before);
  CHECK_EQ(bm.num_tokens(1), 6);
  CHECK_EQ(bm.num_free_blocks(), 2);

  CHECK_THROWS_WITH(bm.allocate(1, 1), "already has blocks");
  CHECK_EQ(bm.num_tokens(1), 6);
  bm.check_invariants();

  CHECK(bm.can_append(1, 10));  // 16 tokens = 4 blocks exactly
  bm.append(1, 10);
  CHECK_EQ(bm.num_free_blocks(), 0);
  CHECK(!bm.can_allocate(1));
  CHECK(bm.can_allocate(0));
  bm.deallocate(1);
  CHECK_EQ(bm.num_free_blocks(), 4);
  bm.deallocate(1);  // unknown now: a no-op
  CHECK_EQ(bm.num_free_blocks(), 4);
  bm.check_invariants();
}

TEST_CASE("block_manager: freed blocks are reused") {
  block_manager bm(3, 2);
  bm.allocate(1, 2);
  bm.allocate(2, 2);
  bm.allocate(3, 2);
  CHECK_EQ(bm.num_free_blocks(), 0);
  int32_t freed = bm.block_table(2)[0];
  bm.deallocate(2);
  bm.allocate(4, 1);
  CHECK_EQ(bm.block_table(4)[0], freed);
  CHECK_EQ(bm.num_used_blocks() + bm.num_free_blocks(), bm.num_blocks());
  bm.check_invariants();
}

TEST_CASE("block_manager: fork shares blocks and frees respect ref counts") {
  block_manager bm(6, 4);
  bm.allocate(1, 8);  // 2 full blocks
  bm.fork(1, 2);
  CHECK(bm.block_table(2) == bm.block_table(1));
  CHECK_EQ(bm.num_tokens(2), 8);
  CHECK_EQ(bm.num_used_blocks(), 2);
  for (int32_t b : bm.block_table(1)) CHECK_EQ(bm.ref_count(b), 2);
  bm.check_invariants();

  bm.append(2, 1);  // the shared tail is full: the child gets a fresh block of its own
  CHECK_EQ(bm.block_table(2).size(), size_t(3));
  CHECK_EQ(bm.ref_count(bm.block_table(2)[2]), 1);
  CHECK_EQ(bm.num_used_blocks(), 3);

  bm.deallocate(1);
  CHECK_EQ(bm.num_used_blocks(), 3);  // still held by 2
  for (int32_t b : bm.block_table(2)) CHECK_EQ(bm.ref_count(b), 1);
  bm.check_invariants();
  bm.deallocate(2);
  CHECK_EQ(bm.num_free_blocks(), 6);
  bm.check_invariants();

  CHECK_THROWS_WITH(bm.fork(9, 10), "unknown sequence 9");
  bm.allocate(3, 1);
  CHECK_THROWS_WITH(bm.fork(3, 3), "already has blocks");
  bm.check_invariants();
}

TEST_CASE("block_manager: appending onto a shared partial block throws and changes nothing") {
  block_manager bm(4, 4);
  bm.allocate(1, 5);  // tail block holds 1 of 4 slots
  bm.fork(1, 2);
  CHECK_THROWS_WITH(bm.append(2, 1), "copy-on-write");
  CHECK_THROWS_WITH(bm.can_append(1, 1), "copy-on-write");
  CHECK_EQ(bm.num_tokens(1), 5);
  CHECK_EQ(bm.num_tokens(2), 5);
  CHECK_EQ(bm.num_used_blocks(), 2);
  bm.append(2, 0);  // nothing new: fine
  bm.deallocate(1);
  bm.append(2, 3);  // no longer shared
  CHECK_EQ(bm.num_tokens(2), 8);
  bm.check_invariants();
}

TEST_CASE("block_manager: bytes per token") {
  // 2 layers * 2 kv heads * (4 + 4) dims * 4 bytes
  CHECK_EQ(spindle::block_manager_bytes_per_token(2, 2, 4, 4), uint64_t(128));
  CHECK_EQ(spindle::block_manager_bytes_per_token(28, 8, 128, 128, 2), uint64_t(28 * 8 * 256 * 2));
  CHECK_THROWS_WITH(spindle::block_manager_bytes_per_token(0, 2, 4, 4), "bad sizes");
  CHECK_THROWS_WITH(spindle::block_manager_bytes_per_token(2, 2, 4, -4), "bad sizes");
  CHECK_THROWS_WITH(spindle::block_manager_bytes_per_token(2, 2, 4, 4, 0), "bad sizes");
  int32_t big = std::numeric_limits<int32_t>::max();
  CHECK_THROWS_WITH(spindle::block_manager_bytes_per_token(big, big, big, big, 8), "overflow");
}

TEST_CASE("block_manager: budget from a fraction of free memory") {
  CHECK_EQ(spindle::block_manager_budget_from_fraction(1000, 0.5), uint64_t(500));
  CHECK_EQ(spindle::block_manager_budget_from_fraction(1000, 1.0), uint64_t(1000));
  CHECK_EQ(spindle::block_manager_budget_from_fraction(1001, 0.5), uint64_t(500));
  uint64_t max = std::numeric_limits<uint64_t>::max();
  CHECK_EQ(spindle::block_manager_budget_from_fraction(max, 1.0), max);
  CHECK_THROWS_WITH(spindle::block_manager_budget_from_fraction(1000, 0.0), "fraction");
  CHECK_THROWS_WITH(spindle::block_manager_budget_from_fraction(1000, 1.5), "fraction");
  CHECK_THROWS_WITH(spindle::block_manager_budget_from_fraction(1000, -0.1), "fraction");
  CHECK_THROWS_WITH(spindle::block_manager_budget_from_fraction(1000, std::numeric_limits<double>::quiet_NaN()),
                    "fraction");
}

TEST_CASE("block_manager: number of blocks from a budget") {
  const uint64_t per_token = 128, per_block = per_token * 16;  // 2048 bytes a block of 16 tokens
  // 100 blocks of budget; max_model_len 64 -> 4 blocks a sequence; 8 sequences -> cap 32.
  CHECK_EQ(spindle::block_manager_num_blocks(100 * per_block, per_token, 16, 64, 8), 32);
  CHECK_EQ(spindle::block_manager_num_blocks(100 * per_block, per_token, 16, 64, 100), 100);
  CHECK_EQ(spindle::block_manager_num_blocks(100 * per_block + per_block - 1, per_token, 16, 64, 100), 100);
  // Exactly one sequence's worth (65 tokens -> 5 blocks) is enough; one byte less is not.
  CHECK_EQ(spindle::block_manager_num_blocks(5 * per_block, per_token, 16, 65, 4), 5);
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(5 * per_block - 1, per_token, 16, 65, 4), "max_model_len 65");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(0, per_token, 16, 65, 4), "needs 5 blocks");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(1 << 20, 0, 16, 64, 4), "must be > 0");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(1 << 20, per_token, 0, 64, 4), "must be > 0");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(1 << 20, per_token, 16, 0, 4), "must be > 0");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(1 << 20, per_token, 16, 64, 0), "must be > 0");
  CHECK_THROWS_WITH(spindle::block_manager_num_blocks(1 << 20, uint64_t(1) << 62, 16, 64, 4), "overflow");
  // A huge budget with tiny tokens is capped at INT32_MAX blocks.
  int32_t big = std::numeric_limits<int32_t>::max();
  CHECK_EQ(spindle::block_manager_num_blocks(std::numeric_limits<uint64_t>::max(), 1, 1, big, big), big);
}
