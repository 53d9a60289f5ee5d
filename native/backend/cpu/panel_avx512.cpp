// AVX-512 panel kernels for F32, F16 and BF16 weights (panel.h): panels of 64 rows (four 16-lane vectors per
// slot), tiles of up to 6 tokens, 24 accumulators; each activation is an embedded broadcast of the fma. (On a
// Zen 4 core, 64 x 6 ran at ~95% of the fma peak with the activations in cache and reads 4 bytes of them per 64
// multiply-adds; 32 x 12 and 16 x 24 were slower or read more.)
// Invariant: lane j of an output is the chain fma(w[k], x[k], acc) over the slots of lane j in k order, starting
// from +0, padding slots (zero weights and activations) included, exactly as the masked tile kernel
// (vec_dot_avx512_float.cpp) runs it; lanes merge in hsum_avx512's order, so each output has its bits.
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS && !defined(SPINDLE_EMULATE_AVX512)

namespace spindle {
namespace {

constexpr int k_vecs = 4, k_rows = 16 * k_vecs, k_lanes = 16, k_tokens = 6;

// 16 consecutive elements of a slot, as f32.
struct f32_slot {
  static constexpr size_t bytes = 4;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) { return _mm512_loadu_ps((const float*)p); }
};

struct f16_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p));
  }
};

struct bf16_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX512 static inline __m512 load16(const uint8_t* p) {
    const __m256i h = _mm256_loadu_si256((const __m256i*)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
};

constexpr int bit_reverse4(int m) { return (m & 1) << 3 | (m & 2) << 1 | (m & 4) >> 1 | (m & 8) >> 3; }

// acc[k_vecs * t + v] = lane chain of rows 16v .. 16v + 16 for token t, over `steps` slots from w and x.
template <class E, int NT>
SPINDLE_AVX512 inline void lane_chain(int64_t steps, const uint8_t* w, const float* x, __m512 acc[k_vecs * NT]) {
  __m512 a[k_vecs * NT];  // a local array the compiler keeps in registers
#pragma GCC unroll 32
  for (int q = 0; q < k_vecs * NT; ++q) a[q] = _mm512_setzero_ps();
  for (int64_t i = 0; i < steps; ++i, w += k_rows * E::bytes, x += k_tokens) {
    __m512 wv[k_vecs];
#pragma GCC unroll 4
    for (int v = 0; v < k_vecs; ++v) wv[v] = E::load16(w + 16 * v * E::bytes);
#pragma GCC unroll 32
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_set1_ps(x[t]);
#pragma GCC unroll 4
      for (int v = 0; v < k_vecs; ++v) a[k_vecs * t + v] = _mm512_fmadd_ps(wv[v], xv, a[k_vecs * t + v]);
    }
  }
#pragma GCC unroll 32
  for (int q = 0; q < k_vecs * NT; ++q) acc[q] = a[q];
}

template <class E>
struct panel_tiles512 {
  template <int NT>
  struct kernel {
    SPINDLE_AVX512 static void run(int64_t n, const uint8_t* panel, const float* xt, float* y, int64_t ys, int nr) {
      const int64_t steps = (n + k_lanes - 1) / k_lanes;
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

template <template <int> class K, int MT>
void panel_entry(int64_t n, const uint8_t* panel, const float* xt, int nt, float* y, int64_t ys, int nr) {
  if constexpr (MT > 1) {
    if (nt < MT) return panel_entry<K, MT - 1>(n, panel, xt, nt, y, ys, nr);
  }
  K<MT>::run(n, panel, xt, y, ys, nr);
}

template <class E>
panel_kernel make(panel_pack_fn pack, panel_round_fn round) {
  panel_kernel k;
  k.fn = &panel_entry<panel_tiles512<E>::template kernel, k_tokens>;
  k.pack = pack;
  k.round = round;
  k.shape = panel_shape{k_rows, k_lanes, true};
  k.max_tokens = k_tokens;
  k.element_bytes = E::bytes;
  return k;
}

}  // namespace

panel_kernel panel_kernel_avx512(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return make<f32_slot>(pack_panel_avx512_f32, panel_round_f32);
    case ggml_type::F16: return make<f16_slot>(pack_panel_avx512_16bit, panel_round_f16_f16c);
    case ggml_type::BF16:
      if (cpu_detected_features().avx512_bf16) return {};  // its tile kernel pairs products (vdpbf16ps)
      return make<bf16_slot>(pack_panel_avx512_16bit, panel_round_bf16);
    default: return {};
  }
}

}  // namespace spindle

#else

namespace spindle {
panel_kernel panel_kernel_avx512(ggml_type) { return {}; }
}  // namespace spindle

#endif
