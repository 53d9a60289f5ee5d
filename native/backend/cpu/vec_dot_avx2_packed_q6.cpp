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
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// pshufb control: bytes a and b of every 32-bit word into the high bytes of the word's two int16 halves.
SPINDLE_AVX2 static inline __m256i pick_byte_pairs(char a, char b) {
  const char z = (char)0x80;  // pshufb: zero byte
  return _mm256_setr_epi8(z, a, z, b, z, (char)(4 + a), z, (char)(4 + b), z, (char)(8 + a), z, (char)(8 + b), z,
                          (char)(12 + a), z, (char)(12 + b), z, a, z, b, z, (char)(4 + a), z, (char)(4 + b), z,
                          (char)(8 + a), z, (char)(8 + b), z, (char)(12 + a), z, (char)(12 + b));
}

// scp[2k + hi]: the int16 pair (scale 4k + hi, scale 4k + 2 + hi) of row r in int32 lane r: the scales of chunks
// 2k and 2k + 1 for lane positions 0..3 (hi 0) or 4..7 (hi 1); sp[l]: the int16 pair (-32 scale 2l, -32 scale
// 2l + 1) of row r in int32 lane r (l = 0..7; |32 scale| <= 4096 fits int16).
SPINDLE_AVX2 static inline void q6_Kx8_scales(const block_q6_Kx8* blk, __m256i scp[8], __m256i sp[8]) {
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
SPINDLE_AVX2 static inline void q6_Kx8_weights(const block_q6_Kx8* wb, int l, __m256i q[8]) {
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
