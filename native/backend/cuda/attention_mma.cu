// Tensor-core attention for head dims up to 128, prompt and decode rows alike. f32 K / V stores: mma.sync m16n8k8
// with tf32 inputs, each multiply done as three, a*b ~ a_hi*b_hi + a_hi*b_lo + a_lo*b_hi with a = a_hi + a_lo in
// tf32 parts (truncated: split_tf32), so scores and weighted sums keep about f32 precision; f16 / bf16 stores:
// mma.sync m16n8k16 over the stored values with q and the probabilities in hi + lo parts (attention_mma_split.cuh);
// fp8 stores (e4m3, e5m2): the f16 code over their values widened to halves as they are read (exact; kv_element.cuh).
// One arithmetic for every (query row, head) of a store type, whose positions are [lo, n_kv) (lo: its sliding
// window's start, kv_lo_at; 0 without a window; n_kv: one past its own position, or past its sequence's last one
// when not causal):
//   - positions are cut into splits of k_mma_split = 32 aligned at position 0; split_partial() gives a split's
//     (max m, probability sum l, unnormalized weighted V o) for the 16 rows of a warp tile, each row's positions
//     outside [lo, n_kv) masked;
//   - a chunk's splits (k_mma_chunk = 256 positions) holding any of the row's positions are folded in split order
//     by fold() (online softmax from an empty state: fold's comment);
//   - a row whose positions lie in one chunk writes o / l; the chunks of a longer row (from the one holding lo) go
//     to attention_merge_kernel (attention.cu).
// A block starts at the split holding its tile's first window start (grid z counts chunks from the chunk holding
// it), and no K / V row below that start is read: a window over a long context reads only the window.
// Two launch shapes run those steps: `rows` (prompts: each warp owns a tile of 16 (query row, head) rows and
// walks the chunk's splits) and `splits` (decode: a block owns one tile, its W warps take different splits,
// folded in order through shared memory; W = 8, or in launches of many blocks as many as a chunk has splits, so
// short contexts leave no warp idle; with args.done, the last block of a tile merges its chunks, so decode needs
// no attention_merge_kernel launch).
// Invariant: a (query row, head) output depends only on its q row, its positions' K/V rows and its positions
// [lo, n_kv), never on the launch shape or on the other rows of the launch (batch invariance).
// Fragment layouts of the tf32 code (PTX m16n8k8 .tf32, lane = 4 g + t): A a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
// B b0 (k t, n g), b1 (k t + 4, n g); C c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1).
#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention_args.cuh"
#include "backend/cuda/attention_mma.h"
#include "backend/cuda/attention_mma_split.cuh"
#include "backend/cuda/block_done.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kv_element.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/quantize_act.cuh"

namespace spindle {

namespace {

constexpr int k_mma_warps = 4;
constexpr int k_splits_per_chunk = k_mma_chunk / k_mma_split;  // 8

// x = hi + lo + r: hi is x truncated to tf32 (its top 19 bits), lo the rest x - hi (exact in f32) truncated too,
// |r| < 2^-20 |x|. Truncation is a mask (cvt.rna.tf32 compiles to four instructions and ran for a third of a
// decode split's instructions).
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = __float_as_uint(x) & 0xffffe000u;
  lo = __float_as_uint(__fsub_rn(x, __uint_as_float(hi))) & 0xffffe000u;
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d += a * b in three tf32 products, the small terms first.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                           float b0, float b1) {
  uint32_t bh[2], bl[2];
  split_tf32(b0, bh[0], bl[0]);
  split_tf32(b1, bh[1], bl[1]);
  mma_tf32(d, al, bh);
  mma_tf32(d, ah, bl);
  mma_tf32(d, ah, bh);
}

__device__ __forceinline__ void split_a(const float (&a)[4], uint32_t (&ah)[4], uint32_t (&al)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) split_tf32(a[e], ah[e], al[e]);
}

// The 16 rows of a warp tile: row r is query row i0 + r / gh, head h0 + r % gh (rows past nq query rows or nh
// heads are padding: q zero, never written).
struct warp_tile {
  int64_t i0;
  int nq, h0, nh, gh, kvh;
  const int32_t* table;  // the sequence's block table, or null (contiguous)
  int64_t n_kv_max;      // positions of the tile's last query row (the most)
  int64_t pos0;          // position of the tile's first query row
  // The window start of the tile's first query row (the least; 0 without a window): the tile's rows are one
  // sequence's, at consecutive positions.
  __device__ __forceinline__ int64_t kv_lo(const attn_args& a) const { return kv_lo_at(a, pos0); }
};

