// The CUDA implementation of the backend interface. Every op is queued on one stream of one device; host
// arguments (token ids, positions, block tables, row scales) are staged into device scratch first. Weights are
// uploaded once at load, quantized as in the file, in the row-interleaved x32 layout (backend/pack_x32.h); the
// backend owns them: release_weight frees one, destruction frees the rest.
// Invariant (batch invariance, as on the CPU): every output row is computed by the same threads doing the same
// operations in the same order whatever else is in the call: matmul splits K into a number of segments fixed by
// the weight's shape only, tokens never share a reduction, and reductions use fixed butterfly orders.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"

namespace spindle {

// Grows-only device scratch of T (never shrinks; ops are serialized on one stream).
template <typename T>
struct device_scratch {
  T* data = nullptr;
  int64_t capacity = 0;
  T* reserve(int64_t n);  // cuda_backend.cu
  ~device_scratch();
};

class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device);
  ~cuda_backend() override;

  const char* name() const override { return "cuda"; }
  int n_threads() const override { return 1; }
  bool supports_type(ggml_type type) const override;
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override;

  float* alloc_f32(int64_t n) override;
  void free_f32(float* p) override;
  void upload(float* dst, const float* src, int64_t n) override;
  void download(float* dst, const float* src, int64_t n) override;
  void copy(float* dst, const float* src, int64_t n) override;
  void copy_rows(float* dst, const int64_t* dst_rows, const float* src, const int64_t* src_rows, int64_t n,
                 int64_t width) override;                                                           // ops.cu
  backend_weight upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) override;
  void release_weight(backend_weight& w) override;
  void sync() override;

  void get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) override;  // ops.cu
  void matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) override;        // matmul.cu
  void matmul_expert(const backend_weight& w, int64_t expert, int64_t n_out, const float* x, int64_t n_rows,
                     float* y) override;                                                            // matmul.cu
  void scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) override;                    // ops.cu
  void add_row_vector(float* x, const float* b, int64_t n_rows, int64_t n) override;                // ops.cu
  void add(const float* a, const float* b, float* y, int64_t n) override;                           // ops.cu
  void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) override;
  void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int64_t n,
                  float eps) override;                                                              // ops.cu
  void rope(float* x, int64_t n_rows, int32_t n_head, int32_t head_dim, const int32_t* pos,
            const rope_params& p) override;                                                         // ops.cu
  void swiglu(const float* gate, const float* up, float* y, int64_t n) override;                    // ops.cu
  void gelu(const float* x, float* y, int64_t n) override;                                          // ops.cu
  void gelu_quick(const float* x, float* y, int64_t n) override;                                    // ops.cu
  void softmax(float* x, int64_t n_rows, int64_t n, float scale) override;                          // ops.cu
  void attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                 float* out) override;                                                              // attention.cu
  void attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                       const float* v_store, float* out) override;                                  // attention.cu
  void attention_paged_batch(const paged_attention_params* seqs, int64_t n_seqs, const float* q, const float* k_store,
                             const float* v_store, float* out) override;                            // attention.cu
  void short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                  float* state, float* y) override;                                                 // short_conv.cu

  cudaStream_t stream() const { return stream_; }
  int sm_count() const { return sm_count_; }

 private:
  // Rows [row0, row0 + n_out) of w times x: the one matmul path (matmul.cu).
  void matmul_rows(const backend_weight& w, int64_t row0, int64_t n_out, const float* x, int64_t n_rows, float* y);
  // Host arguments -> device memory through a pinned ring (asynchronous, no stream sync): the device copy stays
  // valid until the next sync() / download(), after which the ring starts over.
  const void* stage(const void* host, size_t bytes);
  template <typename T>
  const T* stage(const T* host, int64_t n) { return (const T*)stage((const void*)host, (size_t)n * sizeof(T)); }
  void queue_drained() { ring_used_ = 0; }  // the stream is idle: every staged copy has been consumed
  void attention_launch(const paged_attention_params* seqs, int64_t n_seqs, bool paged, const float* q,
                        const float* k, const float* v, float* out);  // attention.cu

  int device_ = 0;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  char* ring_host_ = nullptr;  // pinned
  char* ring_dev_ = nullptr;
  size_t ring_cap_ = 0, ring_used_ = 0;
  device_scratch<int8_t> qx_;      // quantized activations [n_rows, n_in] (matmul.cu)
  device_scratch<float> qx_scale_; // [n_rows, n_in / 32] d, then [n_rows, n_in / 32] d * sum(q)
  std::unordered_set<void*> weights_;  // uploaded weights not yet released (freed with the backend)
};

}  // namespace spindle
