// The block of the pipelined tensor-core matmul of the super-block types (matmul_mmq_k.cu; its top comment has the
// design and the arithmetic): stage layout, loaders, per-type fragment unpacking and unit sums, and the block's
// loop (mmq_kq_block). Device code; a host test (test/native/mmq_host_test.cpp) runs it with emulated threads,
// mma.sync and cp.async (test/native/cuda_host_shim.h).
#pragma once
#include <cstdint>

#include "backend/cuda/mma_int8.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"

namespace spindle {
namespace kq {

constexpr int k_rows = 64, k_tok = 64, k_stages = 3, k_threads = 128;
constexpr int k_xrow = 256 + 16;  // shared activation row stride: conflict-free fragment loads

// Raw x32 bytes of one unit of one 32-row group (backend/pack_x32.h).
// has_min: S2 from the mins; unpacks_scales: the stage's scales go to st.sc once per stage (unpack_scales).
struct kq_q4_K {  // d dmin [32 x 4 B] at 0, scales [32 x 12 B] at 128, qs [8 chunks][32][16 B] at 512
  static constexpr int group_bytes = 32 * 144;
  static constexpr bool has_min = true, unpacks_scales = true;
  static constexpr int qs_at = x32_q4_K::qs_at, qh_at = x32_q4_K::qh_at;
};
// q5_K: q4_K's fields plus the fifth bits (bit j of qh byte l: element 32j + l), between the scales and qs:
// d dmin at 0, scales at 128, qh [2 chunks][32][16 B] at 512, qs [8 chunks][32][16 B] at 1536.
struct kq_q5_K {
  static constexpr int group_bytes = 32 * 176;
  static constexpr bool has_min = true, unpacks_scales = true;
  static constexpr int qs_at = x32_q5_K::qs_at, qh_at = x32_q5_K::qh_at;
};
struct kq_q6_K {  // ql [8][32][16 B] at 0, qh [4][32][16 B] at 4096, scales [32 x 16 B] at 6144, d [32 x 2 B] at 6656
  static constexpr int group_bytes = 32 * 210;
  static constexpr bool has_min = false, unpacks_scales = false;
};
// iq4_xs: d | scales_h | scales_l [32 x 8 B] at 0, qs [8 sub-blocks][32][16 B] at 256 (sub-block j's 16 bytes in
// chunk j, laid out as in q4_0); weights are the iq4_nl levels (x32_types_more.cuh's iq4nl_levels).
struct kq_iq4_xs {
  static constexpr int group_bytes = 32 * 136;
  static constexpr bool has_min = false, unpacks_scales = true;
};
// q3_K: hmask [2][32][16 B] at 0, qs [4][32][16 B] at 1024, scales [32 x 12 B] at 3072, d [32 x 2 B] at 3456
// (x32_types_more.cuh: element 128h + 32c + l, 16-value group 8h + 2c + l / 16).
struct kq_q3_K {
  static constexpr int group_bytes = 32 * 110;
  static constexpr bool has_min = false, unpacks_scales = true;
};
// q2_K: scales [1][32][16 B] at 0 (group g: scale in the low nibble, min in the high; read raw), qs [4][32][16 B] at
// 512 (as q3_K's), d dmin [32 x 4 B] at 2560.
struct kq_q2_K {
  static constexpr int group_bytes = 32 * 84;
  static constexpr bool has_min = true, unpacks_scales = false;
};

// One stage (one unit of K) in shared memory.
template <class W>
struct alignas(16) kq_stage {
  uint8_t w[2][W::group_bytes];  // the tile's two groups, raw
  int8_t x[k_tok][k_xrow];       // q8_256 activations
  float dx[k_tok];               // their group scale
  int8_t sc[k_rows][16];         // q4_K / q5_K: each row's 8 scales, then its 8 mins; iq4_xs: its 8 ls - 32;
                                 // q3_K: its 16 group scales - 32
};

// cp.async (zero-filled when !valid); the host emulation copies at once (a later __syncthreads orders it as the
// wait does on the device).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__)
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::copy_or_zero(dst, src, 16, valid);
#endif
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__)
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::copy_or_zero(dst, src, 4, valid);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ int lds32(const void* p) { return *(const int*)p; }

// Issues the copies of unit u into stage st (every thread takes its share; rows of a group past the matrix and
// tokens past the call are zero-filled).
template <class W>
__device__ __forceinline__ void issue_stage(kq_stage<W>& st, const mmv_shape& sh, const mmv_act& a, int64_t grp0,
                                            int64_t n_groups, int t0, int64_t u) {
  constexpr int chunks = W::group_bytes / 16;
  for (int c = threadIdx.x; c < 2 * chunks; c += k_threads) {
    const int gi = c / chunks, off = (c % chunks) * 16;
    const bool ok = grp0 + gi < n_groups;
    const uint8_t* src = sh.w + ((uint64_t)(ok ? grp0 + gi : 0) * sh.n_units + u) * W::group_bytes + off;
    cp_async16(&st.w[gi][off], src, ok);
  }
  for (int c = threadIdx.x; c < k_tok * 16; c += k_threads) {
    const int tok = c / 16, part = c % 16;
    const bool ok = t0 + tok < a.n_tok;
    cp_async16(&st.x[tok][16 * part], a.qx + (int64_t)(ok ? t0 + tok : 0) * a.n_in + u * 256 + 16 * part, ok);
  }
  if (threadIdx.x < k_tok) {
    const int tok = threadIdx.x;
    const bool ok = t0 + tok < a.n_tok;
    cp_async4(&st.dx[tok], a.dx + (int64_t)(ok ? t0 + tok : 0) * (a.nsub / 8) + u, ok);
  }
}

// q4_K, q5_K: unpacks the 6-bit scales and mins of the stage's 64 rows into st.sc (two threads per row).
template <class W>
__device__ __forceinline__ void unpack_scales(kq_stage<W>& st) {
  const int row = threadIdx.x / 2, half = threadIdx.x % 2;
  const uint32_t* sp = (const uint32_t*)(st.w[row / 32] + 128 + 12 * (row % 32));
  const uint32_t s0 = sp[0], s1 = sp[1], s2 = sp[2];
#pragma unroll
  for (int j = 4 * half; j < 4 * half + 4; ++j) {
    int sc, m;
    q4_K_scale_min_words(j, s0, s1, s2, sc, m);
    st.sc[row][j] = (int8_t)sc;
    st.sc[row][8 + j] = (int8_t)m;
  }
}

// iq4_xs: the 8 signed sub-block scales (ls - 32) of the stage's 64 rows into st.sc (two threads per row).
__device__ __forceinline__ void unpack_scales(kq_stage<kq_iq4_xs>& st) {
  const int row = threadIdx.x / 2, half = threadIdx.x % 2;
  const uint8_t* h = st.w[row / 32] + 8 * (row % 32);
  const uint32_t scales_h = *(const uint16_t*)(h + 2), scales_l = *(const uint32_t*)(h + 4);
#pragma unroll
  for (int j = 4 * half; j < 4 * half + 4; ++j) st.sc[row][j] = (int8_t)(iq4_xs_scale_dev(j, scales_h, scales_l) - 32);
}

// q3_K: the 16 signed group scales (sc - 32) of the stage's 64 rows into st.sc (two threads per row).
__device__ __forceinline__ void unpack_scales(kq_stage<kq_q3_K>& st) {
  const int row = threadIdx.x / 2, half = threadIdx.x % 2;
  const uint8_t* sc = st.w[row / 32] + 3072 + 12 * (row % 32);
#pragma unroll
  for (int g = 8 * half; g < 8 * half + 8; ++g) st.sc[row][g] = (int8_t)(q3_K_scale_dev(g, sc) - 32);
}

// s (one token tile's four outputs: rows r0, r0, r1, r1) += the row's sub-block scale times an mma's sums c.
__device__ __forceinline__ void add_scaled(int (&s)[4], int sc0, int sc1, const int (&c)[4]) {
  s[0] += sc0 * c[0];
  s[1] += sc0 * c[1];
  s[2] += sc1 * c[2];
  s[3] += sc1 * c[3];
}
// The same for a 32-value piece of two 16-value groups (scales l, h per row) from two k16 mmas lo, hi.
__device__ __forceinline__ void add_scaled16(int (&s)[4], int sc0l, int sc0h, int sc1l, int sc1h, const int (&lo)[4],
                                             const int (&hi)[4]) {
  s[0] += sc0l * lo[0] + sc0h * hi[0];
  s[1] += sc0l * lo[1] + sc0h * hi[1];
  s[2] += sc1l * lo[2] + sc1h * hi[2];
  s[3] += sc1l * lo[3] + sc1h * hi[3];
}

// The fifth bits of sub-block j of 4 values (one per byte) as bit 4 of each byte, from a q5_K qh word (0 for q4_K).
template <class W>
__device__ __forceinline__ int fifth_bits(int qh, int j) {
  if constexpr (W::qh_at < 0) return 0;
  else return ((qh >> j) & 0x01010101) << 4;
}

// s[n4][e] += the unit's integer sums of this thread's outputs (rows r0, r1; tokens 8nt + 2t4 + {0, 1} of the
// token tiles nt = 4nh + n4): S1 of
// q4_K / q5_K (and its S2 in s2: the mins replicated over their sub-blocks as an mma operand against the same
// activations give sum_j m_j * bsum_j exactly, on the tensor cores instead of 8 integer multiply-adds per
// output), S of q6_K.
template <class W>  // kq_q4_K, kq_q5_K
__device__ __forceinline__ void unit_sums(const kq_stage<W>& st, int r0, int r1, int g, int t4, int nh,
                                          int (&s)[4][4], int (&s2)[4][4]) {
  const uint8_t* w = st.w[r0 / 32];  // r0 and r1 are in one group
  const int l0 = r0 % 32, l1 = r1 % 32;
  int h0 = 0, h1 = 0, h2 = 0, h3 = 0;  // q5_K: qh words of values 4t4.. (chunk 0) and 16 + 4t4.. (chunk 1), rows r0, r1
  if constexpr (W::qh_at >= 0) {
    h0 = lds32(w + W::qh_at + l0 * 16 + 4 * t4);
    h1 = lds32(w + W::qh_at + l1 * 16 + 4 * t4);
    h2 = lds32(w + W::qh_at + (32 + l0) * 16 + 4 * t4);
    h3 = lds32(w + W::qh_at + (32 + l1) * 16 + 4 * t4);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // qs chunk 2k: values 0..15 of sub-blocks 2k (low nibbles), 2k + 1 (high)
    const int q0 = lds32(w + W::qs_at + ((2 * k) * 32 + l0) * 16 + 4 * t4);
    const int q1 = lds32(w + W::qs_at + ((2 * k) * 32 + l1) * 16 + 4 * t4);
    const int q2 = lds32(w + W::qs_at + ((2 * k + 1) * 32 + l0) * 16 + 4 * t4);
    const int q3 = lds32(w + W::qs_at + ((2 * k + 1) * 32 + l1) * 16 + 4 * t4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * k + h;
      const int a0 = ((q0 >> (4 * h)) & 0x0F0F0F0F) | fifth_bits<W>(h0, j);
      const int a1 = ((q1 >> (4 * h)) & 0x0F0F0F0F) | fifth_bits<W>(h1, j);
      const int a2 = ((q2 >> (4 * h)) & 0x0F0F0F0F) | fifth_bits<W>(h2, j);
      const int a3 = ((q3 >> (4 * h)) & 0x0F0F0F0F) | fifth_bits<W>(h3, j);
      const int sc0 = st.sc[r0][j], sc1 = st.sc[r1][j];
      const int m0 = st.sc[r0][8 + j] * 0x01010101, m1 = st.sc[r1][8 + j] * 0x01010101;  // 0..63 in each byte
#pragma unroll
      for (int n4 = 0; n4 < 4; ++n4) {
        const int tok = 8 * (4 * nh + n4) + g;
        const int b0 = lds32(&st.x[tok][32 * j + 4 * t4]), b1 = lds32(&st.x[tok][32 * j + 16 + 4 * t4]);
        int c[4];
        mma_k32(c, a0, a1, a2, a3, b0, b1);
        mma_k32_acc(s2[n4], m0, m1, m0, m1, b0, b1);
        add_scaled(s[n4], sc0, sc1, c);
      }
    }
  }
}

// iq4_xs: sub-block j's 32 levels of rows r0, r1 from qs chunk j (low nibbles: values 4t4.., high: 16 + 4t4..),
// S = sum_j (ls_j - 32) * dot_j as mmv_x32's reader.
__device__ __forceinline__ void unit_sums(const kq_stage<kq_iq4_xs>& st, int r0, int r1, int g, int t4, int nh,
                                          int (&s)[4][4], int (&)[4][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const int l0 = r0 % 32, l1 = r1 % 32;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t q0 = (uint32_t)lds32(w + 256 + (j * 32 + l0) * 16 + 4 * t4);
    const uint32_t q1 = (uint32_t)lds32(w + 256 + (j * 32 + l1) * 16 + 4 * t4);
    const int a0 = iq4nl_levels(q0 & 0x0F0F0F0Fu), a1 = iq4nl_levels(q1 & 0x0F0F0F0Fu);
    const int a2 = iq4nl_levels((q0 >> 4) & 0x0F0F0F0Fu), a3 = iq4nl_levels((q1 >> 4) & 0x0F0F0F0Fu);
    const int sc0 = st.sc[r0][j], sc1 = st.sc[r1][j];
#pragma unroll
    for (int n4 = 0; n4 < 4; ++n4) {
      const int tok = 8 * (4 * nh + n4) + g;
      int c[4];
      mma_k32(c, a0, a1, a2, a3, lds32(&st.x[tok][32 * j + 4 * t4]), lds32(&st.x[tok][32 * j + 16 + 4 * t4]));
      add_scaled(s[n4], sc0, sc1, c);
    }
  }
}

// q3_K / q2_K: the qs words of 128-value half h for rows l[0], l[1] (the raw layout's qs at qs_at): [row][p], p = 0
// values 4t4.. (qs chunk 2h), p = 1 values 16 + 4t4.. (chunk 2h + 1) of every quarter, two bits each.
__device__ __forceinline__ void half_qs_words(const uint8_t* w, int qs_at, const int (&l)[2], int h, int t4, int (&qw)[2][2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int p = 0; p < 2; ++p) qw[r][p] = lds32(w + qs_at + ((2 * h + p) * 32 + l[r]) * 16 + 4 * t4);
}

// q3_K: per 128-value half h and quarter c, the 32 values of rows r0, r1 from qs chunks 2h (values 4t4..) and
// 2h + 1 (16 + 4t4..) and hmask chunks 0 and 1, as two k16 mmas with their group scales (q6_K's shape): S as
// mmv_x32's reader.
__device__ __forceinline__ void unit_sums(const kq_stage<kq_q3_K>& st, int r0, int r1, int g, int t4, int nh,
                                          int (&s)[4][4], int (&)[4][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const int l[2] = {r0 % 32, r1 % 32};
  int hm[2][2];  // [row][values 0..15 / 16..31]
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int p = 0; p < 2; ++p) hm[r][p] = lds32(w + (p * 32 + l[r]) * 16 + 4 * t4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int qw[2][2];
    half_qs_words(w, 1024, l, h, t4, qw);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int sb = 4 * h + c, g0 = 8 * h + 2 * c;
      int a[2][2];
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
          const int low = (qw[r][p] >> (2 * c)) & 0x03030303, high = ((hm[r][p] >> (4 * h + c)) & 0x01010101) << 2;
          a[r][p] = __vsubss4(low | high, 0x04040404);
        }
      const int sc0l = st.sc[r0][g0], sc0h = st.sc[r0][g0 + 1], sc1l = st.sc[r1][g0], sc1h = st.sc[r1][g0 + 1];
#pragma unroll
      for (int n4 = 0; n4 < 4; ++n4) {
        const int tok = 8 * (4 * nh + n4) + g;
        int lo[4], hi16[4];
        mma_k16(lo, a[0][0], a[1][0], lds32(&st.x[tok][32 * sb + 4 * t4]));
        mma_k16(hi16, a[0][1], a[1][1], lds32(&st.x[tok][32 * sb + 16 + 4 * t4]));
        add_scaled16(s[n4], sc0l, sc0h, sc1l, sc1h, lo, hi16);
      }
    }
  }
}

