// Device-side readers of the x32 weight layout (backend/pack_x32.h), one struct per weight type:
//   dot_unit<NT>(gb, lane, u, a, t0, acc): acc[t] += this row's unit u . token t0 + t's activations, in the
//     type's fixed order (one rounding sequence per unit or sub-block, written with _rn intrinsics so no kernel
//     can contract it differently);
//   value(gb, lane, j): the dequantized value j of the unit (get_rows), as the CPU's dequantizers compute it.
// gb points at the group's unit u; lane is the row's index inside its group of 32.
// Quantized types dot against int8 activations (x ~= d * q) in one of two formats (act_format): the 32-value
// block types (q8_0, q4_0 here; q4_1, q5_0, q5_1, iq4_nl in x32_types_more.cuh) against a scale per 32 values
// (with s = d * sum(q)), adding one float term per block; the 256-value super-block types (q4_K, q6_K here;
// q2_K, q3_K, q5_K, iq4_xs there) against a scale per 256 values (one unit) with the integer sum of each 32, so
// a unit's sub-block dots and scales add up exactly in int32 and a unit costs one float term (affine_unit_term /
// scaled_unit_term), whichever kernel computes it. Float types dot against the f32 activations with sequential
// fmaf.
// Host compilers: the readers are plain C++ over a handful of CUDA intrinsics, so a host test
// (test/native/x32_readers_test.cpp) runs them, one lane at a time, after defining that vocabulary itself.
#pragma once
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cstdint>

#include "gguf/ggml_type.h"

namespace spindle {

// How a matmul's activations are quantized: per 32 values (the 32-value block types) or per 256 (the super-block
// types).
enum class act_format : int32_t { q8_32 = 0, q8_256 = 1 };

// The activation format a quantized weight type dots against (host code): per 256 values for the types whose ggml
// blocks hold 256 (the k-quants, iq4_xs), per 32 for the others.
inline act_format act_format_of(ggml_type type) {
  const ggml_type_traits* info = ggml_type_info((uint32_t)type);
  return info && info->block_size == 256 ? act_format::q8_256 : act_format::q8_32;
}

// Activations of one matmul call.   float: xf [n_tok, n_in].   qx [n_tok, n_in] (int8) and
//   q8_32:  dx, sx [n_tok, nsub]: d and d * sum(q) of each 32 values;
//   q8_256: dx [n_tok, nsub / 8]: d of each 256 values; bx [n_tok, nsub]: sum(q) of each 32 values.
struct mmv_act {
  const int8_t* qx;
  const float* dx;
  const float* sx;
  const int32_t* bx;
  const float* xf;
  int64_t n_in;
  int64_t nsub;  // n_in / 32
  int n_tok;     // tokens in the call (t0 + t < n_tok are valid)
  int pad_ = 0;  // no padding bytes: launch signatures compare argument bytes (launch.cuh)
};
static_assert(sizeof(mmv_act) == 5 * sizeof(void*) + 2 * 8 + 2 * 4, "mmv_act has padding");

// One matmul call's weight side: rows [row0, row0 + n_out) of a packed weight, K in `splits` segments.
struct mmv_shape {
  const uint8_t* w;
  int64_t n_units;  // units per row
  int64_t row0;     // first weight row of the call
  int64_t n_out;    // rows of the call
  float* y;         // [n_tok, ldy]
  int64_t ldy;
  int splits;       // S: K segments (warps per row group)
  int pad_;         // no padding bytes (launch.cuh)
};
static_assert(sizeof(mmv_shape) == 2 * sizeof(void*) + 4 * 8 + 2 * 4, "mmv_shape has padding");

__device__ __forceinline__ float ld_half(const uint8_t* p) { return __half2float(*(const __half*)p); }
__device__ __forceinline__ float ld_bf16(const uint8_t* p) { return __bfloat162float(*(const __nv_bfloat16*)p); }
__device__ __forceinline__ int4 ld16(const uint8_t* p) { return *(const int4*)p; }

// The float term of one unit of an affine super-block type (w = d * sc * q - dmin * m: q4_K, q5_K, q2_K) against
// one token's q8_256 group: d, dmin of the row's unit, dx of the token's group, S1 = sum_j sc_j * isum_j and
// S2 = sum_j m_j * bsum_j (exact int32 over the sub-blocks). The one expression every kernel uses (the same bits
// on every path).
__device__ __forceinline__ float affine_unit_term(float d, float dmin, float dx, int s1, int s2) {
  return __fsub_rn(__fmul_rn(__fmul_rn(d, dx), __int2float_rn(s1)), __fmul_rn(__fmul_rn(dmin, dx), __int2float_rn(s2)));
}
// The same for a scaled type (w = d * sc * q: q6_K, q3_K, iq4_xs): S = sum over the sub-blocks of sc * isum.
__device__ __forceinline__ float scaled_unit_term(float d, float dx, int s) {
  return __fmul_rn(__fmul_rn(d, dx), __int2float_rn(s));
}

// The 32 quantized activations of sub-block `sub` of token t, as two 16-byte words (values 0..15, 16..31).
__device__ __forceinline__ void load_x32(const mmv_act& a, int t, int64_t sub, int4& x0, int4& x1) {
  const int4* xq = (const int4*)(a.qx + (int64_t)t * a.n_in + sub * 32);
  x0 = xq[0];
  x1 = xq[1];
}

// Dot of 4 packed int8 words (16 values) with 16 activations.
__device__ __forceinline__ int dot16(const int* w, int4 x) {
  int s = 0;
  s = __dp4a(w[0], x.x, s); s = __dp4a(w[1], x.y, s); s = __dp4a(w[2], x.z, s); s = __dp4a(w[3], x.w, s);
  return s;
}

// Dot of 8 packed int8 words with the 32 quantized activations of sub-block `sub` of token t.
__device__ __forceinline__ int dot32(const int (&w)[8], const mmv_act& a, int t, int64_t sub) {
  int4 x0, x1;
  load_x32(a, t, sub, x0, x1);
  int s = 0;
  s = __dp4a(w[0], x0.x, s); s = __dp4a(w[1], x0.y, s); s = __dp4a(w[2], x0.z, s); s = __dp4a(w[3], x0.w, s);
  s = __dp4a(w[4], x1.x, s); s = __dp4a(w[5], x1.y, s); s = __dp4a(w[6], x1.z, s); s = __dp4a(w[7], x1.w, s);
  return s;
}

// acc + (d * dx) * isum: the block term of the symmetric q8_32 types (q8_0, q4_0, q5_0, iq4_nl).
__device__ __forceinline__ float add_sym(float acc, float d, float dx, int isum) {
  return __fadd_rn(acc, __fmul_rn(__fmul_rn(d, dx), (float)isum));
}

struct x32_q8_0 {
  static constexpr int unit_values = 32, unit_bytes = 34;
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const float d = ld_half(gb + 2 * lane);
    const int4 q0 = ld16(gb + 64 + lane * 16), q1 = ld16(gb + 64 + (32 + lane) * 16);
    const int w[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t < a.n_tok) acc[t] = add_sym(acc[t], d, a.dx[(int64_t)(t0 + t) * a.nsub + u], dot32(w, a, t0 + t, u));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const int8_t q = (int8_t)gb[64 + ((j / 16) * 32 + lane) * 16 + j % 16];
    return ld_half(gb + 2 * lane) * (float)q;
  }
};

