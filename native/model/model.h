// A loaded model: hyperparameters, weights (kept in their GGUF types, pointing into the mapping), the
// tokenizer, and the forward pass for the dense architectures (llama, qwen2, qwen3; dense_model.h) and the hybrid
// ones with recurrent short-conv layers (lfm2, lfm2moe; lfm2_model.h, which also use the state slots below).
// Invariant: load() either returns a model whose every required tensor exists with the shape and a type the
// backend supports, or throws spindle::error naming the file and the problem.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"  // kv_type, sample_spec

namespace spindle {

class backend;
class gguf_file;
class lora_adapter;
struct lora_target;
class tokenizer;
class thread_pool;

struct model_hparams {
  std::string arch;        // general.architecture
  std::string name;        // general.name (may be empty)
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_ff = 0;
  int32_t head_dim_k = 0;  // key_length (default n_embd / n_head)
  int32_t head_dim_v = 0;  // value_length
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  bool rope_neox = false;  // NEOX halves (qwen family) vs adjacent pairs (llama)
  int32_t n_rot = 0;              // rope.dimension_count (default head_dim_k; must equal it for these archs)
  float rope_freq_scale = 1.0f;   // 1 / rope.scaling.factor (linear scaling; 1 when absent or type "none")
  int32_t n_layer_kv = 0;  // layers that keep K/V (the attention layers of a hybrid model); 0 = all n_layer
  // gemma3 (model_gemma3.cpp) and granite (model_granite.cpp); the defaults are every other architecture's:
  float embd_scale = 0.0f;   // token embeddings times this before the first layer (gemma3: sqrt(n_embd), not its
                             // image rows, as llama.cpp; granite: embedding_scale, a model no projector pairs with
                             // here); 0: unscaled
  float attn_scale = 0.0f;   // q.k scale; 0: 1 / sqrt(head_dim_k)
  float residual_scale = 0.0f;  // granite: each attention and FFN output times this before its residual add; 0: none
  float logit_scale = 0.0f;     // granite: the logits times 1 / this (llama.cpp's ggml_scale by 1 / logit_scale); 0: none
  bool ffn_gelu = false;     // gated FFN gelu(gate) * up (geglu) instead of silu(gate) * up
  int32_t swa_window = 0;    // sliding window (attention_params::window) of the layers swa_layers marks; 0: none
  std::vector<uint8_t> swa_layers;  // [n_layer] 1: a sliding-window layer, with the rope below; empty: none
  float rope_freq_base_swa = 10000.0f;  // the sliding-window layers' rope (llama.cpp's rope_freq_base_train_swa)
  float rope_freq_scale_swa = 1.0f;
  // Whether layer il attends through the sliding window.
  bool is_swa(int il) const { return swa_window > 0 && il < (int)swa_layers.size() && swa_layers[(size_t)il] != 0; }
};

struct model_options {
  int threads = 0;             // CPU threads; 0 = number of cores
  std::string device = "cpu";  // "cpu", "cuda" or "auto" (make_backend in backend/backend.h)
  // The K / V store type wanted (--dtype float16 / bfloat16, kvCacheDtype q8_0); what the backend and the model's
  // head dims cannot store falls back (kv_dtype(): model::want_kv_dtype).
  kv_type kv = kv_type::f32;
  // --dtype auto: the device's default instead of kv (model::want_kv_dtype_auto).
  bool kv_auto = false;
  // false: no step graphs (vLLM's enforce_eager, SGLang's disable_cuda_graph; backend::set_step_graphs).
  bool step_graphs = true;
};

// Paged KV storage of every attention layer: per layer K [n_blocks * block_size, n_head_kv * head_dim_k] and
// V [n_blocks * block_size, n_head_kv * head_dim_v], f32 backend memory. Position p of a sequence with block
// table T lives in row T[p / block_size] * block_size + p % block_size. Made by model::new_kv_cache.
class kv_cache {
 public:
  virtual ~kv_cache() = default;
  virtual int32_t n_blocks() const = 0;
  virtual int32_t block_size() const = 0;  // token slots per block
  // Fixed-size recurrent-state slots beside the paged KV (models with recurrent layers; 0 otherwise): a running
  // sequence owns one slot (batch_sequence::state_slot) holding its recurrent state at its current position.
  virtual int32_t n_state_slots() const { return 0; }
};

// One sequence's share of a forward_batch call: tokens[0..n_tokens) sit at positions first_pos.. and their
// K/V rows go into the slots of block_table; positions [0, first_pos) must already be in the cache.
struct batch_sequence {
  const int32_t* tokens = nullptr;       // host [n_tokens]
  int32_t n_tokens = 0;                  // >= 1
  int32_t first_pos = 0;                 // >= 0
  const int32_t* block_table = nullptr;  // host [n_table], block ids; covers first_pos + n_tokens slots
  int32_t n_table = 0;
  int32_t n_logits = 0;  // logits wanted for the last n_logits tokens (0: none, 1: the last, n_tokens: all)
  // Recurrent-state slot of this sequence, in [0, kv.n_state_slots()); ignored by models without recurrent
  // layers. first_pos == 0 starts the state afresh; first_pos > 0 continues the state the slot holds, which
  // must be at exactly first_pos (the model throws otherwise). No two sequences of a batch share a slot.
  int32_t state_slot = -1;
  // Speculative decoding: models with recurrent state keep the state after each of the first n_rollback tokens
  // (< n_tokens) for model::rollback_state; 0: none.
  int32_t n_rollback = 0;
  // Input embeddings (images): host rows of n_embd floats, one per token whose id is k_embedding_token, in
  // order; that token's input is its row instead of a vocabulary embedding. Null when no token is one.
  const float* embd = nullptr;
  // Greedy choice only: host [n_logits]; forward_batch writes argmax_first (common/argmax.h) of the first
  // argmax_n entries of each of this sequence's logits rows here and may leave the rows themselves unwritten (a
  // GPU then copies ids, not rows). argmax_n: the ids that may be chosen (a row may be longer: padding rows).
  int32_t* argmax = nullptr;
  int32_t argmax_n = 0;
  // Sampled choice (with argmax): host [n_logits] specs; forward_batch writes backend::sample_rows' token of each
  // row (backend/sample_rows.h: the request's edits, then its argmax or draw) to argmax instead of the argmax.
  const sample_spec* sample = nullptr;
  // Embeddings: host [n_logits, n_embd]; non-null: this sequence's last n_logits rows are its hidden states after
  // the output norm (what llama.cpp pools into an embedding), written here instead of logits (the sequence then
  // takes no logits rows, argmax or sample: the other sequences' logits rows stay numbered without it).
  float* hidden = nullptr;
  // A LoRA adapter (model/lora.h) of this model applied to this sequence's rows; null: the base model. A batch
  // may mix adapters (each row gets its own sequence's).
  const lora_adapter* lora = nullptr;
  // Bidirectional spans (gemma3's image embeddings): host [2 * n_bidir_spans], [begin, end) position pairs, sorted
  // and disjoint. The queries of a span attend every position of it (and, like any query, those before it, within a
  // sliding window); the rest stays causal. A span this chunk reaches must lie inside it (the scheduler never splits
  // one: rows computed in an earlier chunk would not have seen the later ones). Null: causal throughout.
  const int32_t* bidir_spans = nullptr;
  int32_t n_bidir_spans = 0;
};

// The id that marks a position whose input embedding comes from batch_sequence::embd (an image placeholder).
constexpr int32_t k_embedding_token = -1;

// KV cache of one sequence for the single-sequence forward: a paged cache of one block of max_tokens slots.
struct sequence_state {
  int64_t n_past = 0;      // positions already in the cache
  int64_t max_tokens = 0;  // capacity
  std::unique_ptr<kv_cache> kv;  // one block of max_tokens slots (null: not made by new_sequence)
};

class model {
 public:
  static std::unique_ptr<model> load(const std::string& path, const model_options& options);
  virtual ~model() = default;

