// Paged KV block manager (see block_manager.h). Invariant: each public mutator validates everything first
// and only then changes state, so a thrown spindle::error leaves the free list, ref counts and tables as
// they were.
#include "engine/block_manager.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

namespace {

std::string seq_name(uint64_t seq_id) { return "sequence " + std::to_string(seq_id); }

}  // namespace

block_manager::block_manager(int32_t num_blocks, int32_t block_size) : block_size_(block_size) {
  if (block_size <= 0) throw error("block_manager: block_size must be > 0, got " + std::to_string(block_size));
  if (num_blocks <= 0) throw error("block_manager: num_blocks must be > 0, got " + std::to_string(num_blocks));
  ref_counts_.assign(size_t(num_blocks), 0);
  free_blocks_.reserve(size_t(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);  // block 0 is handed out first
  committed_.assign(size_t(num_blocks), 0);
  hash_.assign(size_t(num_blocks), 0);
  parent_.assign(size_t(num_blocks), -1);
  salt_.assign(size_t(num_blocks), 0);
  lru_prev_.assign(size_t(num_blocks), -1);
  lru_next_.assign(size_t(num_blocks), -1);
}

uint64_t block_manager::chain_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = parent * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int32_t i = 0; i < n; ++i) {
    h ^= uint64_t(uint32_t(tokens[i]));
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
  }
  h ^= h >> 29;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 32;
  return h == 0 ? 1 : h;  // 0 is the parent hash of a first block
}

void block_manager::lru_unlink(int32_t b) {
  const int32_t p = lru_prev_[size_t(b)], n = lru_next_[size_t(b)];
  (p >= 0 ? lru_next_[size_t(p)] : lru_head_) = n;
  (n >= 0 ? lru_prev_[size_t(n)] : lru_tail_) = p;
  lru_prev_[size_t(b)] = lru_next_[size_t(b)] = -1;
  --lru_size_;
}

void block_manager::lru_push_back(int32_t b) {
  lru_prev_[size_t(b)] = lru_tail_;
  lru_next_[size_t(b)] = -1;
  (lru_tail_ >= 0 ? lru_next_[size_t(lru_tail_)] : lru_head_) = b;
  lru_tail_ = b;
  ++lru_size_;
}

int32_t block_manager::evict_lru_head() {
  const int32_t b = lru_head_;
  lru_unlink(b);
  cached_.erase(hash_[size_t(b)]);
  committed_[size_t(b)] = 0;
  return b;
}

int32_t block_manager::take_free_block() {
  if (!free_blocks_.empty()) {
    const int32_t b = free_blocks_.back();
    free_blocks_.pop_back();
    return b;
  }
  return evict_lru_head();  // the least recently freed cached block
}

void block_manager::take_new_blocks(table& t, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    const int32_t b = take_free_block();
    ref_counts_[size_t(b)] = 1;
    t.blocks.push_back(b);
  }
}

void block_manager::release_block(int32_t b) {
  if (committed_[size_t(b)]) {
    lru_push_back(b);
  } else {
    free_blocks_.push_back(b);
  }
}

bool block_manager::block_matches(int32_t b, const int32_t* tokens, int32_t parent, uint64_t salt) const {
  return committed_[size_t(b)] && parent_[size_t(b)] == parent && salt_[size_t(b)] == salt &&
         std::memcmp(block_tokens_.data() + size_t(b) * size_t(block_size_), tokens,
                     size_t(block_size_) * sizeof(int32_t)) == 0;
}

void block_manager::set_prefix_caching(bool on) {
  if (on == caching_) return;
  if (on) {
    block_tokens_.assign(size_t(num_blocks()) * size_t(block_size_), 0);
  } else {
    drop_cached();  // the free cached blocks; the ones in use are uncommitted below
    std::fill(committed_.begin(), committed_.end(), 0);
    cached_.clear();
    for (auto& kv : tables_) kv.second.hashes.clear();
    block_tokens_.clear();
    block_tokens_.shrink_to_fit();
  }
  caching_ = on;
}

