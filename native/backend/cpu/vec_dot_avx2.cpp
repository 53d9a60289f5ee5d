// AVX2 (+FMA, F16C) tile kernels for the quantized weight types; compiled per function with
// __attribute__((target)) so the binary still runs on CPUs without AVX2 (they never call these).
// Invariant: every output (r, t) owns its accumulator and sees the same instruction sequence in every tile
// shape; integer block sums are exact (maddubs pairs stay below 2^15, sums in int32). The float arithmetic
// per output is that of llama.cpp's x86 AVX2 build: Q8_0 / Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K / Q5_K / Q6_K / IQ4_XS
// as its vec_dot / tinyBLAS (8 lanes, then the lane sum), Q4_0 / IQ4_NL / Q4_K as its repacked (CPU_REPACK) gemm/gemv
// (one f32 fma chain over the blocks).
#include "backend/cpu/vec_dot_avx2.h"

#if SPINDLE_HAVE_X86_KERNELS
#include <cmath>
#include <cstring>

#include "backend/cpu/quants.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/vec_dot_tile.h"

namespace spindle {
namespace {

// The 8-lane accumulators of the vec_dot-style kernels: one __m256 per output (r, t), zeroed, summed across its
// lanes (hsum_avx2) at the end, plus an optional f32 per output (the kernels that keep an offset term apart).
template <int NR, int NT>
struct f32_lanes {
  SPINDLE_AVX2 static void zero(__m256 acc[NR][NT]) {
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  SPINDLE_AVX2 static void store(const __m256 acc[NR][NT], const tile_args& a) {
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx2(acc[r][t]);
  }
  SPINDLE_AVX2 static void store(const __m256 acc[NR][NT], const float plus[NR][NT], const tile_args& a) {
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = hsum_avx2(acc[r][t]) + plus[r][t];
  }
};

// q8_0 / q4_0 weight block b of a row, as 32 signed bytes, and its scale.
struct q8_0_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_q8_0* blk = (const block_q8_0*)row + b;
    *d = _cvtsh_ss(blk->d);
    return _mm256_loadu_si256((const __m256i*)blk->qs);
  }
};

struct q4_0_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_q4_0* blk = (const block_q4_0*)row + b;
    *d = _cvtsh_ss(blk->d);
    const __m128i packed = _mm_loadu_si128((const __m128i*)blk->qs);
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
                                       _mm256_set1_epi8(0x0f));  // elements 0..15 low nibbles, 16..31 high
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
  }
};

// iq4_nl: the nibbles (laid out as q4_0's) through the non-linear table.
struct iq4_nl_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_iq4_nl* blk = (const block_iq4_nl*)row + b;
    *d = _cvtsh_ss(blk->d);
    const __m128i values = _mm_loadu_si128((const __m128i*)k_iq4nl_values), low4 = _mm_set1_epi8(0x0f);
    const __m128i packed = _mm_loadu_si128((const __m128i*)blk->qs);
    return _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(packed, 4), low4)),
                            _mm_shuffle_epi8(values, _mm_and_si128(packed, low4)));
  }
};

// The 32 nibbles of a q4_0-layout block as bytes: elements 0..15 the low nibbles of qs, 16..31 the high ones.
SPINDLE_AVX2 static inline __m256i block_nibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128((const __m128i*)qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0f));
}

// Byte j: 0xff where bit j of the 32-bit qh is set (byte j / 8 of qh broadcast to its 8 lanes, one bit each).
SPINDLE_AVX2 static inline __m256i block_high_bits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// q5_0: nibble | bit j of qh << 4, minus 16: elements whose high bit is clear get 0xf0 ORed in (nibble - 16).
struct q5_0_weights {
  SPINDLE_AVX2 static inline __m256i load(const uint8_t* row, int64_t b, float* d) {
    const block_q5_0* blk = (const block_q5_0*)row + b;
    *d = _cvtsh_ss(blk->d);
    return _mm256_or_si256(block_nibbles(blk->qs), _mm256_andnot_si256(block_high_bits(blk->qh), _mm256_set1_epi8((char)0xf0)));
  }
};

