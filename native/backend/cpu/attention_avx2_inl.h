// Pieces shared by the per-(query, head) AVX2 attention kernel (ops_avx2.cpp) and the tiled one
// (attention_tiled.cpp). Invariant: both files build their dot products from these very functions, so the
// tiled path repeats the per-item kernel's IEEE operations exactly.
#pragma once
#include <cstdint>

#include "backend/cpu/ops.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {

// Row accessors with the row form and element type (float, kv_f16, kv_bf16, kv_fp8_*, kv_q8, kv_q4) fixed at compile time (no
// per-row branch): contiguous cache rows at base + j * stride, or rows anywhere through a table of row starts
// (paged store read in place). They give kv_elem<E>::ptr (a pointer to the row's first value); base, stride and
// offset here count storage units of E (values, or q8_0 / q4_0 blocks).
template <class E>
struct strided_rows {
  const E* base;
  int64_t stride;
  typename kv_elem<E>::ptr operator()(int64_t j) const { return kv_elem<E>::at(base + j * stride); }
};
template <class E>
struct table_rows {
  const void* const* table;
  int64_t offset;
  typename kv_elem<E>::ptr operator()(int64_t j) const { return kv_elem<E>::at(static_cast<const E*>(table[j]) + offset); }
};
template <class E>
strided_rows<E> strided_of(const kv_rows& r) {
  constexpr int64_t u = kv_elem<E>::per_unit;
  return {static_cast<const E*>(r.base) + r.offset / u, r.stride / u};
}
template <class E>
table_rows<E> table_of(const kv_rows& r) {
  return {r.table, r.offset / kv_elem<E>::per_unit};
}

#if SPINDLE_HAVE_X86_KERNELS
// 8 consecutive K / V elements widened to f32 (exact: F16C's vcvtph2ps, bfloat16 bits shifted up, fp8 through halves).
SPINDLE_AVX2 static inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SPINDLE_AVX2 static inline __m256 load8(const kv_f16* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
SPINDLE_AVX2 static inline __m256 load8(const kv_bf16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
// 8 e4m3 values: each byte made the binary16 bits of its value / 256 (fp8_e4m3_as_fp16_div256: the magnitude under
// the half's sign, NaN codes a half NaN), widened by vcvtph2ps, times 256 (exact).
SPINDLE_AVX2 static inline __m256 load8(const kv_fp8_e4m3* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i mag = _mm_and_si128(b, _mm_set1_epi16(0x7f));
  const __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  const __m128i nan = _mm_and_si128(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f)), _mm_set1_epi16(0x7e00));
  const __m128i h = _mm_or_si128(_mm_or_si128(_mm_slli_epi16(mag, 7), sign), nan);
  return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
}
// 8 e5m2 values: each byte is the high byte of a half.
SPINDLE_AVX2 static inline __m256 load8(const kv_fp8_e5m2* p) {
  const __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_cvtph_ps(_mm_slli_epi16(b, 8));
}
// 8 values of a q8_0 row from value p.i (a multiple of 8: they share a block): d x int8, each product exact.
SPINDLE_AVX2 static inline __m256 load8(kv_q8_ptr p) {
  const kv_q8& blk = p.b[p.i / 32];
  const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + p.i % 32));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_set1_ps(_cvtsh_ss(blk.d)));
}

// 8 values of a q4_0 row from value p.i (a multiple of 8: they share a block and a nibble half): d x (q - 8), each
// product exact. Values 0..15 of a block are the low nibbles of qs[0..16), values 16..31 the high ones.
SPINDLE_AVX2 static inline __m256 load8(kv_q4_ptr p) {
  const kv_q4& blk = p.b[p.i / 32];
  const int j = (int)(p.i % 32);
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + (j & 15)));
  const __m128i nib = _mm_and_si128(j < 16 ? bytes : _mm_srli_epi16(bytes, 4), _mm_set1_epi8(0x0f));
  const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(nib), _mm256_set1_epi32(8));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_set1_ps(_cvtsh_ss(blk.d)));
}

// Hardware prefetch of one row of n values of E, a cache line at a time.
template <class E>
SPINDLE_AVX2 static inline void prefetch_bytes(const E* r, int64_t bytes) {
  // every line the bytes touch, from the line of the first (rows need not start on a line)
  const uintptr_t first = reinterpret_cast<uintptr_t>(r) & ~uintptr_t(63), end = reinterpret_cast<uintptr_t>(r) + bytes;
  for (uintptr_t c = first; c < end; c += 64) _mm_prefetch(reinterpret_cast<const char*>(c), _MM_HINT_T0);
}
template <class E>
SPINDLE_AVX2 static inline void prefetch_elems(const E* r, int32_t n) {
  prefetch_bytes(r, (int64_t)n * (int64_t)sizeof(E));
}
SPINDLE_AVX2 static inline void prefetch_elems(kv_q8_ptr r, int32_t n) {
  prefetch_bytes(r.b + r.i / 32, kv_bytes(kv_type::q8_0, n));
}
SPINDLE_AVX2 static inline void prefetch_elems(kv_q4_ptr r, int32_t n) {
  prefetch_bytes(r.b + r.i / 32, kv_bytes(kv_type::q4_0, n));
}

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
