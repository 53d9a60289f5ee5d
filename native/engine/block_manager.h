// Paged KV block manager: the KV cache is cut into `num_blocks` blocks of `block_size` token slots; each
// sequence owns a block table (block ids, in position order) covering the token slots it has reserved.
// Position p of a sequence lives in block table[p / block_size], slot p % block_size of that block.
//
// Invariants (check_invariants() verifies them all):
// - every block is either on the free list with ref_count 0, or has ref_count == the number of block tables
//   that hold it (a table holds a block at most once); num_free_blocks() + num_used_blocks() == num_blocks();
// - a table that reserves n token slots holds exactly ceil(n / block_size) blocks;
// - every mutating call is all-or-nothing: it succeeds, or it throws spindle::error and changes nothing.
// Blocks are shared through fork() (n > 1 sampling) and the prefix cache. Copy-on-write is not implemented:
// appending to a sequence whose partially filled last block is shared throws.
//
// Prefix cache (set_prefix_caching(true)): a full block whose tokens are all computed is committed under its
// chain hash (hash of the previous block's hash and its own token ids) with its token ids and its parent block,
// so that a later table whose first blocks hold the same tokens shares them (allocate_shared: ref_count + 1)
// instead of recomputing their KV. A committed block whose ref_count falls to 0 stays cached and counts as
// free; new blocks come from never-committed free blocks first, then from the least recently freed cached
// block (its hash is dropped then). A hit is exact: every shared block's token ids and parent are compared,
// never trusted to the hash alone.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace spindle {

class block_manager {
 public:
  // Throws spindle::error unless num_blocks > 0 and block_size > 0.
  explicit block_manager(int32_t num_blocks, int32_t block_size = 16);

  int32_t block_size() const { return block_size_; }   // tokens per block
  int32_t num_blocks() const { return int32_t(ref_counts_.size()); }
  int32_t num_free_blocks() const { return int32_t(free_blocks_.size()) + lru_size_; }  // cached free ones too
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int32_t blocks_for_tokens(int64_t n_tokens) const;  // ceil(n_tokens / block_size); n_tokens >= 0