// A row of a warp tile, which attends positions [lo(a), n_kv(a)): from its window's start to its own position
// (causal) or to its sequence's last one (the tile's last row's). Kept as its position + 1 in 32 bits (one value per
// row, its positions derived where they are needed: the kernels' registers stay near the causal-only code's); a
// padding row (not ok) attends none.
struct row_info {
  bool ok;
  int64_t oh;   // (query row, head) index: output row
  int32_t p1;   // the row's position + 1 (0: padding; positions stay below 2^31: attention_launch checks)
  int32_t end;  // one past the tile's last row's last position (warp_tile::n_kv_max)
  __device__ __forceinline__ int64_t lo(const attn_args& a) const { return p1 > 0 ? kv_lo_at(a, p1 - 1) : 0; }
  __device__ __forceinline__ int64_t n_kv(const attn_args& a) const { return p1 <= 0 ? 0 : a.causal ? p1 : end; }
};

__device__ __forceinline__ row_info tile_row(const attn_args& a, const warp_tile& w, int r) {
  row_info ri{false, 0, 0, (int32_t)w.n_kv_max};
  const int qi = r / w.gh, h = r % w.gh;
  if (qi < w.nq && h < w.nh) {
    ri.ok = true;
    ri.oh = (w.i0 + qi) * a.n_head + w.h0 + h;
    ri.p1 = (int32_t)(w.pos0 + qi + 1);
  }
  return ri;
}

// The 16 q rows of a warp tile into shared memory (zeros for padding rows and dims past hd_k), by threads x of n (the
// caller synchronizes them): for f32 stores as floats, qs[16][HD + 16] (the +16 keeps a quarter warp's 16-byte
// reads of rows g and g + 1 on different banks); for 16-bit stores (T) split into hi / lo parts of T in
// q16_store4's layout, in the same shared array.
template <int HD, typename T>
__device__ __forceinline__ void load_q(const attn_args& a, const warp_tile& w, int x, int n, bool vec,
                                       float* qs) {
  for (int e = x; e < 16 * HD / 4; e += n) {
    const int r = e / (HD / 4), d = 4 * (e % (HD / 4));
    const row_info ri = tile_row(a, w, r);
    const float4 v = ri.ok ? load4_kv(a.q + ri.oh * a.hd_k, d, a.hd_k, vec) : make_float4(0, 0, 0, 0);
    if constexpr (sizeof(T) == 2) q16_store4<HD, T>(reinterpret_cast<uint32_t*>(qs), r, d, v.x, v.y, v.z, v.w);
    else *reinterpret_cast<float4*>(qs + r * (HD + 16) + d) = v;
  }
}

// This lane's K / V store rows of one split (-1 outside the tile's positions [kv_lo, n_kv_max): never read): K keys
// 8j + g at krow[j], V keys 8j + 2t + e at vrow[2j + e] (split_partial's and split_partial16's fragments).
struct split_rows {
  int32_t krow[4];
  int32_t vrow[8];
  __device__ __forceinline__ split_rows(const attn_args& a, const warp_tile& w, int64_t j0, int g, int t) {
    // the tile's positions as keys of the split: [lo, hi)
    const int lo = (int)max(w.kv_lo(a) - j0, (int64_t)0), hi = (int)min(w.n_kv_max - j0, (int64_t)k_mma_split);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int uk = 8 * j + g;
      krow[j] = uk >= lo && uk < hi ? (int32_t)kv_row(w.table, a.block_size, j0 + uk) : -1;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int uv = 8 * j + 2 * t + e;
        vrow[2 * j + e] = uv >= lo && uv < hi ? (int32_t)kv_row(w.table, a.block_size, j0 + uv) : -1;
      }
    }
  }
};

// The K / V store rows of one split a lane reads from global memory (elements E: float, or a 16-bit or fp8 type):
// the head's rows, their strides and dims, and the lane's split_rows. kv_global and kv_global16 read them.
template <typename E>
struct kv_store_rows {
  const E* kb;
  const E* vb;
  int64_t ks, vs;
  int hd_k, hd_v;
  bool vec;
  split_rows rows;
  __device__ __forceinline__ kv_store_rows(const attn_args& a, const warp_tile& w, int64_t j0, int g, int t, bool vec_)
      : kb((const E*)a.k + (int64_t)w.kvh * a.hd_k), vb((const E*)a.v + (int64_t)w.kvh * a.hd_v), ks(a.k_stride),
        vs(a.v_stride), hd_k(a.hd_k), hd_v(a.hd_v), vec(vec_), rows(a, w, j0, g, t) {}
};

// K / V rows of one split as split_partial reads them, four floats from dim d of key u (0..31 within the split),
// zeros past the head dims and outside the tile's positions: kv_global reads the f32 store (the split shape: a warp
// per split), kv_shared the block's copy in shared memory (the rows shape: four warps on the same split). The
// values are the same either way, so the bits are.
struct kv_global : kv_store_rows<float> {
  using kv_store_rows::kv_store_rows;
  __device__ __forceinline__ float4 k(int j, int d) const {
    return rows.krow[j] >= 0 ? load4_kv(kb + rows.krow[j] * ks, d, hd_k, vec) : make_float4(0, 0, 0, 0);
  }
  __device__ __forceinline__ float4 v(int j, int e, int d) const {
    const int32_t r = rows.vrow[2 * j + e];
    return r >= 0 ? load4_kv(vb + r * vs, d, hd_v, vec) : make_float4(0, 0, 0, 0);
  }
};