  virtual const model_hparams& hparams() const = 0;
  virtual const tokenizer& vocab() const = 0;
  virtual const gguf_file& file() const = 0;
  // The backend the model computes on ("cpu", "cuda"), and its device memory (false: host memory, no limit of
  // its own; see backend::device_memory).
  virtual const char* device_name() const = 0;
  // The element type of the K / V cache new_kv_cache makes: f32 unless want_kv_dtype asked for another type the
  // backend stores (model::load does, from model_options::kv).
  kv_type kv_dtype() const { return kv_; }
  // The type asked for where the backend's attention takes it for this model's heads (backend::supports_kv_heads:
  // the CPU's q8_0 / q4_0 need head dims of whole blocks, CUDA's 16-bit and fp8 stores heads of at most 128); a type
  // smaller than 16 bits (q8_0, q4_0, fp8) that cannot be had falls back to float16, llama.cpp's default; a type
  // that cannot be had otherwise, f32.
  void want_kv_dtype(kv_type wanted) {
    backend* be = compute_backend();
    const model_hparams& hp = hparams();
    const auto takes = [&](kv_type t) { return be != nullptr && be->supports_kv_heads(t, hp.head_dim_k, hp.head_dim_v); };
    if ((kv_blocked(wanted) || wanted == kv_type::fp8_e4m3 || wanted == kv_type::fp8_e5m2) && !takes(wanted)) {
      wanted = kv_type::f16;
    }
    kv_ = takes(wanted) ? wanted : kv_type::f32;
  }
  // --dtype auto: float16 K / V on every device (llama.cpp's and Ollama's default: half the memory per token, and
  // attention reads half the bytes: on the CPU decode at depth 3840 ran 19% faster; on an H200 greedy TPOT 0.957 vs
  // 1.028 ms, TTFT(1024) 18.36 vs 19.19 ms, 64 sequences 23488 vs 22319 tok/s); float32 where a backend has no
  // 16-bit stores (want_kv_dtype).
  void want_kv_dtype_auto() { want_kv_dtype(kv_type::f16); }
  void want_kv_dtype(const model_options& o) {
    if (o.kv_auto) want_kv_dtype_auto();
    else want_kv_dtype(o.kv);
  }
  // What model_options asks of the loaded model's backend: the KV cache's type, step graphs (model::load).
  void apply_backend_options(const model_options& o) {
    want_kv_dtype(o);
    if (backend* be = compute_backend(); be != nullptr && !o.step_graphs) be->set_step_graphs(false);
  }
  virtual bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const = 0;
  // The backend the model computes on, for companions that run on the same device (the vision encoder);
  // null for models that have none (test fakes).
  virtual backend* compute_backend() { return nullptr; }

