// The per-row work of the eight-lane few-token matmul (matmul_mmv8.cu; its top comment has the design): the lanes
// of one unit of a row for each weight type, and a block's share of one job (mmv8_rows). Device code over a few
// CUDA intrinsics, so a host test (test/native/mmv8_host_test.cpp) runs it with emulated threads, shuffles and
// barriers.
#pragma once
#include <cstdint>

#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {

constexpr int k_max_warps = 16;  // S * quads per block
constexpr int k_mmv8_lanes = 32;  // threads per warp
constexpr unsigned k_full = 0xffffffffu;


// 16 quantized activations of token t: values [16c, 16c + 16) of sub-block sub.
__device__ __forceinline__ int4 x16(const mmv_act& a, int t, int64_t sub, int c) {
  return *(const int4*)(a.qx + (int64_t)t * a.n_in + sub * 32 + 16 * c);
}

__device__ __forceinline__ int dot16(int w0, int w1, int w2, int w3, int4 x) {
  int s = 0;
  s = __dp4a(w0, x.x, s);
  s = __dp4a(w1, x.y, s);
  s = __dp4a(w2, x.z, s);
  return __dp4a(w3, x.w, s);
}

// The sum of v over the eight lanes of a row (lanes 8r..8r+7): integers, exact in any order.
__device__ __forceinline__ int row_sum8(int v) {
  v += __shfl_xor_sync(k_full, v, 1);
  v += __shfl_xor_sync(k_full, v, 2);
  return v + __shfl_xor_sync(k_full, v, 4);
}

// q4_K (QhAt < 0) and q5_K: sub-lane s = 2k + c reads qs field s (values 16c..16c+15 of sub-blocks 2k, low
// nibbles, and 2k + 1, high; q5_K: their fifth bits, bits 2k and 2k + 1 of qh field c) and adds the min term of
// sub-block s.
template <int UnitBytes, int QsAt, int QhAt>
struct lanes8_affine {
  static constexpr int unit_bytes = UnitBytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int k = sl / 2, c = sl % 2;
    const int4 q = ld16(gb + QsAt + (sl * 32 + li) * 16);
    int lo[4] = {q.x & 0x0F0F0F0F, q.y & 0x0F0F0F0F, q.z & 0x0F0F0F0F, q.w & 0x0F0F0F0F};
    int hi[4] = {(q.x >> 4) & 0x0F0F0F0F, (q.y >> 4) & 0x0F0F0F0F, (q.z >> 4) & 0x0F0F0F0F, (q.w >> 4) & 0x0F0F0F0F};
    if constexpr (QhAt >= 0) {
      const int4 h = ld16(gb + QhAt + (c * 32 + li) * 16);
      const int hw[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        lo[i] |= ((hw[i] >> (2 * k)) & 0x01010101) << 4;
        hi[i] |= ((hw[i] >> (2 * k + 1)) & 0x01010101) << 4;
      }
    }
    const __half2 dm = *(const __half2*)(gb + 4 * li);
    const uint32_t* sp = (const uint32_t*)(gb + 128 + 12 * li);
    const uint32_t s0 = sp[0], s1w = sp[1], s2w = sp[2];
    int sc_lo, sc_hi, m, unused;
    q4_K_scale_min_words(2 * k, s0, s1w, s2w, sc_lo, unused);
    q4_K_scale_min_words(2 * k + 1, s0, s1w, s2w, sc_hi, unused);
    q4_K_scale_min_words(sl, s0, s1w, s2w, unused, m);
    const int64_t sub0 = u * 8 + 2 * k;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);  // past the call's tokens: computed, never used
      const int p_lo = dot16(lo[0], lo[1], lo[2], lo[3], x16(a, tt, sub0, c));
      const int p_hi = dot16(hi[0], hi[1], hi[2], hi[3], x16(a, tt, sub0 + 1, c));
      const int s1 = row_sum8(sc_lo * p_lo + sc_hi * p_hi);
      const int s2 = row_sum8(m * a.bx[(int64_t)tt * a.nsub + u * 8 + sl]);
      acc[t] = __fadd_rn(acc[t], affine_unit_term(__low2float(dm), __high2float(dm), a.dx[(int64_t)tt * (a.nsub / 8) + u], s1, s2));
    }
  }
};
using lanes8_q4_K = lanes8_affine<x32_q4_K::unit_bytes, x32_q4_K::qs_at, x32_q4_K::qh_at>;
using lanes8_q5_K = lanes8_affine<x32_q5_K::unit_bytes, x32_q5_K::qs_at, x32_q5_K::qh_at>;

