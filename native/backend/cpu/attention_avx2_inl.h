// Pieces shared by the per-(query, head) AVX2 attention kernel (ops_avx2.cpp) and the tiled one
// (attention_tiled.cpp). Invariant: both files build their dot products from these very functions, so the
// tiled path repeats the per-item kernel's IEEE operations exactly.
#pragma once
#include <cstdint>

#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {

// Row accessors with the row form fixed at compile time (no per-row branch): contiguous cache rows at
// base + j * stride, or rows anywhere through a table of row starts (paged store read in place).
struct strided_rows {
  const float* base;
  int64_t stride;
  const float* operator()(int64_t j) const { return base + j * stride; }
};
struct table_rows {
  const float* const* table;
  int64_t offset;
  const float* operator()(int64_t j) const { return table[j] + offset; }
};

#if SPINDLE_HAVE_X86_KERNELS
// ggml_vec_dot_f32's sum of one 32-multiple-long row: 4 accumulators over 32-float steps, then
// (s0 + s2) + (s1 + s3), the 128-bit halves added, two hadds (ops_dot_f32_avx2 without its tail).
SPINDLE_AVX2 static inline float dot32_reduce(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  const __m256 v = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(h, h));
}
#endif

}  // namespace spindle
