// LoRA adapters in llama.cpp's GGUF adapter format (convert_lora_to_gguf.py): general.type "adapter",
// adapter.type "lora", adapter.lora.alpha, and for each adapted weight W [n_in -> n_out] of the base model the pair
// "<W's name>.lora_a" (ne [n_in, rank]) and "<W's name>.lora_b" (ne [rank, n_out]). An adapted matmul computes, as
// llama.cpp's build_lora_mm, y = W x + scale * (B (A x)), scale = user_scale * alpha / rank (user_scale when
// alpha is 0). lora_rows applies every adapter of a forward pass to the rows of the sequences that asked for it.
// Invariants: an adapter loads only when every pair names a weight the model adapts, with matching shapes and a
// type the backend computes with (else spindle::error naming the file and the tensor); adding a delta keeps row
// r's result a function of row r alone (batch invariance holds with adapters mixed in a batch).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace spindle {

class gguf_file;
struct batch_sequence;

// A weight the model lets adapters change: its GGUF name and its backend copy (the pointer identifies it).
struct lora_target {
  std::string name;
  const backend_weight* weight = nullptr;
};

// Base tensors an adapter may name that the model computes without lora_rows (MoE experts and routers, token
// embeddings, norms): an adapter naming one is refused with this reason rather than silently ignored.
std::string lora_unsupported_reason(const std::string& base_name);

class lora_adapter {
 public:
  // Reads `path` against the model's adaptable weights (targets) and uploads every pair to `be`. `arch`: the
  // model's general.architecture, which the adapter's must equal. Throws spindle::error naming what is wrong.
  static std::shared_ptr<lora_adapter> load(const std::string& path, float user_scale, const std::string& arch,
                                            const std::vector<lora_target>& targets, backend& be);
  ~lora_adapter();
  lora_adapter(const lora_adapter&) = delete;
  lora_adapter& operator=(const lora_adapter&) = delete;

  struct pair {
    backend_weight a;  // [rank rows of n_in]
    backend_weight b;  // [n_out rows of rank]
    float scale = 1;   // user_scale * alpha / rank (or user_scale)
  };
  // The pair adapting `w` (the model's backend_weight, by address), or null when this adapter leaves w alone.
  const pair* find(const backend_weight& w) const {
    auto it = pairs_.find(&w);
    return it == pairs_.end() ? nullptr : &it->second;
  }
  int32_t max_rank() const { return max_rank_; }
  size_t n_pairs() const { return pairs_.size(); }

 private:
  lora_adapter() = default;
  int32_t max_rank_ = 0;
  std::unique_ptr<gguf_file> file_;  // the CPU backend's weights point into its mapping
  backend* be_ = nullptr;
  std::unordered_map<const backend_weight*, pair> pairs_;
};

// The adapters of one forward pass, as runs of consecutive rows that share one: set() reads them from the
// batch (batch_sequence::lora); add_delta adds each run's adapter delta to the rows of a matmul's output.
class lora_rows {
 public:
  // Runs over the batch's token rows (batch order) and over its logits rows (the n_logits rows of each sequence
  // that takes logits, in batch order, as batch_output_logits lays them out).
  void set(const std::vector<batch_sequence>& batch);
  bool active() const { return !token_runs_.empty(); }
  // Whether some adapter of the pass adapts w (then the caller must not fuse away the matmul's input).
  bool adapts(const backend_weight& w) const;
  // The backend's matmul, matmul_group and swiglu_matmul over the batch's token rows, each followed by the
  // deltas of the adapters that adapt the weight (swiglu_matmul's: over the swiglu it leaves in gate).
  void matmul(backend& be, const backend_weight& w, const float* x, int64_t n_rows, float* y) {
    be.matmul(w, x, n_rows, y);
    if (active()) add_delta(be, w, x, y);
  }
  void matmul_group(backend& be, const backend_weight* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_rows) {
    be.matmul_group(ws, ys, n, x, n_rows);
    for (int i = 0; active() && i < n; ++i) add_delta(be, *ws[i], x, ys[i]);
  }
  void swiglu_matmul(backend& be, const backend_weight& w, float* gate, const float* up, int64_t n_rows, float* y) {
    be.swiglu_matmul(w, gate, up, n_rows, y);  // leaves swiglu(gate, up) in gate: the delta's input
    if (active()) add_delta(be, w, gate, y);
  }
  // y[rows] += scale * (x[rows] A^T) B^T for every token-row run whose adapter adapts w.
  // x: backend [n_rows, w.n_in], y: backend [n_rows, w.n_out], rows as set() numbered them.
  void add_delta(backend& be, const backend_weight& w, const float* x, float* y) { add(be, w, x, y, token_runs_); }
  // The same over the logits rows (the output matmul).
  void add_delta_logits(backend& be, const backend_weight& w, const float* x, float* y) {
    add(be, w, x, y, logits_runs_);
  }

 private:
  struct run {
    const lora_adapter* adapter;
    int64_t row0, n_rows;
  };
  static void push(std::vector<run>& runs, const lora_adapter* a, int64_t row0, int64_t n);
  void add(backend& be, const backend_weight& w, const float* x, float* y, const std::vector<run>& runs);
  std::vector<run> token_runs_, logits_runs_;
  std::vector<const lora_adapter*> adapters_;  // distinct adapters of the pass
  backend_buffer low_, delta_;  // [rows, rank] and [rows, n_out] scratch, rows <= k_tile_rows, grown as needed
  static constexpr int64_t k_tile_rows = 256;  // rows of a run computed at a time (bounds the scratch)
};

}  // namespace spindle
