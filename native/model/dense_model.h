// The dense decoder-only transformer shared by llama, qwen2, qwen3 and gemma3 (and qwen3moe, whose FFN is the MoE
// block of moe_ffn.h): weights, the per-architecture tensor table entry points, and the model class whose
// forward pass runs the common block on a backend.
// Invariant: a dense_model holds every tensor its forward reads, checked by tensor_table at load; forward() and
// forward_batch() validate their arguments before touching the cache, so a bad call throws and changes nothing.
// forward() is forward_batch() of one sequence over a one-block cache: there is one code path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/moe_ffn.h"

namespace spindle {

class tensor_table;

struct dense_layer {
  backend_buffer attn_norm;                  // [n_embd]
  backend_weight wq, wk, wv;                 // [n_embd, n_head * hd], [n_embd, n_head_kv * hd] x2
  backend_buffer bq, bk, bv;                 // optional biases, [n_head * hd], [n_head_kv * hd] x2
  backend_buffer q_norm, k_norm;             // optional per-head RMSNorm weights (qwen3, gemma3), [hd]
  backend_weight wo;                         // [n_head * hd, n_embd]
  backend_buffer bo;                         // optional, [n_embd]
  backend_buffer attn_post_norm;             // optional (gemma3): RMSNorm weights of the attention output, [n_embd]
  backend_buffer ffn_norm;                   // [n_embd]
  backend_buffer ffn_post_norm;              // optional (gemma3): RMSNorm weights of the FFN output, [n_embd]
  backend_weight ffn_gate, ffn_up;           // [n_embd, n_ff]
  backend_weight ffn_down;                   // [n_ff, n_embd]
  moe_layer_weights moe;                     // present(): the MoE block replaces ffn_gate / ffn_up / ffn_down
};

struct dense_weights {
  backend_weight tok_embd;     // [n_embd, n_vocab]
  backend_buffer output_norm;  // [n_embd]
  backend_weight output;       // [n_embd, n_vocab]; token_embd when the file has no output.weight (tied)
  backend_buffer output_b;     // optional, [n_vocab]
  backend_buffer rope_freqs;   // optional rope frequency factors, [n_rot / 2]
  std::vector<dense_layer> layers;
  moe_config moe;              // the MoE layers' config (n_expert 0: no MoE layer)
};

// What differs between the dense architectures' tensor tables.
struct dense_layout {
  int64_t n_embd_q = 0;    // columns of attn_q (and rows of attn_output's input)
  bool qk_norm = false;    // attn_q_norm / attn_k_norm required
  bool out_bias = false;   // optional output.bias allowed
  bool attn_out_bias = false;  // optional attn_output.bias allowed
  bool rope_freqs = false;     // optional rope_freqs.weight allowed
  bool post_norms = false;     // post_attention_norm / post_ffw_norm required (gemma3)
  const moe_config* moe = nullptr;  // non-null: every layer's FFN is a MoE block of this config
};

// The LoRA targets of one layer (blk.<il>.attn_q / attn_k / attn_v / attn_output / ffn_gate / ffn_up / ffn_down
// .weight, those the layer has) appended to out (model.cpp).
void add_dense_lora_targets(std::vector<lora_target>& out, const dense_layer& l, int il);

// Loads the tensors every dense architecture shares, per `layout` (model_dense_tensors.cpp).
dense_weights load_dense_weights(tensor_table& table, const model_hparams& hp, const dense_layout& layout);

// Per-architecture entry points (model_llama.cpp, model_qwen2.cpp, model_qwen3.cpp).
dense_weights load_llama_weights(tensor_table& table, const model_hparams& hp);
dense_weights load_qwen2_weights(tensor_table& table, const model_hparams& hp);
dense_weights load_qwen3_weights(tensor_table& table, const model_hparams& hp);
dense_weights load_qwen3moe_weights(tensor_table& table, const model_hparams& hp);  // model_qwen3moe.cpp
dense_weights load_gemma3_weights(tensor_table& table, const model_hparams& hp);    // model_gemma3.cpp
// gemma3's own hyperparameters (sliding window, its layers and rope, attention scale, embedding scale, geglu) on top
// of load_hparams' (model_gemma3.cpp).
void load_gemma3_hparams(const gguf_file& file, model_hparams& hp);
// granite's scalars (embedding, attention, residual and logit scales) on top of load_hparams' (model_granite.cpp);
// its tensors are llama's (load_llama_weights).
void load_granite_hparams(const gguf_file& file, model_hparams& hp);

// Activations of one forward call, allocated once per call size (grown, never per layer).
struct dense_scratch {
  int64_t capacity = 0;                // tokens the buffers hold
  backend_buffer x;                    // [n, n_embd] residual stream
  backend_buffer cur;                  // [n, max(n_embd, n_head * hd)] normed input / projections
  backend_buffer q;                    // [n, n_head * hd]
  backend_buffer k, v;                 // [n, n_head_kv * hd] new K / V rows before they go to their slots
  backend_buffer attn;                 // [n, n_head * hd]
  backend_buffer gate, up;             // [n, n_ff]
  backend_buffer logits;               // [n, n_vocab]
  std::vector<float> embd_scale;       // host [n] hparams embd_scale per row, for scale_rows
  std::vector<float> residual_scale;   // host [n] hparams residual_scale per row (granite), for scale_rows
  std::vector<float> logit_scale;      // host [rows] 1 / hparams logit_scale per logits row (granite), for scale_rows
  std::vector<int32_t> pos;            // host [n]
  std::vector<int32_t> tokens;         // host [n] every token of the batch, concatenated
  std::vector<int64_t> kv_rows;        // host [n] cache row of each token (block_table slot)
  int64_t n_embd = 0;                  // width of an input row (set when the scratch is made)
  std::vector<int64_t> embd_rows;      // host: batch rows whose input is an embedding (image placeholders)
  std::vector<const float*> embd_src;  // host: their source rows (n_embd floats each)
  std::vector<float> embd_host;        // host staging [embd_rows, n_embd]
  backend_buffer embd;                 // the same rows on the backend
  std::vector<paged_attention_params> attn_seqs;  // host, one per sequence of the batch (reused per layer)
  lora_rows lora;                      // the batch's LoRA adapters by row runs (set per forward pass)
};

// The paged cache of a dense model: per layer K [n_blocks * block_size, n_head_kv * head_dim_k], V likewise.
class dense_kv_cache final : public kv_cache {
 public:
  int32_t n_blocks() const override { return n_blocks_; }
  int32_t block_size() const override { return block_size_; }
  int32_t n_blocks_ = 0;
  int32_t block_size_ = 0;
  const void* owner_ = nullptr;         // the dense_model that made it (forward_batch rejects others)
  std::vector<backend_buffer> k, v;     // [n_layer] each
};

class dense_model final : public model {
 public:
  // weights must have been made with `be` (backend_buffers free through it).
  dense_model(std::unique_ptr<gguf_file> file, std::unique_ptr<tokenizer> vocab, std::unique_ptr<backend> be,
              model_hparams hp, dense_weights weights);
  ~dense_model() override;