// q4_1 / q5_1: the unsigned quants (0..15 / 0..31), their scale and offset.
struct q4_1_weights {
  using block = block_q4_1;
  SPINDLE_AVX2 static inline __m256i load(const block_q4_1* blk) { return block_nibbles(blk->qs); }
};
struct q5_1_weights {
  using block = block_q5_1;
  SPINDLE_AVX2 static inline __m256i load(const block_q5_1* blk) {
    return _mm256_or_si256(block_nibbles(blk->qs), _mm256_and_si256(block_high_bits(blk->qh), _mm256_set1_epi8(0x10)));
  }
};

// W (q4_1 / q5_1) . x (q8_1), as llama.cpp's AVX2 ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1: per 32-block,
// acc = fma(q . x in 8 int32 lanes, dw * dx, acc) and summs = fma(mw, sx, summs) (one f32 per output; x's s is
// dx times the sum of its quants); output: the lane sum of acc plus summs.
template <class W>
struct q4_1_tiles {
template <int NR, int NT>
struct kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    float summs[NR][NT] = {};
    f32_lanes<NR, NT>::zero(acc);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < a.n / QK8_1; ++b) {
      __m256i xq[NT];
      float dx[NT], sx[NT];
      for (int t = 0; t < NT; ++t) {
        const block_q8_1* xb = (const block_q8_1*)(a.x + t * a.xs) + b;
        xq[t] = _mm256_loadu_si256((const __m256i*)xb->qs);
        dx[t] = _cvtsh_ss(xb->d);
        sx[t] = _cvtsh_ss(xb->s);
      }
      for (int r = 0; r < NR; ++r) {
        const typename W::block* blk = (const typename W::block*)(a.w + r * a.ws) + b;
        if (b % 2 == 0) prefetch_stream(blk, 1);
        const __m256i q = W::load(blk);
        const float dw = _cvtsh_ss(blk->d), mw = _cvtsh_ss(blk->m);
        for (int t = 0; t < NT; ++t) {
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq[t]), ones);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * dx[t]), acc[r][t]);
          summs[r][t] = std::fma(mw, sx[t], summs[r][t]);
        }
      }
    }
    f32_lanes<NR, NT>::store(acc, summs, a);
  }
};
};

// W (q8_0 / q5_0) . x (q8_0): per 32-block, (dw * dx) * sum(w * x), accumulated in 8 f32 lanes (as
// tinyBLAS_Q0_AVX).
template <class L>
struct q8_0_tiles {
  template <int NR, int NT>
  struct kernel {
    SPINDLE_AVX2 static void run(const tile_args& a) {
      __m256 acc[NR][NT];
      f32_lanes<NR, NT>::zero(acc);
      for (int64_t b = 0; b < a.n / QK8_0; ++b) {
        __m256i xq[NT];
        float dx[NT];
        for (int t = 0; t < NT; ++t) {
          const block_q8_0* xb = (const block_q8_0*)(a.x + t * a.xs) + b;
          xq[t] = _mm256_loadu_si256((const __m256i*)xb->qs);
          dx[t] = _cvtsh_ss(xb->d);
        }
        for (int r = 0; r < NR; ++r) {
          if (b % 2 == 0) prefetch_stream(a.w + r * a.ws + b * sizeof(block_q8_0), 1);  // a line per 2 blocks
          float dw;
          const __m256i sw = L::load(a.w + r * a.ws, b, &dw);
          const __m256i aw = _mm256_sign_epi8(sw, sw);
          for (int t = 0; t < NT; ++t) {
            const __m256i p = dot_i8_avx2(aw, sw, xq[t]);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[t]), _mm256_cvtepi32_ps(p), acc[r][t]);
          }
        }
      }
      f32_lanes<NR, NT>::store(acc, a);
    }
  };
};

// The int16 scales of chunk c of a half (32 elements = groups 2c and 2c + 1 of 16): group 2c's in every int16 of
// the low 128 bits, 2c + 1's in the high, for madd with maddubs pair sums. sc_half: the half's 8 int16 scales in
// both 128-bit lanes (q3_K, q6_K: 16-element groups).
SPINDLE_AVX2 static inline __m256i chunk_group_scales(__m256i sc_half, int c) {
  const char a0 = (char)(4 * c), a1 = (char)(4 * c + 1), b0 = (char)(4 * c + 2), b1 = (char)(4 * c + 3);
  return _mm256_shuffle_epi8(sc_half, _mm256_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1,
                                                       b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1));
}