struct x32_q4_0 {
  static constexpr int unit_values = 32, unit_bytes = 18;
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const float d = ld_half(gb + 2 * lane);
    const int4 q = ld16(gb + 64 + lane * 16);
    const int qs[4] = {q.x, q.y, q.z, q.w};
    int w[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = __vsubss4(qs[i] & 0x0F0F0F0F, 0x08080808);             // elements 4i..4i+3
      w[i + 4] = __vsubss4((qs[i] >> 4) & 0x0F0F0F0F, 0x08080808);  // elements 16 + 4i..
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t < a.n_tok) acc[t] = add_sym(acc[t], d, a.dx[(int64_t)(t0 + t) * a.nsub + u], dot32(w, a, t0 + t, u));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const uint8_t b = gb[64 + lane * 16 + j % 16];
    const int q = j < 16 ? (b & 0xF) : (b >> 4);
    return ld_half(gb + 2 * lane) * (float)(q - 8);
  }
};

// The 6-bit scale and min of sub-block j of a q4_K super-block (ggml's get_scale_min_k4).
__device__ __forceinline__ void q4_K_scale_min_dev(int j, const uint8_t* s, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The same from the 12 scale bytes as three little-endian words, without branches (the lanes of a warp may
// ask for different j).
__device__ __forceinline__ void q4_K_scale_min_words(int j, uint32_t s0, uint32_t s1, uint32_t s2, int& sc, int& m) {
  const int sh = 8 * (j & 3);
  const int b0 = (s0 >> sh) & 0xFF, b1 = (s1 >> sh) & 0xFF, b2 = (s2 >> sh) & 0xFF;
  sc = j < 4 ? (b0 & 63) : ((b2 & 0xF) | ((b0 >> 6) << 4));
  m = j < 4 ? (b1 & 63) : ((b2 >> 4) | ((b1 >> 6) << 4));
}

// The affine super-block types with 32-value sub-blocks: q4_K (QhAt < 0) and q5_K (x32_types_more.cuh), their
// fields: d dmin [32 x 4 B] at 0, scales [32 x 12 B] at 128 (q4_K's 6-bit packing), q5_K: qh [2 chunks][32][16 B]
// at QhAt (bit j of qh byte l: the fifth bit of element 32j + l), qs [8 chunks][32][16 B] at QsAt (element 32j + l:
// nibble j % 2 of qs byte 32 * (j / 2) + l).
template <int UnitBytes, int QsAt, int QhAt>
struct x32_k_affine {
  static constexpr int unit_values = 256, unit_bytes = UnitBytes, qs_at = QsAt, qh_at = QhAt;
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const __half2 dm = *(const __half2*)(gb + 4 * lane);
    const uint32_t* sp = (const uint32_t*)(gb + 128 + 12 * lane);
    alignas(4) uint8_t sc8[12];
    *(uint32_t*)(sc8 + 0) = sp[0];
    *(uint32_t*)(sc8 + 4) = sp[1];
    *(uint32_t*)(sc8 + 8) = sp[2];
    int qh[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if constexpr (QhAt >= 0) {
      const int4 h0 = ld16(gb + QhAt + lane * 16), h1 = ld16(gb + QhAt + (32 + lane) * 16);
      const int hw[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i) qh[i] = hw[i];
    }
    int s1[NT], s2[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) s1[t] = s2[t] = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // 64-value chunk k: sub-blocks 2k (low nibbles) and 2k + 1 (high)
      const int4 c0 = ld16(gb + QsAt + ((2 * k) * 32 + lane) * 16), c1 = ld16(gb + QsAt + ((2 * k + 1) * 32 + lane) * 16);
      const int qs[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * k + h;
        int w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          w[i] = (qs[i] >> (4 * h)) & 0x0F0F0F0F;
          if constexpr (QhAt >= 0) w[i] |= ((qh[i] >> j) & 0x01010101) << 4;
        }
        int sc, m;
        q4_K_scale_min_dev(j, sc8, sc, m);
        const int64_t sub = u * 8 + j;
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const int tt = min(t0 + t, a.n_tok - 1);  // past the call's tokens: computed, never used
          s1[t] += sc * dot32(w, a, tt, sub);
          s2[t] += m * a.bx[(int64_t)tt * a.nsub + sub];
        }
      }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      acc[t] = __fadd_rn(acc[t], affine_unit_term(__low2float(dm), __high2float(dm), a.dx[(int64_t)tt * (a.nsub / 8) + u], s1[t], s2[t]));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const __half2 dm = *(const __half2*)(gb + 4 * lane);
    const int sb = j / 32, l = j % 32, byte = 32 * (sb / 2) + l;
    const uint8_t b = gb[QsAt + ((byte / 16) * 32 + lane) * 16 + byte % 16];
    int q = (sb & 1) ? (b >> 4) : (b & 0xF);
    if constexpr (QhAt >= 0) q |= ((gb[QhAt + ((l / 16) * 32 + lane) * 16 + l % 16] >> sb) & 1) << 4;
    int sc, m;
    q4_K_scale_min_dev(sb, gb + 128 + 12 * lane, sc, m);
    const float d1 = __fmul_rn(__low2float(dm), (float)sc), m1 = __fmul_rn(__high2float(dm), (float)m);
    return __fsub_rn(__fmul_rn(d1, (float)q), m1);  // never contracted: the CPU dequantizer's bits
  }
};
using x32_q4_K = x32_k_affine<144, 512, -1>;