// kv_shared16's values read from a 16-bit or fp8 store of T (the split shape, and the rows shape of heads over 64
// dims): load4_kv16 widens fp8 values to halves as it reads.
template <typename T>
struct kv_global16 : kv_store_rows<T> {
  using kv_store_rows<T>::kv_store_rows;
  __device__ __forceinline__ uint2 k4(int j, int d) const {
    const int32_t r = this->rows.krow[j];
    return r >= 0 ? load4_kv16(this->kb + r * this->ks, d, this->hd_k, this->vec) : make_uint2(0, 0);
  }
  __device__ __forceinline__ uint4 v8(int j, int e, int d) const {
    const int32_t r = this->rows.vrow[2 * j + e];
    if (r < 0) return make_uint4(0, 0, 0, 0);
    const T* row = this->vb + r * this->vs;
    const uint2 x = load4_kv16(row, d, this->hd_v, this->vec), y = load4_kv16(row, d + 4, this->hd_v, this->vec);
    return make_uint4(x.x, x.y, y.x, y.y);
  }
};

template <int HD>
struct kv_shared {
  static constexpr int k_stride = HD + 16;  // a quarter warp's 16-byte K reads (rows g, g + 1) on distinct banks
  static constexpr int v_stride = HD + 4;
  const float* ks;  // [32][k_stride]
  const float* vs;  // [32][v_stride]
  int g, t;
  __device__ __forceinline__ float4 k(int j, int d) const {
    return *reinterpret_cast<const float4*>(ks + (8 * j + g) * k_stride + d);
  }
  __device__ __forceinline__ float4 v(int j, int e, int d) const {
    return *reinterpret_cast<const float4*>(vs + (8 * j + 2 * t + e) * v_stride + d);
  }
};

// One split (positions j0 .. j0 + 32) of a warp tile: m[r], l[r] of rows g (r = 0) and g + 8 (r = 1), o[nd][e] the
// weighted V sums (not divided by l) of row g (e 0, 1) / g + 8 (e 2, 3) at dims (HD / 8) (2t + e % 2) + nd.
// Positions of a row outside [kv_lo, n_kv) are masked (split_softmax).
// q: the tile's rows in shared memory (load_q). A fragments: k-step 2i takes dims 16i + 4t (slot t) and 16i + 4t + 1
// (slot t + 4), k-step 2i + 1 the next two, so a lane reads 4 contiguous dims of q and of a K row per two k-steps.
template <int HD, typename KV>
__device__ __forceinline__ void split_partial(const attn_args& a, const KV& kv, const float* qs,
                                              const int64_t (&kv_lo)[2], const int64_t (&n_kv)[2], int64_t j0, int g,
                                              int t, float (&m)[2], float (&l)[2], float (&o)[HD / 8][4]) {
  constexpr int ND = HD / 8;  // V n-tiles; column g of n-tile nd is dim ND g + nd (a lane reads ND contiguous dims)
  // scores: s[j][e], key 8j + 2t + e % 2 of row g / g + 8
  float s[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll 2
  for (int i = 0; i < HD / 16; ++i) {
    const float4 q0 = *reinterpret_cast<const float4*>(qs + g * (HD + 16) + 16 * i + 4 * t);
    const float4 q1 = *reinterpret_cast<const float4*>(qs + (g + 8) * (HD + 16) + 16 * i + 4 * t);
    uint32_t ah0[4], al0[4], ah1[4], al1[4];
    split_a({q0.x, q1.x, q0.y, q1.y}, ah0, al0);  // k-step 2i
    split_a({q0.z, q1.z, q0.w, q1.w}, ah1, al1);  // k-step 2i + 1
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 kx = kv.k(j, 16 * i + 4 * t);
      mma_3xtf32(s[j], ah0, al0, kx.x, kx.y);
      mma_3xtf32(s[j], ah1, al1, kx.z, kx.w);
    }
  }
  split_softmax(a.scale, s, kv_lo, n_kv, j0, t, m, l);
  // weighted V: k-step j takes keys 8j + 2t (slot t) and 8j + 2t + 1 (slot t + 4): the score registers as they are
#pragma unroll
  for (int nd = 0; nd < ND; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t ah[4], al[4];
    split_a({s[j][0], s[j][2], s[j][1], s[j][3]}, ah, al);
    float v0[ND], v1[ND];
#pragma unroll
    for (int c = 0; c < ND / 4; ++c) {
      const float4 x0 = kv.v(j, 0, ND * g + 4 * c), x1 = kv.v(j, 1, ND * g + 4 * c);
      v0[4 * c] = x0.x, v0[4 * c + 1] = x0.y, v0[4 * c + 2] = x0.z, v0[4 * c + 3] = x0.w;
      v1[4 * c] = x1.x, v1[4 * c + 1] = x1.y, v1[4 * c + 2] = x1.z, v1[4 * c + 3] = x1.w;
    }
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) mma_3xtf32(o[nd], ah, al, v0[nd], v1[nd]);
  }
}

