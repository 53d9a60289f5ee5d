// Float kernels of the CPU backend, one row (or one attention head of one query) at a time. The portable
// versions mirror the numerics of ggml's CPU ops where that is cheap (rms_norm sums squares in double; softmax
// sums exp in double; rope angles are built by repeated f32 multiplication as ggml_rope_cache_init does); the
// *_avx2 versions (ops_avx2.cpp) reproduce llama.cpp's AVX2 CPU build bit for bit (FMA contraction, ggml's
// vectorized expf, its attention reduction orders), and rms_norm / add already are bit-identical to it.
// Invariant: each function is a pure function of its arguments with a fixed reduction order, so the threaded
// wrappers in cpu_backend.cpp give bitwise the same rows whatever the split.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/quants.h"

namespace spindle {

// sum_i a[i] * b[i] in f32 with 8 interleaved partial sums (lane i % 8), then summed pairwise.
float ops_dot_f32(const float* a, const float* b, int64_t n);

// y = x * (1 / sqrt(mean(x^2) + eps)) [* w].   x, y, w: [n]; w may be nullptr; y may alias x.
void ops_rms_norm_row(const float* x, const float* w, float* y, int64_t n, float eps);

// y = (x - mean) * (1 / sqrt(var + eps)) [* w] [+ b] as ggml_norm then ggml_mul / ggml_add: mean = sum(x) / n
// summed in double, v = x - mean (f32), var = sum(v * v) / n summed in double; w * and + b rounded separately.
// x, y, w, b: [n]; w, b may be nullptr; y may alias x.
void ops_layer_norm_row(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);

// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) x (1 + 0.044715 x^2), evaluated as x / (1 + exp(-2u)) (the
// same function; it avoids the cancellation of 1 + tanh(u) for negative x, and large |x| give x or -0).
float ops_gelu(float x);
// gelu_quick(x) = x * sigmoid(1.702 x) = x / (1 + exp(-1.702 x))
float ops_gelu_quick(float x);
// y = gelu(x) / gelu_quick(x).   n elements; y may alias x.
void ops_gelu_vec(const float* x, float* y, int64_t n);
void ops_gelu_quick_vec(const float* x, float* y, int64_t n);

// cache[2j] = cos(angle_j), cache[2j + 1] = sin(angle_j) for j < n_rot/2 at position pos.   cache: [n_rot]
void ops_rope_cache(int64_t pos, const rope_params& p, float* cache);
// Rotates the first n_rot dims of one head in place with a cache from ops_rope_cache.   x: [head_dim]
void ops_rope_head(float* x, const float* cache, int32_t n_rot, bool neox);

// x = softmax(x * scale) in place (max subtracted, exp summed in double).   x: [n]
void ops_softmax_row(float* x, int64_t n, float scale);

// silu(x) = x / (1 + exp(-x))
float ops_silu(float x);
// y = silu(gate) * up.   n elements; y may alias gate or up.
void ops_swiglu(const float* gate, const float* up, float* y, int64_t n);
// y = a + b.   n elements; y may alias a or b.
void ops_add(const float* a, const float* b, float* y, int64_t n);

// 16-bit K / V elements as the store holds them (kv_type f16 / bf16): the bits of an IEEE half or a bfloat16.
// kv_to_f32 widens one exactly, so every kernel computes on the same f32 values whatever the store type.
struct kv_f16 {
  uint16_t bits;
};
struct kv_bf16 {
  uint16_t bits;
};
inline float kv_to_f32(float x) { return x; }
inline float kv_to_f32(kv_f16 x) { return fp16_to_f32(x.bits); }
inline float kv_to_f32(kv_bf16 x) { return bf16_to_f32(x.bits); }
// 8-bit float K / V elements (kv_type fp8_e4m3 / fp8_e5m2, fp8.h): the byte as stored, widened exactly.
struct kv_fp8_e4m3 {
  uint8_t bits;
};
struct kv_fp8_e5m2 {
  uint8_t bits;
};
inline float kv_to_f32(kv_fp8_e4m3 x) { return fp8_e4m3_to_f32(x.bits); }
inline float kv_to_f32(kv_fp8_e5m2 x) { return fp8_e5m2_to_f32(x.bits); }

// A block of a q8_0 K / V store (kv_type q8_0): llama.cpp's block_q8_0 (quants.h), value i = f16 d x qs[i] (exact
// in f32), made by quantize_row_q8_0 (the activations' quantizer, as llama.cpp's x86 one).
using kv_q8 = block_q8_0;
static_assert(sizeof(kv_q8) == 34, "block_q8_0 is 34 bytes");
// A value of a q8_0 row as a pointer to it: block b's value i (i counting on across the row's blocks), so the
// kernels' `row + d` and `row[d]` read q8_0 rows as they read the others; value reads are exact.
struct kv_q8_ptr {
  const kv_q8* b;
  int64_t i;
  kv_q8_ptr operator+(int64_t n) const { return {b, i + n}; }
  float operator[](int64_t n) const {
    const kv_q8& blk = b[(i + n) / 32];
    return fp16_to_f32(blk.d) * (float)blk.qs[(i + n) % 32];
  }
};

// A block of a q4_0 K / V store (kv_type q4_0): llama.cpp's block_q4_0 (quants.h), value i = f16 d x (q_i - 8) with
// q_i the low nibble of qs[i] for i < 16, the high nibble of qs[i - 16] after (exact in f32), made by
// quantize_row_q4_0 (llama.cpp's quantize_row_q4_0_ref, which its CPU KV cache stores with).
using kv_q4 = block_q4_0;
static_assert(sizeof(kv_q4) == 18, "block_q4_0 is 18 bytes");
// A value of a q4_0 row as a pointer to it, as kv_q8_ptr.
struct kv_q4_ptr {
  const kv_q4* b;
  int64_t i;
  kv_q4_ptr operator+(int64_t n) const { return {b, i + n}; }
  float operator[](int64_t n) const {
    const kv_q4& blk = b[(i + n) / 32];
    const int j = (int)((i + n) % 32);
    const int q = j < 16 ? blk.qs[j] & 0x0f : blk.qs[j - 16] >> 4;
    return fp16_to_f32(blk.d) * (float)(q - 8);
  }
};

// How a row of element type E is addressed: a pointer to its first value (const E*, or kv_q8_ptr / kv_q4_ptr for
// q8_0 / q4_0), and values per storage unit (strides and offsets count values; a block row advances a block per 32).
template <class E>
struct kv_elem {
  using ptr = const E*;
  static constexpr int64_t per_unit = 1;
  static ptr at(const E* unit) { return unit; }
};
template <>
struct kv_elem<kv_q8> {
  using ptr = kv_q8_ptr;
  static constexpr int64_t per_unit = 32;
  static ptr at(const kv_q8* unit) { return {unit, 0}; }
};
template <>
struct kv_elem<kv_q4> {
  using ptr = kv_q4_ptr;
  static constexpr int64_t per_unit = 32;
  static ptr at(const kv_q4* unit) { return {unit, 0}; }
};

// The C++ element type of a K / V store type, for code that instantiates a kernel per type: with_kv_elem(t, f)
// calls f(E{}) with E float, kv_f16, kv_bf16, kv_q8, kv_q4, kv_fp8_e4m3 or kv_fp8_e5m2, and returns what f returns.
template <class F>
decltype(auto) with_kv_elem(kv_type t, F&& f) {
  switch (t) {
    case kv_type::f16: return f(kv_f16{});
    case kv_type::bf16: return f(kv_bf16{});
    case kv_type::q8_0: return f(kv_q8{});
    case kv_type::q4_0: return f(kv_q4{});
    case kv_type::fp8_e4m3: return f(kv_fp8_e4m3{});
    case kv_type::fp8_e5m2: return f(kv_fp8_e5m2{});
    case kv_type::f32: break;
  }
  return f(float{});
}

// Where position j's K (or V) head starts: base + j * stride + offset (a contiguous cache) or, when table is set,
// table[j] + offset (a paged store read in place; table[j] = the start of position j's row). Values of `type`
// (float, kv_f16, kv_bf16, kv_fp8_*, or kv_q8 / kv_q4 blocks): stride and offset count values (whole blocks for the
// block types).
struct kv_rows {
  const void* base = nullptr;
  int64_t stride = 0;
  const void* const* table = nullptr;
  int64_t offset = 0;
  kv_type type = kv_type::f32;
  template <class E>
  typename kv_elem<E>::ptr row_as(int64_t j) const {
    constexpr int64_t u = kv_elem<E>::per_unit;
    return kv_elem<E>::at((table ? static_cast<const E*>(table[j]) : static_cast<const E*>(base) + j * (stride / u)) +
                          offset / u);
  }
  // The same rows seen from position `first` on: row j of the result is row first + j of this.
  kv_rows from(int64_t first) const {
    kv_rows r = *this;
    if (table) r.table = table + first;
    else r.base = static_cast<const char*>(base) + kv_bytes(type, first * stride);
    return r;
  }
};

// The first key position a query at position pos attends, causal or not: 0, or pos - window + 1 under a sliding
// window (attention_params::window).
inline int64_t attention_first_pos(const attention_params& p, int64_t pos) {
  return p.window > 0 && pos >= p.window ? pos - p.window + 1 : 0;
}

// One query head against positions [0, n_kv) of its KV head:
// out[d] = sum_j softmax_j(scale * q.k_j) * v_j[d].   q: [head_dim_k], k_j = k + j * k_stride,
// v_j = v + j * v_stride, out: [head_dim_v], scores: scratch [n_kv].
void ops_attention_head(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                        int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v, float scale, float* scores,
                        float* out);
// The same with K / V rows anywhere (same result, bit for bit, as the strided form over the same rows).
void ops_attention_head_kv(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t head_dim_k,
                           int32_t head_dim_v, float scale, float* scores, float* out);

// Floats of scratch ops_attention_head_avx2 needs: n_kv rounded up to 8, plus 8 * head_dim_v.
int64_t ops_attention_scratch(int64_t n_kv, int32_t head_dim_v);

// AVX2 + FMA variants, bit-identical to llama.cpp's x86 AVX2 CPU backend (only call them when
// cpu_level_supported(cpu_level::avx2)). Same arguments as above, except the attention scratch, which must
// hold ops_attention_scratch(n_kv, head_dim_v) floats.
float ops_dot_f32_avx2(const float* a, const float* b, int64_t n);  // ggml_vec_dot_f32
void ops_softmax_row_avx2(float* x, int64_t n, float scale);          // soft_max_f32 without mask
void ops_rope_head_avx2(float* x, const float* cache, int32_t n_rot, bool neox);
void ops_attention_head_avx2(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                             int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch,
                             float* out);
void ops_attention_head_kv_avx2(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv,
                                int32_t head_dim_k, int32_t head_dim_v, float scale, float* scratch, float* out);
// In place: p[0, n_kv) scaled scores -> the probabilities ops_attention_head_kv_avx2 makes of them (its softmax,
// shared with the tiled kernels of attention_tiled.h). p: [n_kv rounded up to 8] (the padding is overwritten).
void ops_attention_softmax_avx2(float* p, int64_t n_kv);
// Groups of 8 start at element 0 of the call, so callers split rows at multiples of 8 elements.
void ops_swiglu_avx2(const float* gate, const float* up, float* y, int64_t n);
// ops_layer_norm_row with the sums in 8 double lanes (4 + 4, lane i % 8), reduced in a fixed order, then the
// n % 8 rest added one by one; the same contract and fixed order for every row of a given n.
void ops_layer_norm_row_avx2(const float* x, const float* w, const float* b, float* y, int64_t n, float eps);
// gelu / gelu_quick on 8 lanes with ggml's vectorized expf (about 1.5 ulp) and a true division; the n % 8 rest
// goes through the same lanes (masked), so every element's bits depend on its own value only.
void ops_gelu_avx2(const float* x, float* y, int64_t n);
void ops_gelu_quick_avx2(const float* x, float* y, int64_t n);

}  // namespace spindle