// The 32 signed 6-bit values (q - 32, as int8 in 8 words) of quarter q of a q6_K 128-value half: low bits from the
// ql words' nibble `hi`, high bits from bits 2q..2q+1 of the qh words (the tensor-core loader uses it too).
__device__ __forceinline__ void q6_K_words(const int (&ql)[8], const int (&qh)[8], int q, int hi, int (&w)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int lo4 = (ql[i] >> (4 * hi)) & 0x0F0F0F0F;
    const int hi2 = ((qh[i] >> (2 * q)) & 0x03030303) << 4;
    w[i] = __vsubss4(lo4 | hi2, 0x20202020);
  }
}

struct x32_q6_K {
  static constexpr int unit_values = 256, unit_bytes = 210;
  // fields: ql [8][32][16 B] at 0, qh [4][32][16 B] at 4096, scales [32 x 16 B] at 6144, d [32 x 2 B] at 6656
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int4 scv = ld16(gb + 6144 + lane * 16);
    const int8_t* sc = (const int8_t*)&scv;
    int s[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) s[t] = 0;
#pragma unroll
    for (int n = 0; n < 2; ++n) {  // 128-value halves
      const int4 h0 = ld16(gb + 4096 + ((2 * n) * 32 + lane) * 16), h1 = ld16(gb + 4096 + ((2 * n + 1) * 32 + lane) * 16);
      const int qh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
      for (int p = 0; p < 2; ++p) {  // ql bytes [64n + 32p, +32): quarters q = p (low nibbles) and p + 2 (high)
        const int4 l0 = ld16(gb + ((4 * n + 2 * p) * 32 + lane) * 16), l1 = ld16(gb + ((4 * n + 2 * p + 1) * 32 + lane) * 16);
        const int ql[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
#pragma unroll
        for (int hi = 0; hi < 2; ++hi) {
          const int q = p + 2 * hi;
          int w[8];
          q6_K_words(ql, qh, q, hi, w);
          const int sc_lo = sc[8 * n + 2 * q], sc_hi = sc[8 * n + 2 * q + 1];
          const int64_t sub = u * 8 + 4 * n + q;
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            const int tt = min(t0 + t, a.n_tok - 1);  // past the call's tokens: computed, never used
            int4 x0, x1;
            load_x32(a, tt, sub, x0, x1);
            s[t] += sc_lo * dot16(w, x0) + sc_hi * dot16(w + 4, x1);
          }
        }
      }
    }
    const float d = ld_half(gb + 6656 + 2 * lane);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s[t]));
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) {
    const int n = j / 128, q = (j % 128) / 32, l = j % 32;
    const int qlb = 64 * n + 32 * (q & 1) + l, qhb = 32 * n + l;
    const uint8_t b = gb[((qlb / 16) * 32 + lane) * 16 + qlb % 16];
    const uint8_t h = gb[4096 + ((qhb / 16) * 32 + lane) * 16 + qhb % 16];
    const int q6 = ((q >= 2 ? (b >> 4) : (b & 0xF)) | (((h >> (2 * q)) & 3) << 4)) - 32;
    const int8_t sc = (int8_t)gb[6144 + lane * 16 + 8 * n + 2 * q + l / 16];
    return __fmul_rn(__fmul_rn(ld_half(gb + 6656 + 2 * lane), (float)sc), (float)q6);
  }
};

