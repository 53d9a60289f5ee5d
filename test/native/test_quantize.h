// Plain weight quantizers for test models: f32 values -> valid GGUF blocks of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl
// (32-value blocks) and q2_K, q3_K, q4_K, q5_K, q6_K, iq4_xs (256-value super-blocks). Simple max-abs or min/max
// rounding, not llama.cpp's search; the tests only need sane blocks whose dequantized values follow the f32 ones.
// Scales stored as fp16 are re-read before the quants are computed. Invariant: every block written has finite
// scales (for finite inputs within fp16 range) and in-range quants.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_more.h"

namespace test_quantize {

using namespace spindle;

inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// The element of x[0..n) with the largest magnitude, sign kept (0 for an all-zero run).
inline float signed_absmax(const float* x, int n) {
  float m = 0;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > std::fabs(m)) m = x[j];
  return m;
}

// Index of the k_iq4nl_values level nearest to v.
inline int nearest_iq4nl(float v) {
  int best = 0;
  for (int k = 1; k < 16; ++k)
    if (std::fabs(v - k_iq4nl_values[k]) < std::fabs(v - k_iq4nl_values[best])) best = k;
  return best;
}

// Sets the 5-bit quant q of element j (0..31) of a q5_0 / q5_1 block (qs, qh zeroed first).
inline void put_q5(uint8_t* qs, uint8_t* qh, int j, int q) {
  qs[j % 16] |= (uint8_t)((q & 0xF) << (j < 16 ? 0 : 4));
  qh[j / 8] |= (uint8_t)(((q >> 4) & 1) << (j % 8));
}

inline void q4_0(const float* x, block_q4_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_0; ++b, x += QK4_0) {
    float amax = 0;
    for (int j = 0; j < QK4_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 7.0f, id = d > 0 ? 1.0f / d : 0.0f;
    y[b].d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = clampi((int)std::lround(x[j] * id) + 8, 0, 15);
      const int hi = clampi((int)std::lround(x[j + 16] * id) + 8, 0, 15);
      y[b].qs[j] = (uint8_t)(lo | (hi << 4));
    }
  }
}

// A 32-value block's w = d * q + m with q in 0..levels: d = (max - min) / levels and m = min stored as fp16 (d16, m16);
// d, m are the stored values read back and id = 1 / d (0 for a constant block).
inline void affine_block_scale(const float* x, int n, int levels, uint16_t& d16, uint16_t& m16, float& d, float& m,
                               float& id) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < n; ++j) { lo = std::min(lo, x[j]); hi = std::max(hi, x[j]); }
  d16 = f32_to_fp16((hi - lo) / (float)levels);
  m16 = f32_to_fp16(lo);
  d = fp16_to_f32(d16);
  m = fp16_to_f32(m16);
  id = d > 0 ? 1.0f / d : 0.0f;
}

// w = d * q + m, q in 0..15: d = (max - min) / 15, m = min.
inline void q4_1(const float* x, block_q4_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_1; ++b, x += QK4_1) {
    float d, m, id;
    affine_block_scale(x, QK4_1, 15, y[b].d, y[b].m, d, m, id);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int q0 = clampi((int)std::lround((x[j] - m) * id), 0, 15);
      const int q1 = clampi((int)std::lround((x[j + 16] - m) * id), 0, 15);
      y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
  }
}

// w = d * (q - 16), q in 0..31: d = amax / 15.
inline void q5_0(const float* x, block_q5_0* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_0; ++b, x += QK5_0) {
    float amax = 0;
    for (int j = 0; j < QK5_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    y[b].d = f32_to_fp16(amax / 15.0f);
    const float d = fp16_to_f32(y[b].d), id = d > 0 ? 1.0f / d : 0.0f;
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int j = 0; j < QK5_0; ++j) put_q5(y[b].qs, y[b].qh, j, clampi((int)std::lround(x[j] * id) + 16, 0, 31));
  }
}

// w = d * q + m, q in 0..31: d = (max - min) / 31, m = min.
inline void q5_1(const float* x, block_q5_1* y, int64_t n) {
  for (int64_t b = 0; b < n / QK5_1; ++b, x += QK5_1) {
    float d, m, id;
    affine_block_scale(x, QK5_1, 31, y[b].d, y[b].m, d, m, id);
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int j = 0; j < QK5_1; ++j) put_q5(y[b].qs, y[b].qh, j, clampi((int)std::lround((x[j] - m) * id), 0, 31));
  }
}

