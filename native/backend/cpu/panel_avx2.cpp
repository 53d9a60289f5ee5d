// AVX2 panel kernels for F32, F16 and BF16 weights (panel.h): panels of 16 rows (two 8-lane vectors per slot),
// tiles of up to 6 tokens, 12 accumulators; and the F16C activation rounding of both SIMD levels.
// Invariant: lane j of an output is the chain fma(w[k], x[k], acc) over k = j, j + 8, ... < n - n % 8 from +0,
// the 8 lanes merge in hsum_avx2's order, then the tail elements are fma steps into the sum, k ascending:
// exactly the arithmetic of the AVX2 tile kernel (vec_dot_avx2_float.cpp), so each output has its bits.
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/fp16.h"

namespace spindle {

// Round to nearest even through vcvtps2ph (what f32_to_fp16 computes); NaN becomes f32_to_fp16's quiet NaN.
SPINDLE_AVX2 void panel_round_f16_f16c(const float* x, float* out, int64_t n) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(out + i, _mm256_blendv_ps(r, _mm256_or_ps(_mm256_and_ps(v, sign), qnan), nan));
  }
  for (; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i]));
}

namespace {

constexpr int k_vecs = 2, k_rows = 8 * k_vecs, k_lanes = 8, k_tokens = 6;

// 8 consecutive elements of a slot, as f32.
struct f32_slot {
  static constexpr size_t bytes = 4;
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* p) { return _mm256_loadu_ps((const float*)p); }
};

struct f16_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p));
  }
};

struct bf16_slot {
  static constexpr size_t bytes = 2;
  SPINDLE_AVX2 static inline __m256 load8(const uint8_t* p) {
    const __m128i h = _mm_loadu_si128((const __m128i*)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

constexpr int bit_reverse3(int m) { return (m & 1) << 2 | (m & 2) | (m & 4) >> 2; }

// acc[k_vecs * t + v] += rows 8v .. 8v + 8 of `count` slots from w, times token t's activations from x.
template <class E, int NT>
SPINDLE_AVX2 inline void fma_slots(int64_t count, const uint8_t* w, const float* x, __m256 acc[k_vecs * NT]) {
  __m256 a[k_vecs * NT];  // a local copy the compiler keeps in registers
#pragma GCC unroll 16
  for (int q = 0; q < k_vecs * NT; ++q) a[q] = acc[q];
  for (int64_t i = 0; i < count; ++i, w += k_rows * E::bytes, x += k_tokens) {
    __m256 wv[k_vecs];
#pragma GCC unroll 4
    for (int v = 0; v < k_vecs; ++v) wv[v] = E::load8(w + 8 * v * E::bytes);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_broadcast_ss(x + t);
#pragma GCC unroll 4
      for (int v = 0; v < k_vecs; ++v) a[k_vecs * t + v] = _mm256_fmadd_ps(wv[v], xv, a[k_vecs * t + v]);
    }
  }
#pragma GCC unroll 16
  for (int q = 0; q < k_vecs * NT; ++q) acc[q] = a[q];
}

template <class E>
struct panel_tiles256 {
  template <int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(int64_t n, const uint8_t* panel, const float* xt, float* y, int64_t ys, int nr) {
      const int64_t steps = n / k_lanes;
      __m256 acc[k_vecs * NT], stack[3][k_vecs * NT];  // popcount(m + 1) <= 3 partial trees wait at once
      int depth = 0;
      for (int m = 0; m < k_lanes; ++m) {
        const int j = bit_reverse3(m);
        for (int q = 0; q < k_vecs * NT; ++q) acc[q] = _mm256_setzero_ps();
        fma_slots<E, NT>(steps, panel + (size_t)j * steps * k_rows * E::bytes, xt + j * steps * k_tokens, acc);
        for (int c = m; c & 1; c >>= 1) {  // merge equal-sized trees: s_i = l_i + l_i+4, then (s0 + s2) + (s1 + s3)
          --depth;
          for (int q = 0; q < k_vecs * NT; ++q) acc[q] = _mm256_add_ps(stack[depth][q], acc[q]);
        }
        if (m + 1 < k_lanes) {
          for (int q = 0; q < k_vecs * NT; ++q) stack[depth][q] = acc[q];
          ++depth;
        }
      }
      const int64_t n8 = steps * k_lanes;  // tail slots n8 .. n: fma steps into the lane sum
      fma_slots<E, NT>(n - n8, panel + (size_t)n8 * k_rows * E::bytes, xt + n8 * k_tokens, acc);
      for (int t = 0; t < NT; ++t) {
        if (nr == k_rows) {
          for (int v = 0; v < k_vecs; ++v) _mm256_storeu_ps(y + t * ys + 8 * v, acc[k_vecs * t + v]);
        } else {
          alignas(32) float row[k_rows];
          for (int v = 0; v < k_vecs; ++v) _mm256_store_ps(row + 8 * v, acc[k_vecs * t + v]);
          for (int r = 0; r < nr; ++r) y[t * ys + r] = row[r];
        }
      }
    }
  };
};

template <class E>
panel_kernel make(panel_pack_fn pack, panel_round_fn round) {
  panel_kernel k;
  k.fn = &panel_entry<panel_tiles256<E>::template kernel, k_tokens>;
  k.pack = pack;
  k.round = round;
  k.shape = panel_shape{k_rows, k_lanes, false};
  k.max_tokens = k_tokens;
  k.element_bytes = E::bytes;
  return k;
}

}  // namespace

panel_kernel panel_kernel_avx2(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return make<f32_slot>(pack_panel_avx2_f32, panel_round_f32);
    case ggml_type::F16: return make<f16_slot>(pack_panel_avx2_16bit, panel_round_f16_f16c);
    case ggml_type::BF16: return make<bf16_slot>(pack_panel_avx2_16bit, panel_round_bf16);
    default: return {};
  }
}

}  // namespace spindle

#else

namespace spindle {
void panel_round_f16_f16c(const float* x, float* out, int64_t n) { panel_round_f16(x, out, n); }
panel_kernel panel_kernel_avx2(ggml_type) { return {}; }
}  // namespace spindle

#endif
