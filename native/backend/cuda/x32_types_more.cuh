// Device-side readers of the x32 layout for the weight types after the first four quantized ones (the CPU's
// quants_more.h), with x32_types.cuh's contract (dot_unit<NT> / value) and pack_x32.cpp's field offsets:
//   32-value blocks against q8_32 activations, one float term per block:
//     q5_0, iq4_nl: w = d * q (add_sym);  q4_1, q5_1: w = d * q + m (add_affine, with the block's s = dx * sum(xq));
//   256-value super-blocks against q8_256 activations, one float term per unit from exact int32 sums:
//     q5_K, q2_K: w = d * sc * q - dmin * m (affine_unit_term);  q3_K, iq4_xs: w = d * sc * q (scaled_unit_term).
// Weights become int8 words (4 values each, element order of the activations) before any dp4a, so every dot is
// an exact integer; the integer sums never overflow (|sum| < 2^28 for every type here).
#pragma once
#include "backend/cuda/x32_types.cuh"

namespace spindle {

// acc + ((d * dx) * isum + m * s): the block term of the affine q8_32 types (w = d * q + m), s = dx * sum(xq).
__device__ __forceinline__ float add_affine(float acc, float d, float m, float dx, float s, int isum) {
  return __fadd_rn(acc, __fadd_rn(__fmul_rn(__fmul_rn(d, dx), (float)isum), __fmul_rn(m, s)));
}

// Bits 0..3 of `bits` to bit 0 of bytes 0..3 (one multiply: the four shifted copies do not overlap).
__device__ __forceinline__ int spread4(uint32_t bits) { return (int)(((bits & 0xFu) * 0x00204081u) & 0x01010101u); }

// The 32 unsigned 5-bit values of a q5_0 / q5_1 block as 8 words (elements 0..15, then 16..31): the low nibbles of
// the 16 qs bytes as in q4_0, bit 4 of element j from bit j of qh.
__device__ __forceinline__ void q5_words(int4 q, uint32_t qh, int (&w)[8]) {
  const int qs[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = (qs[i] & 0x0F0F0F0F) | (spread4(qh >> (4 * i)) << 4);
    w[i + 4] = ((qs[i] >> 4) & 0x0F0F0F0F) | (spread4(qh >> (16 + 4 * i)) << 4);
  }
}

// Four lookups in the 16 levels of iq4_nl / iq4_xs (the CPU's k_iq4nl_values: -127, -104, ..., 113) at once: byte k
// of the result is the level of index byte k of idx (0..15). The levels as little-endian words of four int8.
__device__ __forceinline__ int iq4nl_levels(uint32_t idx) {
  const uint32_t sel = (idx & 0x7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(0xbfad9881u, 0xf6eaddcfu, sel);  // levels 0..7
  const uint32_t hi = __byte_perm(0x26190d01u, 0x71594535u, sel);  // levels 8..15
  const uint32_t take_hi = ((idx & 0x08080808u) >> 3) * 0xFFu;      // 0xFF in the bytes whose index is >= 8
  return (int)((lo & ~take_hi) | (hi & take_hi));
}

// The levels of a 32-value iq4_nl block (or iq4_xs sub-block) from its 16 nibble bytes, laid out as in q4_0.
__device__ __forceinline__ void iq4nl_words(int4 q, int (&w)[8]) {
  const uint32_t qs[4] = {(uint32_t)q.x, (uint32_t)q.y, (uint32_t)q.z, (uint32_t)q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    w[i] = iq4nl_levels(qs[i] & 0x0F0F0F0Fu);
    w[i + 4] = iq4nl_levels((qs[i] >> 4) & 0x0F0F0F0Fu);
  }
}
__device__ __forceinline__ int iq4nl_level(int nibble) { return (int)(int8_t)(iq4nl_levels((uint32_t)nibble) & 0xFF); }

// The nibble of element j (0..31) of a q4_0-style block's 16 bytes.
__device__ __forceinline__ int block_nibble(const uint8_t* qs16, int j) {
  const uint8_t b = qs16[j % 16];
  return j < 16 ? (b & 0xF) : (b >> 4);
}

// The sum of 16 int8 activations.
__device__ __forceinline__ int sum16(int4 x) {
  const int ones[4] = {0x01010101, 0x01010101, 0x01010101, 0x01010101};
  return dot16(ones, x);
}

// The int8 weights of the 32-value block types: words(ub, lane, w) fills 8 words (elements 0..15, then 16..31) of
// the lane's block at ub (its group's unit), element(ub, lane, j) is weight j's integer (q, q - 16 or the level);
// d (and m) come first in the unit: [32 x 2 B], or d m [32 x 4 B] for the affine types.
struct words_q4_1 {  // qs [32][16 B] at 128
  __device__ static void words(const uint8_t* ub, int lane, int (&w)[8]) {
    const int4 q = ld16(ub + 128 + lane * 16);
    const int qs[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = qs[i] & 0x0F0F0F0F;             // elements 4i..4i+3
      w[i + 4] = (qs[i] >> 4) & 0x0F0F0F0F;  // elements 16 + 4i..
    }
  }
  __device__ static int element(const uint8_t* ub, int lane, int j) { return block_nibble(ub + 128 + lane * 16, j); }
};
struct words_q5_0 {  // qh [32 x 4 B] at 64, qs [32][16 B] at 192; q - 16
  __device__ static void words(const uint8_t* ub, int lane, int (&w)[8]) {
    q5_words(ld16(ub + 192 + lane * 16), *(const uint32_t*)(ub + 64 + 4 * lane), w);
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __vsubss4(w[i], 0x10101010);
  }
  __device__ static int element(const uint8_t* ub, int lane, int j) {
    const uint32_t qh = *(const uint32_t*)(ub + 64 + 4 * lane);
    return (block_nibble(ub + 192 + lane * 16, j) | (int)(((qh >> j) & 1u) << 4)) - 16;
  }
};
struct words_q5_1 {  // qh [32 x 4 B] at 128, qs [32][16 B] at 256
  __device__ static void words(const uint8_t* ub, int lane, int (&w)[8]) {
    q5_words(ld16(ub + 256 + lane * 16), *(const uint32_t*)(ub + 128 + 4 * lane), w);
  }
  __device__ static int element(const uint8_t* ub, int lane, int j) {
    const uint32_t qh = *(const uint32_t*)(ub + 128 + 4 * lane);
    return block_nibble(ub + 256 + lane * 16, j) | (int)(((qh >> j) & 1u) << 4);
  }
};
struct words_iq4_nl {  // qs [32][16 B] at 64
  __device__ static void words(const uint8_t* ub, int lane, int (&w)[8]) { iq4nl_words(ld16(ub + 64 + lane * 16), w); }
  __device__ static int element(const uint8_t* ub, int lane, int j) {
    return iq4nl_level(block_nibble(ub + 64 + lane * 16, j));
  }
};

// A 32-value block type from its word builder: w = d * q (add_sym) or, Affine, d * q + m (add_affine).
template <class Words, int UnitBytes, bool Affine>
struct x32_block32 {
  static constexpr int unit_values = 32, unit_bytes = UnitBytes;
  static constexpr bool affine = Affine;
  using words_of = Words;
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    int w[8];
    Words::words(gb, lane, w);
    float d, m = 0.0f;
    if constexpr (Affine) {
      const __half2 dm = *(const __half2*)(gb + 4 * lane);
      d = __low2float(dm);
      m = __high2float(dm);
    } else {
      d = ld_half(gb + 2 * lane);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t >= a.n_tok) continue;
      const int64_t b = (int64_t)(t0 + t) * a.nsub + u;
      const int isum = dot32(w, a, t0 + t, u);
      if constexpr (Affine) acc[t] = add_affine(acc[t], d, m, a.dx[b], a.sx[b], isum);
      else acc[t] = add_sym(acc[t], d, a.dx[b], isum);
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const float q = (float)Words::element(gb, lane, j);
    if constexpr (Affine) {  // q * d + m, never contracted (the CPU dequantizer's bits)
      const __half2 dm = *(const __half2*)(gb + 4 * lane);
      return __fadd_rn(__fmul_rn(q, __low2float(dm)), __high2float(dm));
    } else {
      return __fmul_rn(q, ld_half(gb + 2 * lane));
    }
  }
};
using x32_q4_1 = x32_block32<words_q4_1, 20, true>;     // d m | qs
using x32_q5_0 = x32_block32<words_q5_0, 22, false>;    // d | qh | qs
using x32_q5_1 = x32_block32<words_q5_1, 24, true>;     // d m | qh | qs
using x32_iq4_nl = x32_block32<words_iq4_nl, 18, false>;  // d | qs

// The 6-bit scale (0..63, before the -32) of sub-block j (0..7) of an iq4_xs unit from its scales_h / scales_l.
__device__ __forceinline__ int iq4_xs_scale_dev(int j, uint32_t scales_h, uint32_t scales_l) {
  return (int)(((scales_l >> (4 * j)) & 0xFu) | (((scales_h >> (2 * j)) & 3u) << 4));
}

struct x32_iq4_xs {
  static constexpr int unit_values = 256, unit_bytes = 136;
  // fields: d | scales_h | scales_l [32 x 8 B] at 0, qs [8 sub-blocks][32][16 B] at 256
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const uint8_t* h = gb + 8 * lane;
    const uint32_t scales_h = *(const uint16_t*)(h + 2), scales_l = *(const uint32_t*)(h + 4);
    int s[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) s[t] = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int w[8];
      iq4nl_words(ld16(gb + 256 + (j * 32 + lane) * 16), w);
      const int ls = iq4_xs_scale_dev(j, scales_h, scales_l) - 32;
      const int64_t sub = u * 8 + j;
#pragma unroll
      for (int t = 0; t < NT; ++t) s[t] += ls * dot32(w, a, min(t0 + t, a.n_tok - 1), sub);  // past the call's tokens: never used
    }
    const float d = ld_half(h);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s[t]));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const uint8_t* h = gb + 8 * lane;
    const int sb = j / 32;
    const int ls = iq4_xs_scale_dev(sb, *(const uint16_t*)(h + 2), *(const uint32_t*)(h + 4));
    const int level = iq4nl_level(block_nibble(gb + 256 + (sb * 32 + lane) * 16, j % 32));
    return __fmul_rn(__fmul_rn(ld_half(h), (float)(ls - 32)), (float)level);
  }
};