// Folds a split's (m, l, o) into a row's running (M, L, O), the same expression wherever it runs (registers of
// the rows shape, shared memory of the splits shape): the weights of both sides from the new maximum. A row's (M, L,
// O) in a chunk starts empty, (-inf, 0, 0), and folds in its splits holding any of its positions in order (the first
// fold gives the split's (m, l, o) exactly, but o = -0 becomes +0); a split holding none (m = -inf: below the row's
// window or past its last position) is skipped. So M stays -inf in a chunk holding none of the row's positions.
struct fold_weights {
  float mx, a, b;
};
__device__ __forceinline__ fold_weights fold(float M, float m) {
  const float mx = fmaxf(M, m);
  return {mx, expf(__fsub_rn(M, mx)), expf(__fsub_rn(m, mx))};
}
__device__ __forceinline__ float fold_value(float acc, float x, const fold_weights& f) {
  return __fmaf_rn(acc, f.a, __fmul_rn(x, f.b));
}

// Splits of a chunk a row reaches (the chunk's first ones, up to the one holding position n_kv - 1).
__device__ __forceinline__ int splits_reached(int64_t n_kv, int64_t chunk_start) {
  const int64_t n = (n_kv - chunk_start + k_mma_split - 1) / k_mma_split;
  return n <= 0 ? 0 : n >= k_splits_per_chunk ? k_splits_per_chunk : (int)n;
}

// The first of the chunk's splits (index within the chunk at chunk_start) that holds a position >= lo: 0 when lo lies
// before the chunk.
__device__ __forceinline__ int first_split(int64_t lo, int64_t chunk_start) {
  return lo <= chunk_start ? 0 : (int)((lo - chunk_start) / k_mma_split);
}

// Writes a row's chunk result: o / l when the row's positions lie in one chunk, else (max, sum, o) for
// attention_merge_kernel as the row's partial chunk - (its first chunk).
__device__ __forceinline__ void write_result(const attn_args& a, const row_info& ri, int64_t chunk, int d, float M,
                                             float L, float O) {
  if (d >= a.hd_v) return;
  const int64_t lo = ri.lo(a);
  if (spans_of(lo, ri.n_kv(a), k_mma_chunk) == 1) {
    a.out[ri.oh * a.hd_v + d] = __fdiv_rn(O, L);
  } else {
    float* pr = a.part + (ri.oh * a.n_split_max + chunk - lo / k_mma_chunk) * (a.hd_v + 2);
    if (d == 0) {
      pr[0] = M;
      pr[1] = L;
    }
    pr[2 + d] = O;
  }
}

// The launch's tile of this block and warp: tiles[2 blockIdx.x ..] = (first query row, query rows); the warp takes
// query rows [first_q, first_q + rq) of it. blockIdx.y = KV head x head group.
__device__ __forceinline__ bool setup_tile(const attn_args& a, const int32_t* tiles, int rq, int gh, int first_q,
                                           warp_tile& w) {
  const int64_t i0 = tiles[2 * blockIdx.x];
  const int n = tiles[2 * blockIdx.x + 1];
  if (first_q >= n) return false;
  const int group_heads = a.n_head / a.n_head_kv;
  const int hgroups = (group_heads + gh - 1) / gh;
  w.kvh = blockIdx.y / hgroups;
  w.h0 = w.kvh * group_heads + (blockIdx.y % hgroups) * gh;
  w.nh = min(gh, w.kvh * group_heads + group_heads - w.h0);
  w.gh = gh;
  w.i0 = i0 + first_q;
  w.nq = min(rq, n - first_q);
  const int32_t seq = a.tok_seq[w.i0];
  w.table = a.tables ? a.tables + (int64_t)seq * a.table_stride : nullptr;
  w.n_kv_max = n_kv_of(a, w.i0 + w.nq - 1, seq);
  w.pos0 = row_pos(a, w.i0, seq);
  return true;
}

