// The interface the model code computes through, so that CPU, CUDA and Metal kernels can be swapped without
// touching model code. Pointers passed to ops are backend memory (from alloc_f32 / upload_weight); token ids and
// positions are host memory. All activations are f32, row-major.
// Invariant (batch invariance): row r of every op's output depends only on row r of its inputs (attention: on
// query row r and the cache up to its position) with a fixed reduction order, never on how many rows a call
// holds or on the number of threads. So a token's logits are the same whatever it is batched with.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/moe_route.h"
#include "backend/sample_rows.h"
#include "common/argmax.h"
#include "gguf/ggml_type.h"

namespace spindle {

// A weight matrix as stored in the model file: n_out rows of n_in elements of `type`, rows contiguous.
struct backend_weight {
  ggml_type type = ggml_type::F32;
  const void* data = nullptr;  // backend memory (CPU: inside the GGUF mapping, never copied)
  int64_t n_in = 0;            // ne[0], elements per row
  int64_t n_out = 0;           // ne[1], rows
};

// Rotary position embedding as ggml_rope_ext computes it with no YaRN extrapolation (ext_factor 0, mscale 1):
// theta_0 = pos, theta_{j+1} = theta_j * freq_base^(-2/n_rot) (in f32), angle_j = freq_scale * theta_j / ff[j].
struct rope_params {
  int32_t n_rot = 0;                    // rotated dims at the start of each head (even, <= head_dim)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  bool neox = false;                    // pairs (j, j + n_rot/2) instead of (2j, 2j + 1)
  const float* freq_factors = nullptr;  // [n_rot/2] backend memory, or nullptr (all 1)
};

// Element type of a K / V store: f32, a 16-bit type that halves the cache (a value is rounded to nearest even
// when stored), an 8-bit float (fp8 e4m3 / e5m2, vLLM's and SGLang's fp8 caches at scale 1: rounded to nearest
// even, saturating; cpu/fp8.h), q8_0 (llama.cpp's block_q8_0: 32 values as an f16 scale and 32 int8, 34 bytes) or
// q4_0 (llama.cpp's block_q4_0: 32 values as an f16 scale and 32 4-bit values, 18 bytes); a value of those two is
// quantized when stored. Attention reads the stored values back exactly (f32 of the 16- or 8-bit value, scale x
// integer) and computes in f32. Strides and offsets count values; q8_0 / q4_0 rows and heads are whole blocks
// (multiples of 32: kv_blocked).
enum class kv_type : int32_t { f32 = 0, f16 = 1, bf16 = 2, q8_0 = 3, fp8_e4m3 = 4, fp8_e5m2 = 5, q4_0 = 6 };
// Every K / V store type.
inline constexpr kv_type k_kv_types[] = {kv_type::f32,  kv_type::f16,      kv_type::bf16,    kv_type::q8_0,
                                         kv_type::q4_0, kv_type::fp8_e4m3, kv_type::fp8_e5m2};
// True for the block types (q8_0, q4_0), whose rows and heads are whole 32-value blocks.
inline bool kv_blocked(kv_type t) { return t == kv_type::q8_0 || t == kv_type::q4_0; }
// True when n values (a head dim, a row stride, a row) are whole units of t: always, or whole 32-value blocks.
inline bool kv_whole_blocks(kv_type t, int64_t n) { return !kv_blocked(t) || n % 32 == 0; }
// Bytes that n values of type t take (for q8_0 / q4_0 n is a multiple of 32: whole blocks).
inline int64_t kv_bytes(kv_type t, int64_t n) {
  switch (t) {
    case kv_type::f16:
    case kv_type::bf16: return 2 * n;
    case kv_type::fp8_e4m3:
    case kv_type::fp8_e5m2: return n;
    case kv_type::q8_0: return n / 32 * 34;
    case kv_type::q4_0: return n / 32 * 18;
    case kv_type::f32: break;
  }
  return 4 * n;
}
// The API's name of a K / V store type (--dtype / kvCacheDtype spelling: float32, float16, bfloat16, q8_0, q4_0,
// fp8_e4m3, fp8_e5m2), and back (false for another name, e.g. "auto").
inline const char* kv_type_name(kv_type t) {
  switch (t) {
    case kv_type::f16: return "float16";
    case kv_type::bf16: return "bfloat16";
    case kv_type::q8_0: return "q8_0";
    case kv_type::q4_0: return "q4_0";
    case kv_type::fp8_e4m3: return "fp8_e4m3";
    case kv_type::fp8_e5m2: return "fp8_e5m2";
    case kv_type::f32: break;
  }
  return "float32";
}
inline bool kv_type_of_name(const std::string& name, kv_type* t) {
  for (kv_type k : k_kv_types) {
    if (name == kv_type_name(k)) {
      *t = k;
      return true;
    }
  }
  return false;
}
// Floats of backend memory that n values of type t take (alloc_f32 sizes a store by this).
inline int64_t kv_store_floats(kv_type t, int64_t n) { return (kv_bytes(t, n) + 3) / 4; }

// Attention of n_tokens query rows of one sequence against its KV cache. Causal (the default): query row i sits
// at position n_past + i and attends to cache rows 0..n_past + i (its own K/V must already be in the cache).
// Non-causal (causal = false: a ViT encoder, or an image span of gemma3's prompt, whose rows see each other): every
// query row attends to all n_past + n_tokens cache rows. A sliding window (window) then drops the keys too far
// below each row's own position. Query head h uses KV head h / (n_head / n_head_kv) (GQA / MQA).
struct attention_params {
  int64_t n_tokens = 0;
  int64_t n_past = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  int64_t k_row_stride = 0;  // elements (of kv) between consecutive positions in the K cache (>= n_head_kv * head_dim_k)
  int64_t v_row_stride = 0;  // elements (of kv) between consecutive positions in the V cache (>= n_head_kv * head_dim_v)
  float scale = 1.0f;        // applied to q.k before the softmax (1/sqrt(head_dim_k))
  bool causal = true;        // false: bidirectional, every query attends to every cache row (of its window)
  // Sliding-window attention (gemma3's local layers): > 0: the query at position P = n_past + i attends key
  // position j only when P - j < window (llama.cpp's LLAMA_SWA_TYPE_STANDARD masks j when P - j >= window), so
  // causal: [max(0, P - window + 1), P], the window positions up to and including its own; non-causal (llama.cpp's
  // standard SWA with its causal mask off): [max(0, P - window + 1), n_past + n_tokens), its window's start to the
  // last row. 0: no window ([0, P] causal, [0, n_past + n_tokens) not).
  int32_t window = 0;
  kv_type kv = kv_type::f32; // the element type of the K / V cache (strides in its elements)
};

// Attention of n_tokens query rows of one sequence against a paged KV store: position p lives in row
// block_table[p / block_size] * block_size + p % block_size of the store (row strides as in attention_params).
// Query row i sits at position P = n_past + i and attends to positions 0..P (all n_past + n_tokens positions when
// attn.causal is false), those with P - j < attn.window only under a sliding window (attention_params::window).
// Same result, bit for bit, as attention() over the same rows laid out contiguously.
struct paged_attention_params {
  attention_params attn;                 // n_tokens, n_past, heads, strides, scale
  const int32_t* block_table = nullptr;  // host [n_table]; covers n_past + n_tokens positions
  int32_t n_table = 0;
  int32_t block_size = 0;  // rows per block
  int32_t n_blocks = 0;    // blocks in the store (every table entry must be < n_blocks)
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const char* name() const = 0;
  virtual int n_threads() const = 0;
  // True for the weight types matmul and get_rows accept.
  virtual bool supports_type(ggml_type type) const = 0;
  // True for the K / V store types store_kv, rope_store_kv and the paged attention ops take (f32 everywhere; the CPU
  // and CUDA backends take f16, bf16, fp8_e4m3 and fp8_e5m2 too, the CPU q8_0 and q4_0).
  virtual bool supports_kv(kv_type t) const { return t == kv_type::f32; }
  // True when the attention ops take a store of type t for heads of these dims: supports_kv, and the backend's own
  // rules (the CPU's block types need multiples of 32; CUDA's 16-bit and fp8 attention, head dims of at most 128).
  virtual bool supports_kv_heads(kv_type t, int32_t head_dim_k, int32_t head_dim_v) const {
    (void)head_dim_k;
    (void)head_dim_v;
    return supports_kv(t);
  }
  // Free and total bytes of the device memory the backend allocates from; false when it has no such limit
  // of its own (CPU: host memory).
  virtual bool device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const { return false; }