// q2_K: q3_K's shape without the hmask bit (values 0..3), the 4-bit group scales on S1 and the 4-bit mins on S2
// (an mma of each row's two group mins, replicated over their 16 values, against the same activations: m_g times the
// sum of the group's 16 activations, exactly), as mmv_x32's reader.
__device__ __forceinline__ void unit_sums(const kq_stage<kq_q2_K>& st, int r0, int r1, int g, int t4, int nh,
                                          int (&s)[4][4], int (&s2)[4][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const int l[2] = {r0 % 32, r1 % 32};
  const uint8_t* sc0 = w + l[0] * 16;
  const uint8_t* sc1 = w + l[1] * 16;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int qw[2][2];
    half_qs_words(w, 512, l, h, t4, qw);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int sb = 4 * h + c, g0 = 8 * h + 2 * c;
      int a[2][2];
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int p = 0; p < 2; ++p) a[r][p] = (qw[r][p] >> (2 * c)) & 0x03030303;
      const int b0l = sc0[g0], b0h = sc0[g0 + 1], b1l = sc1[g0], b1h = sc1[g0 + 1];
      const int s0l = b0l & 0xF, s0h = b0h & 0xF, s1l = b1l & 0xF, s1h = b1h & 0xF;
      const int m0l = (b0l >> 4) * 0x01010101, m0h = (b0h >> 4) * 0x01010101;  // 0..15 in each byte
      const int m1l = (b1l >> 4) * 0x01010101, m1h = (b1h >> 4) * 0x01010101;
#pragma unroll
      for (int n4 = 0; n4 < 4; ++n4) {
        const int tok = 8 * (4 * nh + n4) + g;
        const int x0 = lds32(&st.x[tok][32 * sb + 4 * t4]), x1 = lds32(&st.x[tok][32 * sb + 16 + 4 * t4]);
        int lo[4], hi16[4];
        mma_k16(lo, a[0][0], a[1][0], x0);
        mma_k16(hi16, a[0][1], a[1][1], x1);
        add_scaled16(s[n4], s0l, s0h, s1l, s1h, lo, hi16);
        mma_k32_acc(s2[n4], m0l, m1l, m0h, m1h, x0, x1);
      }
    }
  }
}

