// The tensor-core attention's split over 16-bit K / V stores (native/backend/cuda/attention_mma_split.cuh) on the
// host: one warp of std::threads with mma.sync m16n8k16 emulated (cuda_host_shim.h), against a double-precision
// reference of the same split over the stored (rounded) K / V values and the unrounded f32 q. Every lane's m, l and
// o must match the reference row and dim its registers stand for (the layouts in the header), for f16 and bf16,
// head dims 64 and 128, rows masked at different positions at both ends (a row's positions [lo, n_kv): ends inside
// the split, window starts inside it, rows with none of the split's positions), and scores spread wide enough that
// the probabilities cover many binades.
// Tolerances: q and p are split into hi + lo parts of the type (about 2^-20 / 2^-15 relative), the emulated
// instruction rounds each sum once; 3e-6 (f16) / 1e-4 (bf16) of a result's scale (for o: the sum of p |v| over the
// keys, where a probability below f16's normal range counts as having up to 2^-25 of error, half the subnormal
// spacing its parts are rounded to), far below what a layout error moves (a wrong dim or key changes results by
// O(1)).
// What this cannot check: the device instruction's own accumulation order and rounding (the GPU suite compares the
// kernels with the CPU), the launches and the global-memory K / V readers of attention_mma.cu.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "harness.h"

#include "cuda_host_shim.h"

#include "backend/cuda/attention_mma_split.cuh"

using namespace spindle;

