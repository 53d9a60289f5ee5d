// The weight lanes of the q8_0-arithmetic packed kernels (q8_0 and q5_0 x8 groups, repack.h), shared by the AVX2
// kernels (vec_dot_avx2_packed.cpp) and the AVX-512 two-group ones (vec_dot_avx512_packed.cpp): at(block, l) gives
// the 8 rows' elements 4l .. 4l + 4 as signed bytes, row r in int32 lane r; line(block, l) the bytes to prefetch.
// Invariant: the bytes are exactly the row's weights (q5_0: nibble | high bit << 4, minus 16), so a kernel's dots
// are the row kernel's integers. Include only from files compiled for x86 (SPINDLE_HAVE_X86_KERNELS).
#pragma once
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {
namespace packed_q8_0 {

// The 8 rows' 4-element groups at lane position l (elements 4l .. 4l + 4 of a block) as signed bytes, one row per
// int32 lane: q8_0 reads them; q5_0 builds them from nibbles and high bits (nibble | bit e of qh << 4, minus 16).
struct q8_0x8_lanes {
  using block = block_q8_0x8;
  SPINDLE_AVX2 static inline __m256i at(const block& b, int l) { return _mm256_loadu_si256((const __m256i*)b.qs[l]); }
  static const void* line(const block& b, int l) { return b.qs[l]; }
};
struct q5_0x8_lanes {
  using block = block_q5_0x8;
  SPINDLE_AVX2 static inline __m256i at(const block& b, int l) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256((const __m256i*)b.qs[l % 4]);
    const __m256i nib = l < 4 ? _mm256_and_si256(v, low4) : _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    // bits 4l .. 4l + 3 of each row's qh, bit k to bit 4 of byte k: the 4 bits spread 7 apart by one multiply
    const __m256i bits = _mm256_and_si256(_mm256_srl_epi32(_mm256_loadu_si256((const __m256i*)b.qh), _mm_cvtsi32_si128(4 * l)),
                                          _mm256_set1_epi32(0xf));
    const __m256i spread = _mm256_and_si256(_mm256_mullo_epi32(bits, _mm256_set1_epi32(0x00204081)), _mm256_set1_epi32(0x01010101));
    return _mm256_sub_epi8(_mm256_or_si256(nib, _mm256_slli_epi32(spread, 4)), _mm256_set1_epi8(16));
  }
  static const void* line(const block& b, int l) { return b.qs[l % 4]; }
};

}  // namespace packed_q8_0
}  // namespace spindle