__device__ __forceinline__ void unit_sums(const kq_stage<kq_q6_K>& st, int r0, int r1, int g, int t4, int nh,
                                          int (&s)[4][4], int (&)[4][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const int l[2] = {r0 % 32, r1 % 32};
#pragma unroll
  for (int n = 0; n < 2; ++n) {  // 128-value halves
    int qh[2][2];                // [row][values 0..15 / 16..31]: qh chunks 2n, 2n + 1
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) qh[r][c] = lds32(w + 4096 + ((2 * n + c) * 32 + l[r]) * 16 + 4 * t4);
#pragma unroll
    for (int p = 0; p < 2; ++p) {  // ql chunks 4n + 2p + c: quarters p (low nibbles) and p + 2 (high)
      int ql[2][2];
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 2; ++c) ql[r][c] = lds32(w + ((4 * n + 2 * p + c) * 32 + l[r]) * 16 + 4 * t4);
#pragma unroll
      for (int hi = 0; hi < 2; ++hi) {
        const int q = p + 2 * hi, sb = 4 * n + q;
        int a[2][2];  // [row][c]
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int lo4 = (ql[r][c] >> (4 * hi)) & 0x0F0F0F0F;
            const int hi2 = ((qh[r][c] >> (2 * q)) & 0x03030303) << 4;
            a[r][c] = __vsubss4(lo4 | hi2, 0x20202020);
          }
        const int8_t* sc0 = (const int8_t*)(w + 6144 + l[0] * 16 + 2 * sb);
        const int8_t* sc1 = (const int8_t*)(w + 6144 + l[1] * 16 + 2 * sb);
        const int sc0l = sc0[0], sc0h = sc0[1], sc1l = sc1[0], sc1h = sc1[1];
#pragma unroll
        for (int n4 = 0; n4 < 4; ++n4) {
          const int tok = 8 * (4 * nh + n4) + g;
          int lo[4], hi16[4];
          mma_k16(lo, a[0][0], a[1][0], lds32(&st.x[tok][32 * sb + 4 * t4]));
          mma_k16(hi16, a[0][1], a[1][1], lds32(&st.x[tok][32 * sb + 16 + 4 * t4]));
          add_scaled16(s[n4], sc0l, sc0h, sc1l, sc1h, lo, hi16);
        }
      }
    }
  }
}

