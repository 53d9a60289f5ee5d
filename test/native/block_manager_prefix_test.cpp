// Block manager prefix cache: full blocks committed under chain hashes are shared by later tables with the same
// leading tokens (exact match of ids and parent), freed committed blocks stay cached and count as free, new
// blocks take never-committed free blocks before evicting the least recently freed cached one, image
// placeholders stop the chain, and turning caching off drops the cache. Every case checks the invariants.
#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/block_manager.h"
#include "harness.h"

using spindle::block_manager;

namespace {

std::vector<int32_t> ids(int32_t n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

}  // namespace

TEST_CASE("block_manager prefix cache: commit, hit, share, free into the cache") {
  block_manager bm(10, 4);
  bm.set_prefix_caching(true);
  const std::vector<int32_t> a = ids(14, 100);  // 3 full blocks + 2
  bm.allocate(1, 14);
  CHECK(bm.cached_prefix(a.data(), 3).empty());  // nothing committed yet
  bm.commit_full_blocks(1, a.data(), 9);         // blocks 0, 1 full and computed
  CHECK_EQ(bm.num_cached_blocks(), 2);
  bm.commit_full_blocks(1, a.data(), 14);        // block 2 too; the partial tail never
  CHECK_EQ(bm.num_cached_blocks(), 3);
  bm.check_invariants();
  // a second sequence with the same first 10 tokens shares two blocks
  std::vector<int32_t> b = ids(10, 100);
  b.push_back(7);
  const std::vector<int32_t> hit = bm.cached_prefix(b.data(), (int32_t(b.size()) - 1) / 4);
  REQUIRE(hit.size() == size_t(2));
  CHECK_EQ(hit[0], bm.block_table(1)[0]);
  CHECK_EQ(hit[1], bm.block_table(1)[1]);
  const int32_t free_before = bm.num_free_blocks();
  CHECK(bm.can_allocate_shared(hit, 11));
  bm.allocate_shared(2, hit, 11);
  CHECK_EQ(bm.num_free_blocks(), free_before - 1);  // one new block for tokens 8..10
  CHECK_EQ(bm.ref_count(hit[0]), 2);
  CHECK_EQ(bm.ref_count(hit[1]), 2);
  bm.check_invariants();
  // both go: every block is free again, the three committed ones still cached
  bm.deallocate(1);
  bm.deallocate(2);
  CHECK_EQ(bm.num_free_blocks(), 10);
  CHECK_EQ(bm.num_cached_blocks(), 3);
  bm.check_invariants();
  // a cached free block is claimed again by a hit (it leaves the free list)
  const std::vector<int32_t> hit2 = bm.cached_prefix(a.data(), 3);
  CHECK_EQ(hit2.size(), size_t(3));
  bm.allocate_shared(3, hit2, 14);
  CHECK_EQ(bm.num_free_blocks(), 10 - 4);
  bm.check_invariants();
  CHECK_THROWS_WITH(bm.allocate_shared(3, hit2, 14), "already has blocks");
  CHECK_THROWS_WITH(bm.allocate_shared(4, hit2, 8), "do not cover");
  CHECK_THROWS_WITH(bm.allocate_shared(4, {9}, 8), "not cached");
  bm.deallocate(3);
  bm.check_invariants();
}

TEST_CASE("block_manager prefix cache: exact matches only, duplicates, placeholders") {
  block_manager bm(12, 4);
  bm.set_prefix_caching(true);
  const std::vector<int32_t> a = ids(8, 1);
  bm.allocate(1, 8);
  bm.commit_full_blocks(1, a.data(), 8);
  // same second block after a different first block: no hit at all (the chain starts from the first)
  std::vector<int32_t> c = ids(8, 1);
  c[0] = 99;
  CHECK(bm.cached_prefix(c.data(), 2).empty());
  // a different second block: one block hit
  std::vector<int32_t> d = ids(8, 1);
  d[6] = 99;
  CHECK_EQ(bm.cached_prefix(d.data(), 2).size(), size_t(1));
  // the same tokens computed again in fresh blocks: those stay uncommitted (the first copy is the cached one)
  bm.allocate(2, 8);
  bm.commit_full_blocks(2, a.data(), 8);
  CHECK_EQ(bm.num_cached_blocks(), 2);
  bm.deallocate(2);  // its blocks go back as plain free blocks
  bm.check_invariants();
  // an image placeholder (negative id) ends the chain: neither looked up nor committed
  std::vector<int32_t> e = ids(12, 1);
  e[5] = -1;
  CHECK_EQ(bm.cached_prefix(e.data(), 2).size(), size_t(1));
  bm.allocate(3, 12);
  bm.commit_full_blocks(3, e.data(), 12);
  CHECK_EQ(bm.num_cached_blocks(), 2);  // block 0 equals a's block 0 (a duplicate); blocks 1, 2 stopped
  bm.deallocate(3);
  bm.deallocate(1);
  bm.check_invariants();
  // caching off: the cache is dropped, everything is plainly free
  bm.set_prefix_caching(false);
  CHECK_EQ(bm.num_cached_blocks(), 0);
  CHECK(bm.cached_prefix(a.data(), 2).empty());
  CHECK_EQ(bm.num_free_blocks(), 12);
  bm.check_invariants();
}

TEST_CASE("block_manager prefix cache: new blocks evict the least recently freed cached block last") {
  block_manager bm(4, 2);
  bm.set_prefix_caching(true);
  const std::vector<int32_t> a = ids(4, 10), b = ids(4, 50);
  bm.allocate(1, 4);
  bm.commit_full_blocks(1, a.data(), 4);
  bm.deallocate(1);  // a's two blocks cached, freed first
  bm.allocate(2, 4);  // takes the two never-committed blocks
  CHECK_EQ(bm.num_cached_blocks(), 2);
  bm.commit_full_blocks(2, b.data(), 4);
  bm.deallocate(2);  // b's blocks cached, freed after a's
  CHECK_EQ(bm.num_cached_blocks(), 4);
  CHECK_EQ(bm.num_free_blocks(), 4);
  bm.allocate(3, 2);  // one block: evicts the least recently freed cached block (a's last block)
  CHECK_EQ(bm.num_cached_blocks(), 3);
  CHECK_EQ(bm.cached_prefix(a.data(), 2).size(), size_t(1));  // a's first block is still there
  CHECK_EQ(bm.cached_prefix(b.data(), 2).size(), size_t(2));
  bm.allocate(4, 4);  // two more: a's first block, then b's last
  CHECK(bm.cached_prefix(a.data(), 2).empty());
  CHECK_EQ(bm.cached_prefix(b.data(), 2).size(), size_t(1));
  CHECK_EQ(bm.num_free_blocks(), 1);
  bm.check_invariants();
  bm.deallocate(3);
  bm.deallocate(4);
  CHECK_EQ(bm.num_free_blocks(), 4);
  bm.check_invariants();
}
