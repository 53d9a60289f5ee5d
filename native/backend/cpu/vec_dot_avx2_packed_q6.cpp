// AVX2 kernel over the packed q6_K x8 layout (repack.h): one packed group (8 rows, one per int32 lane) times up
// to 8 tokens, reading activations in pair_q8_K_row's order. The 6-bit weights of 8 rows unpack once per group
// and super-block for all the tokens; two chunks' products add up in int16 (one 4-value group of each chunk per
// int16 lane, |sum| <= 4 * 63 * 128 < 2^15) before one multiply by the two chunks' scales.
// Invariant: the arithmetic per output (r, t) is q6_K_kernel's (vec_dot_avx2.cpp, llama.cpp's AVX2
// ggml_vec_dot_q6_K_q8_K): per super-block, int32 lane l = sum over the 8 chunks j of
// scale(j, l) * (q . x over elements 32j + 4l .. + 4) minus 32 (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]) (exact
// integers, so their grouping cannot matter), then acc_l = fma(d * dx, (float)lane l, acc_l) in block order and
// the hsum_avx2 lane sum. Here the vector holding lane l of the 8 rows is acc[l], each f32 operation lane-wise
// with lane r = row r, so a packed output has the bits of the tile kernel's whatever nt is.
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include "backend/cpu/packed_q6_K_avx2_inl.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

using packed_q6_K::q6_Kx8_scales;
using packed_q6_K::q6_Kx8_weights;

template <int NT>
struct q6_Kx8_kernel {
  SPINDLE_AVX2 static void run(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, float* y, int64_t ys) {
    const block_q6_Kx8* wb = (const block_q6_Kx8*)group;
    __m256 acc[8][NT];  // acc[l][t]: f32 lane l of the 8 rows (row r in lane r) for token t
    for (int l = 0; l < 8; ++l)
      for (int t = 0; t < NT; ++t) acc[l][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; ++b, ++wb) {
      prefetch_stream(wb, sizeof(block_q6_Kx8));
      __m256i scp[8], sp[8];
      q6_Kx8_scales(wb, scp, sp);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)wb->d));
      const block_q8_K* xb[NT];
      __m256 sd[NT];
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(x + t * xs) + b;
        sd[t] = _mm256_mul_ps(d, _mm256_set1_ps(xb[t]->d));  // d * dx per row, as the tile kernel's scalar product
      }
#pragma GCC unroll 1
      for (int l = 0; l < 8; ++l) {
        __m256i q[8];
        q6_Kx8_weights(wb, l, q);
        const int hi = l >= 4;  // bytes 16..31 of a chunk take the odd scale of the chunk's pair
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          // isum starts at -32 (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]): the tile kernel's offset, exactly
          const __m256i bs = bcast32((const int8_t*)(xb[t]->bsums + 2 * l));  // int16 (bsums[2l], bsums[2l+1])
          __m256i isum = _mm256_madd_epi16(sp[l], bs);
          const int8_t* xq = xb[t]->qs + 8 * l;
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {  // chunks 2k and 2k + 1: A and B groups, int16 lanes (chunk 2k, chunk 2k + 1)
            const __m256i a = _mm256_maddubs_epi16(q[2 * k], bcast32(xq + 64 * k));
            const __m256i s16 = _mm256_add_epi16(a, _mm256_maddubs_epi16(q[2 * k + 1], bcast32(xq + 64 * k + 4)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(s16, scp[2 * k + hi]));
          }
          acc[l][t] = _mm256_fmadd_ps(sd[t], _mm256_cvtepi32_ps(isum), acc[l][t]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) {  // hsum_avx2 per row: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
      const __m256 s04 = _mm256_add_ps(acc[0][t], acc[4][t]), s15 = _mm256_add_ps(acc[1][t], acc[5][t]);
      const __m256 s26 = _mm256_add_ps(acc[2][t], acc[6][t]), s37 = _mm256_add_ps(acc[3][t], acc[7][t]);
      _mm256_storeu_ps(y + t * ys, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
    }
  }
};

}  // namespace

packed_kernel packed_kernel_q6_K_avx2() { return packed_kernel{&packed_entry<q6_Kx8_kernel, 8>, 8, true}; }

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX2 kernels

namespace spindle {
packed_kernel packed_kernel_q6_K_avx2() { return {}; }
}  // namespace spindle

#endif