// acc[nt][e] += term(r, dx, e) for this thread's outputs of token tiles 4nh..4nh + 3 (row r0 or r1 by r, the
// token's group scale dx).
template <class Term>
__device__ __forceinline__ void add_unit_terms(const float* dx, int t4, int nh, float (&acc)[8][4], Term term) {
#pragma unroll
  for (int n4 = 0; n4 < 4; ++n4)
#pragma unroll
    for (int tk = 0; tk < 2; ++tk) {
      const int nt = 4 * nh + n4;
      const float dxv = dx[8 * nt + 2 * t4 + tk];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int e = 2 * r + tk;
        acc[nt][e] = __fadd_rn(acc[nt][e], term(r, dxv, n4, e));
      }
    }
}

// acc += the unit's float terms of this thread's outputs.
template <class W>  // kq_q4_K, kq_q5_K: d dmin at 0
__device__ __forceinline__ void add_terms(const kq_stage<W>& st, int r0, int r1, int t4, int nh, const int (&s)[4][4],
                                          const int (&s2)[4][4], float (&acc)[8][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const __half2 dm0 = *(const __half2*)(w + 4 * (r0 % 32)), dm1 = *(const __half2*)(w + 4 * (r1 % 32));
  const float d[2] = {__low2float(dm0), __low2float(dm1)}, dmin[2] = {__high2float(dm0), __high2float(dm1)};
  add_unit_terms(st.dx, t4, nh, acc,
                 [&](int r, float dxv, int n4, int e) { return affine_unit_term(d[r], dmin[r], dxv, s[n4][e], s2[n4][e]); });
}

__device__ __forceinline__ void add_terms(const kq_stage<kq_q6_K>& st, int r0, int r1, int t4, int nh, const int (&s)[4][4],
                                          const int (&)[4][4], float (&acc)[8][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const float d[2] = {ld_half(w + 6656 + 2 * (r0 % 32)), ld_half(w + 6656 + 2 * (r1 % 32))};
  add_unit_terms(st.dx, t4, nh, acc, [&](int r, float dxv, int n4, int e) { return scaled_unit_term(d[r], dxv, s[n4][e]); });
}

__device__ __forceinline__ void add_terms(const kq_stage<kq_iq4_xs>& st, int r0, int r1, int t4, int nh, const int (&s)[4][4],
                                          const int (&)[4][4], float (&acc)[8][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const float d[2] = {ld_half(w + 8 * (r0 % 32)), ld_half(w + 8 * (r1 % 32))};
  add_unit_terms(st.dx, t4, nh, acc, [&](int r, float dxv, int n4, int e) { return scaled_unit_term(d[r], dxv, s[n4][e]); });
}

__device__ __forceinline__ void add_terms(const kq_stage<kq_q3_K>& st, int r0, int r1, int t4, int nh, const int (&s)[4][4],
                                          const int (&)[4][4], float (&acc)[8][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const float d[2] = {ld_half(w + 3456 + 2 * (r0 % 32)), ld_half(w + 3456 + 2 * (r1 % 32))};
  add_unit_terms(st.dx, t4, nh, acc, [&](int r, float dxv, int n4, int e) { return scaled_unit_term(d[r], dxv, s[n4][e]); });
}

__device__ __forceinline__ void add_terms(const kq_stage<kq_q2_K>& st, int r0, int r1, int t4, int nh, const int (&s)[4][4],
                                          const int (&s2)[4][4], float (&acc)[8][4]) {
  const uint8_t* w = st.w[r0 / 32];
  const __half2 dm0 = *(const __half2*)(w + 2560 + 4 * (r0 % 32)), dm1 = *(const __half2*)(w + 2560 + 4 * (r1 % 32));
  const float d[2] = {__low2float(dm0), __low2float(dm1)}, dmin[2] = {__high2float(dm0), __high2float(dm1)};
  add_unit_terms(st.dx, t4, nh, acc,
                 [&](int r, float dxv, int n4, int e) { return affine_unit_term(d[r], dmin[r], dxv, s[n4][e], s2[n4][e]); });
}

// part: null (the block adds its K segments itself), or [splits][n_tok][n_out] with blockIdx.z the segment.
// One block of the kernel (mmq_kq in matmul_mmq_k.cu): smem holds k_stages stages.
template <class W>
__device__ __forceinline__ void mmq_kq_block(const mmv_shape& sh, const mmv_act& a, int64_t n_groups, float* part,
                                             uint8_t* smem) {
  kq_stage<W>* st = (kq_stage<W>*)smem;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t4 = lane & 3;
  const int64_t rel0 = (int64_t)blockIdx.x * k_rows;  // first row of the tile (relative to row0)
  const int64_t grp0 = (sh.row0 + rel0) / 32;         // row0 is a multiple of 32 on this path
  const int t0 = blockIdx.y * k_tok;
  const int r0 = 16 * warp + g, r1 = r0 + 8;          // this thread's rows of the tile

  const int seg_first = part ? (int)blockIdx.z : 0, seg_last = part ? seg_first : sh.splits - 1;
  const int64_t u_begin = seg_first * sh.n_units / sh.splits, u_end = (seg_last + 1) * sh.n_units / sh.splits;
  const int64_t n_u = u_end - u_begin;
#pragma unroll
  for (int i = 0; i < k_stages - 1; ++i) {
    if (i < n_u) issue_stage<W>(st[i], sh, a, grp0, n_groups, t0, u_begin + i);
    cp_async_commit();
  }
  float acc[8][4], total[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = total[nt][e] = 0.0f;
  int seg = seg_first;
  int64_t seg_end = (seg + 1) * sh.n_units / sh.splits;
  for (int64_t i = 0; i < n_u; ++i) {
    kq_stage<W>& cur = st[i % k_stages];
    cp_async_wait<k_stages - 2>();  // this thread's copies of unit i landed
    __syncthreads();                // everyone's; and unit i - 1's stage is free again
    const int64_t next = i + k_stages - 1;
    if (next < n_u) issue_stage<W>(st[next % k_stages], sh, a, grp0, n_groups, t0, u_begin + next);
    cp_async_commit();
    if constexpr (W::unpacks_scales) {
      unpack_scales(cur);
      __syncthreads();
    }
#pragma unroll
    for (int nh = 0; nh < 2; ++nh) {  // half the token tiles at a time (fewer live registers)
      int s[4][4], s2[4][4];         // the unit's S1 (q6_K: S) and S2 (q4_K)
#pragma unroll
      for (int n4 = 0; n4 < 4; ++n4)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n4][e] = s2[n4][e] = 0;
      unit_sums(cur, r0, r1, g, t4, nh, s, s2);
      add_terms(cur, r0, r1, t4, nh, s, s2, acc);
    }
    if (u_begin + i + 1 == seg_end) {  // the segment's last unit: add its sum to the segments before it
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          total[nt][e] = seg == seg_first ? acc[nt][e] : __fadd_rn(total[nt][e], acc[nt][e]);
          acc[nt][e] = 0.0f;
        }
      ++seg;
      seg_end = (seg + 1) * sh.n_units / sh.splits;
    }
  }
  float* out = part ? part + (int64_t)blockIdx.z * a.n_tok * sh.n_out : sh.y;
  const int64_t ld = part ? sh.n_out : sh.ldy;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t rel = rel0 + (e < 2 ? r0 : r1);
      const int tok = t0 + 8 * nt + 2 * t4 + (e & 1);
      if (rel < sh.n_out && tok < a.n_tok) out[(int64_t)tok * ld + rel] = total[nt][e];
    }
}

}  // namespace kq
}  // namespace spindle