// Int16 lane j of sc_all (the same 8 int16 in both 128-bit lanes) in every int16 lane (q4_K / q5_K sub-block scales).
SPINDLE_AVX2 static inline __m256i broadcast_i16(__m256i sc_all, int j) {
  return _mm256_shuffle_epi8(sc_all, _mm256_set1_epi16((short)(0x0100 * (2 * j + 1) + 2 * j)));
}

// The 8 sums of 32 quants of a q8_K block as int16 (|sum| <= 32 * 128), from its 16 sums of 16.
SPINDLE_AVX2 static inline __m128i q8_K_sums32(const block_q8_K* xb) {
  const __m256i bs = _mm256_loadu_si256((const __m256i*)xb->bsums);
  return _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
}

// The 8 six-bit scales and mins of a q4_K block (ggml's packing, unpacked 4 at a time).
SPINDLE_AVX2 static inline void q4_K_unpack_scales(const uint8_t* packed, uint8_t sc[8], uint8_t m[8]) {
  uint32_t u[3], s[2], mm[2];
  std::memcpy(u, packed, 12);
  s[0] = u[0] & 0x3f3f3f3f;
  mm[0] = u[1] & 0x3f3f3f3f;
  s[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
  mm[1] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
  std::memcpy(sc, s, 8);
  std::memcpy(m, mm, 8);
}

// Lane i of the result = the sum of the 8 int32 lanes of v[i] (exact).
SPINDLE_AVX2 static inline __m256i sum_lanes8(const __m256i v[8]) {
  const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

// The (r, t) outputs of a tile as lanes of NG vectors (pair i = r * NT + t in lane i % 8 of vector i / 8), so
// that acc_i = fma((float)isum_i, scale_i, acc_i) per step is one scalar f32 chain per output whatever the
// tile shape. Unused lanes stay zero.
template <int NR, int NT>
struct pair_lanes {
  static constexpr int NP = NR * NT, NG = (NP + 7) / 8;
  SPINDLE_AVX2 static void zero(__m256 acc[NG]) {
    for (int g = 0; g < NG; ++g) acc[g] = _mm256_setzero_ps();
  }
  // acc += isums * scales lane by lane; isums: NG * 8 vectors whose lanes sum to the pair's integer.
  SPINDLE_AVX2 static void fma_lane_sums(__m256 acc[NG], const __m256i* isums, const float* scales) {
    for (int g = 0; g < NG; ++g)
      acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_lanes8(isums + 8 * g)), _mm256_loadu_ps(scales + 8 * g), acc[g]);
  }
  SPINDLE_AVX2 static void store(const __m256 acc[NG], const tile_args& a) {
    float out[NG * 8];
    for (int g = 0; g < NG; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = out[r * NT + t];
  }
};

// W (q4_0 / iq4_nl) . x (q8_0) with the arithmetic of llama.cpp's repacked x86 kernels (CPU_REPACK q4_0_8x8 and
// iq4_nl_8x8, one gemm / gemv template for both): exact int32 dot per 32-block, then
// acc = fma((float)isum_b, dw_b * dx_b, acc) in block order.
template <class W>
struct q4_0_tiles {
template <int NR, int NT>
struct kernel {
  using L = pair_lanes<NR, NT>;
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[L::NG];
    L::zero(acc);
    __m256i isum[L::NG * 8];
    float scale[L::NG * 8];
    for (int i = 0; i < L::NG * 8; ++i) isum[i] = _mm256_setzero_si256(), scale[i] = 0.0f;
    for (int64_t b = 0; b < a.n / QK4_0; ++b) {
      __m256i sw[NR], aw[NR];
      float dw[NR];
      for (int r = 0; r < NR; ++r) {
        sw[r] = W::load(a.w + r * a.ws, b, &dw[r]);
        aw[r] = _mm256_sign_epi8(sw[r], sw[r]);
      }
      for (int t = 0; t < NT; ++t) {
        const block_q8_0* xb = (const block_q8_0*)(a.x + t * a.xs) + b;
        const __m256i xq = _mm256_loadu_si256((const __m256i*)xb->qs);
        const float dx = _cvtsh_ss(xb->d);
        for (int r = 0; r < NR; ++r) {
          isum[r * NT + t] = dot_i8_avx2(aw[r], sw[r], xq);
          scale[r * NT + t] = dw[r] * dx;
        }
      }
      L::fma_lane_sums(acc, isum, scale);
    }
    L::store(acc, a);
  }
};
};