// Float weights: a unit is 8 values; acc = fmaf(w_i, x_i, acc) over i ascending (values past n_in are padding
// and skipped).
template <typename Load>
struct x32_float {
  static constexpr int unit_values = 8, unit_bytes = Load::bytes * 8;
  template <int NT>
  __device__ static void dot_unit(const uint8_t* gb, int lane, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    float w[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = value(gb, lane, i);
    const int64_t e0 = u * 8;
    const int n = a.n_in - e0 < 8 ? (int)(a.n_in - e0) : 8;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t >= a.n_tok) continue;
      const float* x = a.xf + (int64_t)(t0 + t) * a.n_in + e0;
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (i < n) acc[t] = __fmaf_rn(w[i], x[i], acc[t]);
    }
  }
  __device__ static float value(const uint8_t* gb, int lane, int j) { return Load::at(gb, lane, j); }
};

struct load_f32 {
  static constexpr int bytes = 4;
  __device__ static float at(const uint8_t* gb, int lane, int j) {
    return *(const float*)(gb + ((j / 4) * 32 + lane) * 16 + (j % 4) * 4);
  }
};
struct load_f16 {
  static constexpr int bytes = 2;
  __device__ static float at(const uint8_t* gb, int lane, int j) { return ld_half(gb + lane * 16 + j * 2); }
};
struct load_bf16 {
  static constexpr int bytes = 2;
  __device__ static float at(const uint8_t* gb, int lane, int j) { return ld_bf16(gb + lane * 16 + j * 2); }
};

using x32_f32 = x32_float<load_f32>;
using x32_f16 = x32_float<load_f16>;
using x32_bf16 = x32_float<load_bf16>;

}  // namespace spindle
