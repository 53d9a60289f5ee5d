// Host-test helpers for the GPU's matmul code (x32_readers_test, mmv8_host_test, mmq_host_test): activations
// quantized as the device's quantize kernels do (native/backend/cuda/quantize_act.cuh), and mmv_x32's arithmetic
// (the reference every other path must match bit for bit). Include after cuda_host_shim.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/x32_types.cuh"
#include "backend/pack_x32.h"
#include "kernels_util.h"

namespace spindle {

// Activations quantized as the device's quantize kernels do (quantize_act.cuh): d = amax / 127, q = rint(v / d);
// per 32 values with s = d * sum(q), or per 256 with the int32 sum of each 32. deq[i] = d * q (double).
struct host_act {
  std::vector<int8_t> qx;
  std::vector<float> dx, sx, xf;
  std::vector<int32_t> bx;
  std::vector<double> deq;
  mmv_act view{};
};

inline host_act quantize_act(const std::vector<float>& x, int64_t n_tok, int64_t n_in, act_format fmt, bool quantized) {
  host_act h;
  h.xf = x;
  if (!quantized) {  // float weights read xf only
    h.view = mmv_act{nullptr, nullptr, nullptr, nullptr, h.xf.data(), n_in, n_in / 32, (int)n_tok};
    return h;
  }
  h.qx.resize(x.size());
  h.deq.resize(x.size());
  const int64_t nsub = n_in / 32, group = fmt == act_format::q8_32 ? 32 : 256;
  h.sx.resize(n_tok * nsub);
  h.bx.resize(n_tok * nsub);
  for (int64_t g0 = 0; g0 < n_tok * n_in; g0 += group) {
    float amax = 0;
    for (int64_t i = g0; i < g0 + group; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    for (int64_t i = g0; i < g0 + group; ++i) {
      const int q = amax == 0.0f ? 0 : (int)std::rint(x[i] / d);
      h.qx[i] = (int8_t)q;
      h.deq[i] = (double)d * q;
    }
    h.dx.push_back(d);
    for (int64_t s = g0 / 32; s < (g0 + group) / 32; ++s) {
      int sum = 0;
      for (int64_t i = 32 * s; i < 32 * s + 32; ++i) sum += h.qx[i];
      h.bx[s] = sum;
      h.sx[s] = d * (float)sum;
    }
  }
  h.view = mmv_act{h.qx.data(), h.dx.data(), fmt == act_format::q8_32 ? h.sx.data() : nullptr,
                   fmt == act_format::q8_256 ? h.bx.data() : nullptr, h.xf.data(), n_in, nsub, (int)n_tok};
  return h;
}

// mmv_x32's arithmetic for rows row0 .. row0 + n_out: each K segment's units in order, segments added in order.
template <class Q>
inline std::vector<float> mmv_reference(const std::vector<uint8_t>& packed, const x32_shape& xs, int64_t row0, int64_t n_out,
                             int splits, const mmv_act& a) {
  std::vector<float> y((size_t)(a.n_tok * n_out));
  for (int64_t rel = 0; rel < n_out; ++rel) {
    const int64_t r = row0 + rel;
    const uint8_t* base = packed.data() + (uint64_t)(r / 32) * xs.n_units * (32 * Q::unit_bytes);
    for (int t = 0; t < a.n_tok; ++t) {
      float total = 0.0f;
      for (int seg = 0; seg < splits; ++seg) {
        float acc[1] = {0.0f};
        for (int64_t u = seg * xs.n_units / splits; u < (seg + 1) * xs.n_units / splits; ++u)
          Q::template dot_unit<1>(base + (uint64_t)u * (32 * Q::unit_bytes), (int)(r % 32), u, a, t, acc);
        total = seg == 0 ? acc[0] : __fadd_rn(total, acc[0]);
      }
      y[(size_t)(t * n_out + rel)] = total;
    }
  }
  return y;
}

// Random rows of a weight type packed in the x32 layout, and n_tok tokens of N(0, 1) activations quantized in
// format fmt (kept as floats only when !quantized: float weights).
struct packed_case {
  std::vector<uint8_t> w, packed;  // GGUF rows, their x32 packing
  x32_shape xs;
  host_act act;
};
template <class Rng>
packed_case make_case(ggml_type type, int64_t n_rows, int64_t n_in, int64_t n_tok, act_format fmt, bool quantized,
                      Rng& rng) {
  packed_case c;
  c.w = kernels_test::random_rows(type, n_rows, n_in, rng);
  x32_pack(type, c.w.data(), n_in, n_rows, c.packed);
  c.xs = x32_shape_of(type, n_in, n_rows);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x((size_t)(n_tok * n_in));
  for (float& v : x) v = normal(rng);
  c.act = quantize_act(x, n_tok, n_in, fmt, quantized);
  return c;
}

}  // namespace spindle