int32_t block_manager::drop_cached() {
  int32_t n = 0;
  for (; lru_head_ >= 0; ++n) free_blocks_.push_back(evict_lru_head());
  return n;
}

std::vector<uint64_t> block_manager::chain_hashes(const int32_t* tokens, int32_t n_tokens, uint64_t salt) const {
  std::vector<uint64_t> out;
  uint64_t h = salt;  // the first block's chain starts at its namespace
  for (int32_t k = 0; int64_t(k + 1) * block_size_ <= n_tokens; ++k) {
    const int32_t* t = tokens + size_t(k) * size_t(block_size_);
    if (std::any_of(t, t + block_size_, [](int32_t id) { return id < 0; })) break;  // an image placeholder: the chain stops
    h = chain_hash(h, t, block_size_);
    out.push_back(h);
  }
  return out;
}

std::vector<int32_t> block_manager::cached_prefix(const int32_t* tokens, int32_t max_blocks, uint64_t salt) const {
  std::vector<int32_t> out;
  if (!caching_) return out;
  uint64_t h = salt;  // the first block's chain starts at its namespace
  int32_t parent = -1;
  for (int32_t k = 0; k < max_blocks; ++k) {
    const int32_t* t = tokens + size_t(k) * size_t(block_size_);
    if (std::any_of(t, t + block_size_, [](int32_t id) { return id < 0; })) break;
    h = chain_hash(h, t, block_size_);
    auto it = cached_.find(h);
    if (it == cached_.end() || !block_matches(it->second, t, parent, salt)) break;
    out.push_back(it->second);
    parent = it->second;
  }
  return out;
}

bool block_manager::can_allocate_shared(const std::vector<int32_t>& shared, int64_t n_tokens) const {
  if (n_tokens < int64_t(shared.size()) * block_size_ || n_tokens > std::numeric_limits<int32_t>::max()) return false;
  int32_t claimed = 0;  // cached blocks that leave the free list when shared
  for (int32_t b : shared) claimed += ref_counts_[size_t(b)] == 0 ? 1 : 0;
  return blocks_for_tokens(n_tokens) - int32_t(shared.size()) + claimed <= num_free_blocks();
}

void block_manager::allocate_shared(uint64_t seq_id, const std::vector<int32_t>& shared, int32_t n_tokens) {
  if (has(seq_id)) throw error("block_manager: allocate: " + seq_name(seq_id) + " already has blocks");
  for (int32_t b : shared) {
    if (b < 0 || b >= num_blocks() || !committed_[size_t(b)]) {
      throw error("block_manager: allocate_shared: block " + std::to_string(b) + " is not cached");
    }
  }
  if (n_tokens < int64_t(shared.size()) * block_size_) {
    throw error("block_manager: allocate_shared: " + std::to_string(n_tokens) + " slots do not cover " +
                std::to_string(shared.size()) + " shared blocks");
  }
  if (!can_allocate_shared(shared, n_tokens)) {
    throw error("block_manager: out of KV blocks: " + seq_name(seq_id) + " needs " +
                std::to_string(blocks_for_tokens(n_tokens) - int32_t(shared.size())) + " new, " +
                std::to_string(num_free_blocks()) + " free");
  }
  table t;
  t.num_tokens = n_tokens;
  for (int32_t b : shared) {
    if (ref_counts_[size_t(b)]++ == 0) lru_unlink(b);
    t.blocks.push_back(b);
    t.hashes.push_back(hash_[size_t(b)]);
  }
  take_new_blocks(t, blocks_for_tokens(n_tokens) - int32_t(shared.size()));
  tables_.emplace(seq_id, std::move(t));
}