// w = d * k_iq4nl_values[q]: d = -(the largest-magnitude element) / 127, so that element lands on level -127
// (the levels run -127..113); each element takes the nearest level to x / d.
inline void iq4_nl(const float* x, block_iq4_nl* y, int64_t n) {
  for (int64_t b = 0; b < n / QK4_NL; ++b, x += QK4_NL) {
    y[b].d = f32_to_fp16(-signed_absmax(x, QK4_NL) / 127.0f);
    const float d = fp16_to_f32(y[b].d), id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK4_NL / 2; ++j)
      y[b].qs[j] = (uint8_t)(nearest_iq4nl(x[j] * id) | (nearest_iq4nl(x[j + 16] * id) << 4));
  }
}

// The scales of a q4_K / q5_K super-block (sub-blocks j of 32: w = d * sc_j * q - dmin * m_j, q in 0..levels,
// 6-bit sc and m packed as get_scale_min_k4 reads them): sets d, dmin, scales[12] and the effective
// ds[j] = d * sc_j, ms[j] = dmin * m_j the quants are rounded against.
inline void k_scale_min(const float* x, int levels, uint16_t& d, uint16_t& dmin, uint8_t* scales, float* ds, float* ms) {
  float scale[8], mn[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = 0;
    for (int l = 0; l < 32; ++l) { lo = std::min(lo, x[32 * j + l]); hi = std::max(hi, x[32 * j + l]); }
    scale[j] = (hi - lo) / (float)levels;
    mn[j] = -lo;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, mn[j]);
  }
  d = f32_to_fp16(max_scale / 63.0f);
  dmin = f32_to_fp16(max_min / 63.0f);
  const float dq = fp16_to_f32(d), dmq = fp16_to_f32(dmin);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = (uint8_t)clampi(dq > 0 ? (int)std::lround(scale[j] / dq) : 0, 0, 63);
    m[j] = (uint8_t)clampi(dmq > 0 ? (int)std::lround(mn[j] / dmq) : 0, 0, 63);
    ds[j] = dq * sc[j];
    ms[j] = dmq * m[j];
  }
  for (int j = 0; j < 4; ++j) {
    scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
    scales[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
    scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// q in 0..15, nibble j % 2 of qs[32 * (j / 2) + l] for element 32j + l.
inline void q4_K(const float* x, block_q4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float ds[8], ms[8];
    k_scale_min(x, 15, y[b].d, y[b].dmin, y[b].scales, ds, ms);
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int q = ds[j] > 0 ? clampi((int)std::lround((x[32 * j + l] + ms[j]) / ds[j]), 0, 15) : 0;
        y[b].qs[32 * (j / 2) + l] |= (uint8_t)(q << (4 * (j % 2)));
      }
    }
  }
}

// As q4_K with q in 0..31: low 4 bits in qs as q4_K's, bit 4 of element 32j + l in bit j of qh[l].
inline void q5_K(const float* x, block_q5_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float ds[8], ms[8];
    k_scale_min(x, 31, y[b].d, y[b].dmin, y[b].scales, ds, ms);
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) {
        const int q = ds[j] > 0 ? clampi((int)std::lround((x[32 * j + l] + ms[j]) / ds[j]), 0, 31) : 0;
        y[b].qs[32 * (j / 2) + l] |= (uint8_t)((q & 0xF) << (4 * (j % 2)));
        y[b].qh[l] |= (uint8_t)((q >> 4) << j);
      }
    }
  }
}

// Group g of 16: w = d * (sc_g & 15) * q - dmin * (sc_g >> 4), q in 0..3; group scale (hi - lo) / 3 and min -lo
// (lo <= 0 <= hi) as 4-bit multiples of d = max scale / 15 and dmin = max min / 15. Element 128h + 32c + l is bits
// 2c..2c+1 of qs[32h + l].
inline void q2_K(const float* x, block_q2_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float scale[16], mn[16], max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; ++g) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 16; ++l) { lo = std::min(lo, x[16 * g + l]); hi = std::max(hi, x[16 * g + l]); }
      scale[g] = (hi - lo) / 3.0f;
      mn[g] = -lo;
      max_scale = std::max(max_scale, scale[g]);
      max_min = std::max(max_min, mn[g]);
    }
    y[b].d = f32_to_fp16(max_scale / 15.0f);
    y[b].dmin = f32_to_fp16(max_min / 15.0f);
    const float dq = fp16_to_f32(y[b].d), dmq = fp16_to_f32(y[b].dmin);
    float ds[16], ms[16];
    for (int g = 0; g < 16; ++g) {
      const int sc = clampi(dq > 0 ? (int)std::lround(scale[g] / dq) : 0, 0, 15);
      const int m = clampi(dmq > 0 ? (int)std::lround(mn[g] / dmq) : 0, 0, 15);
      y[b].scales[g] = (uint8_t)(sc | (m << 4));
      ds[g] = dq * sc;
      ms[g] = dmq * m;
    }
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    for (int i = 0; i < QK_K; ++i) {
      const int h = i / 128, c = (i % 128) / 32, l = i % 32, g = i / 16;
      const int q = ds[g] > 0 ? clampi((int)std::lround((x[i] + ms[g]) / ds[g]), 0, 3) : 0;
      y[b].qs[32 * h + l] |= (uint8_t)(q << (2 * c));
    }
  }
}