// One split's K and V rows (32 positions from j0, zeros outside [kv_lo, n_kv_max), which are not read, and past the
// head dims) for the rows shape's shared copy: thread x of 128 holds four values x + 128 i (i < HD / 8), K rows
// first, then V rows, HD / 4 per row: floats of an f32 store (T float) in kv_shared's layout, or the 16-bit values
// of a 16-bit store (fp8 ones widened to halves), two to a word, in kv_shared16's (the shared arrays are the
// kernel's float arrays, reinterpreted).
template <int HD, typename T>
struct kv_stage {
  static constexpr bool H16 = !std::is_same<T, float>::value;
  using four = std::conditional_t<H16, uint2, float4>;
  static constexpr int n = HD / 8;
  four r[n];
  __device__ __forceinline__ void load(const attn_args& a, const warp_tile& bt, int64_t j0, bool vec) {
    const int64_t lo = bt.kv_lo(a);
#pragma unroll
    for (int i = 0; i < n; ++i) {
      const int e = threadIdx.x + k_mma_warps * k_warp * i, is_v = e >= 32 * HD / 4, u = (e % (32 * HD / 4)) / (HD / 4);
      const int d = 4 * (e % (HD / 4));
      const int64_t pos = j0 + u;
      r[i] = four{};
      if (pos >= lo && pos < bt.n_kv_max) {
        const int64_t row = kv_row(bt.table, a.block_size, pos);
        if constexpr (H16) {
          r[i] = is_v ? load4_kv16((const T*)a.v + row * a.v_stride + (int64_t)bt.kvh * a.hd_v, d, a.hd_v, vec)
                      : load4_kv16((const T*)a.k + row * a.k_stride + (int64_t)bt.kvh * a.hd_k, d, a.hd_k, vec);
        } else {
          r[i] = is_v ? load4_kv(a.v + row * a.v_stride + (int64_t)bt.kvh * a.hd_v, d, a.hd_v, vec)
                      : load4_kv(a.k + row * a.k_stride + (int64_t)bt.kvh * a.hd_k, d, a.hd_k, vec);
        }
      }
    }
  }
  __device__ __forceinline__ void store(float* ks, float* vs) const {
#pragma unroll
    for (int i = 0; i < n; ++i) {
      const int e = threadIdx.x + k_mma_warps * k_warp * i, is_v = e >= 32 * HD / 4, u = (e % (32 * HD / 4)) / (HD / 4);
      const int d = 4 * (e % (HD / 4));
      if constexpr (H16) {
        uint32_t* dst = is_v ? reinterpret_cast<uint32_t*>(vs) + u * kv_shared16<HD>::v_stride + d / 2
                             : reinterpret_cast<uint32_t*>(ks) + u * kv_shared16<HD>::k_stride + d / 2;
        *reinterpret_cast<uint2*>(dst) = r[i];
      } else {
        float* dst = is_v ? vs + u * kv_shared<HD>::v_stride + d : ks + u * kv_shared<HD>::k_stride + d;
        *reinterpret_cast<float4*>(dst) = r[i];
      }
    }
  }
};