// q6_K: sub-lane s = 4n + 2p + c reads ql field s and qh field 2n + c: values 16c..16c+15 of quarters p and
// p + 2 of 128-value half n, each sixteen with its own scale.
struct lanes8_q6_K {
  static constexpr int unit_bytes = x32_q6_K::unit_bytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int n = sl / 4, p = (sl / 2) % 2, c = sl % 2;
    const int4 l = ld16(gb + (sl * 32 + li) * 16);
    const int4 h = ld16(gb + 4096 + ((2 * n + c) * 32 + li) * 16);
    const int ql[4] = {l.x, l.y, l.z, l.w}, qh[4] = {h.x, h.y, h.z, h.w};
    int w[2][4];  // [hi]: quarter p + 2 * hi
#pragma unroll
    for (int hi = 0; hi < 2; ++hi)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int lo4 = (ql[i] >> (4 * hi)) & 0x0F0F0F0F;
        const int hi2 = ((qh[i] >> (2 * (p + 2 * hi))) & 0x03030303) << 4;
        w[hi][i] = __vsubss4(lo4 | hi2, 0x20202020);
      }
    const float d = ld_half(gb + 6656 + 2 * li);
    const int8_t* scp = (const int8_t*)(gb + 6144 + li * 16 + 8 * n + c);
    const int sc0 = scp[2 * p], sc1 = scp[2 * (p + 2)];  // quarters p and p + 2, sixteen c
    const int64_t sub_p = u * 8 + 4 * n + p;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      const int s0 = dot16(w[0][0], w[0][1], w[0][2], w[0][3], x16(a, tt, sub_p, c));
      const int s1 = dot16(w[1][0], w[1][1], w[1][2], w[1][3], x16(a, tt, sub_p + 2, c));
      const int s = row_sum8(sc0 * s0 + sc1 * s1);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s));
    }
  }
};

// iq4_xs: sub-lane s reads qs field s (sub-block s: its levels 0..15 from the low nibbles, 16..31 from the high)
// and adds (ls_s - 32) times their dot.
struct lanes8_iq4_xs {
  static constexpr int unit_bytes = x32_iq4_xs::unit_bytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    int w[8];
    iq4nl_words(ld16(gb + 256 + (sl * 32 + li) * 16), w);
    const uint8_t* h = gb + 8 * li;
    const int ls = iq4_xs_scale_dev(sl, *(const uint16_t*)(h + 2), *(const uint32_t*)(h + 4)) - 32;
    const float d = ld_half(h);
    const int64_t sub = u * 8 + sl;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      const int p = dot16(w[0], w[1], w[2], w[3], x16(a, tt, sub, 0)) + dot16(w[4], w[5], w[6], w[7], x16(a, tt, sub, 1));
      const int s = row_sum8(ls * p);
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s));
    }
  }
};

// q3_K, q2_K: sub-lane s = 4h + c takes quarter c of 128-value half h (32 values: qs fields 2h and 2h + 1, bits
// 2c..2c+1; q3_K also hmask fields 0 and 1, bit 4h + c), its two 16-value groups 8h + 2c and 8h + 2c + 1.
__device__ __forceinline__ void quarter_words(const uint8_t* gb, int qs_at, int li, int h, int c, int (&w)[8]) {
  const int4 q0 = ld16(gb + qs_at + ((2 * h) * 32 + li) * 16), q1 = ld16(gb + qs_at + ((2 * h + 1) * 32 + li) * 16);
  const int qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] = (qs[i] >> (2 * c)) & 0x03030303;
}