// q5_K: x32_types.cuh's affine super-block reader with the fifth bits: d dmin [32 x 4 B] at 0, scales [32 x 12 B] at
// 128, qh [2][32][16 B] at 512, qs [8][32][16 B] at 1536.
using x32_q5_K = x32_k_affine<176, 1536, 512>;

// The 6-bit scale (0..63, before the -32) of 16-value group g (0..15) of a q3_K unit (the CPU's q3_K_scale).
__device__ __forceinline__ int q3_K_scale_dev(int g, const uint8_t* s) {
  const int low = g < 8 ? (s[g] & 0x0F) : (s[g - 8] >> 4);
  const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
  return low | (high << 4);
}

struct x32_q3_K {
  static constexpr int unit_values = 256, unit_bytes = 110;
  // fields: hmask [2][32][16 B] at 0, qs [4][32][16 B] at 1024, scales [32 x 12 B] at 3072, d [32 x 2 B] at 3456.
  // Element 128h + 32c + l: bits 2c..2c+1 of qs byte 32h + l, minus 4 unless bit 4h + c of hmask byte l is set;
  // group (8h + 2c + l / 16).
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int4 m0 = ld16(gb + lane * 16), m1 = ld16(gb + (32 + lane) * 16);
    const int hm[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
    const uint32_t* sp = (const uint32_t*)(gb + 3072 + 12 * lane);
    alignas(4) uint8_t sc8[12];
    *(uint32_t*)(sc8 + 0) = sp[0];
    *(uint32_t*)(sc8 + 4) = sp[1];
    *(uint32_t*)(sc8 + 8) = sp[2];
    int s[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) s[t] = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // 128-value halves
      const int4 q0 = ld16(gb + 1024 + ((2 * h) * 32 + lane) * 16), q1 = ld16(gb + 1024 + ((2 * h + 1) * 32 + lane) * 16);
      const int qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {  // 32-value quarters: groups 8h + 2c (l < 16) and 8h + 2c + 1
        int w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const int low = (qs[i] >> (2 * c)) & 0x03030303, high = ((hm[i] >> (4 * h + c)) & 0x01010101) << 2;
          w[i] = __vsubss4(low | high, 0x04040404);
        }
        const int sc_lo = q3_K_scale_dev(8 * h + 2 * c, sc8) - 32, sc_hi = q3_K_scale_dev(8 * h + 2 * c + 1, sc8) - 32;
        const int64_t sub = u * 8 + 4 * h + c;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          int4 x0, x1;
          load_x32(a, min(t0 + t, a.n_tok - 1), sub, x0, x1);  // past the call's tokens: computed, never used
          s[t] += sc_lo * dot16(w, x0) + sc_hi * dot16(w + 4, x1);
        }
      }
    }
    const float d = ld_half(gb + 3456 + 2 * lane);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s[t]));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const int h = j / 128, c = (j % 128) / 32, l = j % 32;
    const uint8_t qb = gb[1024 + ((2 * h + l / 16) * 32 + lane) * 16 + l % 16];
    const uint8_t hb = gb[((l / 16) * 32 + lane) * 16 + l % 16];
    const int q = ((qb >> (2 * c)) & 3) - (((hb >> (4 * h + c)) & 1) ? 0 : 4);
    const int sc = q3_K_scale_dev(8 * h + 2 * c + l / 16, gb + 3072 + 12 * lane);
    return __fmul_rn(__fmul_rn(ld_half(gb + 3456 + 2 * lane), (float)(sc - 32)), (float)q);
  }
};