void block_manager::commit_full_blocks(uint64_t seq_id, const int32_t* tokens, int32_t n_computed, uint64_t salt) {
  if (!caching_) return;
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  table& t = it->second;
  const size_t full = std::min(size_t(std::max(n_computed, 0) / block_size_), t.blocks.size());
  for (size_t k = t.hashes.size(); k < full; ++k) {
    const int32_t* tk = tokens + k * size_t(block_size_);
    if (std::any_of(tk, tk + block_size_, [](int32_t id) { return id < 0; })) return;  // image placeholders
    int32_t parent = -1;
    if (k > 0) {
      auto p = cached_.find(t.hashes[k - 1]);
      if (p == cached_.end()) return;  // the chain's copy of the previous block was evicted: nothing to hang on
      parent = p->second;
    }
    const uint64_t h = chain_hash(k > 0 ? t.hashes[k - 1] : salt, tk, block_size_);
    const int32_t b = t.blocks[k];
    if (cached_.find(h) == cached_.end() && !committed_[size_t(b)]) {
      committed_[size_t(b)] = 1;
      hash_[size_t(b)] = h;
      parent_[size_t(b)] = parent;
      salt_[size_t(b)] = salt;
      std::memcpy(block_tokens_.data() + size_t(b) * size_t(block_size_), tk, size_t(block_size_) * sizeof(int32_t));
      cached_.emplace(h, b);
    }  // else: this block is the cached copy already, or another block is (this one stays uncommitted)
    t.hashes.push_back(h);
  }
}

int32_t block_manager::blocks_for_tokens(int64_t n_tokens) const {
  if (n_tokens < 0) throw error("block_manager: negative token count " + std::to_string(n_tokens));
  int64_t n = (n_tokens + block_size_ - 1) / block_size_;
  if (n > std::numeric_limits<int32_t>::max()) throw error("block_manager: token count too large");
  return int32_t(n);
}

const block_manager::table& block_manager::find(uint64_t seq_id, const char* what) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw error(std::string("block_manager: ") + what + ": unknown " + seq_name(seq_id));
  return it->second;
}

int32_t block_manager::new_blocks_needed(const table& t, int32_t n_new_tokens) const {
  if (n_new_tokens < 0) throw error("block_manager: negative token count " + std::to_string(n_new_tokens));
  if (n_new_tokens == 0) return 0;
  bool partial_tail = t.num_tokens % block_size_ != 0;
  if (partial_tail && ref_counts_[size_t(t.blocks.back())] > 1) {
    throw error("block_manager: cannot append to a shared, partially filled block " +
                std::to_string(t.blocks.back()) + " (copy-on-write is not supported)");
  }
  int64_t total = int64_t(t.num_tokens) + n_new_tokens;
  if (total > std::numeric_limits<int32_t>::max()) throw error("block_manager: token count too large");
  return blocks_for_tokens(total) - int32_t(t.blocks.size());
}

bool block_manager::can_allocate(int64_t n_tokens) const {
  return n_tokens >= 0 && n_tokens <= std::numeric_limits<int32_t>::max() &&
         blocks_for_tokens(n_tokens) <= num_free_blocks();
}

void block_manager::allocate(uint64_t seq_id, int32_t n_tokens) {
  if (has(seq_id)) throw error("block_manager: allocate: " + seq_name(seq_id) + " already has blocks");
  int32_t need = blocks_for_tokens(n_tokens);
  if (need > num_free_blocks()) {
    throw error("block_manager: out of KV blocks: " + seq_name(seq_id) + " needs " + std::to_string(need) +
                ", " + std::to_string(num_free_blocks()) + " free");
  }
  table t;
  t.num_tokens = n_tokens;
  t.blocks.reserve(size_t(need));
  take_new_blocks(t, need);
  tables_.emplace(seq_id, std::move(t));
}

bool block_manager::can_append(uint64_t seq_id, int32_t n_new_tokens) const {
  return new_blocks_needed(find(seq_id, "can_append"), n_new_tokens) <= num_free_blocks();
}

