// Shared pieces of the AVX2 kernel files (internal to native/backend/cpu).
// Invariant: everything here is either a declaration or a function carrying the AVX2 target attribute, so
// including it never makes baseline code depend on AVX2.
#pragma once
#include "backend/cpu/vec_dot.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SPINDLE_HAVE_X86_KERNELS 1
#include <immintrin.h>

#include <cstring>
#define SPINDLE_AVX2 __attribute__((target("avx2,fma,f16c")))
#else
#define SPINDLE_HAVE_X86_KERNELS 0
#endif

namespace spindle {

// The AVX2 kernels for F32 / F16 / BF16 weights (vec_dot_avx2_float.cpp).
tile_kernel tile_kernel_avx2_float(ggml_type wtype);

// Q2_K with the arithmetic of llama.cpp's repacked q2_K gemv / gemm, which llama.cpp runs on AVX-512 CPUs
// (vec_dot_avx2.cpp; the AVX-512 level takes it; null fn off x86).
tile_kernel tile_kernel_q2_K_repacked();

// The packed q6_K x8 kernel (vec_dot_avx2_packed_q6.cpp; null fn off x86).
packed_kernel packed_kernel_q6_K_avx2();

#if SPINDLE_HAVE_X86_KERNELS
// Sum of the 8 lanes in a fixed order.
SPINDLE_AVX2 inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// [p[0..4) as one int32] in all 8 lanes (a load-port broadcast).
SPINDLE_AVX2 inline __m256i bcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Hints the lines of the bytes k_prefetch_distance past [p, p + bytes) into L1: one-token matmuls stream their
// weights from DRAM, and the hardware prefetcher alone keeps too few lines in flight for full bandwidth (a hint
// only: past the end of a row or of the weights it does nothing).
constexpr int k_prefetch_distance = 3456;  // bytes, about 3.4 KiB
SPINDLE_AVX2 inline void prefetch_stream(const void* p, size_t bytes) {
  const char* q = (const char*)p + k_prefetch_distance;
  for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(q + off, _MM_HINT_T0);
}

// 8 int32 lanes, each the sum of 4 products w[i] * x[i] (int8; aw = |w|, x never -128).
SPINDLE_AVX2 inline __m256i dot_i8_avx2(__m256i aw, __m256i w, __m256i x) {
  const __m256i sx = _mm256_sign_epi8(x, w);  // x * sign(w)
  return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
}
#endif

}  // namespace spindle