  const model_hparams& hparams() const override { return hp_; }
  const tokenizer& vocab() const override { return *vocab_; }
  const gguf_file& file() const override { return *file_; }
  const char* device_name() const override { return be_->name(); }
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override {
    return be_->device_memory(free_bytes, total_bytes);
  }
  backend* compute_backend() override { return be_.get(); }
  const dense_weights& weights() const { return w_; }

  std::unique_ptr<sequence_state> new_sequence(int64_t max_tokens) const override;
  void forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits, bool all_logits) override;
  std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size) const override;
  void forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv, float* logits) override;
  std::vector<lora_target> lora_targets() const override;
  // Test hook: while set, every MoE layer appends its tokens' expert selection scores [n, n_expert] to *sink
  // (layer after layer, batch order). nullptr: off.
  void set_moe_trace(std::vector<float>* sink) { moe_trace_ = sink; }

 private:
  void check_call(const sequence_state& state, const int32_t* tokens, int64_t n, const float* logits) const;
  int64_t check_batch(const std::vector<batch_sequence>& batch, const dense_kv_cache& kv) const;  // tokens
  void reserve_scratch(int64_t n);
  void run_layer(int il, const std::vector<batch_sequence>& batch, dense_kv_cache& kv, int64_t n);  // model_dense_block.cpp

  std::unique_ptr<gguf_file> file_;  // owns the mapping the weights point into (declared first: freed last)
  std::unique_ptr<tokenizer> vocab_;
  std::unique_ptr<backend> be_;      // declared before everything it allocated: destroyed after them
  model_hparams hp_;
  dense_weights w_;
  dense_scratch scratch_;
  moe_ffn moe_;  // scratch of the MoE layers
  std::vector<float>* moe_trace_ = nullptr;
};

}  // namespace spindle
