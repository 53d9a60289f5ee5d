// Paged KV block manager: the KV cache is cut into `num_blocks` blocks of `block_size` token slots; each
// sequence owns a block table (block ids, in position order) covering the token slots it has reserved.
// Position p of a sequence lives in block table[p / block_size], slot p % block_size of that block.
//
// Invariants (check_invariants() verifies them all):
// - every block is either on the free list with ref_count 0, or has ref_count == the number of block tables
//   that hold it (a table holds a block at most once); num_free_blocks() + num_used_blocks() == num_blocks();
// - a table that reserves n token slots holds exactly ceil(n / block_size) blocks;
// - every mutating call is all-or-nothing: it succeeds, or it throws spindle::error and changes nothing.
// Blocks are shared only through fork() (n > 1 sampling, later prefix caching). Copy-on-write is not
// implemented: appending to a sequence whose partially filled last block is shared throws.
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
  int32_t num_free_blocks() const { return int32_t(free_blocks_.size()); }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int32_t blocks_for_tokens(int64_t n_tokens) const;  // ceil(n_tokens / block_size); n_tokens >= 0

  bool has(uint64_t seq_id) const { return tables_.count(seq_id) != 0; }
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
  // Drops the table of seq_id; blocks whose ref_count falls to 0 return to the free list. Unknown ids are a
  // no-op (a waiting sequence holds no blocks).
  void deallocate(uint64_t seq_id);

  const std::vector<int32_t>& block_table(uint64_t seq_id) const;  // throws for an unknown seq_id
  int32_t num_tokens(uint64_t seq_id) const;                       // slots reserved; 0 for an unknown id
  int32_t ref_count(int32_t block_id) const;                       // throws when out of range
  // Throws spindle::error naming the first broken invariant (tests; cheap enough for debug checks).
  void check_invariants() const;

 private:
  struct table {
    std::vector<int32_t> blocks;  // block ids, position order
    int32_t num_tokens = 0;       // token slots reserved
  };
  const table& find(uint64_t seq_id, const char* what) const;
  int32_t new_blocks_needed(const table& t, int32_t n_new_tokens) const;  // throws on a shared tail

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;   // [num_blocks]
  std::vector<int32_t> free_blocks_;  // stack: back() is handed out next
  std::unordered_map<uint64_t, table> tables_;
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
