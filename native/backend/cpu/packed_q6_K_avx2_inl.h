// Building blocks of the AVX2 kernels over q6_K x8 packed groups (repack.h, block_q6_Kx8), shared by the AVX2
// kernel (vec_dot_avx2_packed_q6.cpp) and the AVX-512 two-group kernel (vec_dot_avx512_packed.cpp): the scale
// pairs of 8 rows and the 6-bit weight vectors of one lane position.
// Invariant: integer unpacking only, exact. Include only from files compiled for x86 (SPINDLE_HAVE_X86_KERNELS).
#pragma once
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {
namespace packed_q6_K {

// pshufb control: bytes a and b of every 32-bit word into the high bytes of the word's two int16 halves.
SPINDLE_AVX2 inline __m256i pick_byte_pairs(char a, char b) {
  const char z = (char)0x80;  // pshufb: zero byte
  return _mm256_setr_epi8(z, a, z, b, z, (char)(4 + a), z, (char)(4 + b), z, (char)(8 + a), z, (char)(8 + b), z,
                          (char)(12 + a), z, (char)(12 + b), z, a, z, b, z, (char)(4 + a), z, (char)(4 + b), z,
                          (char)(8 + a), z, (char)(8 + b), z, (char)(12 + a), z, (char)(12 + b));
}

// scp[2k + hi]: the int16 pair (scale 4k + hi, scale 4k + 2 + hi) of row r in int32 lane r: the scales of chunks
// 2k and 2k + 1 for lane positions 0..3 (hi 0) or 4..7 (hi 1); sp[l]: the int16 pair (-32 scale 2l, -32 scale
// 2l + 1) of row r in int32 lane r (l = 0..7; |32 scale| <= 4096 fits int16).
SPINDLE_AVX2 inline void q6_Kx8_scales(const block_q6_Kx8* blk, __m256i scp[8], __m256i sp[8]) {
  for (int k = 0; k < 4; ++k) {
    const __m256i u = _mm256_loadu_si256((const __m256i*)blk->scales[k]);
    for (int p = 0; p < 2; ++p) {
      scp[2 * k + p] = _mm256_srai_epi16(_mm256_shuffle_epi8(u, pick_byte_pairs((char)p, (char)(2 + p))), 8);
      const __m256i pair = _mm256_srai_epi16(_mm256_shuffle_epi8(u, pick_byte_pairs((char)(2 * p), (char)(2 * p + 1))), 8);
      sp[2 * k + p] = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(pair, 5));
    }
  }
}

// The unsigned 6-bit weights of lane position l: q[4h] = A(4h, l), q[4h + 1] = B(4h, l), q[4h + 2] = A(4h + 2, l),
// q[4h + 3] = B(4h + 2, l) of repack.h (vector int32 lane r: row r).
SPINDLE_AVX2 inline void q6_Kx8_weights(const block_q6_Kx8* wb, int l, __m256i q[8]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i a = _mm256_loadu_si256((const __m256i*)wb->ql[16 * h + 2 * l]);
    const __m256i b = _mm256_loadu_si256((const __m256i*)wb->ql[16 * h + 2 * l + 1]);
    const __m256i hb = _mm256_loadu_si256((const __m256i*)wb->qh[8 * h + l]);
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(3)), 4);    // bits 0-1 -> 4-5
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(12)), 2);   // bits 2-3 -> 4-5
    const __m256i h2 = _mm256_and_si256(hb, _mm256_set1_epi8(48));                         // bits 4-5
    const __m256i h3 = _mm256_srli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8((char)0xc0)), 2);  // 6-7 -> 4-5
    q[4 * h] = _mm256_or_si256(_mm256_and_si256(a, low4), h0);
    q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(b, low4), h1);
    q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), h2);
    q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4), h3);
  }
}

}  // namespace packed_q6_K
}  // namespace spindle