namespace {

template <typename T>
uint16_t round16(float x) {
  return is_bf16_v<T> ? f32_to_bf16(x) : f32_to_fp16(x);
}
template <typename T>
float value16(uint16_t u) {
  return is_bf16_v<T> ? bf16_to_f32(u) : fp16_to_f32(u);
}

struct split_out {
  float m[16], l[16];
  std::vector<float> o;  // [16][HD]
};

// The split of keys j0 .. j0 + 32 for 16 rows through split_partial16 in one emulated warp.
template <int HD, typename T>
split_out run_split(const std::vector<float>& q, const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                    const int64_t (&kv_lo)[16], const int64_t (&n_kv)[16], int64_t j0, float scale) {
  using kvs = kv_shared16<HD>;
  std::vector<uint32_t> qs((size_t)q16_words<HD>()), ks((size_t)(32 * kvs::k_stride)), vs((size_t)(32 * kvs::v_stride));
  for (int r = 0; r < 16; ++r) {
    for (int d = 0; d < HD; d += 4) {
      const float* x = q.data() + r * HD + d;
      q16_store4<HD, T>(qs.data(), r, d, x[0], x[1], x[2], x[3]);
    }
  }
  for (int u = 0; u < 32; ++u) {
    for (int d = 0; d < HD; d += 2) {
      ks[(size_t)(u * kvs::k_stride + d / 2)] = k[(size_t)(u * HD + d)] | (uint32_t)k[(size_t)(u * HD + d + 1)] << 16;
      vs[(size_t)(u * kvs::v_stride + d / 2)] = v[(size_t)(u * HD + d)] | (uint32_t)v[(size_t)(u * HD + d + 1)] << 16;
    }
  }
  split_out out;
  out.o.assign(16 * HD, NAN);
  cuda_host::run_block(32, 0, 0, [&] {
    const int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
    const int64_t lo[2] = {kv_lo[g], kv_lo[g + 8]}, nk[2] = {n_kv[g], n_kv[g + 8]};
    float m[2], l[2], o[HD / 8][4];
    split_partial16<HD, T>(scale, kvs{ks.data(), vs.data(), g, t}, qs.data(), lo, nk, j0, g, t, m, l, o);
    if (t == 0) {
      out.m[g] = m[0], out.m[g + 8] = m[1];
      out.l[g] = l[0], out.l[g + 8] = l[1];
    }
    constexpr int ND = HD / 8;
    for (int nd = 0; nd < ND; ++nd) {
      for (int e = 0; e < 4; ++e) {
        const int row = e < 2 ? g : g + 8, dim = ND * (2 * t + e % 2) + nd;
        out.o[(size_t)(row * HD + dim)] = o[nd][e];
      }
    }
  });
  return out;
}

template <int HD, typename T>
void check_split(std::mt19937& rng, float spread, double tol) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(16 * HD);
  for (float& x : q) x = spread * nd(rng);
  std::vector<uint16_t> k(32 * HD), v(32 * HD);
  for (uint16_t& x : k) x = round16<T>(nd(rng));
  for (uint16_t& x : v) x = round16<T>(nd(rng));
  const int64_t j0 = 64;
  // rows reach every split position, a few, one, or none of this split; most start before it, a few inside it (a
  // sliding window's start: from key 5, 20 or 31 on), one past it (none)
  int64_t kv_lo[16], n_kv[16];
  for (int r = 0; r < 16; ++r) {
    n_kv[r] = r == 3 ? j0 : r == 5 ? j0 + 1 : r == 9 ? j0 + 17 : r == 12 ? j0 + 31 : j0 + 40 + r;
    kv_lo[r] = r == 2 ? j0 - 3 : r == 7 ? j0 + 5 : r == 10 ? j0 + 20 : r == 13 ? j0 + 31 : r == 14 ? j0 + 32 : 0;
  }
  const float scale = 1.0f / std::sqrt((float)HD);
  const split_out got = run_split<HD, T>(q, k, v, kv_lo, n_kv, j0, scale);
  double worst = 0.0;
  bool ok = true;
  for (int r = 0; r < 16; ++r) {
    // the row's keys in this split: [u0, n)
    const int u0 = (int)std::clamp<int64_t>(kv_lo[r] - j0, 0, 32), n = (int)std::clamp<int64_t>(n_kv[r] - j0, 0, 32);
    double s[32], mx = -INFINITY;
    for (int u = u0; u < n; ++u) {
      double dot = 0.0;
      for (int d = 0; d < HD; ++d) dot += (double)q[(size_t)(r * HD + d)] * value16<T>(k[(size_t)(u * HD + d)]);
      s[u] = dot * scale;
      mx = std::max(mx, s[u]);
    }
    if (n <= u0) {
      ok = ok && got.m[r] == -INFINITY && got.l[r] == 0.0f;
      for (int d = 0; d < HD; ++d) ok = ok && got.o[(size_t)(r * HD + d)] == 0.0f;
      continue;
    }
    double l = 0.0;
    std::vector<double> o(HD, 0.0), mag(HD, 0.0);
    for (int u = u0; u < n; ++u) {
      const double p = std::exp(s[u] - mx);
      l += p;
      for (int d = 0; d < HD; ++d) {
        const double x = value16<T>(v[(size_t)(u * HD + d)]);
        o[(size_t)d] += p * x;
        // a probability's error: tol of it, or below f16's normal range half its subnormal spacing (2^-25)
        mag[(size_t)d] += (p + 0x1p-25 / tol) * std::fabs(x);
      }
    }
    const double em = std::fabs(got.m[r] - mx) / std::max(1.0, std::fabs(mx)), el = std::fabs(got.l[r] - l) / l;
    worst = std::max({worst, em, el});
    ok = ok && em <= tol && el <= tol;
    for (int d = 0; d < HD; ++d) {
      const double e = std::fabs(got.o[(size_t)(r * HD + d)] - o[(size_t)d]) / mag[(size_t)d];
      worst = std::max(worst, e);
      ok = ok && e <= tol;
    }
  }
  if (!ok) std::printf("  split16 %s hd %d spread %.1f: worst relative error %.3g (tolerance %.3g)\n",
                       is_bf16_v<T> ? "bf16" : "f16", HD, spread, worst, tol);
  CHECK(ok);
}

}  // namespace

TEST_CASE("attention split over 16-bit K / V (host emulation): every lane's m, l, o match a double reference") {
  std::mt19937 rng(77);
  for (const float spread : {0.5f, 4.0f}) {
    check_split<64, __half>(rng, spread, 3e-6f);
    check_split<128, __half>(rng, spread, 3e-6f);
    check_split<64, __nv_bfloat16>(rng, spread, 1e-4f);
    check_split<128, __nv_bfloat16>(rng, spread, 1e-4f);
  }
}