// Group g of 16: w = d * (sc_g - 32) * q, q in -4..3 (low 2 bits of q + 4 in qs as q2_K's, bit 2 of q + 4 in hmask
// bit 4h + c of byte l for element 128h + 32c + l). Group scale -(its largest-magnitude element) / 4 (that element
// lands on -4), as a 6-bit signed multiple of d = max |group scale| / 31 (packed as q3_K_scale reads it).
inline void q3_K(const float* x, block_q3_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float gs[16], max_gs = 0;
    for (int g = 0; g < 16; ++g) {
      gs[g] = -signed_absmax(x + 16 * g, 16) / 4.0f;
      max_gs = std::max(max_gs, std::fabs(gs[g]));
    }
    y[b].d = f32_to_fp16(max_gs / 31.0f);
    const float d = fp16_to_f32(y[b].d);
    std::fill(std::begin(y[b].scales), std::end(y[b].scales), 0);
    float dl[16];
    for (int g = 0; g < 16; ++g) {
      const int sc = clampi(d > 0 ? (int)std::lround(gs[g] / d) : 0, -32, 31);
      const int s6 = sc + 32;
      if (g < 8) y[b].scales[g] |= (uint8_t)(s6 & 0xF);
      else y[b].scales[g - 8] |= (uint8_t)((s6 & 0xF) << 4);
      y[b].scales[8 + g % 4] |= (uint8_t)((s6 >> 4) << (2 * (g / 4)));
      dl[g] = d * sc;
    }
    std::fill(std::begin(y[b].qs), std::end(y[b].qs), 0);
    std::fill(std::begin(y[b].hmask), std::end(y[b].hmask), 0);
    for (int i = 0; i < QK_K; ++i) {
      const int h = i / 128, c = (i % 128) / 32, l = i % 32, g = i / 16;
      const int q4 = (dl[g] != 0 ? clampi((int)std::lround(x[i] / dl[g]), -4, 3) : 0) + 4;  // 0..7
      y[b].qs[32 * h + l] |= (uint8_t)((q4 & 3) << (2 * c));
      y[b].hmask[l] |= (uint8_t)((q4 >> 2) << (4 * h + c));
    }
  }
}

// Group g of 16: w = d * sc_g * (q - 32), 8-bit sc, 6-bit q (4 low bits in ql, 2 high in qh).
inline void q6_K(const float* x, block_q6_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float gs[16], max_gs = 0;
    for (int g = 0; g < 16; ++g) {
      float amax = 0;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * g + l]));
      gs[g] = amax / 31.0f;
      max_gs = std::max(max_gs, gs[g]);
    }
    y[b].d = f32_to_fp16(max_gs / 127.0f);
    const float d = fp16_to_f32(y[b].d);
    for (int g = 0; g < 16; ++g) y[b].scales[g] = (int8_t)clampi(d > 0 ? (int)std::lround(gs[g] / d) : 0, -128, 127);
    std::fill(std::begin(y[b].ql), std::end(y[b].ql), 0);
    std::fill(std::begin(y[b].qh), std::end(y[b].qh), 0);
    for (int i = 0; i < QK_K; ++i) {
      const int half = i / 128, q4 = (i % 128) / 32, l = i % 32;
      const float s = d * y[b].scales[8 * half + 2 * q4 + l / 16];
      const int q = (s != 0 ? clampi((int)std::lround(x[i] / s), -32, 31) : 0) + 32;
      uint8_t& lb = y[b].ql[64 * half + 32 * (q4 & 1) + l];
      lb = (uint8_t)(q4 >= 2 ? ((lb & 0x0F) | ((q & 0xF) << 4)) : ((lb & 0xF0) | (q & 0xF)));
      y[b].qh[32 * half + l] |= (uint8_t)((q >> 4) << (2 * q4));
    }
  }
}