// Prompts: warp w owns query rows [w rq, (w + 1) rq) of the block's tile (16 (row, head) rows), walks the chunk's
// splits in order (from the one holding its first row's window start) and folds them in registers. Head dims up to
// 64: the block copies each split's K / V rows into shared memory once for its four warps (the next split's rows
// load into registers while the warps compute); wider heads (shared memory too small for both copies): each warp
// reads the store.
template <int HD, typename T>
__global__ void __launch_bounds__(k_mma_warps * k_warp, HD <= 64 ? 3 : 1) attention_mma_rows(attn_args a,
                                                                                             const int32_t* tiles,
                                                                                             int rq, int gh, int vec) {
  pdl_begin();
  constexpr bool staged = HD <= 64;
  constexpr int ND = HD / 8;
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp, g = lane / 4, t = lane % 4;
  warp_tile bt, w;  // the block's whole tile, this warp's rows
  setup_tile(a, tiles, 0x7fffffff, gh, 0, bt);
  const int64_t chunk = bt.kv_lo(a) / k_mma_chunk + blockIdx.z, chunk_start = chunk * k_mma_chunk;
  if (chunk_start >= bt.n_kv_max) return;  // uniform over the block
  const bool active = setup_tile(a, tiles, rq, gh, warp * rq, w) && chunk_start < w.n_kv_max &&
                      w.kv_lo(a) < chunk_start + k_mma_chunk;
  constexpr bool h16 = !std::is_same<T, float>::value;  // a 16-bit or fp8 store: the 16-bit tensor-core code
  using MT = kv_mma_t<T>;
  static_assert(q16_words<HD>() <= 16 * (HD + 16), "a 16-bit store's split q fits the f32 q rows");
  __shared__ __align__(16) float sm_q[k_mma_warps][16 * (HD + 16)];
  __shared__ __align__(16) float sm_k[!staged ? 1 : h16 ? 32 * kv_shared16<HD>::k_stride : 32 * kv_shared<HD>::k_stride];
  __shared__ __align__(16) float sm_v[!staged ? 1 : h16 ? 32 * kv_shared16<HD>::v_stride : 32 * kv_shared<HD>::v_stride];
  const uint32_t* q16 = reinterpret_cast<const uint32_t*>(sm_q[warp]);
  if (active) load_q<HD, MT>(a, w, lane, k_warp, vec, sm_q[warp]);
  __syncwarp();
  row_info ri[2] = {};  // rows g, g + 8 (an inactive warp's: padding)
  if (active) {
    ri[0] = tile_row(a, w, g);
    ri[1] = tile_row(a, w, g + 8);
  }
  const int64_t kv_lo[2] = {ri[0].lo(a), ri[1].lo(a)}, n_kv[2] = {ri[0].n_kv(a), ri[1].n_kv(a)};  // [kv_lo, n_kv)
  float M[2] = {-INFINITY, -INFINITY}, L[2] = {0.0f, 0.0f}, O[ND][4] = {};  // empty (fold's comment)
  // splits [s0, n_splits) of the chunk for the block, [warp_s0, warp_splits) for this warp's rows
  const int s0 = first_split(bt.kv_lo(a), chunk_start);
  const int n_splits = splits_reached(bt.n_kv_max, chunk_start);
  const int warp_s0 = active ? first_split(w.kv_lo(a), chunk_start) : 0;
  const int warp_splits = active ? splits_reached(w.n_kv_max, chunk_start) : 0;
  kv_stage<staged ? HD : 8, T> next;
  if constexpr (staged) next.load(a, bt, chunk_start + (int64_t)s0 * k_mma_split, vec);
  for (int s = s0; s < n_splits; ++s) {
    const int64_t j0 = chunk_start + (int64_t)s * k_mma_split;
    if constexpr (staged) {
      __syncthreads();  // every warp is done with the previous split's copy
      next.store(sm_k, sm_v);
      __syncthreads();
      if (s + 1 < n_splits) next.load(a, bt, j0 + k_mma_split, vec);
    }
    if (s < warp_s0 || s >= warp_splits) continue;
    float m[2], l[2], o[ND][4];
    if constexpr (h16 && staged) {
      const kv_shared16<HD> kv{reinterpret_cast<const uint32_t*>(sm_k), reinterpret_cast<const uint32_t*>(sm_v), g, t};
      split_partial16<HD, MT>(a.scale, kv, q16, kv_lo, n_kv, j0, g, t, m, l, o);
    } else if constexpr (h16) {
      split_partial16<HD, MT>(a.scale, kv_global16<T>(a, w, j0, g, t, vec), q16, kv_lo, n_kv, j0, g, t, m, l, o);
    } else if constexpr (staged) {
      split_partial<HD>(a, kv_shared<HD>{sm_k, sm_v, g, t}, sm_q[warp], kv_lo, n_kv, j0, g, t, m, l, o);
    } else {
      split_partial<HD>(a, kv_global(a, w, j0, g, t, vec), sm_q[warp], kv_lo, n_kv, j0, g, t, m, l, o);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (row_reaches(kv_lo[r], n_kv[r], j0, k_mma_split)) {  // the split holds some of the row's positions
        const fold_weights f = fold(M[r], m[r]);
        L[r] = fold_value(L[r], l[r], f);
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          O[nd][2 * r] = fold_value(O[nd][2 * r], o[nd][2 * r], f);
          O[nd][2 * r + 1] = fold_value(O[nd][2 * r + 1], o[nd][2 * r + 1], f);
        }
        M[r] = f.mx;
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (!ri[r].ok || !row_reaches(ri[r].lo(a), ri[r].n_kv(a), chunk_start, k_mma_chunk)) continue;  // none in this chunk
#pragma unroll
    for (int nd = 0; nd < ND; ++nd) {
#pragma unroll
      for (int e = 0; e < 2; ++e) write_result(a, ri[r], chunk, ND * (2 * t + e) + nd, M[r], L[r], O[nd][2 * r + e]);
    }
  }
}

// Decode: the block owns one tile of rq query rows; its W warps take splits s0 + w, s0 + w + W, .. of the chunk (s0:
// the split holding the tile's window start in its first chunk, else 0), and the block folds each group of W in
// split order through shared memory (thread: row tid / TPR, dims tid % TPR + TPR k).
// W: a chunk's 8 splits at once where shared memory allows; fewer for launches of many blocks whose rows have
// fewer splits (attention_mma_decode_warps; the fold's registers bound W from below: 2 for 128 dims).
template <int HD>
__host__ __device__ constexpr int splits_warps() { return HD <= 64 ? 8 : 4; }
template <int HD>
__host__ __device__ constexpr int splits_warps_min() { return HD <= 64 ? 1 : 2; }

// The tile's outputs (whole q8_256 groups: attention_launch checks) are final: quantize them for the o
// projection, a group of 256 values at a time by the block's W warps (quantize256_block with 8, quantize256_warps
// with fewer: the bits of quantize_q8_256 either way).
template <int W>
__device__ __forceinline__ void quantize_tile_out(const attn_args& a, const warp_tile& w) {
  __shared__ float sh_amax[8];
  __threadfence();
  __syncthreads();
  const int groups = w.nh * a.hd_v / 256;
  for (int r = 0; r < w.nq; ++r) {
    const int64_t first = ((w.i0 + r) * a.n_head + w.h0) * a.hd_v;  // a multiple of 256
    for (int gi = 0; gi < groups; ++gi) {
      const int64_t at = first + 256 * gi;
      if constexpr (W == 8) {  // a value per thread
        quantize256_block(__ldcg(a.out + at + threadIdx.x), a.out_q + at, a.out_d + at / 256, a.out_bsum + at / 32,
                          sh_amax);
      } else {
        quantize256_warps<W>(a.out + at, a.out_q + at, a.out_d + at / 256, a.out_bsum + at / 32, sh_amax);
      }
      __syncthreads();
    }
  }
}

// Decode with several chunks: each block counts itself done; the last of the tile's chunks (those of its positions
// [kv_lo, n_kv_max)) to finish merges its rows' partials (attention_merge_kernel's arithmetic) and returns true, the
// others false. The counter goes back to 0 for the next launch.
template <int W>
__device__ __forceinline__ bool merge_last(const attn_args& a, const warp_tile& w) {
  if (!a.done) return false;  // attention_merge_kernel merges
  __shared__ int last;
  const int chunks = (int)spans_of(w.kv_lo(a), w.n_kv_max, k_mma_chunk);
  if (!last_block_done(a.done + (int64_t)blockIdx.x * gridDim.y + blockIdx.y, chunks, &last)) return false;
  // thread x takes (row, dim) pairs x, x + blockDim.x, ..: the valid rows come first (decode: one query row's
  // heads, a pair per thread)
  for (int e = threadIdx.x; e < 16 * a.hd_v; e += W * k_warp) {
    const row_info ri = tile_row(a, w, e / a.hd_v);
    const int64_t n_split = ri.ok ? spans_of(ri.lo(a), ri.n_kv(a), k_mma_chunk) : 0;
    if (n_split <= 1) continue;
    const float* pr = a.part + ri.oh * a.n_split_max * (a.hd_v + 2);
    a.out[ri.oh * a.hd_v + e % a.hd_v] = merge_dim(a, pr, n_split, merge_max(a, pr, n_split), e % a.hd_v);
  }
  return true;
}

template <int HD, int W, typename T>
__global__ void __launch_bounds__(W * k_warp, HD <= 64 ? 16 / W : 1) attention_mma_splits(attn_args a, const int32_t* tiles,
                                                                                         int rq, int gh, int vec) {
  pdl_begin();
  constexpr int ND = HD / 8, TPR = W * k_warp / 16, NF = HD / TPR;  // TPR, NF: folding
  __shared__ float sm_o[W][16][HD + 1];
  __shared__ float sm_m[W][16], sm_l[W][16];
  const int warp = threadIdx.x / k_warp, lane = threadIdx.x % k_warp, g = lane / 4, t = lane % 4;
  warp_tile w;
  if (!setup_tile(a, tiles, rq, gh, 0, w)) return;  // uniform over the block
  // chunks from the one holding the tile's window start: none below it is launched work or read
  const int64_t chunk = w.kv_lo(a) / k_mma_chunk + blockIdx.z, chunk_start = chunk * k_mma_chunk;
  if (chunk_start >= w.n_kv_max) return;
  constexpr bool h16 = !std::is_same<T, float>::value;  // a 16-bit or fp8 store: the 16-bit tensor-core code
  using MT = kv_mma_t<T>;
  __shared__ __align__(16) float sm_q[16 * (HD + 16)];
  const uint32_t* q16 = reinterpret_cast<const uint32_t*>(sm_q);
  load_q<HD, MT>(a, w, threadIdx.x, W * k_warp, vec, sm_q);
  __syncthreads();
  const row_info ri[2] = {tile_row(a, w, g), tile_row(a, w, g + 8)};
  const int64_t kv_lo[2] = {ri[0].lo(a), ri[1].lo(a)}, n_kv[2] = {ri[0].n_kv(a), ri[1].n_kv(a)};  // rows g, g + 8
  // the folding thread's row
  const int fr = threadIdx.x / TPR, fc = threadIdx.x % TPR;
  const row_info fri = tile_row(a, w, fr);
  float M = -INFINITY, L = 0.0f, O[NF] = {};  // empty (fold's comment)
  // the chunk's splits [s0, n_splits): from the one holding the tile's window start
  const int s0 = first_split(w.kv_lo(a), chunk_start);
  const int n_splits = splits_reached(w.n_kv_max, chunk_start);
  for (int base = s0; base < n_splits; base += W) {
    const int s = base + warp;
    if (s < n_splits) {
      float m[2], l[2], o[ND][4];
      const int64_t j0 = chunk_start + (int64_t)s * k_mma_split;
      if constexpr (h16) split_partial16<HD, MT>(a.scale, kv_global16<T>(a, w, j0, g, t, vec), q16, kv_lo, n_kv, j0, g, t, m, l, o);
      else split_partial<HD>(a, kv_global(a, w, j0, g, t, vec), sm_q, kv_lo, n_kv, j0, g, t, m, l, o);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (t == 0) {
          sm_m[warp][g + 8 * r] = m[r];
          sm_l[warp][g + 8 * r] = l[r];
        }
#pragma unroll
        for (int nd = 0; nd < ND; ++nd) {
          sm_o[warp][g + 8 * r][ND * (2 * t) + nd] = o[nd][2 * r];
          sm_o[warp][g + 8 * r][ND * (2 * t + 1) + nd] = o[nd][2 * r + 1];
        }
      }
    }
    __syncthreads();
    for (int u = 0; u < W && base + u < n_splits; ++u) {
      const float m = sm_m[u][fr], l = sm_l[u][fr];
      if (row_reaches(fri.lo(a), fri.n_kv(a), chunk_start + (int64_t)(base + u) * k_mma_split, k_mma_split)) {  // its split
        const fold_weights f = fold(M, m);
        L = fold_value(L, l, f);
#pragma unroll
        for (int k = 0; k < NF; ++k) O[k] = fold_value(O[k], sm_o[u][fr][fc + TPR * k], f);
        M = f.mx;
      }
    }
    __syncthreads();
  }
  if (fri.ok && row_reaches(fri.lo(a), fri.n_kv(a), chunk_start, k_mma_chunk)) {  // the row has positions here
#pragma unroll
    for (int k = 0; k < NF; ++k) write_result(a, fri, chunk, fc + TPR * k, M, L, O[k]);
  }
  if (spans_of(w.kv_lo(a), w.n_kv_max, k_mma_chunk) > 1 && !merge_last<W>(a, w)) return;  // uniform over the block
  if (a.out_q) quantize_tile_out<W>(a, w);
}

}  // namespace