  // Memory. alloc_f32 returns n zeroed floats of backend memory (throws spindle::error if it cannot).
  virtual float* alloc_f32(int64_t n) = 0;
  virtual void free_f32(float* p) = 0;
  virtual void upload(float* dst, const float* src, int64_t n) = 0;    // host -> backend, n floats
  virtual void download(float* dst, const float* src, int64_t n) = 0;  // backend -> host, n floats
  // out[r] = argmax_first(x + r * stride, n) (common/argmax.h) for n_rows rows: the greedy token of a logits
  // row (its first n entries) without bringing the row to the host.   x: backend memory, out: host [n_rows]
  virtual void argmax_rows(const float* x, int64_t n_rows, int64_t stride, int64_t n, int32_t* out) {
    std::vector<float> row((size_t)n);
    for (int64_t r = 0; r < n_rows; ++r) {
      download(row.data(), x + r * stride, n);
      out[r] = argmax_first(row.data(), n);
    }
  }
  // out[r] = sample_row_host(row r, n, specs[r]) (backend/sample_rows.h) for n_rows rows: the token a request's
  // sampler would pick (penalties, bias and mask as edits, then the argmax or the draw) without bringing the
  // vocabulary to the host where the backend can avoid it. The rows are scratch: the edits land in place.
  // x: backend memory [n_rows, stride] (the first n of a row are its ids), specs: host [n_rows], out: host [n_rows].
  // The default (sample_rows.cpp) downloads each row and samples it on the host.
  virtual void sample_rows(float* x, int64_t n_rows, int64_t stride, int64_t n, const sample_spec* specs,
                           int32_t* out);
  virtual void copy(float* dst, const float* src, int64_t n) = 0;      // backend -> backend, n floats
  // dst[dst_rows[i], :] = src[src_rows[i], :] for i < n, rows of `width` floats; a null index array means row i.
  // dst_rows / src_rows: host [n]. The destination rows must be distinct and must not overlap the source rows.
  // (KV slot scatter, MoE gather / scatter: one call instead of n copies.)
  virtual void copy_rows(float* dst, const int64_t* dst_rows, const float* src, const int64_t* src_rows, int64_t n,
                         int64_t width) {
    for (int64_t i = 0; i < n; ++i) {
      copy(dst + (dst_rows ? dst_rows[i] : i) * width, src + (src_rows ? src_rows[i] : i) * width, width);
    }
  }
  // Makes a model-file weight usable by the ops (CPU: wraps the mapped bytes; GPU: uploads them).
  virtual backend_weight upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) = 0;
  virtual void release_weight(backend_weight& w) = 0;
  virtual void sync() = 0;  // waits until every queued op finished

