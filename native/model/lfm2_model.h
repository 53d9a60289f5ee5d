// LFM2 (architectures "lfm2" and "lfm2moe", llama.cpp src/models/lfm2.cpp, lfm2moe.cpp): a hybrid decoder whose
// layers are either a gated short convolution or GQA attention (per-head q/k RMSNorm, NEOX rope), each followed
// by the SwiGLU FFN; the final norm is stored as token_embd_norm. Layer kinds come from
// {arch}.attention.head_count_kv (one entry per layer, 0 = short-conv layer). lfm2moe: the FFN of every layer
// from leading_dense_block_count on is a mixture of experts (moe_ffn.h: sigmoid gating, exp_probs_b used only to
// choose experts, the chosen weights renormalized).
//
// Sequence memory: attention layers keep K/V in the paged cache (as dense_model); each conv layer keeps, per
// sequence, the last d = l_cache - 1 rows of B*X in a fixed-size state slot beside it (lfm2_kv_cache).
// Invariants: forward_batch() validates everything (tokens, tables, slots and the position each slot's state
// is at) before it writes anything; a slot's recorded position is -1 (no usable state) while a forward pass
// runs, and becomes first_pos + n_tokens only when the pass completed, so a sequence can only ever continue
// from a state that matches its position exactly. forward() is forward_batch() of one sequence.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/dense_model.h"

namespace spindle {

struct lfm2_layer {
  bool attention = false;     // attention layer (else short-conv layer)
  int32_t cache_index = 0;    // attention: index of its K/V in the cache; conv: index of its state buffer
  dense_layer d;              // attn_norm (the "operator norm"), ffn_*; attention layers: wq wk wv q_norm k_norm wo
  backend_weight conv_in;     // shortconv.in_proj  [n_embd, 3 * n_embd] -> B | C | X
  backend_buffer conv_w;      // shortconv.conv     [l_cache, n_embd] tap-major (the file stores [n_embd][l_cache])
  backend_weight conv_out;    // shortconv.out_proj [n_embd, n_embd]
};

struct lfm2_weights {
  backend_weight tok_embd;     // [n_embd, n_vocab]
  backend_buffer output_norm;  // token_embd_norm.weight [n_embd]
  backend_weight output;       // [n_embd, n_vocab]; token_embd when the file has no output.weight (tied)
  int32_t l_cache = 0;         // shortconv.l_cache: taps of the convolution (>= 2)
  int32_t n_attention = 0;     // attention layers
  int32_t n_conv = 0;          // short-conv layers
  moe_config moe;              // lfm2moe: the MoE layers' config (n_expert 0: every FFN is dense)
  std::vector<lfm2_layer> layers;  // d.moe.present(): the layer's FFN is the MoE block
};

// The sequence memory of an lfm2 model: paged K/V of the attention layers plus the conv state slots, and, with
// prefix caching (model::enable_block_checkpoints), per block the conv state after its last position: the
// d = l_cache - 1 rows of B * X ending there, per conv layer (ckpt). A new sequence sharing a cached prefix
// that ends at block boundary p gets that block's checkpoint in its slot (restore_from_block) and continues at
// first_pos == p with exactly the state recomputation would give (the checkpoint is the same rows).
// Speculative decoding: a chunk with n_rollback > 0 keeps the state after each of its first n_rollback tokens
// (rollback, this step only: rb_* say where each slot's kept states are), and rollback_state puts one of them
// back into the slot when drafts were rejected.
// save_state / restore_state move a slot's state through host memory (tests).
class lfm2_kv_cache final : public kv_cache {
 public:
  int32_t n_blocks() const override { return n_blocks_; }
  int32_t block_size() const override { return block_size_; }
  int32_t n_state_slots() const override { return n_slots_; }
  int64_t state_floats() const { return state_floats_; }  // per slot, all conv layers
  // Position the state of `slot` is at (tokens folded in), or -1 when it holds no usable state.
  int32_t state_pos(int32_t slot) const;
  // Copies the state of `slot` out: host [state_floats()] (conv layer by layer, each [l_cache - 1, n_embd]).
  // Throws unless the slot holds a usable state.
  void save_state(int32_t slot, float* out) const;
  // Puts a saved state into `slot`, recorded as the state at position pos (> 0).
  void restore_state(int32_t slot, const float* in, int32_t pos);

