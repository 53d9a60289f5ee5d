// The CPU implementation of the backend interface: ops from ops.h spread over a thread_pool, matmul and row
// dequantization from matmul.h. Weights are used in place inside the GGUF mapping; matmul weights of types
// with packed kernels also get a row-interleaved copy (repack.h) that matmul reads instead (same output bits).
// Invariant: every op splits its work by whole output rows (or whole (query, head) pairs), each computed by
// one thread with the single-row kernel, so results are bitwise independent of n_threads and of n_rows.
#pragma once
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/thread_pool.h"

namespace spindle {

class cpu_backend final : public backend {
 public:
  explicit cpu_backend(int n_threads);  // n_threads <= 0: std::thread::hardware_concurrency()

  const char* name() const override { return "cpu"; }
  int n_threads() const override { return pool_.size(); }
  bool supports_type(ggml_type type) const override;
  bool supports_kv(kv_type) const override { return true; }  // f32, f16, bf16, fp8, q8_0 and q4_0 K / V stores (kv_store.cpp)
  bool supports_kv_heads(kv_type t, int32_t head_dim_k, int32_t head_dim_v) const override {  // blocks: whole heads
    return kv_whole_blocks(t, head_dim_k) && kv_whole_blocks(t, head_dim_v);
  }

  float* alloc_f32(int64_t n) override;
  void free_f32(float* p) override;
  void upload(float* dst, const float* src, int64_t n) override;
  void download(float* dst, const float* src, int64_t n) override;
  void argmax_rows(const float* x, int64_t n_rows, int64_t stride, int64_t n, int32_t* out) override {
    for (int64_t r = 0; r < n_rows; ++r) out[r] = argmax_first(x + r * stride, n);  // x is host memory
  }
  void copy(float* dst, const float* src, int64_t n) override;
  backend_weight upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) override;
  void release_weight(backend_weight& w) override;
  void sync() override {}

  void get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) override;
  void matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) override;
  void matmul_expert(const backend_weight& w, int64_t expert, int64_t n_out, const float* x, int64_t n_rows,
                     float* y) override;                                       // cpu_backend_moe.cpp
  void scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) override;  // cpu_backend_moe.cpp
  void lora_add(const backend_weight& a, const backend_weight& b, float scale, const float* x, int64_t n_rows, float* y,
                float* low, float* delta) override;  // lora_kernel.h
  bool lora_add_in_place(const backend_weight& b) const override;
  void add_row_vector(float* x, const float* b, int64_t n_rows, int64_t n) override;
  void add(const float* a, const float* b, float* y, int64_t n) override;
  void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int64_t n,
                  float eps) override;
  void rope(float* x, int64_t n_rows, int32_t n_head, int32_t head_dim, const int32_t* pos,
            const rope_params& p) override;
  void swiglu(const float* gate, const float* up, float* y, int64_t n) override;
  void gelu(const float* x, float* y, int64_t n) override;
  void gelu_quick(const float* x, float* y, int64_t n) override;
  void geglu(const float* gate, const float* up, float* y, int64_t n) override;
  void softmax(float* x, int64_t n_rows, int64_t n, float scale) override;
  // Rows into f32 stores as copies, into 16-bit and fp8 ones rounded to nearest even, into q8_0 / q4_0 ones quantized
  // (kv_store.cpp).
  void store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new, const float* v_new, int64_t n,
                int64_t k_dim, int64_t v_dim, kv_type kv) override;
  void attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                 float* out) override;
  void attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                       const float* v_store, float* out) override;  // attention_paged.cpp
  void short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                  float* state, float* y) override;  // short_conv.cpp
  void gather_bx_rows(const float* bcx, const int64_t* src_rows, int64_t n, int64_t n_ch, float* dst,
                      const int64_t* dst_rows) override;  // short_conv.cpp

  thread_pool& pool() { return pool_; }

 private:
  float* scratch(int64_t n);  // per-op scratch of at least n floats, grown only (ops never run concurrently)
  // attention() over K / V rows at base + position * row stride (tables null) or at table[position] (paged
  // store read in place, attention_paged.cpp); tables hold n_past + n_tokens row starts.
  void attention_rows(const attention_params& p, const float* q, const void* k_base, const void* const* k_table,
                      const void* v_base, const void* const* v_table, float* out);
  // attention_rows on the AVX2 path: tiles of queries sharing K / V rows (attention_tiled.h), same bits.
  void attention_tiles(const attention_params& p, const float* q, const void* k_base, const void* const* k_table,
                       const void* v_base, const void* const* v_table, float* out);
  thread_pool pool_;
  // rope / attention / swiglu use the llama.cpp-identical AVX2 kernels, layer_norm / gelu / non-causal attention over
  // f32 K / V without a window the AVX2 ones of their own (cpu_active_level() >= avx2)
  bool avx2_;
  std::vector<float> scratch_;
  // Packed copies of the weights matmul has seen (made at a weight's first matmul, kept until destruction),
  // keyed by the weight's data pointer; a weight only read by get_rows (untied embeddings) is never packed.
  const packed_weight* packed_for(const backend_weight& w);
  std::mutex packed_mutex_;
  std::unordered_map<const void*, std::unique_ptr<packed_weight>> packed_;  // null entry: nothing to pack
  // Transposed f32 copies of LoRA b weights (lora_add), made at first use, dropped by release_weight.
  const std::vector<float>* lora_bt_for(const backend_weight& b);
  std::unordered_map<const void*, std::vector<float>> lora_bt_;
};

}  // namespace spindle