  // out[i, :] = dequantized row ids[i] of table.   ids: host [n], each in [0, table.n_out).
  virtual void get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) = 0;
  // y[t, o] = sum_i W[o, i] * x[t, i].   x: [n_rows, w.n_in], y: [n_rows, w.n_out]
  virtual void matmul(const backend_weight& w, const float* x, int64_t n_rows, float* y) = 0;
  // One expert of a stacked weight (MoE): y = x @ rows [expert * n_out, (expert + 1) * n_out) of w, where
  // w.n_out = n_expert * n_out, with the per-output arithmetic of llama.cpp's ggml_mul_mat_id on this backend.
  // x: [n_rows, w.n_in], y: [n_rows, n_out]. Throws spindle::error on an expert or n_out that does not fit w.
  virtual void matmul_expert(const backend_weight& w, int64_t expert, int64_t n_out, const float* x, int64_t n_rows,
                             float* y) = 0;
  // x[r, :] *= s[r].   x: [n_rows, n], s: host [n_rows]
  virtual void scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) = 0;
  // x[r, :] += b.   x: [n_rows, n], b: [n]
  virtual void add_row_vector(float* x, const float* b, int64_t n_rows, int64_t n) = 0;
  // y = a + b elementwise, n elements (y may alias a or b)
  virtual void add(const float* a, const float* b, float* y, int64_t n) = 0;
  // y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.   x, y: [n_rows, n], w: [n] or nullptr (no weight)
  virtual void rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) = 0;
  // y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * w + b, mean first, then the population variance of
  // (x - mean) (as ggml_norm). x, y: [n_rows, n] (y may alias x), w, b: [n] or nullptr (no weight / no bias)
  virtual void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int64_t n,
                          float eps) = 0;
  // Rotates each head of x in place.   x: [n_rows, n_head, head_dim], pos: host [n_rows]
  virtual void rope(float* x, int64_t n_rows, int32_t n_head, int32_t head_dim, const int32_t* pos,
                    const rope_params& p) = 0;
  // y = silu(gate) * up elementwise, n elements (y may alias gate or up)
  virtual void swiglu(const float* gate, const float* up, float* y, int64_t n) = 0;
  // y = gelu(x) elementwise, tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in f32 (no f16 table;
  // evaluated as x / (1 + exp(-2 sqrt(2/pi) (x + 0.044715 x^3))), the same function), n elements (y may alias x)
  virtual void gelu(const float* x, float* y, int64_t n) = 0;
  // y = x * sigmoid(1.702 x) elementwise, n elements (y may alias x)
  virtual void gelu_quick(const float* x, float* y, int64_t n) = 0;
  // y = gelu(gate) * up elementwise (gelu's tanh form above; the gated FFN of gemma3, llama.cpp's geglu), n elements
  // (y may alias gate or up)
  virtual void geglu(const float* gate, const float* up, float* y, int64_t n) = 0;
  // x[r, :] = softmax(x[r, :] * scale) in place.   x: [n_rows, n]
  virtual void softmax(float* x, int64_t n_rows, int64_t n, float scale) = 0;
  // q: [n_tokens, n_head * head_dim_k], k_cache: [positions, k_row_stride], v_cache: [positions, v_row_stride]
  // out: [n_tokens, n_head * head_dim_v]
  virtual void attention(const attention_params& p, const float* q, const float* k_cache, const float* v_cache,
                         float* out) = 0;
  // q: [n_tokens, n_head * head_dim_k], k_store: [n_blocks * block_size, k_row_stride], v_store likewise,
  // out: [n_tokens, n_head * head_dim_v]. Throws spindle::error on a table that does not cover the positions.
  virtual void attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                               const float* v_store, float* out) = 0;
  // attention_paged for each of n_seqs sequences, whose query and output rows follow each other in order:
  // sequence s reads q rows and writes out rows [sum of the earlier n_tokens, + seqs[s].attn.n_tokens), with the
  // bits of its own attention_paged call. Sequences may differ in causal and window (a prompt chunk cut into causal
  // segments and the non-causal segment of an image span, each an item at its own n_past); a backend may require
  // the same heads, dims, strides, scale, store type and block size of all of them (CUDA does). The default makes
  // one attention_paged call per sequence; a GPU backend launches once for all of them (CUDA: once per run of
  // consecutive sequences with the same causal and window).
  virtual void attention_paged_batch(const paged_attention_params* seqs, int64_t n_seqs, const float* q,
                                     const float* k_store, const float* v_store, float* out) {
    int64_t at = 0;
    for (int64_t s = 0; s < n_seqs; ++s) {
      const attention_params& a = seqs[s].attn;
      attention_paged(seqs[s], q + at * a.n_head * a.head_dim_k, k_store, v_store, out + at * a.n_head * a.head_dim_v);
      at += a.n_tokens;
    }
  }
  // LFM2's gated short convolution of one sequence (the shortconv block between in_proj and out_proj):
  //   bx[t] = B[t] * X[t];  y[t, c] = C[t, c] * sum_k w[k, c] * bx[t - d + k, c]   (d = l_cache - 1; tap d is the
  //   current token, rows t - d + k < 0 come from state). Afterwards state holds the last d rows of state ++ bx,
  //   so the sequence's next chunk continues where this one stopped (chunked prefill == one call).
  // bcx: [n_tokens, 3 * n_ch] rows B | C | X, w: [l_cache, n_ch] tap-major, state: [d, n_ch] oldest row first
  // (read and updated), y: [n_tokens, n_ch]. Not row-wise: token t reads rows <= t of its own sequence only.
  virtual void short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                          float* state, float* y) = 0;
  // short_conv for each of n_seqs sequences whose rows follow each other in bcx and y (sequence s: n_tokens[s]
  // rows, its own state states[s]); the same result as one short_conv call per sequence. n_tokens, states: host
  // [n_seqs]. The default makes those calls; a GPU backend launches once for all of them.
  virtual void short_conv_batch(const float* bcx, const int64_t* n_tokens, float* const* states, int64_t n_seqs,
                                int64_t n_ch, int32_t l_cache, const float* w, float* y) {
    int64_t at = 0;
    for (int64_t s = 0; s < n_seqs; ++s) {
      short_conv(bcx + at * 3 * n_ch, n_tokens[s], n_ch, l_cache, w, states[s], y + at * n_ch);
      at += n_tokens[s];
    }
  }

  // Fused steps of a transformer layer: each is exactly the sequence of ops its default runs (same results, bit
  // for bit); a GPU backend does each in one launch.
  // x += r (as add(r, x, x)), then y = rms_norm(x) * w.   x, r, y: [n_rows, n], w: [n] or nullptr
  virtual void add_rms_norm(float* x, const float* r, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
    add(r, x, x, n_rows * n);
    rms_norm(x, w, y, n_rows, n, eps);
  }
  // rope(q) then rope(k) at the same positions.   q: [n_rows, n_head_q, head_dim], k: [n_rows, n_head_k, head_dim]
  virtual void rope_qk(float* q, float* k, int64_t n_rows, int32_t n_head_q, int32_t n_head_k, int32_t head_dim,
                       const int32_t* pos, const rope_params& p) {
    rope(q, n_rows, n_head_q, head_dim, pos, p);
    rope(k, n_rows, n_head_k, head_dim, pos, p);
  }
  // The batch's new K and V rows into their cache slots: copy_rows(k_store, rows, k_new) and likewise for V (f32
  // stores; 16-bit ones hold each value rounded to nearest even, on backends whose supports_kv says so: the
  // default throws for them). rows: host [n]; k_new: [n, k_dim], v_new: [n, v_dim]
  virtual void store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new, const float* v_new,
                        int64_t n, int64_t k_dim, int64_t v_dim, kv_type kv = kv_type::f32);
  // rope_qk(q, k_new) then store_kv(k_store, v_store, rows, k_new, v_new) (k_dim = n_head_k * head_dim): one call,
  // so a backend may do both in one launch with the same bits.
  virtual void rope_store_kv(float* q, float* k_new, const float* v_new, int64_t n_rows, int32_t n_head_q,
                             int32_t n_head_k, int32_t head_dim, const int32_t* pos, const rope_params& p,
                             float* k_store, float* v_store, const int64_t* rows, int64_t v_dim,
                             kv_type kv = kv_type::f32) {
    rope_qk(q, k_new, n_rows, n_head_q, n_head_k, head_dim, pos, p);
    store_kv(k_store, v_store, rows, k_new, v_new, n_rows, (int64_t)n_head_k * head_dim, v_dim, kv);
  }
  // ys[i] = x . ws[i] for the n weights of one input (q / k / v, gate / up), each exactly as matmul would give it;
  // one call, so a backend may run them as one launch.   x: [n_rows, n_in], ys[i]: [n_rows, ws[i]->n_out]
  virtual void matmul_group(const backend_weight* const* ws, float* const* ys, int n, const float* x, int64_t n_rows) {
    for (int i = 0; i < n; ++i) matmul(*ws[i], x, n_rows, ys[i]);
  }
  // LoRA (llama.cpp's build_lora_mm): y += scale * (b . (a . x)): the low-rank product low = a . x (matmul),
  // delta = b . low, scaled (rounded), then added to y. a: [rank rows of n_in], b: [n_out rows of rank].
  // x: [n_rows, a.n_in], y: [n_rows, b.n_out]; low, delta: scratch of n_rows * a.n_out and n_rows * b.n_out floats
  // (delta may be null where lora_add_in_place(b)).
  // The default runs exactly those ops; a backend may sum b's products in another order (the CPU backend does: b's
  // rows are too short for its dot kernels) but forms the same products and keeps row r a function of row r.
  virtual void lora_add(const backend_weight& a, const backend_weight& b, float scale, const float* x, int64_t n_rows,
                        float* y, float* low, float* delta) {
    matmul(a, x, n_rows, low);
    matmul(b, low, n_rows, delta);
    const std::vector<float> scales((size_t)n_rows, scale);
    scale_rows(delta, scales.data(), n_rows, b.n_out);
    add(y, delta, y, n_rows * b.n_out);
  }
  // Whether lora_add with this b needs no delta scratch (it may then be null).
  virtual bool lora_add_in_place(const backend_weight& b) const { return false; }
  // gate = swiglu(gate, up), then y = w . gate (matmul).   gate, up: [n_rows, w.n_in], y: [n_rows, w.n_out]
  virtual void swiglu_matmul(const backend_weight& w, float* gate, const float* up, int64_t n_rows, float* y) {
    swiglu(gate, up, gate, n_rows * w.n_in);
    matmul(w, gate, n_rows, y);
  }

  // LFM2 conv-state checkpoints: dst[dst_rows[i], c] = bcx[src_rows[i], c] * bcx[src_rows[i], 2 n_ch + c] for
  // c < n_ch: the B * X rows short_conv folds into its state, with the same single multiply.
  // bcx: [rows, 3 * n_ch] (B | C | X), dst: [rows, n_ch]; src_rows, dst_rows: host [n]. The default goes
  // through host memory (download, multiply, upload, copy_rows); the CPU backend multiplies in place.
  virtual void gather_bx_rows(const float* bcx, const int64_t* src_rows, int64_t n, int64_t n_ch, float* dst,
                              const int64_t* dst_rows) {
    if (n <= 0) return;
    std::vector<float> row((size_t)(3 * n_ch)), out((size_t)(n * n_ch));
    for (int64_t i = 0; i < n; ++i) {
      download(row.data(), bcx + src_rows[i] * 3 * n_ch, 3 * n_ch);
      for (int64_t c = 0; c < n_ch; ++c) out[(size_t)(i * n_ch + c)] = row[(size_t)c] * row[(size_t)(2 * n_ch + c)];
    }
    float* tmp = alloc_f32(n * n_ch);
    upload(tmp, out.data(), n * n_ch);
    copy_rows(dst, dst_rows, tmp, nullptr, n, n_ch);
    sync();
    free_f32(tmp);
  }

  // MoE experts without the host (model/moe_ffn.h's grouped path): entries are slot-major, entry e = j * n + t for
  // token t < n and slot j < k. Each op gives the bits of the per-expert path (matmul_expert over an expert's
  // gathered rows, scale_rows, copy and add); the defaults go through the host where they must.
  // Whether these ops run on the device without the host for n_entries entries of weight w's experts of n_out rows
  // (one launch each, no sync: a decode step stays one step graph). False (the default): the MoE block keeps its
  // per-expert path.
  virtual bool moe_on_device(const backend_weight& w, int64_t n_out, int64_t n_entries) const { return false; }
  // x = 1 / (1 + exp(-x)) elementwise in place (MoE sigmoid gating).   x: backend [n]. Default: through the host
  // with sigmoid_gate (backend/moe_route.h: llama.cpp's CPU arithmetic), which the CPU backend keeps.
  virtual void sigmoid(float* x, int64_t n);
  // Whether moe_route runs on the device for these parameters (no host read, no sync). False (the default): it goes
  // through the host.
  virtual bool moe_route_on_device(const moe_route_params& p) const { return false; }
  // route_experts (backend/moe_route.h) of n tokens: probs [n, n_expert] (after the gating) and bias [n_expert]
  // (or null) in backend memory; ids [k, n] (int32) and weights [k, n] written to backend memory, slot-major.
  virtual void moe_route(const float* probs, const float* bias, int64_t n, const moe_route_params& p, int32_t* ids,
                         float* weights);
  // y[e, :] = rows [ids[e] n_out, (ids[e] + 1) n_out) of w . x[e % x_rows, :] for e < n_entries, each exactly as
  // matmul_expert gives it.   ids: backend [n_entries] (int32, each < w.n_out / n_out), x: backend [x_rows, w.n_in],
  // y: backend [n_entries, n_out]. Throws spindle::error on an id out of range (where it reads them).
  virtual void matmul_experts(const backend_weight& w, int64_t n_out, const int32_t* ids, int64_t n_entries,
                              int64_t x_rows, const float* x, float* y);
  // out[t, :] = (y[t] w[t] + y[n + t] w[n + t]) + ... + y[(k - 1) n + t] w[(k - 1) n + t]: each product rounded, the
  // sum in slot order.   y: backend [k n, n_embd] (scratch: may be overwritten), weights: backend [k n],
  // out: backend [n, n_embd], not overlapping y.
  virtual void moe_combine(float* y, const float* weights, int64_t n, int64_t k, int64_t n_embd, float* out);

  // Step graphs (a GPU backend's way past per-op launch costs; no-ops elsewhere). The ops issued between
  // graph_begin(key) and graph_end() form one step that the backend may record once and replay for a later step
  // of the same key whose ops, shapes and buffers are all the same (the host data the ops stage, such as token
  // ids, positions, block tables and slot rows, may differ: it is copied in at each replay). Ops keep their
  // contract: host arguments are read before the op returns, results are visible after graph_end() through
  // download / sync. A step that needs the host mid-way (download, upload, sync, free) runs op by op instead.
  // graph_abort() drops a step that threw part-way (nothing recorded in it runs).
  // Step graphs off for this backend (vLLM's enforce_eager, SGLang's disable_cuda_graph): every step op by op.
  // Backends without step graphs ignore it.
  virtual void set_step_graphs(bool on) { (void)on; }
  virtual void graph_begin(uint64_t key) { (void)key; }
  virtual void graph_end() {}
  virtual void graph_abort() {}
};