  bool has(uint64_t seq_id) const { return tables_.count(seq_id) != 0; }
  // Chain hash of a block of block_size token ids after the block whose hash is `parent` (0 for a first block).
  static uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int32_t n);
  // Whether a new table of n_tokens slots fits in the free blocks.
  bool can_allocate(int64_t n_tokens) const;
  // Creates the table of seq_id with n_tokens slots. Throws if seq_id already has one or blocks run out.
  void allocate(uint64_t seq_id, int32_t n_tokens);
  // Whether seq_id can reserve n_new_tokens more slots. Throws for an unknown seq_id.
  bool can_append(uint64_t seq_id, int32_t n_new_tokens) const;
  // Reserves n_new_tokens more slots for seq_id, taking new blocks as needed.
  void append(uint64_t seq_id, int32_t n_new_tokens);
  // child_id shares every block of parent_id (ref_count + 1 each) and reserves the same slots.
  void fork(uint64_t parent_id, uint64_t child_id);
  // Gives back the slots of seq_id beyond its first n_tokens (0 <= n_tokens <= num_tokens(seq_id)): whole blocks
  // past ceil(n_tokens / block_size) leave the table (ref_count - 1, freed at 0). Speculative decoding reserves
  // slots for its draft tokens and returns those of rejected drafts this way. Throws for an unknown seq_id or a
  // count out of range.
  void truncate(uint64_t seq_id, int32_t n_tokens);
  // Drops the table of seq_id; blocks whose ref_count falls to 0 return to the free list (committed ones stay
  // cached until evicted). Unknown ids are a no-op (a waiting sequence holds no blocks).
  void deallocate(uint64_t seq_id);

  // Prefix cache (see above). Turning it off drops every cached block.
  void set_prefix_caching(bool on);
  bool prefix_caching() const { return caching_; }
  // The cached blocks holding tokens[0, k * block_size) for the largest k <= max_blocks (block ids in order;
  // empty when caching is off or nothing matches). Stops at a block holding a negative id (an image
  // placeholder, whose content the ids do not say). salt: the namespace of the lookup; only blocks committed
  // with the same salt match (a LoRA adapter's KV differs from the base model's for the same tokens).
  std::vector<int32_t> cached_prefix(const int32_t* tokens, int32_t max_blocks, uint64_t salt = 0) const;
  // Whether a table of n_tokens slots whose first blocks are `shared` (from cached_prefix) fits.
  bool can_allocate_shared(const std::vector<int32_t>& shared, int64_t n_tokens) const;
  // Creates the table of seq_id: the shared blocks (ref_count + 1; cached free ones leave the free list), then
  // new blocks up to n_tokens slots. Throws (changing nothing) if seq_id has a table, a shared block is not
  // cached, n_tokens does not cover them, or blocks run out.
  void allocate_shared(uint64_t seq_id, const std::vector<int32_t>& shared, int32_t n_tokens);
  // Commits every full block of seq_id's table whose tokens are among tokens[0, n_computed) and not yet
  // committed (tokens: the sequence's ids). A block whose tokens are already cached in another block is left
  // uncommitted (the cached one stays the shared copy). No-op when caching is off or seq_id is unknown. salt: the
  // sequence's namespace (cached_prefix), the same on every call for one sequence.
  void commit_full_blocks(uint64_t seq_id, const int32_t* tokens, int32_t n_computed, uint64_t salt = 0);
  int32_t num_cached_blocks() const { return int32_t(cached_.size()); }  // committed blocks, in use or not
  // Forgets every cached block no table holds (SGLang's /flush_cache, vLLM's reset_prefix_cache): each becomes a
  // plain free block and no later lookup matches it. Blocks in use stay committed. Returns how many were dropped.
  int32_t drop_cached();
  // Chain hashes of the full blocks of tokens[0, n_tokens) from namespace `salt` (as cached_prefix and
  // commit_full_blocks chain them), up to the first block holding an image placeholder (a negative id).
  std::vector<uint64_t> chain_hashes(const int32_t* tokens, int32_t n_tokens, uint64_t salt) const;

  const std::vector<int32_t>& block_table(uint64_t seq_id) const;  // throws for an unknown seq_id
  int32_t num_tokens(uint64_t seq_id) const;                       // slots reserved; 0 for an unknown id
  int32_t ref_count(int32_t block_id) const;                       // throws when out of range
  // Throws spindle::error naming the first broken invariant (tests; cheap enough for debug checks).
  void check_invariants() const;

 private:
  struct table {
    std::vector<int32_t> blocks;  // block ids, position order
    int32_t num_tokens = 0;       // token slots reserved
    std::vector<uint64_t> hashes;  // chain hashes of blocks[0, hashes.size()): the ones commit_full_blocks saw
  };
  const table& find(uint64_t seq_id, const char* what) const;
  int32_t new_blocks_needed(const table& t, int32_t n_new_tokens) const;  // throws on a shared tail
  int32_t take_free_block();        // a never-committed free block, else the least recently freed cached one
  int32_t evict_lru_head();         // the least recently freed cached block, uncommitted and out of the LRU list
  void take_new_blocks(table& t, int32_t n);  // n free blocks (ref_count 1) onto the end of t (callers checked room)
  void release_block(int32_t b);    // ref_count reached 0: cached (LRU tail) if committed, else free
  void lru_unlink(int32_t b);
  void lru_push_back(int32_t b);
  bool block_matches(int32_t b, const int32_t* tokens, int32_t parent, uint64_t salt) const;

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;   // [num_blocks]
  std::vector<int32_t> free_blocks_;  // never-committed free blocks, a stack: back() is handed out next
  std::unordered_map<uint64_t, table> tables_;
  // Prefix cache: per block its chain hash (committed_[b]), parent block (-1 for a first block) and token ids;
  // the hash -> block map; committed blocks with ref_count 0 in a doubly linked LRU list (head evicted first).
  bool caching_ = false;
  std::vector<uint8_t> committed_;
  std::vector<uint64_t> hash_;
  std::vector<int32_t> parent_;
  std::vector<uint64_t> salt_;         // the namespace each committed block was computed in
  std::vector<int32_t> block_tokens_;  // [num_blocks * block_size]
  std::unordered_map<uint64_t, int32_t> cached_;
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = -1, lru_tail_ = -1, lru_size_ = 0;
};

// KV bytes of one token over all attention layers: n_layer * n_head_kv * (head_dim_k + head_dim_v) *
// elem_size (sizeof(float) for the f32 cache). Pass only layers that keep attention KV (hybrid models keep
// their per-sequence conv state elsewhere). Throws on a non-positive size or overflow.
uint64_t block_manager_bytes_per_token(int32_t n_layer, int32_t n_head_kv, int32_t head_dim_k,
                                       int32_t head_dim_v, uint64_t elem_size = sizeof(float));

// KV budget (bytes) as a fraction in (0, 1] of free_bytes. Throws on a fraction outside (0, 1].
uint64_t block_manager_budget_from_fraction(uint64_t free_bytes, double fraction);

// Number of blocks for a KV budget: floor(budget_bytes / (bytes_per_token * block_size)), capped at what
// max_num_seqs sequences of max_model_len tokens can ever hold at once (max_num_seqs * ceil(max_model_len /
// block_size); more could never be used, since only running sequences hold blocks) and at INT32_MAX.
// Throws spindle::error when the budget cannot hold even one sequence of max_model_len tokens (the
// scheduler needs that much to always make progress), or on non-positive sizes.
int32_t block_manager_num_blocks(uint64_t budget_bytes, uint64_t bytes_per_token, int32_t block_size,
                                 int32_t max_model_len, int32_t max_num_seqs);

}  // namespace spindle
