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
#include <functional>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"

namespace spindle {

// Counters of blocks done (cuda_backend::done_counters_): the decode attention kernel's in-kernel chunk merge, one
// per (tile, KV head x head group); argmax_slices_kernel's, one per row.
constexpr int64_t k_attn_done_max = 1 << 16;
constexpr int64_t k_argmax_done_max = 4096;

struct mmv_act;                       // x32_types.cuh
enum class act_format : int32_t;      // x32_types.cuh

// Grows-only device scratch of T (never shrinks; ops are serialized on one stream). A buffer outgrown while a
// step is being recorded is kept until the backend goes (recorded ops and step graphs may still point at it).
template <typename T>
struct device_scratch {
  T* data = nullptr;
  int64_t capacity = 0;
  T* reserve(int64_t n, std::vector<void*>* keep_old = nullptr);  // cuda_backend.cu
  ~device_scratch();
};

// One recorded step graph (step_graph.cu): the launches' signature it was captured from, the instantiated
// graph, the staging area its first node copies in (pinned host -> device, fixed addresses), and an event
// marking its last launch (the host area is not rewritten before that launch has read it).
struct step_graph {
  std::string signature;
  cudaGraphExec_t exec = nullptr;
  char* stage_host = nullptr;  // pinned
  char* stage_dev = nullptr;
  size_t stage_cap = 0;
  size_t want_cap = 0;  // the area the next step of this key gets (grown after a step outgrew it)
  cudaEvent_t done = nullptr;
  uint64_t last_use = 0;
  bool disabled = false;  // a step of this key needed the host mid-way or outgrew the staging area
};

class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device);
  ~cuda_backend() override;

  const char* name() const override { return "cuda"; }
  int n_threads() const override { return 1; }
  bool supports_type(ggml_type type) const override;
  bool supports_kv(kv_type t) const override {  // f32, f16, bf16 and fp8 stores (no q8_0)
    return t == kv_type::f32 || t == kv_type::f16 || t == kv_type::bf16 || t == kv_type::fp8_e4m3 ||
           t == kv_type::fp8_e5m2;
  }
  // 16-bit and fp8 stores: the tensor-core attention's head dims (at most 128); f32 any (attention.cu)
  bool supports_kv_heads(kv_type t, int32_t head_dim_k, int32_t head_dim_v) const override;
  bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const override;

  float* alloc_f32(int64_t n) override;
  void free_f32(float* p) override;
  void upload(float* dst, const float* src, int64_t n) override;
  void download(float* dst, const float* src, int64_t n) override;
  void argmax_rows(const float* x, int64_t n_rows, int64_t stride, int64_t n, int32_t* out) override;  // ops.cu
  void sample_rows(float* x, int64_t n_rows, int64_t stride, int64_t n, const sample_spec* specs,
                   int32_t* out) override;                                                         // sample_rows.cu
  void copy(float* dst, const float* src, int64_t n) override;
  void copy_rows(float* dst, const int64_t* dst_rows, const float* src, const int64_t* src_rows, int64_t n,
                 int64_t width) override;                                                           // ops.cu
  backend_weight upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) override;
  void release_weight(backend_weight& w) override;
  void sync() override;

  void get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) override;  // ops.cu
  void matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) override;        // matmul.cu
  void matmul_group(const backend_weight* const* ws, float* const* ys, int n, const float* x,
                    int64_t n_rows) override;                                                       // matmul.cu
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
  void add_rms_norm(float* x, const float* r, const float* w, float* y, int64_t n_rows, int64_t n,
                    float eps) override;                                                            // ops.cu
  void rope_qk(float* q, float* k, int64_t n_rows, int32_t n_head_q, int32_t n_head_k, int32_t head_dim,
               const int32_t* pos, const rope_params& p) override;                                  // ops.cu
  void store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new, const float* v_new, int64_t n,
                int64_t k_dim, int64_t v_dim, kv_type kv = kv_type::f32) override;
  void rope_store_kv(float* q, float* k_new, const float* v_new, int64_t n_rows, int32_t n_head_q, int32_t n_head_k,
                     int32_t head_dim, const int32_t* pos, const rope_params& p, float* k_store, float* v_store,
                     const int64_t* rows, int64_t v_dim, kv_type kv = kv_type::f32) override;                  // ops.cu
  void swiglu_matmul(const backend_weight& w, float* gate, const float* up, int64_t n_rows, float* y) override;
                                                                                                    // matmul.cu
  void gelu(const float* x, float* y, int64_t n) override;                                          // ops.cu
  void gelu_quick(const float* x, float* y, int64_t n) override;                                    // ops.cu
  void geglu(const float* gate, const float* up, float* y, int64_t n) override;                     // ops.cu
  void sigmoid(float* x, int64_t n) override;                                                       // ops.cu
  void softmax(float* x, int64_t n_rows, int64_t n, float scale) override;                          // ops.cu
  void attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                 float* out) override;                                                              // attention.cu
  void attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                       const float* v_store, float* out) override;                                  // attention.cu
  void attention_paged_batch(const paged_attention_params* seqs, int64_t n_seqs, const float* q, const float* k_store,
                             const float* v_store, float* out) override;                            // attention.cu
  void short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                  float* state, float* y) override;                                                 // short_conv.cu
  void short_conv_batch(const float* bcx, const int64_t* n_tokens, float* const* states, int64_t n_seqs, int64_t n_ch,
                        int32_t l_cache, const float* w, float* y) override;                        // short_conv.cu
  void gather_bx_rows(const float* bcx, const int64_t* src_rows, int64_t n, int64_t n_ch, float* dst,
                      const int64_t* dst_rows) override;                                            // short_conv.cu
  bool moe_on_device(const backend_weight& w, int64_t n_out, int64_t n_entries) const override;    // matmul.cu
  bool moe_route_on_device(const moe_route_params& p) const override;  // moe_ops.cu
  void moe_route(const float* probs, const float* bias, int64_t n, const moe_route_params& p, int32_t* ids,
                 float* weights) override;                                                          // moe_ops.cu
  void matmul_experts(const backend_weight& w, int64_t n_out, const int32_t* ids, int64_t n_entries, int64_t x_rows,
                      const float* x, float* y) override;                                           // matmul.cu
  void moe_combine(float* y, const float* weights, int64_t n, int64_t k, int64_t n_embd, float* out) override;
                                                                                                    // moe_ops.cu
  void set_step_graphs(bool on) override { graphs_enabled_ = graphs_enabled_ && on; }
  void graph_begin(uint64_t key) override;                                                          // step_graph.cu
  void graph_end() override;                                                                        // step_graph.cu
  void graph_abort() override;                                                                      // step_graph.cu

  cudaStream_t stream() const { return stream_; }
  int sm_count() const { return sm_count_; }
  int device() const { return device_; }

  // Every kernel goes through launch (launch.cuh): now, or recorded into the step being built (its function,
  // launch shape and argument bytes are the step's signature). Stream copies go through enqueue likewise.
  template <typename... KArgs, typename... Args>
  void launch(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, Args&&... args);
  // The same with smem bytes of dynamic shared memory per block.
  template <typename... KArgs, typename... Args>
  void launch_smem(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args);
  void enqueue(const void* sig, size_t sig_bytes, std::function<void()> op);  // step_graph.cu

 private:
  // Rows [row0, row0 + n_out) of w times x: the one matmul path (matmul.cu).
  void matmul_rows(const backend_weight& w, int64_t row0, int64_t n_out, const float* x, int64_t n_rows, float* y);
  int8_t* reserve_q8(int64_t n_rows, int64_t n_in, float** scales);  // matmul.cu
  mmv_act q8_view(int64_t n_rows, int64_t n_in, act_format fmt);
  mmv_act quantized_act(const float* x, int64_t n_rows, int64_t n_in, act_format fmt);
  void keep_quantized_act(const float* x, int64_t n_rows, int64_t n_in, act_format fmt);
  // Host arguments -> device memory through a pinned ring (asynchronous, no stream sync): the device copy stays
  // valid until the next sync() / download(), after which the ring starts over.
  const void* stage(const void* host, size_t bytes);
  template <typename T>
  const T* stage(const T* host, int64_t n) { return (const T*)stage((const void*)host, (size_t)n * sizeof(T)); }
  void queue_drained();  // the stream is idle: every staged copy has been consumed, deferred frees done
  bool recording() const { return rec_ != nullptr; }
  void sig_add(const void* p, size_t n) { rec_sig_.append((const char*)p, n); }
  // Runs what the step recorded so far op by op, and the rest of the step too (step_graph.cu).
  void play_recorded_eagerly();
  void run_recorded(step_graph& g, std::vector<std::function<void()>>& ops);
  const void* stage_recorded(const void* host, size_t bytes);  // stage() inside a recorded step
  void destroy_graph(step_graph& g);
  void leave_recording();  // before an op that needs the host: the step goes on op by op
  void graph_setup_from_env();
  void graph_teardown();
  int32_t* attn_done() const { return done_counters_; }
  int32_t* argmax_done() const { return done_counters_ + k_attn_done_max; }
  void attention_launch(const paged_attention_params* seqs, int64_t n_seqs, bool paged, const float* q,
                        const float* k, const float* v, float* out);  // attention.cu

  int device_ = 0;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  char* ring_host_ = nullptr;  // pinned
  char* ring_dev_ = nullptr;
  size_t ring_cap_ = 0, ring_used_ = 0;
  device_scratch<int8_t> qx_;      // quantized activations [n_rows, n_in] (matmul.cu)
  device_scratch<float> qx_scale_; // their scales (reserve_q8)
  // What qx_ holds: the quantized rows of qx_of_ [qx_rows, qx_n_in] in format qx_fmt_, valid while only matmuls
  // ran since (q, k, v and gate, up read one input: it is quantized once). Null when unknown.
  const float* qx_of_ = nullptr;
  int64_t qx_rows_ = 0, qx_n_in_ = 0;
  act_format qx_fmt_{};
  act_format next_fmt_{1};  // the format add_rms_norm quantizes into: the last quantized matmul's (q8_256 first)
  std::unordered_set<void*> weights_;  // uploaded weights not yet released (freed with the backend)
  device_scratch<float> attn_part_;    // split attention partials (attention.cu)
  // [k_attn_done_max + k_argmax_done_max] counters of blocks done, zero between launches: decode attention's
  // (attention_mma.cu), then argmax_slices_kernel's (ops.cu)
  int32_t* done_counters_ = nullptr;
  device_scratch<float> argmax_part_;  // argmax_slices_kernel's per-block best pairs (ops.cu)
  device_scratch<float> mmq_part_;     // K-segment sums of the tensor-core matmul (matmul.cu)
  device_scratch<int32_t> argmax_ids_; // argmax_rows results before they are copied to the host (ops.cu)
  device_scratch<double> sample_buf_;  // sample_rows' results and draw scratch (sample_rows.cu)
  device_scratch<int32_t> moe_idx_;    // matmul_experts' sorted entry order and tiles (matmul.cu)
  device_scratch<float> moe_x_, moe_y_;  // its input rows gathered in that order, its output rows before the scatter
  std::vector<double> sample_back_;    // sample_rows' results on the host
  struct {
    std::vector<token_candidate> shortlist;
    sample_scratch scratch;
  } sample_host_;                      // sample_rows' host finish
  std::vector<int32_t> attn_meta_;     // host metadata of the last attention launch (attention.cu)
  std::vector<void*> outgrown_;        // scratch buffers outgrown while recording (freed with the backend)
  std::vector<void*> freed_while_recording_;  // free_f32 calls of a recorded step (freed when the stream drains)

  // Step graphs (step_graph.cu).
  std::map<uint64_t, step_graph> graphs_;
  step_graph* rec_ = nullptr;              // the step being recorded, or null (ops run as they are issued)
  std::string rec_sig_;                    // its signature so far
  std::vector<std::function<void()>> rec_ops_;
  size_t rec_stage_used_ = 0;              // bytes staged into rec_->stage_host so far
  std::vector<std::pair<size_t, size_t>> rec_stages_;  // (offset, bytes) of this step's staged arrays
  uint64_t graph_clock_ = 0;
  uint64_t rec_begin_ns_ = 0;              // when the step being recorded began (host clock)
  bool graphs_enabled_ = true;             // SPINDLE_CUDA_GRAPHS=0 or set_step_graphs(false) turns step graphs off
  bool pdl_ = false;                       // programmatic dependent launches (sm_90+; SPINDLE_CUDA_PDL=0: off)
  bool mmv8_ = true;                       // k-quant matvec with 8 lanes per row (SPINDLE_CUDA_MMV=x32: mmv_x32)
  bool moe_grouped_ = true;                // MoE experts in grouped launches (SPINDLE_CUDA_MOE=per-expert: off)
  // where decode attention blocks take fewer warps than 8 (SPINDLE_CUDA_ATTN_WARPS=8: never, =context: in every
  // launch, for tests; the same bits)
  enum class attn_warps { large_launches, never, every_launch };
  attn_warps attn_fewer_warps_ = attn_warps::large_launches;
  double mmq_split_tiles_per_sm_ = 0.5;  // K segments in separate blocks below this many tiles per SM
                                         // (SPINDLE_CUDA_MMQ_SPLIT; the same bits at any value)
  bool fused_ = true;  // fewer launches (SPINDLE_CUDA_FUSE=0: off, the same bits): rope + K/V store, gate / up
                       // one-lane matvecs, decode attention's chunk merge and output quantization
  bool graph_stats_ = false;               // SPINDLE_CUDA_GRAPH_STATS=1 prints the counts below at exit
  uint64_t n_replays_ = 0, n_captures_ = 0, n_eager_steps_ = 0;
};

}  // namespace spindle
