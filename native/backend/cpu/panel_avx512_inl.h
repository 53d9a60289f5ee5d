// The AVX-512 panel kernel template (panel.h), included by panel_avx512.cpp (F32, F16, BF16: fma) and
// panel_avx512_bf16.cpp (BF16 pairs: vdpbf16ps) after defining SPINDLE_PANEL_TARGET, the target attribute of
// the including file. A slot type E gives: vec (a weight vector), bytes (of one row in a slot), group (elements of
// a row in a slot), load16 (16 rows of a slot), madd(acc, w, x) (acc plus w times the activation at x, as the
// tile kernel's instruction computes it).
// Panels of 64 rows (four 16-lane vectors per slot), tiles of up to 6 tokens, 24 accumulators; each activation
// is an embedded broadcast. (On a Zen 4 core, 64 x 6 ran at ~95% of the fma peak with the activations in cache
// and reads 4 bytes of them per 64 multiply-adds; 32 x 12 and 16 x 24 were slower or read more.)
// Invariant: lane j of an output is the chain acc = madd(acc, w, x) over the slots of lane j in k order from +0,
// padding slots (zero weights and activations) included, exactly as the masked tile kernel runs it; lanes merge
// in hsum_avx512's order, so each output has the tile kernel's bits.
#pragma once
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx512.h"

namespace spindle {
namespace {

constexpr int k_vecs = 4, k_rows = 16 * k_vecs, k_lanes = 16, k_tokens = 6;

constexpr int bit_reverse4(int m) { return (m & 1) << 3 | (m & 2) << 1 | (m & 4) >> 1 | (m & 8) >> 3; }

// acc[k_vecs * t + v] = lane chain of rows 16v .. 16v + 16 for token t, over `steps` slots from w and x.
template <class E, int NT>
SPINDLE_PANEL_TARGET inline void lane_chain(int64_t steps, const uint8_t* w, const float* x,
                                            __m512 acc[k_vecs * NT]) {
  __m512 a[k_vecs * NT];  // a local array the compiler keeps in registers
#pragma GCC unroll 32
  for (int q = 0; q < k_vecs * NT; ++q) a[q] = _mm512_setzero_ps();
  for (int64_t i = 0; i < steps; ++i, w += k_rows * E::bytes, x += k_tokens) {
    typename E::vec wv[k_vecs];
#pragma GCC unroll 4
    for (int v = 0; v < k_vecs; ++v) wv[v] = E::load16(w + 16 * v * E::bytes);
#pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < k_vecs; ++v) a[k_vecs * t + v] = E::madd(a[k_vecs * t + v], wv[v], x + t);
    }
  }
#pragma GCC unroll 32
  for (int q = 0; q < k_vecs * NT; ++q) acc[q] = a[q];
}

template <class E>
struct panel_tiles512 {
  template <int NT>
  struct kernel {
    SPINDLE_PANEL_TARGET static void run(int64_t n, const uint8_t* panel, const float* xt, float* y, int64_t ys,
                                         int nr) {
      const int64_t steps = (n + k_lanes * E::group - 1) / (k_lanes * E::group);
      __m512 acc[k_vecs * NT], stack[4][k_vecs * NT];  // popcount(m + 1) <= 4 partial trees wait at once
      int depth = 0;
#pragma GCC unroll 16
      for (int m = 0; m < k_lanes; ++m) {
        const int j = bit_reverse4(m);
        lane_chain<E, NT>(steps, panel + (size_t)j * steps * k_rows * E::bytes, xt + j * steps * k_tokens, acc);
        for (int c = m; c & 1; c >>= 1) {  // merge equal-sized trees: h_i = l_i + l_i+8, s_i = h_i + h_i+4, ...
          --depth;
          for (int q = 0; q < k_vecs * NT; ++q) acc[q] = _mm512_add_ps(stack[depth][q], acc[q]);
        }
        if (m + 1 < k_lanes) {
          for (int q = 0; q < k_vecs * NT; ++q) stack[depth][q] = acc[q];
          ++depth;
        }
      }
      for (int v = 0; v < k_vecs; ++v) {
        const int left = nr - 16 * v;
        const __mmask16 mv = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + t * ys + 16 * v, mv, acc[k_vecs * t + v]);
      }
    }
  };
};

template <class E>
panel_kernel make_panel_kernel512(panel_pack_fn pack, panel_round_fn round, panel_shape shape,
                                  size_t element_bytes) {
  panel_kernel k;
  k.fn = &panel_entry<panel_tiles512<E>::template kernel, k_tokens>;
  k.pack = pack;
  k.round = round;
  k.shape = shape;
  k.max_tokens = k_tokens;
  k.element_bytes = element_bytes;
  return k;
}

}  // namespace
}  // namespace spindle
