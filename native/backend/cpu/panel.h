// Panels: F32 / F16 / BF16 weight rows rearranged, one panel at a time while a batch of tokens is multiplied,
// for outer-product kernels (a vector holds one element of `rows` weight rows, times one broadcast activation
// per token) that keep the per-output arithmetic of the level's tile kernel.
//
// The tile kernels (vec_dot_avx2_float.cpp, vec_dot_avx512_float.cpp) give each output (o, t) L lane sums,
// lane j summing w[o, k] * x[t, k] over k = j, j + L, j + 2L, ... (one fma per element, k ascending; avx512:
// n padded with zeros to a multiple of 16 by its masked loads), then one fixed lane-sum tree (hsum_avx2 /
// hsum_avx512), then (avx2) the n % 8 tail elements as fma steps into that sum, k ascending.
// A panel stores the weights in that order: slot s of the panel holds one element of each of its rows,
//   slot(k) = (k % L) * steps + k / L   for k < L * steps (the lane-j elements side by side, lane after lane),
//   slot(k) = k                          for the tail (avx2: k >= L * steps),
// with steps = ceil(n / L) (padded, avx512) or floor(n / L) (avx2). Byte (slot * rows + r) * element size is
// row r's element; padding slots and rows past the weight's last row hold zero.
// Activations go in the same slot order, f32 (the exact value of the activation format: f16 / bf16 rounded for
// F16 / BF16 weights), `max_tokens` tokens per slot: xt[slot * max_tokens + t]. BF16 with AVX512_BF16 (its tile
// kernel's vdpbf16ps takes pairs: lane j sums elements 32i + 2j and 32i + 2j + 1) slots pairs of elements instead,
// activations as 32-bit units holding the pair's two bf16 values (low half: the even element).
// Invariant: a panel kernel runs, for every output, the tile kernel's lane chains in k order, merges the lanes
// with the same additions (the tree is balanced, so lanes taken in bit-reversed order merge like a binary
// counter), then the same tail fmas: every y[t, o] has the bits of the level's tile kernel, whatever the
// panel, token tile or thread that computed it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"

namespace spindle {

struct panel_shape {
  int rows = 0;         // weight rows per panel (vector lanes x vectors per slot)
  int lanes = 0;        // L: lane sums per output in the level's tile kernel
  bool padded = false;  // true: n rounded up to a multiple of L * group (no tail); false: n % L tail slots
  int group = 1;        // elements of a row per slot: 2 for BF16 pairs (vdpbf16ps; padded only)