// [sum(v[0]), sum(v[1]), sum(v[2]), sum(v[3])] of four 8-lane int32 vectors (exact).
SPINDLE_AVX2 static inline __m128i sum_lanes4(const __m256i v[4]) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// Transposes 8 rows of 4 int32 (16-byte aligned) into 4 vectors: lane k of t[s] = rows[k][s].
SPINDLE_AVX2 static inline void transpose_8x4(const int32_t (*rows)[4], __m256i t[4]) {
  __m256i p[4];  // p[k] = [rows[k] | rows[k + 4]]
  for (int k = 0; k < 4; ++k)
    p[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128((const __m128i*)rows[k])),
                                   _mm_load_si128((const __m128i*)rows[k + 4]), 1);
  const __m256i a = _mm256_unpacklo_epi32(p[0], p[1]), b = _mm256_unpackhi_epi32(p[0], p[1]);
  const __m256i c = _mm256_unpacklo_epi32(p[2], p[3]), d = _mm256_unpackhi_epi32(p[2], p[3]);
  t[0] = _mm256_unpacklo_epi64(a, c);
  t[1] = _mm256_unpackhi_epi64(a, c);
  t[2] = _mm256_unpacklo_epi64(b, d);
  t[3] = _mm256_unpackhi_epi64(b, d);
}

// W (q4_K) . x (q8_K) with the arithmetic of llama.cpp's repacked x86 gemm (q4_K_8x8, rows in groups of 4):
// per 64-element pair of sub-blocks s (4 per super-block), exact isum_s = sc[2s] (q.x)_2s + sc[2s+1] (q.x)_2s+1
// and msum_s = m[2s] xsum_2s + m[2s+1] xsum_2s+1, two f32 chains acc = fma(isum_s, d*dx, acc) and
// accm = fma(msum_s, dmin*dx, accm), output acc - accm. (Its gemv, used for the last n % 4 rows of a batch,
// steps per super-block instead; that differs in the last bits only.)
template <int NR, int NT>
struct q4_K_kernel {
  using L = pair_lanes<NR, NT>;
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[L::NG], accm[L::NG];
    L::zero(acc);
    L::zero(accm);
    alignas(16) int32_t isum[L::NG * 8][4] = {}, msum[L::NG * 8][4] = {};  // [pair][s]
    float sd[L::NG * 8] = {}, sm[L::NG * 8] = {};
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      __m128i xsum[NT];  // per token: the 8 sub-block sums of x as int16 (|sum| <= 32 * 128)
      for (int t = 0; t < NT; ++t) {
        xsum[t] = q8_K_sums32((const block_q8_K*)(a.x + t * a.xs) + b);
      }
      for (int r = 0; r < NR; ++r) {
        const block_q4_K* wb = (const block_q4_K*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_q4_K));
        __m256i q[8], scale[8];
        uint8_t sc[8], m[8];
        q4_K_unpack_scales(wb->scales, sc, m);
        for (int c = 0; c < 4; ++c) {
          const __m256i v = _mm256_loadu_si256((const __m256i*)(wb->qs + 32 * c));
          q[2 * c] = _mm256_and_si256(v, low4);
          q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
        const __m128i sc8 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)sc));
        const __m256i sc_all = _mm256_set_m128i(sc8, sc8);
        for (int j = 0; j < 8; ++j)  // int16 lane j of sc8 into every lane
          scale[j] = broadcast_i16(sc_all, j);
        const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)m));
        const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
        for (int t = 0; t < NT; ++t) {
          const block_q8_K* xb = (const block_q8_K*)(a.x + t * a.xs) + b;
          const int i = r * NT + t;
          __m256i v[4];
          for (int s = 0; s < 4; ++s) {
            const __m256i x0 = _mm256_loadu_si256((const __m256i*)(xb->qs + 64 * s));
            const __m256i x1 = _mm256_loadu_si256((const __m256i*)(xb->qs + 64 * s + 32));
            v[s] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q[2 * s], x0), scale[2 * s]),
                                    _mm256_madd_epi16(_mm256_maddubs_epi16(q[2 * s + 1], x1), scale[2 * s + 1]));
          }
          _mm_store_si128((__m128i*)isum[i], sum_lanes4(v));
          _mm_store_si128((__m128i*)msum[i], _mm_madd_epi16(m16, xsum[t]));  // lane s: m[2s] xs[2s] + m[2s+1] xs[2s+1]
          sd[i] = d * xb->d;
          sm[i] = dmin * xb->d;
        }
      }
      for (int g = 0; g < L::NG; ++g) {
        __m256i iv[4], mv[4];
        transpose_8x4(isum + 8 * g, iv);
        transpose_8x4(msum + 8 * g, mv);
        const __m256 vsd = _mm256_loadu_ps(sd + 8 * g), vsm = _mm256_loadu_ps(sm + 8 * g);
        for (int s = 0; s < 4; ++s) {
          acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iv[s]), vsd, acc[g]);
          accm[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mv[s]), vsm, accm[g]);
        }
      }
    }
    for (int g = 0; g < L::NG; ++g) acc[g] = _mm256_sub_ps(acc[g], accm[g]);
    L::store(acc, a);
  }
};

