// AVX2 versions of the activation quantizers of quants.h (quantize_row_q8_0 as llama.cpp's AVX2 build,
// quantize_row_q8_K as its reference), used by cpu_convert_activation when the active level has AVX2.
// Invariant: for every input without NaNs the output blocks are bit-identical to the scalar quantizers'
// (same max, same f32 scale arithmetic, round half to even, the same saturation), so the choice between
// them can never change a matmul result.
#include "backend/cpu/quants_avx2.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS

namespace spindle {

namespace {

// max of the 8 lanes
SPINDLE_AVX2 inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// 32 floats times mul, rounded half to even, saturated to int8, in element order.
SPINDLE_AVX2 inline __m256i round_pack32(const float* x, __m256 mul) {
  __m256i i[4];
  for (int k = 0; k < 4; ++k)
    i[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));  // undo the lane interleave
}

}  // namespace

SPINDLE_AVX2 void quantize_row_q8_0_avx2(const float* x, block_q8_0* y, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / QK8_0; ++b) {
    const float* xb = x + b * QK8_0;
    __m256 amax = _mm256_and_ps(_mm256_loadu_ps(xb), abs_mask);
    for (int k = 1; k < 4; ++k) amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask));
    const float m = hmax8(amax);
    y[b].d = (uint16_t)_cvtss_sh(m / 127.f, _MM_FROUND_TO_NEAREST_INT);
    const float id = m != 0.0f ? 127.f / m : 0.0f;
    _mm256_storeu_si256((__m256i*)y[b].qs, round_pack32(xb, _mm256_set1_ps(id)));
  }
}

SPINDLE_AVX2 void quantize_row_q8_K_avx2(const float* x, block_q8_K* y, int64_t n) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < n / QK_K; ++b) {
    const float* xb = x + b * QK_K;
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < QK_K / 8; ++k) amax = _mm256_max_ps(amax, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask));
    const float am = hmax8(amax);
    if (am == 0.0f) {
      std::memset(&y[b], 0, sizeof(block_q8_K));
      continue;
    }
    int j = 0;  // the first element of largest magnitude gives the sign, as in the scalar quantizer
    while (std::fabs(xb[j]) != am) ++j;
    const float iscale = -127.f / xb[j];
    const __m256 mul = _mm256_set1_ps(iscale);
    const __m256i ones = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int c = 0; c < QK_K / 32; ++c) {
      const __m256i q = round_pack32(xb + 32 * c, mul);
      _mm256_storeu_si256((__m256i*)(y[b].qs + 32 * c), q);
      // lanes 0..3: 4-element sums of elements 0..15, lanes 4..7: of 16..31
      const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, q), ones16);
      const __m256i s8 = _mm256_hadd_epi32(s4, s4);
      const __m256i s16 = _mm256_hadd_epi32(s8, s8);
      y[b].bsums[2 * c] = (int16_t)_mm256_extract_epi32(s16, 0);
      y[b].bsums[2 * c + 1] = (int16_t)_mm256_extract_epi32(s16, 4);
    }
    y[b].d = 1 / iscale;
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: the scalar quantizers

#include "backend/cpu/quants.h"

namespace spindle {
void quantize_row_q8_0_avx2(const float* x, block_q8_0* y, int64_t n) { quantize_row_q8_0(x, y, n); }
void quantize_row_q8_K_avx2(const float* x, block_q8_K* y, int64_t n) { quantize_row_q8_K(x, y, n); }
}  // namespace spindle

#endif
