// ggml's vectorized expf on 8 AVX2 lanes, shared by the softmax / SwiGLU / GELU kernels (ops_avx2.cpp) and the
// non-causal attention tiles (attention_bidir.cpp).
// Invariant: a fixed sequence of IEEE operations per lane; a lane's result depends on that lane's input only.
#pragma once
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {

#if SPINDLE_HAVE_X86_KERNELS
// exp(x) on 8 lanes: ggml's ggml_v_expf (ARM optimized-routines polynomial, max error ~1.5 ulp), the same
// operation sequence so the results are identical: x = n ln2 + b, exp(x) = 2^n (1 + p(b)).
// Lanes with |n| > 126 take the scaled path; |n| > 192 gives 0 or inf (so -inf gives exactly 0).
SPINDLE_AVX2 static inline __m256 expf8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);  // x / ln2 + shift
  const __m256 n = _mm256_sub_ps(z, shift);                                      // round(x / ln2)
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);               // n in the exponent field
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.f), n);
  const __m256i big = _mm256_castps_si256(_mm256_cmp_ps(abs_n, _mm256_set1_ps(126), _CMP_GT_OQ));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
  const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
  const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, u, lo), u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (!_mm256_movemask_ps(_mm256_castsi256_ps(big))) return _mm256_fmadd_ps(j, k, k);
  // 2^n split over two factors s1 * s2 so that neither over- nor underflows on its own
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32((int)0x82000000u));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 huge = _mm256_cmp_ps(abs_n, _mm256_set1_ps(192), _CMP_GT_OQ);
  const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
  const __m256 normal = _mm256_fmadd_ps(k, j, k);
  const __m256 mid = _mm256_blendv_ps(normal, scaled, _mm256_castsi256_ps(big));
  return _mm256_blendv_ps(mid, _mm256_mul_ps(s1, s1), huge);
}

#endif

}  // namespace spindle