// Half H of a q6_K block times NT tokens: for chunk j = 4H + c (elements 32j .. 32j + 32, unsigned 6-bit q),
// isum[t] += madd(maddubs(q_j, x_t[32j ..]), scale_j) with scale_j = [scales[2j] x 8 | scales[2j + 1] x 8].
// sc_half: the int16 scales of this half's 8 groups in both 128-bit lanes.
template <int H, int NT>
SPINDLE_AVX2 static inline void q6_K_half(const block_q6_K* wb, __m256i sc_half, const block_q8_K* const xb[NT],
                                          __m256i isum[NT]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const __m256i l0 = _mm256_loadu_si256((const __m256i*)(wb->ql + 64 * H));
  const __m256i l1 = _mm256_loadu_si256((const __m256i*)(wb->ql + 64 * H + 32));
  const __m256i hb = _mm256_loadu_si256((const __m256i*)(wb->qh + 32 * H));
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    __m256i q;  // nibble | top two bits << 4
    switch (c) {
      case 0: q = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(3)), 4)); break;
      case 1: q = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(12)), 2)); break;
      case 2: q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, _mm256_set1_epi8(48))); break;
      default: q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                   _mm256_srli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8((char)0xc0)), 2)); break;
    }
    const __m256i scale = chunk_group_scales(sc_half, c);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb[t]->qs + 32 * (4 * H + c)));
      isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), scale));
    }
  }
}

// W (q6_K) . x (q8_K): per super-block, d*dx * (sum_g scales[g] (q.x)_g - 32 * sum_g scales[g] * bsums[g]) in 8
// int32 lanes (lane l: elements 32j + 4l .. + 4 of every chunk j), accumulated in 8 f32 lanes, then the lane
// sum, as llama.cpp's AVX2 ggml_vec_dot_q6_K_q8_K.
template <int NR, int NT>
struct q6_K_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    f32_lanes<NR, NT>::zero(acc);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      const block_q8_K* xb[NT];
      for (int t = 0; t < NT; ++t) xb[t] = (const block_q8_K*)(a.x + t * a.xs) + b;
      for (int r = 0; r < NR; ++r) {
        const block_q6_K* wb = (const block_q6_K*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_q6_K));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)wb->scales));
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
        q6_K_half<0, NT>(wb, _mm256_permute2x128_si256(sc16, sc16, 0x00), xb, isum);
        q6_K_half<1, NT>(wb, _mm256_permute2x128_si256(sc16, sc16, 0x11), xb, isum);
        const float d = _cvtsh_ss(wb->d);
        for (int t = 0; t < NT; ++t) {
          const __m256i bs = _mm256_loadu_si256((const __m256i*)xb[t]->bsums);
          const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5);  // 32 * scales . bsums
          const __m256i v = _mm256_sub_epi32(isum[t], offset);
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb[t]->d), _mm256_cvtepi32_ps(v), acc[r][t]);
        }
      }
    }
    f32_lanes<NR, NT>::store(acc, a);
  }
};

