// Plain weight quantizers for test models: f32 values -> valid q8_0 / q4_0 / q4_K / q6_K blocks (simple
// max-abs rounding, not llama.cpp's search; the tests only need sane blocks whose dequantized values follow the
// f32 ones). Invariant: every block written has finite scales and in-range quants.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/quants.h"

namespace test_quantize {

using namespace spindle;

inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

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

// Sub-block j of 32: w = d * sc_j * q - dmin * m_j with 6-bit sc, m (packed as get_scale_min_k4 reads them).
inline void q4_K(const float* x, block_q4_K* y, int64_t n) {
  for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
    float scale[8], mn[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) { lo = std::min(lo, x[32 * j + l]); hi = std::max(hi, x[32 * j + l]); }
      scale[j] = (hi - lo) / 15.0f;
      mn[j] = -lo;
      max_scale = std::max(max_scale, scale[j]);
      max_min = std::max(max_min, mn[j]);
    }
    const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
    y[b].d = f32_to_fp16(d);
    y[b].dmin = f32_to_fp16(dmin);
    const float dq = fp16_to_f32(y[b].d), dmq = fp16_to_f32(y[b].dmin);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = (uint8_t)clampi(dq > 0 ? (int)std::lround(scale[j] / dq) : 0, 0, 63);
      m[j] = (uint8_t)clampi(dmq > 0 ? (int)std::lround(mn[j] / dmq) : 0, 0, 63);
    }
    for (int j = 0; j < 4; ++j) {
      y[b].scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
      y[b].scales[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
      y[b].scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
    for (int j = 0; j < 8; ++j) {
      const float ds = dq * sc[j], ms = dmq * m[j];
      for (int l = 0; l < 32; ++l) {
        const int q = ds > 0 ? clampi((int)std::lround((x[32 * j + l] + ms) / ds), 0, 15) : 0;
        uint8_t& byte = y[b].qs[32 * (j / 2) + l];
        byte = (uint8_t)((j & 1) ? ((byte & 0x0F) | (q << 4)) : ((byte & 0xF0) | q));
      }
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

// True when `type` is one of the quantized types above; then out receives the quantized bytes of v.
inline bool quantize(ggml_type type, const std::vector<float>& v, std::vector<uint8_t>& out) {
  const int64_t n = (int64_t)v.size();
  switch (type) {
    case ggml_type::Q8_0: out.resize(n / QK8_0 * sizeof(block_q8_0)); quantize_row_q8_0(v.data(), (block_q8_0*)out.data(), n); return true;
    case ggml_type::Q4_0: out.resize(n / QK4_0 * sizeof(block_q4_0)); q4_0(v.data(), (block_q4_0*)out.data(), n); return true;
    case ggml_type::Q4_K: out.resize(n / QK_K * sizeof(block_q4_K)); q4_K(v.data(), (block_q4_K*)out.data(), n); return true;
    case ggml_type::Q6_K: out.resize(n / QK_K * sizeof(block_q6_K)); q6_K(v.data(), (block_q6_K*)out.data(), n); return true;
    default: return false;
  }
}

}  // namespace test_quantize