  int32_t n_blocks_ = 0;
  int32_t block_size_ = 0;
  int32_t n_slots_ = 0;
  int64_t state_floats_ = 0;
  int64_t layer_state_floats_ = 0;  // per slot and conv layer: (l_cache - 1) * n_embd
  const void* owner_ = nullptr;     // the lfm2_model that made it
  backend* be_ = nullptr;
  std::vector<backend_buffer> k, v;   // [n_attention] each [n_blocks * block_size, n_head_kv * head_dim]
  std::vector<backend_buffer> state;  // [n_conv] each [n_slots, l_cache - 1, n_embd]
  std::vector<int32_t> slot_pos;      // host [n_slots]; -1: no usable state
  std::vector<backend_buffer> ckpt;   // [n_conv] each [n_blocks, l_cache - 1, n_embd] when checkpoints are on
  bool checkpoints() const { return !ckpt.empty(); }
  // Rollback states of the last forward pass: [n_conv] each [rollback_capacity, l_cache - 1, n_embd]; per slot
  // (host [n_slots]) the chunk's first position, how many states it kept (after positions first + 1 ..
  // first + count) and the index of the first.
  std::vector<backend_buffer> rollback;
  int64_t rollback_capacity = 0;
  std::vector<int32_t> rb_first, rb_count;
  std::vector<int64_t> rb_base;
  void reserve_rollback(int64_t n_states);  // grows `rollback` (contents not kept) to hold n_states
};

// Rows of conv state copied out of each conv layer before its states move on (lfm2_block.cpp): B * X rows of
// the chunk (bcx rows -> destination rows) and rows of the slot's state (state rows -> destination rows).
struct lfm2_state_rows {
  std::vector<int64_t> bx_src, bx_dst, st_src, st_dst;
  void add(const batch_sequence& b, int64_t at, int64_t q, int64_t d, int64_t dst_row);
  void clear();
  bool empty() const { return bx_src.empty() && st_src.empty(); }
};

class lfm2_model final : public model {
 public:
  lfm2_model(std::unique_ptr<gguf_file> file, std::unique_ptr<tokenizer> vocab, std::unique_ptr<backend> be,
             model_hparams hp, lfm2_weights weights);
  ~lfm2_model() override;

  const model_hparams& hparams() const override { return hp_; }
  const tokenizer& vocab() const override { return *vocab_; }
  const gguf_file& file() const override { return *file_; }
  const char* device_name() const override { return be_->name(); }
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override {
    return be_->device_memory(free_bytes, total_bytes);
  }
  backend* compute_backend() override { return be_.get(); }
  const lfm2_weights& weights() const { return w_; }

  std::unique_ptr<sequence_state> new_sequence(int64_t max_tokens) const override;
  void forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) override;
  // One state slot (enough for one sequence at a time).
  std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size) const override;
  std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size, int32_t n_state_slots) const override;
  uint64_t state_bytes_per_slot() const override;
  uint64_t checkpoint_bytes_per_block(int32_t block_size) const override;
  void enable_block_checkpoints(kv_cache& kv) const override;
  void restore_from_block(kv_cache& kv, int32_t slot, int32_t block_id, int32_t pos) const override;
  void rollback_state(kv_cache& kv, int32_t slot, int32_t pos) const override;
  void forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv, float* logits) override;
  std::vector<lora_target> lora_targets() const override;

 private:
  int64_t check_batch(const std::vector<batch_sequence>& batch, const lfm2_kv_cache& kv) const;  // tokens
  void check_slots(const std::vector<batch_sequence>& batch, const lfm2_kv_cache& kv) const;
  void reserve_scratch(int64_t n);
  // lfm2_block.cpp: the mixer of layer il reads cur (normed x) and writes its output to cur; then the FFN.
  void run_conv(const lfm2_layer& l, const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv, int64_t n);
  void run_attention(const lfm2_layer& l, const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv, int64_t n);
  void run_ffn(const lfm2_layer& l, int64_t n);

  std::unique_ptr<gguf_file> file_;  // owns the mapping the weights point into (declared first: freed last)
  std::unique_ptr<tokenizer> vocab_;
  std::unique_ptr<backend> be_;      // declared before everything it allocated: destroyed after them
  model_hparams hp_;
  lfm2_weights w_;
  dense_scratch scratch_;            // x, cur, q, k, v, attn (conv output), gate, up, logits, host arrays
  backend_buffer bcx_;               // [capacity, 3 * n_embd] in_proj output
  backend_buffer zero_state_;        // [(l_cache - 1) * n_embd] zeros: the state of a sequence at position 0
  std::vector<int64_t> conv_tokens_;  // per sequence of the batch: tokens, conv state (run_conv's host arrays)
  std::vector<float*> conv_states_;
  lfm2_state_rows ckpt_rows_, rollback_rows_;  // this step's checkpoint and rollback rows
  void plan_state_rows(const std::vector<batch_sequence>& batch, lfm2_kv_cache& kv);  // once per step
  void write_state_rows(lfm2_kv_cache& kv, int32_t cache_index, const float* bcx);  // per conv layer
  moe_ffn moe_;                      // lfm2moe: the MoE block (owns its scratch)
};

// Architectures "lfm2" and "lfm2moe": hyperparameters and weights from the file (lfm2_tensors.cpp). Throws
// spindle::error naming the file and the problem.
std::unique_ptr<model> load_lfm2_model(std::unique_ptr<gguf_file> file, const model_options& options);

}  // namespace spindle