// W (q3_K) . x (q8_K), as llama.cpp's AVX2 ggml_vec_dot_q3_K_q8_K: per chunk j of 32 elements (half H = j / 4,
// c = j % 4), q2 = bits 2c..2c+1 of qs[32H + l] and h4 = 4 where bit 4H + c of hmask[l] is clear, so q = q2 - h4;
// isum += madd(maddubs(q2, x) - maddubs(h4, x), [sc[2j] - 32 x 8 | sc[2j + 1] - 32 x 8]) in 8 int32 lanes,
// per super-block acc = fma(d * dx, isum, acc) in 8 f32 lanes, then the lane sum.
template <int NR, int NT>
struct q3_K_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    f32_lanes<NR, NT>::zero(acc);
    const __m256i three = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      const block_q8_K* xb[NT];
      for (int t = 0; t < NT; ++t) xb[t] = (const block_q8_K*)(a.x + t * a.xs) + b;
      for (int r = 0; r < NR; ++r) {
        const block_q3_K* wb = (const block_q3_K*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_q3_K));
        // the 16 six-bit scales (q3_K_scale's packing: low nibbles of bytes 0..7, high nibbles, then two bits
        // each from bytes 8..11), minus 32, four at a time in 32-bit words as llama.cpp unpacks them
        uint32_t aux[3];
        std::memcpy(aux, wb->scales, 12);
        const uint32_t k2 = 0x0f0f0f0f, k1 = 0x03030303;
        const __m128i sc8 = _mm_sub_epi8(
            _mm_set_epi32((int)(((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4)),
                          (int)(((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4)),
                          (int)((aux[1] & k2) | (((aux[2] >> 2) & k1) << 4)), (int)((aux[0] & k2) | ((aux[2] & k1) << 4))),
            _mm_set1_epi8(32));
        const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
        const __m256i hm = _mm256_loadu_si256((const __m256i*)wb->hmask);
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int H = 0; H < 2; ++H) {
          const __m256i sc_half = H == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                         : _mm256_permute2x128_si256(sc16, sc16, 0x11);
          const __m256i q2s = _mm256_loadu_si256((const __m256i*)(wb->qs + 32 * H));
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256i q2 = _mm256_and_si256(c == 0 ? q2s : _mm256_srli_epi16(q2s, 2 * c), three);
            // 4 where the high bit (bit 4H + c of hmask[l]) is clear: the clear bit moved to bit 2 (masked first,
            // so the 16-bit shift moves no bit across a byte)
            const int b = 4 * H + c;
            const __m256i clear = _mm256_andnot_si256(hm, _mm256_set1_epi8((char)(1 << b)));
            const __m256i h4 = b == 2 ? clear : b > 2 ? _mm256_srli_epi16(clear, b - 2) : _mm256_slli_epi16(clear, 2 - b);
            const __m256i scale = chunk_group_scales(sc_half, c);
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
              const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb[t]->qs + 128 * H + 32 * c));
              const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q2, xq), _mm256_maddubs_epi16(h4, xq));
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, scale));
            }
          }
        }
        const float d = _cvtsh_ss(wb->d);
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
      }
    }
    f32_lanes<NR, NT>::store(acc, a);
  }
};

// W (q5_K) . x (q8_K), as llama.cpp's AVX2 ggml_vec_dot_q5_K_q8_K: sub-block j's quants (nibble | bit j of qh[l]
// << 4) give isum += madd(maddubs(q_j, x_j), sc_j) in 8 int32 lanes, per super-block acc = fma(d * dx, isum, acc)
// in 8 f32 lanes and summs = fma(-dx * dmin, sum_j m_j xsum_j, summs) (one f32 per output); output: the lane sum
// of acc plus summs.
template <int NR, int NT>
struct q5_K_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    float summs[NR][NT] = {};
    f32_lanes<NR, NT>::zero(acc);
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      const block_q8_K* xb[NT];
      __m128i xsum[NT];  // per token: the 8 sub-block sums of x as int16 (|sum| <= 32 * 128)
      for (int t = 0; t < NT; ++t) {
        xb[t] = (const block_q8_K*)(a.x + t * a.xs) + b;
        xsum[t] = q8_K_sums32(xb[t]);
      }
      for (int r = 0; r < NR; ++r) {
        const block_q5_K* wb = (const block_q5_K*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_q5_K));
        uint8_t sc[8], m[8];
        q4_K_unpack_scales(wb->scales, sc, m);
        const __m128i sc8 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)sc));
        const __m256i sc_all = _mm256_set_m128i(sc8, sc8);
        const __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)m));
        const __m256i hb = _mm256_loadu_si256((const __m256i*)wb->qh);
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i v = _mm256_loadu_si256((const __m256i*)(wb->qs + 32 * (j / 2)));
          const __m256i lo = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, low4);
          // bit j of each qh byte to bit 4 (masked after the shift, so no bit crosses a byte)
          const __m256i hi = _mm256_and_si256(j <= 4 ? _mm256_slli_epi16(hb, 4 - j) : _mm256_srli_epi16(hb, j - 4), bit4);
          const __m256i q = _mm256_or_si256(lo, hi);
          const __m256i scale = broadcast_i16(sc_all, j);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb[t]->qs + 32 * j));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), scale));
          }
        }
        const float dw = _cvtsh_ss(wb->d), dminw = _cvtsh_ss(wb->dmin);
        for (int t = 0; t < NT; ++t) {
          const __m128i prod = _mm_madd_epi16(m16, xsum[t]);
          const __m128i h = _mm_hadd_epi32(_mm_hadd_epi32(prod, _mm_setzero_si128()), _mm_setzero_si128());
          summs[r][t] = std::fma(-xb[t]->d * dminw, (float)_mm_cvtsi128_si32(h), summs[r][t]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(xb[t]->d * dw), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
        }
      }
    }
    f32_lanes<NR, NT>::store(acc, summs, a);
  }
};