struct x32_q2_K {
  static constexpr int unit_values = 256, unit_bytes = 84;
  // fields: scales [1][32][16 B] at 0 (group g: scale low nibble, min high), qs [4][32][16 B] at 512,
  // d dmin [32 x 4 B] at 2560. Element 128h + 32c + l: bits 2c..2c+1 of qs byte 32h + l; group (8h + 2c + l / 16).
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int4 scv = ld16(gb + lane * 16);
    const uint8_t* sc = (const uint8_t*)&scv;
    int s1[NT], s2[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) s1[t] = s2[t] = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int4 q0 = ld16(gb + 512 + ((2 * h) * 32 + lane) * 16), q1 = ld16(gb + 512 + ((2 * h + 1) * 32 + lane) * 16);
      const int qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        int w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = (qs[i] >> (2 * c)) & 0x03030303;
        const int g = 8 * h + 2 * c;
        const int sc_lo = sc[g] & 0xF, m_lo = sc[g] >> 4, sc_hi = sc[g + 1] & 0xF, m_hi = sc[g + 1] >> 4;
        const int64_t sub = u * 8 + 4 * h + c;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          int4 x0, x1;
          load_x32(a, min(t0 + t, a.n_tok - 1), sub, x0, x1);  // past the call's tokens: computed, never used
          s1[t] += sc_lo * dot16(w, x0) + sc_hi * dot16(w + 4, x1);
          s2[t] += m_lo * sum16(x0) + m_hi * sum16(x1);
        }
      }
    }
    const __half2 dm = *(const __half2*)(gb + 2560 + 4 * lane);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      acc[t] = __fadd_rn(acc[t], affine_unit_term(__low2float(dm), __high2float(dm), a.dx[(int64_t)tt * (a.nsub / 8) + u], s1[t], s2[t]));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const int h = j / 128, c = (j % 128) / 32, l = j % 32;
    const uint8_t qb = gb[512 + ((2 * h + l / 16) * 32 + lane) * 16 + l % 16];
    const uint8_t sc = gb[lane * 16 + 8 * h + 2 * c + l / 16];
    const __half2 dm = *(const __half2*)(gb + 2560 + 4 * lane);
    const float dl = __fmul_rn(__low2float(dm), (float)(sc & 0xF)), ml = __fmul_rn(__high2float(dm), (float)(sc >> 4));
    return __fsub_rn(__fmul_rn(dl, (float)((qb >> (2 * c)) & 3)), ml);
  }
};

}  // namespace spindle