void block_manager::append(uint64_t seq_id, int32_t n_new_tokens) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw error("block_manager: append: unknown " + seq_name(seq_id));
  table& t = it->second;
  int32_t need = new_blocks_needed(t, n_new_tokens);
  if (need > num_free_blocks()) {
    throw error("block_manager: out of KV blocks: " + seq_name(seq_id) + " needs " + std::to_string(need) +
                " more, " + std::to_string(num_free_blocks()) + " free");
  }
  take_new_blocks(t, need);
  t.num_tokens += n_new_tokens;
}

void block_manager::truncate(uint64_t seq_id, int32_t n_tokens) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw error("block_manager: truncate: unknown " + seq_name(seq_id));
  table& t = it->second;
  if (n_tokens < 0 || n_tokens > t.num_tokens) {
    throw error("block_manager: truncate: " + seq_name(seq_id) + " reserves " + std::to_string(t.num_tokens) +
                " slots, cannot keep " + std::to_string(n_tokens));
  }
  const size_t keep = size_t(blocks_for_tokens(n_tokens));
  while (t.blocks.size() > keep) {
    const int32_t b = t.blocks.back();
    t.blocks.pop_back();
    if (--ref_counts_[size_t(b)] == 0) release_block(b);
  }
  if (t.hashes.size() > keep) t.hashes.resize(keep);
  t.num_tokens = n_tokens;
}

void block_manager::fork(uint64_t parent_id, uint64_t child_id) {
  const table& parent = find(parent_id, "fork");
  if (has(child_id)) throw error("block_manager: fork: " + seq_name(child_id) + " already has blocks");
  table child = parent;
  for (int32_t b : child.blocks) ++ref_counts_[size_t(b)];
  tables_.emplace(child_id, std::move(child));
}

void block_manager::deallocate(uint64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {  // reversed: the first block is reused (or kept) longest
    if (--ref_counts_[size_t(*b)] == 0) release_block(*b);
  }
  tables_.erase(it);
}

const std::vector<int32_t>& block_manager::block_table(uint64_t seq_id) const {
  return find(seq_id, "block_table").blocks;
}

int32_t block_manager::num_tokens(uint64_t seq_id) const {
  auto it = tables_.find(seq_id);
  return it == tables_.end() ? 0 : it->second.num_tokens;
}

int32_t block_manager::ref_count(int32_t block_id) const {
  if (block_id < 0 || block_id >= num_blocks()) {
    throw error("block_manager: block id " + std::to_string(block_id) + " out of range");
  }
  return ref_counts_[size_t(block_id)];
}

void block_manager::check_invariants() const {
  std::vector<int32_t> holders(ref_counts_.size(), 0);
  for (const auto& [seq_id, t] : tables_) {
    if (int32_t(t.blocks.size()) != blocks_for_tokens(t.num_tokens)) {
      throw error("block_manager invariant: " + seq_name(seq_id) + " holds " + std::to_string(t.blocks.size()) +
                  " blocks for " + std::to_string(t.num_tokens) + " tokens");
    }
    for (int32_t b : t.blocks) {
      if (b < 0 || b >= num_blocks()) throw error("block_manager invariant: block id out of range");
      if (std::count(t.blocks.begin(), t.blocks.end(), b) != 1) {
        throw error("block_manager invariant: " + seq_name(seq_id) + " holds block " + std::to_string(b) + " twice");
      }
      ++holders[size_t(b)];
    }
  }
  std::vector<bool> on_free_list(ref_counts_.size(), false);
  for (int32_t b : free_blocks_) {
    if (b < 0 || b >= num_blocks() || on_free_list[size_t(b)] || committed_[size_t(b)]) {
      throw error("block_manager invariant: free list holds block " + std::to_string(b) +
                  " twice, out of range or committed");
    }
    on_free_list[size_t(b)] = true;
  }
  int32_t in_lru = 0;
  for (int32_t b = lru_head_, prev = -1; b >= 0; prev = b, b = lru_next_[size_t(b)]) {
    if (b >= num_blocks() || on_free_list[size_t(b)] || !committed_[size_t(b)] || lru_prev_[size_t(b)] != prev ||
        ++in_lru > num_blocks()) {
      throw error("block_manager invariant: the cached free list is broken at block " + std::to_string(b));
    }
    on_free_list[size_t(b)] = true;
  }
  if (in_lru != lru_size_) throw error("block_manager invariant: cached free list size");
  for (size_t b = 0; b < ref_counts_.size(); ++b) {
    if (ref_counts_[b] != holders[b] || on_free_list[b] != (holders[b] == 0)) {
      throw error("block_manager invariant: block " + std::to_string(b) + " has ref_count " +
                  std::to_string(ref_counts_[b]) + ", " + std::to_string(holders[b]) + " holders, " +
                  (on_free_list[b] ? "on" : "not on") + " the free lists");
    }
    if (committed_[b] && (!caching_ || cached_.count(hash_[b]) == 0 || cached_.at(hash_[b]) != int32_t(b))) {
      throw error("block_manager invariant: committed block " + std::to_string(b) + " is not in the cache map");
    }
  }
  for (const auto& [h, b] : cached_) {
    if (b < 0 || b >= num_blocks() || !committed_[size_t(b)] || hash_[size_t(b)] != h) {
      throw error("block_manager invariant: the cache map points at a block that is not committed under its hash");
    }
  }
}