// The exact sum of 8 int32 lanes.
SPINDLE_AVX2 static inline int32_t hsum_epi32_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// W (q2_K) . x (q8_K) with llama.cpp's arithmetic, which depends on the CPU: without AVX-512 its AVX2
// ggml_vec_dot_q2_K_q8_K (Repacked false): per super-block first the mins, acc = fma(-dx * dmin, madd(m16, bsums),
// acc) (lane k: groups 2k and 2k + 1), then the quants as q3_K's without the high bit, acc = fma(d * dx, isum, acc),
// the lane sum at the end; with AVX-512 its repacked q2_K_8x8 gemv / gemm (Repacked true): per super-block the exact
// totals, acc = fma(isum, d * dx, acc) and accm = fma(msum, dmin * dx, accm) in one f32 each, output acc - accm.
template <bool Repacked>
struct q2_K_tiles {
template <int NR, int NT>
struct kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    float sacc[NR][NT] = {}, saccm[NR][NT] = {};
    f32_lanes<NR, NT>::zero(acc);
    const __m256i three = _mm256_set1_epi8(3);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      const block_q8_K* xb[NT];
      for (int t = 0; t < NT; ++t) xb[t] = (const block_q8_K*)(a.x + t * a.xs) + b;
      for (int r = 0; r < NR; ++r) {
        const block_q2_K* wb = (const block_q2_K*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_q2_K));
        const __m128i packed = _mm_loadu_si128((const __m128i*)wb->scales);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_and_si128(packed, low4));
        const __m256i m16 = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), low4));
        const float dw = _cvtsh_ss(wb->d), dminw = _cvtsh_ss(wb->dmin);
        __m256i isum[NT], msum[NT];
        for (int t = 0; t < NT; ++t) {
          msum[t] = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i*)xb[t]->bsums));
          if constexpr (!Repacked)
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(-xb[t]->d * dminw), _mm256_cvtepi32_ps(msum[t]), acc[r][t]);
          isum[t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 2
        for (int H = 0; H < 2; ++H) {
          const __m256i sc_half = H == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00)
                                         : _mm256_permute2x128_si256(sc16, sc16, 0x11);
          const __m256i q2s = _mm256_loadu_si256((const __m256i*)(wb->qs + 32 * H));
#pragma GCC unroll 4
          for (int c = 0; c < 4; ++c) {
            const __m256i q2 = _mm256_and_si256(c == 0 ? q2s : _mm256_srli_epi16(q2s, 2 * c), three);
            const __m256i scale = chunk_group_scales(sc_half, c);
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
              const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb[t]->qs + 128 * H + 32 * c));
              isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q2, xq), scale));
            }
          }
        }
        for (int t = 0; t < NT; ++t) {
          if constexpr (Repacked) {
            sacc[r][t] = std::fma((float)hsum_epi32_avx2(isum[t]), dw * xb[t]->d, sacc[r][t]);
            saccm[r][t] = std::fma((float)hsum_epi32_avx2(msum[t]), dminw * xb[t]->d, saccm[r][t]);
          } else {
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(xb[t]->d * dw), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) a.y[t * a.ys + r] = Repacked ? sacc[r][t] - saccm[r][t] : hsum_avx2(acc[r][t]);
  }
};
};

