// The block of the tensor-core matmul of the 32-value block types (matmul_mma.cu; its top comment has the design and
// the arithmetic): the stages (weights as int8 in shared memory with their scales) and the block's loop
// (mmq_x32_block). Device code; a host test (test/native/mmq_host_test.cpp) runs it with emulated threads and
// mma.sync (test/native/cuda_host_shim.h).
#pragma once
#include <cstdint>
#include <type_traits>

#include "backend/cuda/mma_int8.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {
namespace mq {

constexpr int k_tile_rows = 64, k_tile_tok = 64, k_stage = 256, k_pad = 16;
constexpr int k_row_bytes = k_stage + k_pad;  // shared row stride: conflict-free fragment loads

struct alignas(16) mmq_smem_base {
  int8_t w[k_tile_rows][k_row_bytes];
  int8_t x[k_tile_tok][k_row_bytes];
  float wa[k_tile_rows][8];  // d of each unit
  float dx[k_tile_tok][8];   // d of each sub-block of the activations
};
// The affine types (q4_1, q5_1: w = d * q + m) also keep each unit's m and each activation sub-block's
// s = dx * sum(q).
struct alignas(16) mmq_smem_affine : mmq_smem_base {
  float wm[k_tile_rows][8];
  float sx[k_tile_tok][8];
};
template <class S>
using mmq_smem = std::conditional_t<S::affine, mmq_smem_affine, mmq_smem_base>;

__device__ __forceinline__ void store16(int8_t* dst, int4 v) { *(int4*)dst = v; }

// Weights of one stage into shared memory. Thread tid: row (tid / 32 % 2) * 32 + tid % 32 of the tile, half
// tid / 64 of the stage's units. gb: group 0's unit u0 (group 1's is n_units units further); n_here: units of
// the stage inside the segment; rows of a missing group are left unwritten (their outputs are never stored).
// q8_0 / q4_0: a unit is one 32-value sub-block; a stage holds up to 8 units.
struct stage_q8_0 {
  static constexpr int stage_units = 8, sub_per_unit = 1, unit_group_bytes = 32 * 34;
  static constexpr bool affine = false;
  __device__ static void load(mmq_smem_base& sm, const uint8_t* gb, int row, int lane, int half, int n_here) {
    for (int k = 4 * half; k < 4 * half + 4 && k < n_here; ++k) {
      const uint8_t* ub = gb + k * unit_group_bytes;
      store16(&sm.w[row][32 * k], *(const int4*)(ub + 64 + lane * 16));
      store16(&sm.w[row][32 * k + 16], *(const int4*)(ub + 64 + (32 + lane) * 16));
      sm.wa[row][k] = ld_half(ub + 2 * lane);
    }
  }
};

struct stage_q4_0 {
  static constexpr int stage_units = 8, sub_per_unit = 1, unit_group_bytes = 32 * 18;
  static constexpr bool affine = false;
  __device__ static void load(mmq_smem_base& sm, const uint8_t* gb, int row, int lane, int half, int n_here) {
    for (int k = 4 * half; k < 4 * half + 4 && k < n_here; ++k) {
      const uint8_t* ub = gb + k * unit_group_bytes;
      const int4 q = *(const int4*)(ub + 64 + lane * 16);
      const int qs[4] = {q.x, q.y, q.z, q.w};
      int lo[4], hi[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        lo[i] = __vsubss4(qs[i] & 0x0F0F0F0F, 0x08080808);
        hi[i] = __vsubss4((qs[i] >> 4) & 0x0F0F0F0F, 0x08080808);
      }
      store16(&sm.w[row][32 * k], make_int4(lo[0], lo[1], lo[2], lo[3]));
      store16(&sm.w[row][32 * k + 16], make_int4(hi[0], hi[1], hi[2], hi[3]));
      sm.wa[row][k] = ld_half(ub + 2 * lane);
    }
  }
};

// The other 32-value block types: their x32 readers' int8 words (x32_types_more.cuh, checked on the host by
// x32_readers_test) into the stage, d (and m) per unit.
template <class Reader>
struct stage_words {
  static constexpr int stage_units = 8, sub_per_unit = 1, unit_group_bytes = 32 * Reader::unit_bytes;
  static constexpr bool affine = Reader::affine;
  __device__ static void load(std::conditional_t<affine, mmq_smem_affine, mmq_smem_base>& sm, const uint8_t* gb, int row,
                              int lane, int half, int n_here) {
    for (int k = 4 * half; k < 4 * half + 4 && k < n_here; ++k) {
      const uint8_t* ub = gb + k * unit_group_bytes;
      int w[8];
      Reader::words_of::words(ub, lane, w);
      store16(&sm.w[row][32 * k], make_int4(w[0], w[1], w[2], w[3]));
      store16(&sm.w[row][32 * k + 16], make_int4(w[4], w[5], w[6], w[7]));
      if constexpr (affine) {
        const __half2 dm = *(const __half2*)(ub + 4 * lane);
        sm.wa[row][k] = __low2float(dm);
        sm.wm[row][k] = __high2float(dm);
      } else {
        sm.wa[row][k] = ld_half(ub + 2 * lane);
      }
    }
  }
};
using stage_q4_1 = stage_words<x32_q4_1>;
using stage_q5_0 = stage_words<x32_q5_0>;
using stage_q5_1 = stage_words<x32_q5_1>;
using stage_iq4_nl = stage_words<x32_iq4_nl>;

template <class S>
struct unit_bytes_of {
  static constexpr int v = S::unit_group_bytes / 32;
};

// One block of the kernel (mmq_x32 in matmul_mma.cu), sm its shared memory; part as the kernel's.
template <class S>
__device__ __forceinline__ void mmq_x32_block(const mmv_shape& sh, const mmv_act& a, int64_t n_groups, float* part,
                                              mmq_smem<S>& sm) {
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t4 = lane & 3;
  const int64_t rel0 = (int64_t)blockIdx.x * k_tile_rows;  // first row of the tile (relative to row0)
  const int64_t grp0 = (sh.row0 + rel0) / 32;              // row0 is a multiple of 32 on this path
  const int t0 = blockIdx.y * k_tile_tok;
  constexpr int ub = unit_bytes_of<S>::v;
  const int load_row = (tid / 32 % 2) * 32 + lane, load_half = tid / 64;
  const int64_t load_grp = grp0 + tid / 32 % 2;

  float total[8][4];
  const int seg_first = part ? (int)blockIdx.z : 0, seg_end = part ? seg_first + 1 : sh.splits;
  for (int seg = seg_first; seg < seg_end; ++seg) {
    const int64_t u0 = seg * sh.n_units / sh.splits, u1 = (seg + 1) * sh.n_units / sh.splits;
    float acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
    for (int64_t u = u0; u < u1; u += S::stage_units) {
      const int n_here = (int)min((int64_t)S::stage_units, u1 - u);  // units of this stage
      const int n_sub = n_here * S::sub_per_unit;
      // weights (zeros for a group past the matrix)
      if (load_grp < n_groups) {
        S::load(sm, sh.w + ((uint64_t)load_grp * sh.n_units + u) * (32 * ub), load_row, lane, load_half, n_here);
      }
      // activations: 64 tokens x 32 * n_sub values, and their per-sub-block d
      const int64_t v0 = u * (k_stage / S::stage_units);
      for (int ch = tid; ch < k_tile_tok * 16; ch += 128) {
        const int tok = ch / 16, c = ch % 16;
        int4 v = make_int4(0, 0, 0, 0);
        if (t0 + tok < a.n_tok && 16 * c < 32 * n_sub) v = *(const int4*)(a.qx + (int64_t)(t0 + tok) * a.n_in + v0 + 16 * c);
        store16(&sm.x[tok][16 * c], v);
      }
      for (int e = tid; e < k_tile_tok * 8; e += 128) {
        const int tok = e / 8, j = e % 8;
        const bool ok = t0 + tok < a.n_tok && j < n_sub;
        sm.dx[tok][j] = ok ? a.dx[(int64_t)(t0 + tok) * a.nsub + v0 / 32 + j] : 0.0f;
        if constexpr (S::affine) sm.sx[tok][j] = ok ? a.sx[(int64_t)(t0 + tok) * a.nsub + v0 / 32 + j] : 0.0f;
      }
      __syncthreads();
      const int r0 = 16 * warp + g, r1 = r0 + 8;
      for (int i = 0; i < n_sub; ++i) {
        const int k0 = 32 * i;
        const int a0 = *(const int*)&sm.w[r0][k0 + 4 * t4], a1 = *(const int*)&sm.w[r1][k0 + 4 * t4];
        const int a2 = *(const int*)&sm.w[r0][k0 + 16 + 4 * t4], a3 = *(const int*)&sm.w[r1][k0 + 16 + 4 * t4];
        const float wa0 = sm.wa[r0][i], wa1 = sm.wa[r1][i];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int tok = 8 * nt + g;
          int c[4];
          mma_k32(c, a0, a1, a2, a3, *(const int*)&sm.x[tok][k0 + 4 * t4], *(const int*)&sm.x[tok][k0 + 16 + 4 * t4]);
          const int tt0 = 8 * nt + 2 * t4;  // this thread's two tokens of the tile: tt0, tt0 + 1
          const float dxs[2] = {sm.dx[tt0][i], sm.dx[tt0 + 1][i]};
          if constexpr (S::affine) {  // add_affine's expression (x32_types_more.cuh)
            const float wm0 = sm.wm[r0][i], wm1 = sm.wm[r1][i], sxs[2] = {sm.sx[tt0][i], sm.sx[tt0 + 1][i]};
#pragma unroll
            for (int e = 0; e < 4; ++e)
              acc[nt][e] = add_affine(acc[nt][e], e < 2 ? wa0 : wa1, e < 2 ? wm0 : wm1, dxs[e & 1], sxs[e & 1], c[e]);
          } else {  // add_sym's (x32_types.cuh)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[nt][e] = add_sym(acc[nt][e], e < 2 ? wa0 : wa1, dxs[e & 1], c[e]);
          }
        }
      }
      __syncthreads();
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) total[nt][e] = seg == seg_first ? acc[nt][e] : __fadd_rn(total[nt][e], acc[nt][e]);
  }
  float* out = part ? part + (int64_t)blockIdx.z * a.n_tok * sh.n_out : sh.y;
  const int64_t ld = part ? sh.n_out : sh.ldy;
  const int64_t r0 = rel0 + 16 * warp + g;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t rel = r0 + (e < 2 ? 0 : 8);
      const int tok = t0 + 8 * nt + 2 * t4 + (e & 1);
      if (rel < sh.n_out && tok < a.n_tok) out[(int64_t)tok * ld + rel] = total[nt][e];
    }
}

}  // namespace mq
}  // namespace spindle