// The CPU backend; n_threads <= 0 means std::thread::hardware_concurrency().
std::unique_ptr<backend> make_cpu_backend(int n_threads);

// The backend for a device name (backend_factory.cpp): "cpu"; "cuda" (throws spindle::error saying why when
// this build has no CUDA backend or no usable GPU and driver is present); "auto": CUDA when usable, else CPU.
// n_threads: CPU threads (<= 0: every core).
std::unique_ptr<backend> make_backend(const std::string& device, int n_threads);
// make_backend for a model whose tensors have these types: "auto" takes CUDA only where its backend computes
// every one of them (a file in a type without GPU kernels runs on the CPU instead of failing to load); "cpu"
// and "cuda" as make_backend ("cuda" then fails at load, naming the tensor and its type).
std::unique_ptr<backend> make_backend_for_types(const std::string& device, int n_threads,
                                                const std::vector<ggml_type>& types);
// Whether make_backend("cuda", ...) can succeed; otherwise *why (if given) says what is missing.
bool cuda_usable(std::string* why);

#ifdef SPINDLE_CUDA
// The CUDA backend on device `device` (native/backend/cuda); throws spindle::error when CUDA fails.
std::unique_ptr<backend> make_cuda_backend(int device);
// Number of CUDA devices; 0 with *why set (if given) when there is no driver or device.
int cuda_device_count(std::string* why);
// Step-graph counts of every CUDA backend of the process so far (tests and benchmarks): steps that replayed a
// graph, steps captured into a new or updated graph, steps that needed the host mid-way and ran op by op, and
// steps of a shape seen for the first time (run op by op; captured if they repeat).
// record_seconds: host time from graph_begin to graph_end (the model's host work plus recording), all steps.
struct cuda_graph_counts {
  uint64_t replayed = 0, captured = 0, op_by_op = 0, first_seen = 0;
  double record_seconds = 0;
};
cuda_graph_counts cuda_step_graph_counts();
#endif

// Owns n floats of backend memory for the lifetime of the object.
class backend_buffer {
 public:
  backend_buffer() = default;
  backend_buffer(backend& be, int64_t n) : be_(&be), data_(be.alloc_f32(n)), n_(n) {}
  ~backend_buffer() { reset(); }
  backend_buffer(const backend_buffer&) = delete;
  backend_buffer& operator=(const backend_buffer&) = delete;
  backend_buffer(backend_buffer&& o) noexcept : be_(o.be_), data_(o.data_), n_(o.n_) { o.data_ = nullptr; o.n_ = 0; }
  backend_buffer& operator=(backend_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_; data_ = o.data_; n_ = o.n_;
      o.data_ = nullptr; o.n_ = 0;
    }
    return *this;
  }
  void reset() {
    if (data_) be_->free_f32(data_);
    data_ = nullptr;
    n_ = 0;
  }
  float* data() const { return data_; }
  int64_t size() const { return n_; }  // floats

 private:
  backend* be_ = nullptr;
  float* data_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace spindle