// W (iq4_xs) . x (q8_K), as llama.cpp's AVX2 ggml_vec_dot_iq4_xs_q8_K: sub-block j's nibbles through the
// iq4_nl table (pshufb; low nibbles are elements 0..15, high 16..31), |w| . sign(x, w) pairs (maddubs), times
// (ls_j - 32) in 8 int32 lanes; per super-block acc = fma(d * dx, isum, acc); the lane sum at the end.
template <int NR, int NT>
struct iq4_xs_kernel {
  SPINDLE_AVX2 static void run(const tile_args& a) {
    __m256 acc[NR][NT];
    f32_lanes<NR, NT>::zero(acc);
    const __m128i values = _mm_loadu_si128((const __m128i*)k_iq4nl_values);
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (int64_t b = 0; b < a.n / QK_K; ++b) {
      const block_q8_K* xb[NT];
      for (int t = 0; t < NT; ++t) xb[t] = (const block_q8_K*)(a.x + t * a.xs) + b;
      for (int r = 0; r < NR; ++r) {
        const block_iq4_xs* wb = (const block_iq4_xs*)(a.w + r * a.ws) + b;
        prefetch_stream(wb, sizeof(block_iq4_xs));
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m128i bits = _mm_loadu_si128((const __m128i*)(wb->qs + 16 * j));
          const __m256i w = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits, 4), low4)),
                                             _mm_shuffle_epi8(values, _mm_and_si128(bits, low4)));
          const __m256i aw = _mm256_sign_epi8(w, w);
          const __m256i ls = _mm256_set1_epi16((short)(iq4_xs_scale(j, *wb) - 32));
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const __m256i xq = _mm256_loadu_si256((const __m256i*)(xb[t]->qs + 32 * j));
            const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, w));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p16, ls));
          }
        }
        const float dw = _cvtsh_ss(wb->d);
        for (int t = 0; t < NT; ++t)
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
      }
    }
    f32_lanes<NR, NT>::store(acc, a);
  }
};

}  // namespace

tile_kernel tile_kernel_q2_K_repacked() { return make_tile_kernel<q2_K_tiles<true>::kernel, 1, 4>(); }

tile_kernel tile_kernel_avx2(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::Q8_0: return make_tile_kernel<q8_0_tiles<q8_0_weights>::kernel, 4, 4>();
    case ggml_type::Q4_0: return make_tile_kernel<q4_0_tiles<q4_0_weights>::kernel, 4, 4>();
    case ggml_type::IQ4_NL: return make_tile_kernel<q4_0_tiles<iq4_nl_weights>::kernel, 4, 4>();
    case ggml_type::Q5_0: return make_tile_kernel<q8_0_tiles<q5_0_weights>::kernel, 4, 4>();
    case ggml_type::Q4_1: return make_tile_kernel<q4_1_tiles<q4_1_weights>::kernel, 2, 4>();
    case ggml_type::Q5_1: return make_tile_kernel<q4_1_tiles<q5_1_weights>::kernel, 2, 4>();
    case ggml_type::Q4_K: return make_tile_kernel<q4_K_kernel, 4, 4>();
    case ggml_type::Q6_K: return make_tile_kernel<q6_K_kernel, 1, 4>();
    case ggml_type::Q3_K: return make_tile_kernel<q3_K_kernel, 1, 4>();
    case ggml_type::Q5_K: return make_tile_kernel<q5_K_kernel, 1, 4>();
    case ggml_type::Q2_K: return make_tile_kernel<q2_K_tiles<false>::kernel, 1, 4>();
    case ggml_type::IQ4_XS: return make_tile_kernel<iq4_xs_kernel, 1, 4>();
    default: return tile_kernel_avx2_float(wtype);
  }
}

}  // namespace spindle

#else  // not x86 with GCC/clang: no AVX2 kernels

namespace spindle {
tile_kernel tile_kernel_avx2(ggml_type) { return {}; }
tile_kernel tile_kernel_q2_K_repacked() { return {}; }
}  // namespace spindle

#endif