  int64_t steps(int64_t n) const { return padded ? (n + lanes * group - 1) / (lanes * group) : n / lanes; }
  int64_t n_slots(int64_t n) const { return padded ? steps(n) * lanes : n; }
  // The slot of element k (for pairs: of unit k / 2).
  int64_t slot(int64_t n, int64_t k) const {
    const int64_t st = steps(n), u = k / group;
    return u < st * lanes ? (u % lanes) * st + u / lanes : u;
  }
  // Element index of (row r, element k) in a panel: slot, then row, then position in the group.
  int64_t offset(int64_t n, int64_t k, int r) const { return (slot(n, k) * rows + r) * group + k % group; }
  int64_t n_elements(int64_t n) const { return n_slots(n) * rows * group; }
};

// Packs rows [0, nr) (nr <= shape.rows; row r at rows + r * row_bytes, n elements of the weight type) into one
// panel of shape.n_elements(n) elements.
using panel_pack_fn = void (*)(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);

// One tile: y[t * y_stride + r] = dot(panel row r, token t) for r < nr, t < nt (1 <= nt <= max_tokens), the
// tokens' activations in xt (panel order, see above).
using panel_tile_fn = void (*)(int64_t n, const uint8_t* panel, const float* xt, int nt, float* y,
                               int64_t y_stride, int nr);

// Rounds n activations to the weight type's activation format, as exact f32 values (F16: f16 rounding; BF16:
// bf16; F32: a copy), bit-identical to cpu_convert_activation followed by the exact widening.
using panel_round_fn = void (*)(const float* x, float* out, int64_t n);

// The rounding functions: plain C++ (panel_ref.cpp) and F16C's (panel_avx2.cpp, avx2 and avx512 levels only).
void panel_round_f32(const float* x, float* out, int64_t n);
void panel_round_f16(const float* x, float* out, int64_t n);
void panel_round_bf16(const float* x, float* out, int64_t n);
void panel_round_f16_f16c(const float* x, float* out, int64_t n);

// A panel_tile_fn over a kernel template K<MT> (MT tokens per tile, unrolled): dispatches nt down to the
// instantiation for exactly nt tokens (1 <= nt <= MT). Each ISA file instantiates it with its own kernels.
template <template <int> class K, int MT>
void panel_entry(int64_t n, const uint8_t* panel, const float* xt, int nt, float* y, int64_t ys, int nr) {
  if constexpr (MT > 1) {
    if (nt < MT) return panel_entry<K, MT - 1>(n, panel, xt, nt, y, ys, nr);
  }
  K<MT>::run(n, panel, xt, y, ys, nr);
}

struct panel_kernel {
  panel_tile_fn fn = nullptr;
  panel_pack_fn pack = nullptr;
  panel_round_fn round = nullptr;
  panel_shape shape;
  int max_tokens = 1;      // nt limit, and the token stride of an activation tile
  size_t element_bytes = 0;  // bytes per panel element (the weight type's)
};

// The panel kernel of `level` for `wtype` (null fn where the level has none or the CPU cannot run it: the scalar
// level, quantized types).
panel_kernel cpu_panel_kernel(cpu_level level, ggml_type wtype);
panel_kernel panel_kernel_avx2(ggml_type wtype);    // panel_avx2.cpp
panel_kernel panel_kernel_avx512(ggml_type wtype);  // panel_avx512.cpp
panel_kernel panel_kernel_avx512_bf16();            // panel_avx512_bf16.cpp (CPUs with AVX512_BF16)

// Plain C++ reference packer (any shape, F32 / F16 / BF16 elements of element_bytes bytes).
void pack_panel_ref(const panel_shape& s, size_t element_bytes, int64_t n, const uint8_t* rows, size_t row_bytes,
                    int nr, uint8_t* panel);

// The SIMD packers of each level's shape (panel_pack_avx2.cpp, panel_pack_avx512.cpp): pack_panel_ref's bytes.
void pack_panel_avx2_16bit(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);
void pack_panel_avx2_f32(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);
void pack_panel_avx512_16bit(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);
void pack_panel_avx512_f32(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);
void pack_panel_avx512_bf16_pairs(int64_t n, const uint8_t* rows, size_t row_bytes, int nr, uint8_t* panel);

// Token rows x[0 .. nt) (n f32 each, x_stride floats apart) as one activation tile of `k`: rounded with k.round
// and stored at xt[slot * k.max_tokens + t] (pairs: as one 32-bit unit); padding gets zero. tmp: n floats.
void pack_panel_activations(const panel_kernel& k, const float* x, int64_t x_stride, int64_t n, int nt, float* xt,
                            float* tmp);

// Tokens from which cpu_matmul_at_level multiplies `wtype` through panels at `level` (packing costs about one
// pass over the weights per call; below this the tile kernels, reading the rows in place, are as fast). Measured
// on Zen 4, one thread: the panels win from ~8-12 tokens at avx512 (~12-16 for BF16 pairs) and for F32 at avx2,
// from ~24-32 for F16 / BF16 at avx2, whose row kernel is already near the FMA peak.
int64_t cpu_panel_min_tokens(cpu_level level, ggml_type wtype);

// True when cpu_matmul_at_level takes the panel path for this level, type and token count.
bool cpu_panel_pays(cpu_level level, ggml_type wtype, int64_t n_tokens);

// cpu_matmul (matmul.h) through panels: the same output bits as the level's tile kernels. W as in cpu_matmul;
// arguments already validated (n_out, n_in, n_tokens > 0, buffers non-null, n_in a valid row length).
void cpu_matmul_panels(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                       int64_t n_in, const float* x, int64_t n_tokens, float* y);

}  // namespace spindle