struct lanes8_q3_K {
  static constexpr int unit_bytes = x32_q3_K::unit_bytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int h = sl / 4, c = sl % 4;
    int w[8];
    quarter_words(gb, 1024, li, h, c, w);
    const int4 m0 = ld16(gb + li * 16), m1 = ld16(gb + (32 + li) * 16);
    const int hm[8] = {m0.x, m0.y, m0.z, m0.w, m1.x, m1.y, m1.z, m1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = __vsubss4(w[i] | (((hm[i] >> (4 * h + c)) & 0x01010101) << 2), 0x04040404);
    const uint32_t* sp = (const uint32_t*)(gb + 3072 + 12 * li);
    alignas(4) uint8_t sc8[12];
    *(uint32_t*)(sc8 + 0) = sp[0];
    *(uint32_t*)(sc8 + 4) = sp[1];
    *(uint32_t*)(sc8 + 8) = sp[2];
    const int sc_lo = q3_K_scale_dev(8 * h + 2 * c, sc8) - 32, sc_hi = q3_K_scale_dev(8 * h + 2 * c + 1, sc8) - 32;
    const float d = ld_half(gb + 3456 + 2 * li);
    const int64_t sub = u * 8 + sl;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      const int s = row_sum8(sc_lo * dot16(w[0], w[1], w[2], w[3], x16(a, tt, sub, 0)) +
                             sc_hi * dot16(w[4], w[5], w[6], w[7], x16(a, tt, sub, 1)));
      acc[t] = __fadd_rn(acc[t], scaled_unit_term(d, a.dx[(int64_t)tt * (a.nsub / 8) + u], s));
    }
  }
};

struct lanes8_q2_K {
  static constexpr int unit_bytes = x32_q2_K::unit_bytes;
  template <int NT>
  __device__ static void unit(const uint8_t* gb, int li, int sl, int64_t u, const mmv_act& a, int t0, float (&acc)[NT]) {
    const int h = sl / 4, c = sl % 4;
    int w[8];
    quarter_words(gb, 512, li, h, c, w);
    const int b_lo = gb[li * 16 + 8 * h + 2 * c], b_hi = gb[li * 16 + 8 * h + 2 * c + 1];
    const int sc_lo = b_lo & 0xF, m_lo = b_lo >> 4, sc_hi = b_hi & 0xF, m_hi = b_hi >> 4;
    const __half2 dm = *(const __half2*)(gb + 2560 + 4 * li);
    const int64_t sub = u * 8 + sl;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int tt = min(t0 + t, a.n_tok - 1);
      const int4 x0 = x16(a, tt, sub, 0), x1 = x16(a, tt, sub, 1);
      const int s1 = row_sum8(sc_lo * dot16(w[0], w[1], w[2], w[3], x0) + sc_hi * dot16(w[4], w[5], w[6], w[7], x1));
      const int s2 = row_sum8(m_lo * sum16(x0) + m_hi * sum16(x1));
      acc[t] = __fadd_rn(acc[t], affine_unit_term(__low2float(dm), __high2float(dm), a.dx[(int64_t)tt * (a.nsub / 8) + u], s1, s2));
    }
  }
};

