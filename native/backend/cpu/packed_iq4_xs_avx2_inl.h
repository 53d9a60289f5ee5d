// The sub-block scales of iq4_xs x8 groups (repack.h, block_iq4_xsx8) for the packed kernels (vec_dot_avx2_packed.cpp,
// vec_dot_avx512_packed.cpp). Invariant: integer unpacking only (exact), the scales of iq4_xs_scale (quants_more.h).
// Include only from files compiled for x86 (SPINDLE_HAVE_X86_KERNELS).
#pragma once
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_avx2.h"

namespace spindle {
namespace packed_iq4_xs {

// The 8 sub-block scales (ls_j - 32) of an iq4_xs x8 super-block as int16 pairs (the same value in both halves of
// each int32 lane, row r in lane r), for madd with maddubs pair sums.
SPINDLE_AVX2 inline void iq4_xsx8_scales(const block_iq4_xsx8& b, __m256i ls16[8]) {
  const __m256i sl = _mm256_loadu_si256((const __m256i*)b.scales_l);
  const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)b.scales_h));
  for (int j = 0; j < 8; ++j) {
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(sl, 8 * (j / 2) + 4 * (j % 2)), _mm256_set1_epi32(0x0f));
    const __m256i hi = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(sh, 2 * j), _mm256_set1_epi32(3)), 4);
    const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
    ls16[j] = _mm256_or_si256(_mm256_and_si256(ls, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls, 16));
  }
}

}  // namespace packed_iq4_xs
}  // namespace spindle
