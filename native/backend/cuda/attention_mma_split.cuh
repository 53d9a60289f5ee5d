// One split (32 positions) of a warp tile of the tensor-core attention (attention_mma.cu): the split's softmax
// (a row's positions outside [its window's start, its last position] masked before it), which both store types share,
// and the split over f16 / bf16 K / V stores on 16-bit tensor cores.
//   - f32 stores: attention_mma.cu's split_partial (three tf32 products per multiply).
//   - 16-bit stores: split_partial16 below, mma m16n8k16 with f32 accumulators (mma_f16.cuh). The K / V values are
//     exact in their type, so only q and the probabilities are split, each into hi + lo parts of the type: a
//     score is q_lo . k + q_hi . k, a weighted sum p_lo . v + p_hi . v (two products where f32 stores take three
//     tf32 ones over twice as many k-steps, and no K / V splitting at all). The result is f32 attention over the
//     stored values to about 2^-20 (f16) / 2^-15 (bf16) of q and p, plus the tensor cores' f32 accumulation.
// Both shapes of attention_mma.cu call the same split function for a store type, so a (query row, head) output
// keeps one arithmetic whatever the launch (batch invariance).
// Layouts (lane = 4g + t), the same for both store types:
//   scores s[j][e]: key 8j + 2t + e % 2 of row g (e < 2) / g + 8 (e >= 2), j < 4;
//   weighted sums o[nd][e]: dim (HD / 8) (2t + e % 2) + nd of row g (e < 2) / g + 8.
// 16-bit k-steps: QK k-step i takes dims 16i + 4t .. 16i + 4t + 3 at k = 2t, 2t + 1, 2t + 8, 2t + 9 (q and K alike:
// a lane reads 4 contiguous dims of each), PV k-step kk keys 16kk + {2t, 2t + 1, 2t + 8, 2t + 9} (the score
// registers as they are; the V pairs across keys built with byte permutes).
#pragma once
#include <cstdint>

#include "backend/cuda/mma_f16.cuh"

namespace spindle {

// The split's softmax, in place on the scores of rows g (r = 0) and g + 8 (r = 1): s scaled, masked (-inf) outside
// the row's positions [kv_lo[r], n_kv[r]) (kv_lo: its sliding window's start, 0 without one); exp(s - max); m[r],
// l[r] the row's max and probability sum over the split's 32 keys (8 per lane, then the lane quad in a fixed order).
__device__ __forceinline__ void split_softmax(float scale, float (&s)[4][4], const int64_t (&kv_lo)[2],
                                              const int64_t (&n_kv)[2], int64_t j0, int t, float (&m)[2],
                                              float (&l)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // the row's positions relative to this lane's first key j0 + 2t: [lo, hi)
    const int64_t p0 = j0 + 2 * t, hi = n_kv[r] - p0, lo = kv_lo[r] - p0;
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int u = 8 * j + e;
        float& v = s[j][2 * r + e];
        v = u >= lo && u < hi ? __fmul_rn(v, scale) : -INFINITY;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mu = mx == -INFINITY ? 0.0f : mx;  // a row with no position here: every p is 0
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = s[j][2 * r + e];
        v = expf(__fsub_rn(v, mu));
        sum = __fadd_rn(sum, v);
      }
    }
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
    m[r] = mx;
    l[r] = sum;
  }
}

// A warp tile's q rows for 16-bit stores, split once: words [0, 16 S) the hi parts, [16 S, 32 S) the lo parts,
// row r's dims d, d + 1 in word r S + d / 2 (S = q16_stride: HD / 2 + 8 words, so the quarter warps' 8-byte reads
// of rows g = 0..3 at words 8i + 2t fall on distinct banks).
template <int HD>
__host__ __device__ constexpr int q16_stride() { return HD / 2 + 8; }
template <int HD>
__host__ __device__ constexpr int q16_words() { return 2 * 16 * q16_stride<HD>(); }

// Stores q[r][d .. d + 4) (zeros for padding) split into hi / lo parts.
template <int HD, typename T>
__device__ __forceinline__ void q16_store4(uint32_t* qs, int r, int d, float x0, float x1, float x2, float x3) {
  uint32_t h0, l0, h1, l1;
  split_pair16<T>(x0, x1, h0, l0);
  split_pair16<T>(x2, x3, h1, l1);
  uint32_t* hi = qs + r * q16_stride<HD>() + d / 2;
  uint32_t* lo = hi + 16 * q16_stride<HD>();
  hi[0] = h0, hi[1] = h1;
  lo[0] = l0, lo[1] = l1;
}

