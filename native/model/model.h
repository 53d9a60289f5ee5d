// A loaded model: hyperparameters, weights (kept in their GGUF types, pointing into the mapping), the
// tokenizer, and the forward pass for the dense architectures (llama, qwen2, qwen3).
// Invariant: load() either returns a model whose every required tensor exists with the shape and a type the
// backend supports, or throws spindle::error naming the file and the problem.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spindle {

class gguf_file;
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
};

struct model_options {
  int threads = 0;  // 0 = number of cores
};

// KV cache of one sequence: contiguous, up to max_tokens positions. (The paged cache replaces this in the
// batching engine.)
struct sequence_state {
  int64_t n_past = 0;      // positions already in the cache
  int64_t max_tokens = 0;  // capacity
  std::vector<float> k;    // [n_layer, max_tokens, n_head_kv * head_dim_k]
  std::vector<float> v;    // [n_layer, max_tokens, n_head_kv * head_dim_v]
};

class model {
 public:
  static std::unique_ptr<model> load(const std::string& path, const model_options& options);
  virtual ~model() = default;

  virtual const model_hparams& hparams() const = 0;
  virtual const tokenizer& vocab() const = 0;
  virtual const gguf_file& file() const = 0;

  virtual std::unique_ptr<sequence_state> new_sequence(int64_t max_tokens) const = 0;
  // Appends tokens[0..n) at positions state.n_past.. and advances n_past by n. Writes logits
  // [n_vocab] of the last token, or [n, n_vocab] of every token when all_logits. Throws spindle::error if
  // the sequence would exceed max_tokens or a token id is out of range.
  virtual void forward(sequence_state& state, const int32_t* tokens, int64_t n, float* logits,
                       bool all_logits) = 0;
};

}  // namespace spindle