mma_layout attention_mma_layout(int32_t n_head, int32_t n_head_kv) {
  mma_layout lay;
  const int group_heads = n_head / n_head_kv;
  lay.gh = std::min(group_heads, 16);
  lay.rq = 16 / lay.gh;
  lay.hgroups = (group_heads + lay.gh - 1) / lay.gh;
  return lay;
}

bool attention_mma_takes(int32_t hd_k, int32_t hd_v) { return std::max(hd_k, hd_v) <= 128; }

int attention_mma_decode_warps(int32_t hd, int64_t max_kv, int64_t blocks, int sm_count) {
  const int64_t splits = (std::min<int64_t>(max_kv, k_mma_chunk) + k_mma_split - 1) / k_mma_split;
  const int lo = hd > 64 ? splits_warps_min<128>() : splits_warps_min<64>();
  const int hi = hd > 64 ? splits_warps<128>() : splits_warps<64>();
  if (blocks < 2 * (int64_t)sm_count) return hi;
  int w = lo;
  while (w < hi && w < splits) w *= 2;
  return w;
}

namespace {
template <int HD, int W, typename T>
void launch_splits(cuda_backend& be, const dim3& grid, const attn_args& args, const int32_t* d_tiles,
                   const mma_layout& lay, bool vec) {
  be.launch("attention_mma_splits", attention_mma_splits<HD, W, T>, grid, dim3(W * k_warp), args, d_tiles, lay.rq,
            lay.gh, (int)vec);
}

template <typename T>
void launch_mma(cuda_backend& be, const attn_args& args, const int32_t* d_tiles, const dim3& grid, bool rows_shape,
                const mma_layout& lay, int decode_warps, bool vec) {
  const dim3 rows_block(k_mma_warps * k_warp);
  const bool wide = std::max(args.hd_k, args.hd_v) > 64;
  if (rows_shape) {
    if (wide) be.launch("attention_mma_rows", attention_mma_rows<128, T>, grid, rows_block, args, d_tiles, lay.rq, lay.gh, (int)vec);
    else be.launch("attention_mma_rows", attention_mma_rows<64, T>, grid, rows_block, args, d_tiles, lay.rq, lay.gh, (int)vec);
  } else if (wide) {
    if (decode_warps <= 2) launch_splits<128, 2, T>(be, grid, args, d_tiles, lay, vec);
    else launch_splits<128, 4, T>(be, grid, args, d_tiles, lay, vec);
  } else {
    if (decode_warps <= 1) launch_splits<64, 1, T>(be, grid, args, d_tiles, lay, vec);
    else if (decode_warps <= 2) launch_splits<64, 2, T>(be, grid, args, d_tiles, lay, vec);
    else if (decode_warps <= 4) launch_splits<64, 4, T>(be, grid, args, d_tiles, lay, vec);
    else launch_splits<64, 8, T>(be, grid, args, d_tiles, lay, vec);
  }
}
}  // namespace

// K / V element type args.kv_elem: each kernel instantiated per type (the f32 code is as it was).
void launch_attention_mma(cuda_backend& be, const attn_args& args, const int32_t* d_tiles, int64_t n_tiles,
                          bool rows_shape, const mma_layout& lay, int decode_warps) {
  const bool vec = args.hd_k % 4 == 0 && args.hd_v % 4 == 0 && args.k_stride % 4 == 0 && args.v_stride % 4 == 0 &&
                   (uintptr_t)args.q % 16 == 0 && (uintptr_t)args.k % 16 == 0 && (uintptr_t)args.v % 16 == 0;
  const dim3 grid((unsigned)n_tiles, (unsigned)(args.n_head_kv * lay.hgroups), (unsigned)args.n_split_max);
  with_kv_element((kv_type)args.kv_elem, [&](auto t) {
    launch_mma<decltype(t)>(be, args, d_tiles, grid, rows_shape, lay, decode_warps, vec);
  });
}

}  // namespace spindle