// Sub-block j of 32: w = d * (ls_j - 32) * k_iq4nl_values[q]. Sub-block scale -(its largest-magnitude element) / 127
// (that element lands on level -127), as a 6-bit signed multiple of d = max |sub-block scale| / 31; each element
// takes the nearest level.
inline void iq4_xs(const float* x, block_iq4_xs* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float ss[8], max_ss = 0;
    for (int j = 0; j < 8; ++j) {
      ss[j] = -signed_absmax(x + 32 * j, 32) / 127.0f;
      max_ss = std::max(max_ss, std::fabs(ss[j]));
    }
    y[b].d = f32_to_fp16(max_ss / 31.0f);
    const float d = fp16_to_f32(y[b].d);
    y[b].scales_h = 0;
    std::fill(std::begin(y[b].scales_l), std::end(y[b].scales_l), 0);
    for (int j = 0; j < 8; ++j) {
      const int ls = clampi(d > 0 ? (int)std::lround(ss[j] / d) : 0, -32, 31);
      const int s = ls + 32;  // 6-bit, as iq4_xs_scale reads it
      y[b].scales_l[j / 2] |= (uint8_t)((s & 0xF) << (4 * (j % 2)));
      y[b].scales_h = (uint16_t)(y[b].scales_h | ((s >> 4) << (2 * j)));
      const float dl = d * ls, id = dl != 0 ? 1.0f / dl : 0.0f;
      const float* xs = x + 32 * j;
      for (int l = 0; l < 16; ++l)
        y[b].qs[16 * j + l] = (uint8_t)(nearest_iq4nl(xs[l] * id) | (nearest_iq4nl(xs[l + 16] * id) << 4));
    }
  }
}

// True when `type` is one of the quantized types above; then out receives the quantized bytes of v.
inline bool quantize(ggml_type type, const std::vector<float>& v, std::vector<uint8_t>& out) {
  const int64_t n = (int64_t)v.size();
  switch (type) {
    case ggml_type::Q8_0: out.resize(n / QK8_0 * sizeof(block_q8_0)); quantize_row_q8_0(v.data(), (block_q8_0*)out.data(), n); return true;
    case ggml_type::Q4_0: out.resize(n / QK4_0 * sizeof(block_q4_0)); q4_0(v.data(), (block_q4_0*)out.data(), n); return true;
    case ggml_type::Q4_K: out.resize(n / QK_K * sizeof(block_q4_K)); q4_K(v.data(), (block_q4_K*)out.data(), n); return true;
    case ggml_type::Q6_K: out.resize(n / QK_K * sizeof(block_q6_K)); q6_K(v.data(), (block_q6_K*)out.data(), n); return true;
    case ggml_type::Q4_1: out.resize(n / QK4_1 * sizeof(block_q4_1)); q4_1(v.data(), (block_q4_1*)out.data(), n); return true;
    case ggml_type::Q5_0: out.resize(n / QK5_0 * sizeof(block_q5_0)); q5_0(v.data(), (block_q5_0*)out.data(), n); return true;
    case ggml_type::Q5_1: out.resize(n / QK5_1 * sizeof(block_q5_1)); q5_1(v.data(), (block_q5_1*)out.data(), n); return true;
    case ggml_type::IQ4_NL: out.resize(n / QK4_NL * sizeof(block_iq4_nl)); iq4_nl(v.data(), (block_iq4_nl*)out.data(), n); return true;
    case ggml_type::Q2_K: out.resize(n / QK_K * sizeof(block_q2_K)); q2_K(v.data(), (block_q2_K*)out.data(), n); return true;
    case ggml_type::Q3_K: out.resize(n / QK_K * sizeof(block_q3_K)); q3_K(v.data(), (block_q3_K*)out.data(), n); return true;
    case ggml_type::Q5_K: out.resize(n / QK_K * sizeof(block_q5_K)); q5_K(v.data(), (block_q5_K*)out.data(), n); return true;
    case ggml_type::IQ4_XS: out.resize(n / QK_K * sizeof(block_iq4_xs)); iq4_xs(v.data(), (block_iq4_xs*)out.data(), n); return true;
    default: return false;
  }
}

}  // namespace test_quantize