// The rows of one job (a block's share of it) at NT tokens: see the top of the file.
// t0: the block's first token (a launch over tokens: blockIdx.y * NT).
template <class Q, int NT>
__device__ __forceinline__ void mmv8_rows(const mmv_shape& sh, int quads, int64_t block, const mmv_act& a,
                                          float (&part)[k_max_warps][NT][4], int t0) {
  const int warp = threadIdx.x / k_mmv8_lanes, lane = threadIdx.x % k_mmv8_lanes;
  const int seg = warp % sh.splits, quad = warp / sh.splits;
  const int rq = lane / 8, sl = lane % 8;
  const int64_t rel = (block * quads + quad) * 4 + rq;
  const bool valid = rel < sh.n_out;
  const int64_t r = sh.row0 + (valid ? rel : sh.n_out - 1);  // a row past the call computes row n_out - 1's sums
  const int64_t g = r / k_mmv8_lanes;
  const int li = (int)(r % k_mmv8_lanes);
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  const int64_t u0 = seg * sh.n_units / sh.splits, u1 = (seg + 1) * sh.n_units / sh.splits;
  const uint8_t* gbase = sh.w + (uint64_t)g * sh.n_units * (k_mmv8_lanes * Q::unit_bytes);
  for (int64_t u = u0; u < u1; ++u) Q::template unit<NT>(gbase + (uint64_t)u * (k_mmv8_lanes * Q::unit_bytes), li, sl, u, a, t0, acc);
  if (sh.splits > 1) {
    if (sl == 0) {
#pragma unroll
      for (int t = 0; t < NT; ++t) part[warp][t][rq] = acc[t];
    }
    __syncthreads();
    if (seg != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float s = part[warp][t][rq];
      for (int k = 1; k < sh.splits; ++k) s = __fadd_rn(s, part[warp + k][t][rq]);
      acc[t] = s;
    }
  }
  if (!valid || sl != 0) return;
#pragma unroll
  for (int t = 0; t < NT; ++t)
    if (t0 + t < a.n_tok) sh.y[(int64_t)(t0 + t) * sh.ldy + rel] = acc[t];
}

// Row r of a q8_256 activation set as a one-token call.
__device__ __forceinline__ mmv_act act_row(const mmv_act& a, int64_t r) {
  mmv_act v = a;
  v.qx = a.qx + r * a.n_in;
  v.dx = a.dx + r * (a.nsub / 8);
  v.bx = a.bx + r * a.nsub;
  v.n_tok = 1;
  return v;
}

// Grouped experts (backend::matmul_experts): block `block` of entry e's rows, i.e. of expert ids[e] (sh: one
// expert's rows, row0 0) at input row e % x_rows, into row e of y [entries, sh.n_out]. The same rows, K segments and
// arithmetic as a call of that expert alone (mmv8_rows), so the bits are matmul_expert's.
template <class Q>
__device__ __forceinline__ void mmv8_expert_rows(mmv_shape sh, int quads, int64_t block, const mmv_act& a,
                                                 const int32_t* ids, int64_t e, int64_t x_rows, float* y,
                                                 float (&part)[k_max_warps][1][4]) {
  sh.row0 = (int64_t)ids[e] * sh.n_out;
  sh.y = y + e * sh.n_out;
  sh.ldy = sh.n_out;
  mmv8_rows<Q, 1>(sh, quads, block, act_row(a, e % x_rows), part, 0);
}

// A tile of a grouped matmul whose entries are sorted by expert (moe_ops.cuh's sort_entries_block) and whose
// activations a are gathered in that order: row block `block` of `expert` for rows [first, first + count) of a
// (count <= 8), into the same rows of y [entries, sh.n_out]. One read of the expert's weights for all of them; each
// entry's rows the bits of that expert alone (mmv8_rows at any token count).
template <class Q>
__device__ __forceinline__ void mmv8_tile_rows(mmv_shape sh, int quads, int64_t block, mmv_act a, int32_t expert,
                                               int32_t first, int32_t count, float* y,
                                               float (&part)[k_max_warps][8][4]) {
  sh.row0 = (int64_t)expert * sh.n_out;
  sh.y = y;
  sh.ldy = sh.n_out;
  a.n_tok = first + count;
  mmv8_rows<Q, 8>(sh, quads, block, a, part, first);
}

}  // namespace spindle