  virtual std::unique_ptr<sequence_state> new_sequence(int64_t max_tokens) const = 0;
  // Appends tokens[0..n) at positions state.n_past.. and advances n_past by n. Writes logits
  // [n_vocab] of the last token, or [n, n_vocab] of every token when all_logits. Throws spindle::error if
  // the sequence would exceed max_tokens or a token id is out of range.
  virtual void forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits,
                       bool all_logits) = 0;

  // Paged cache of n_blocks blocks of block_size slots. Throws spindle::error on bad sizes or no memory.
  virtual std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size) const = 0;
  // Bytes of recurrent state per sequence (one state slot); 0 for models without recurrent layers.
  virtual uint64_t state_bytes_per_slot() const { return 0; }
  // Paged cache plus n_state_slots recurrent-state slots (the engine passes max_num_seqs when
  // state_bytes_per_slot() > 0). Models without recurrent layers need no slots: the default ignores them.
  virtual std::unique_ptr<kv_cache> new_kv_cache(int32_t n_blocks, int32_t block_size, int32_t n_state_slots) const {
    return new_kv_cache(n_blocks, block_size);
  }
  // Prefix caching for models with recurrent state: per-block checkpoints of the state. Bytes one block's
  // checkpoint takes (0: no recurrent state, nothing to checkpoint); enable_block_checkpoints makes kv keep,
  // from then on, the state each sequence has after the last position of every block it computes (stored by
  // block id); restore_from_block puts block `block_id`'s checkpoint into state slot `slot` as the state at
  // position pos (the position after that block), so that a sequence sharing the block's prefix continues there.
  virtual uint64_t checkpoint_bytes_per_block(int32_t block_size) const { (void)block_size; return 0; }
  virtual void enable_block_checkpoints(kv_cache& kv) const { (void)kv; }
  virtual void restore_from_block(kv_cache& kv, int32_t slot, int32_t block_id, int32_t pos) const {
    (void)kv, (void)slot, (void)block_id, (void)pos;
  }
  // Speculative decoding: after a forward pass whose batch_sequence for `slot` had n_rollback > 0, puts the
  // recurrent state after position pos (first_pos < pos <= first_pos + n_rollback) back into the slot, as if
  // only the tokens before pos had been forwarded; the K/V rows beyond are simply overwritten later. Models
  // without recurrent state have nothing to roll back.
  virtual void rollback_state(kv_cache& kv, int32_t slot, int32_t pos) const { (void)kv, (void)slot, (void)pos; }
  // One forward pass over every token of `batch` (one matmul per weight for all rows). Writes logits
  // [sum of n_logits, n_vocab] in batch order (rows of sequences with an argmax buffer: their ids instead;
  // logits may be null when every sequence wanting rows has one). A token's logits are bitwise the same
  // whatever else is in the batch. Throws spindle::error (before writing anything) on an invalid batch.
  virtual void forward_batch(const std::vector<batch_sequence>& batch, kv_cache& kv, float* logits) = 0;

  // The weights LoRA adapters may change (their GGUF names and backend copies); empty: the model takes none.
  virtual std::vector<lora_target> lora_targets() const;
  // Loads a LoRA adapter file for this model (lora_adapter::load against lora_targets() on its backend). The
  // adapter must not outlive the model. Throws spindle::error naming the file and the problem.
  std::shared_ptr<lora_adapter> load_lora(const std::string& path, float scale);

 private:
  kv_type kv_ = kv_type::f32;
};

}  // namespace spindle