// K / V rows of one split as split_partial16 reads them, copied to shared memory (the rows shape): K rows of
// HD / 2 + 8 words (8-byte reads of keys g at words 8i + 2t: distinct banks), V rows of HD / 2 + 4 words (16-byte
// reads of keys 2t + e at words (HD / 16) g: distinct banks per quarter warp). Zeros past the positions and dims.
template <int HD>
struct kv_shared16 {
  static constexpr int k_stride = HD / 2 + 8;
  static constexpr int v_stride = HD / 2 + 4;
  const uint32_t* ks;  // [32][k_stride]
  const uint32_t* vs;  // [32][v_stride]
  int g, t;
  // dims d .. d + 3 of key 8j + g
  __device__ __forceinline__ uint2 k4(int j, int d) const {
    return *reinterpret_cast<const uint2*>(ks + (8 * j + g) * k_stride + d / 2);
  }
  // dims d .. d + 7 of key 8j + 2t + e
  __device__ __forceinline__ uint4 v8(int j, int e, int d) const {
    return *reinterpret_cast<const uint4*>(vs + (8 * j + 2 * t + e) * v_stride + d / 2);
  }
};

// The register pair of dim q (0..7) of two V rows' 8 dims: (x's value, y's value), x's in the low half.
__device__ __forceinline__ uint32_t v_pair(const uint4& x, const uint4& y, int q) {
  const uint32_t wx = q / 2 == 0 ? x.x : q / 2 == 1 ? x.y : q / 2 == 2 ? x.z : x.w;
  const uint32_t wy = q / 2 == 0 ? y.x : q / 2 == 1 ? y.y : q / 2 == 2 ? y.z : y.w;
  return __byte_perm(wx, wy, q % 2 ? 0x7632 : 0x5410);
}

// One split (positions j0 .. j0 + 32) of a warp tile over 16-bit stores of type T: m, l, o as split_softmax and the
// header say (rows g / g + 8 attend [kv_lo, n_kv)). qs: the tile's q rows (q16_store4 layout); kv: k4 / v8 as
// kv_shared16 (any source of the same values).
template <int HD, typename T, typename KV>
__device__ __forceinline__ void split_partial16(float scale, const KV& kv, const uint32_t* qs,
                                                const int64_t (&kv_lo)[2], const int64_t (&n_kv)[2], int64_t j0, int g,
                                                int t, float (&m)[2], float (&l)[2], float (&o)[HD / 8][4]) {
  constexpr int ND = HD / 8, S = q16_stride<HD>();
  float s[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
  for (int i = 0; i < HD / 16; ++i) {
    const uint2 h0 = *reinterpret_cast<const uint2*>(qs + g * S + 8 * i + 2 * t);
    const uint2 h1 = *reinterpret_cast<const uint2*>(qs + (g + 8) * S + 8 * i + 2 * t);
    const uint2 l0 = *reinterpret_cast<const uint2*>(qs + (16 + g) * S + 8 * i + 2 * t);
    const uint2 l1 = *reinterpret_cast<const uint2*>(qs + (24 + g) * S + 8 * i + 2 * t);
    const uint32_t ah[4] = {h0.x, h1.x, h0.y, h1.y}, al[4] = {l0.x, l1.x, l0.y, l1.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 k = kv.k4(j, 16 * i + 4 * t);
      mma_k16_f32<T>(s[j], al, k.x, k.y);  // the small terms first
      mma_k16_f32<T>(s[j], ah, k.x, k.y);
    }
  }
  split_softmax(scale, s, kv_lo, n_kv, j0, t, m, l);
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    // A: probabilities of keys 16kk + 2t, + 1 (score tile 2kk) and 16kk + 8 + 2t, + 1 (tile 2kk + 1)
    uint32_t ph[4], pl[4];
    split_pair16<T>(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
    split_pair16<T>(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
    split_pair16<T>(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
    split_pair16<T>(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
#pragma unroll
    for (int c = 0; c < ND / 8; ++c) {
      // B of n-tiles nd = 8c .. 8c + 7 (column g: dim ND g + nd): keys 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1)
      const int d = ND * g + 8 * c;
      const uint4 v00 = kv.v8(2 * kk, 0, d), v01 = kv.v8(2 * kk, 1, d);
      const uint4 v10 = kv.v8(2 * kk + 1, 0, d), v11 = kv.v8(2 * kk + 1, 1, d);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const uint32_t b0 = v_pair(v00, v01, q), b1 = v_pair(v10, v11, q);
        mma_k16_f32<T>(o[8 * c + q], pl, b0, b1);
        mma_k16_f32<T>(o[8 * c + q], ph, b0, b1);
      }
    }
  }
}

}  // namespace spindle