uint64_t block_manager_bytes_per_token(int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k,
                                       int32_t head_dim_v, uint64_t elem_size) {
  if (n_layer <= 0 || n_head_kv <= 0 || head_dim_k <= 0 || head_dim_v <= 0 || elem_size == 0) {
    throw error("KV cache: bad sizes (n_layer " + std::to_string(n_layer) + ", n_head_kv " +
                std::to_string(n_head_kv) + ", head_dim_k " + std::to_string(head_dim_k) + ", head_dim_v " +
                std::to_string(head_dim_v) + ", elem_size " + std::to_string(elem_size) + ")");
  }
  const char* what = "KV bytes per token";
  uint64_t dims = checked_add(uint64_t(head_dim_k), uint64_t(head_dim_v), what);
  uint64_t n = checked_mul(uint64_t(n_layer), uint64_t(n_head_kv), what);
  return checked_mul(checked_mul(n, dims, what), elem_size, what);
}

uint64_t block_manager_budget_from_fraction(uint64_t free_bytes, double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw error("KV cache: memory fraction must be in (0, 1], got " + std::to_string(fraction));
  }
  long double budget = std::floor((long double)free_bytes * (long double)fraction);
  return budget >= (long double)free_bytes ? free_bytes : uint64_t(budget);
}

int32_t block_manager_num_blocks(uint64_t budget_bytes, uint64_t bytes_per_token, int32_t block_size,
                                 int32_t max_model_len, int32_t max_num_seqs) {
  if (bytes_per_token == 0 || block_size <= 0 || max_model_len <= 0 || max_num_seqs <= 0) {
    throw error("KV cache: bytes_per_token, block_size, max_model_len and max_num_seqs must be > 0");
  }
  uint64_t bytes_per_block = checked_mul(bytes_per_token, uint64_t(block_size), "KV bytes per block");
  uint64_t blocks = budget_bytes / bytes_per_block;
  uint64_t per_seq = (uint64_t(max_model_len) + uint64_t(block_size) - 1) / uint64_t(block_size);
  if (blocks < per_seq) {
    throw error("KV cache: a budget of " + std::to_string(budget_bytes) + " bytes holds " + std::to_string(blocks) +
                " blocks of " + std::to_string(block_size) + " tokens (" + std::to_string(bytes_per_block) +
                " bytes each), but one sequence of max_model_len " + std::to_string(max_model_len) + " needs " +
                std::to_string(per_seq) + " blocks (" + std::to_string(per_seq * bytes_per_block) +
                " bytes); give the KV cache more memory or lower maxModelLen");
  }
  uint64_t cap = per_seq * uint64_t(max_num_seqs);  // both < 2^31: no overflow
  blocks = std::min({blocks, cap, uint64_t(std::numeric_limits<int32_t>::max())});
  return int32_t(blocks);
}

}  // namespace spindle
