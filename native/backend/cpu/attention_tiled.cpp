// Tiled AVX2 attention (see attention_tiled.h). A tile's queries are ordered token-major (head inner), so their
// position counts n_kv are non-decreasing and the queries that attend position j form a suffix of the tile.
// Invariant: each dot is ops_avx2.cpp's (4 lane accumulators over 32-float steps, dot32_reduce, * scale), each
// softmax is ops_attention_softmax_avx2, and each output lane chain acc_l[d] = fma(v[j, d], p[j], acc_l[d]) runs
// over j = l, l + 8, ... < n_kv in ascending order before the same 8-lane sum: bitwise the per-item kernel.
#include "backend/cpu/attention_tiled.h"

#include <algorithm>

#include "backend/cpu/attention_avx2_inl.h"

namespace spindle {

namespace {

constexpr int32_t k_target_queries = 16;        // queries per tile the tiling aims at (K / V reuse)
constexpr int64_t k_max_score_floats = 1 << 20;  // score rows of one tile at most (4 MiB)
constexpr int64_t k_block = 256;                 // positions of V packed at a time (multiple of 8)

int64_t round8(int64_t n) { return (n + 7) / 8 * 8; }

}  // namespace

attention_tiling attention_make_tiling(const attention_params& p) {
  attention_tiling tl;
  const int32_t group = p.n_head / p.n_head_kv;
  tl.n_h = std::min(group, k_attention_tile_max_queries);
  const int64_t chunks_per_group = (group + tl.n_h - 1) / tl.n_h;
  tl.n_head_chunks = chunks_per_group * p.n_head_kv;
  const int64_t n_pad = round8(p.n_past + p.n_tokens);
  // non-causal tiles (attention_bidir.h) read every K / V row for each tile: as many queries as a tile holds
  const int32_t target = p.causal ? k_target_queries : k_attention_tile_max_queries;
  // a sliding window gives each token its own first key: one token per tile (cpu_backend::attention_tiles)
  int64_t n_t = p.window > 0 ? 1 : std::max<int64_t>(1, target / tl.n_h);
  n_t = std::min<int64_t>(n_t, std::max<int64_t>(1, k_max_score_floats / (tl.n_h * n_pad)));
  tl.n_t = std::max<int64_t>(1, std::min(n_t, p.n_tokens));
  tl.n_token_blocks = (p.n_tokens + tl.n_t - 1) / tl.n_t;
  return tl;
}

attention_tile attention_tiling::tile(const attention_params& p, int64_t i) const {
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t chunks_per_group = n_head_chunks / p.n_head_kv;
  const int64_t b = n_token_blocks - 1 - i / n_head_chunks, c = i % n_head_chunks;
  const int32_t within = (int32_t)(c % chunks_per_group) * n_h;
  attention_tile t;
  t.t0 = b * n_t;
  t.n_t = std::min(n_t, p.n_tokens - t.t0);
  t.h0 = (int32_t)(c / chunks_per_group) * group + within;
  t.n_h = std::min(n_h, group - within);
  return t;
}

int64_t attention_tile_scratch(const attention_params& p, const attention_tiling& tl) {
  const int64_t n_kv_max = p.n_past + p.n_tokens;
  const int64_t nq = (int64_t)tl.n_h * tl.n_t;
  // score rows, then either the per-item kernel's scratch or lane sums [nq][8][dv] + a packed V block
  return nq * round8(n_kv_max) +
         std::max(ops_attention_scratch(n_kv_max, p.head_dim_v), (nq * 8 + k_block) * p.head_dim_v);
}

#if SPINDLE_HAVE_X86_KERNELS

namespace {

// K / V rows are 2 KiB or more apart (all KV heads of a position in one row): fetched ahead by hand.
constexpr int64_t k_prefetch_rows = 4;

// The lanes of (s0 + s2) + (s1 + s3) with the 128-bit halves added: dot32_reduce up to its two hadds.
SPINDLE_AVX2 inline __m128 dot32_halves(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
  const __m256 v = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
  return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
}

// ps[i][j] = dot(k_j, qs[i]) * scale for NQ <= 3 queries and one key row, n % 32 == 0: the key's loads shared.
// Each dot is dot32_reduce's: its two hadds are done for the NQ dots at once (hadd(ta, tb) holds
// [a0 + a1, a2 + a3, b0 + b1, b2 + b3]; a second hadd gives (a0 + a1) + (a2 + a3), ... : the same operations).
template <int NQ, class P>
SPINDLE_AVX2 inline void qk_group(const float* const* qs, P kr, int32_t n, float scale, float* const* ps,
                                  int64_t j) {
  __m256 s[NQ][4];
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) s[i][m] = _mm256_setzero_ps();
  for (int32_t e = 0; e < n; e += 32) {
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const __m256 kv = load8(kr + e + 8 * m);
#pragma GCC unroll 4
      for (int i = 0; i < NQ; ++i) s[i][m] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(qs[i] + e + 8 * m), s[i][m]);
    }
  }
  const __m128 ta = dot32_halves(s[0][0], s[0][1], s[0][2], s[0][3]);
  const __m128 tb = NQ > 1 ? dot32_halves(s[NQ > 1][0], s[NQ > 1][1], s[NQ > 1][2], s[NQ > 1][3]) : ta;
  const __m128 tc = NQ > 2 ? dot32_halves(s[NQ - 1][0], s[NQ - 1][1], s[NQ - 1][2], s[NQ - 1][3]) : tb;
  const __m128 r = _mm_mul_ps(_mm_hadd_ps(_mm_hadd_ps(ta, tb), _mm_hadd_ps(tc, tc)), _mm_set1_ps(scale));
  alignas(16) float out[4];
  _mm_store_ps(out, r);
#pragma GCC unroll 4
  for (int i = 0; i < NQ; ++i) ps[i][j] = out[i];
}

// Scores of all tile queries, key-major: each K row is read once and used by every query that attends it.
template <class Rows>
SPINDLE_AVX2 void qk_tile(const float* const* qs, const int64_t* nkv, int32_t nq, Rows k, int32_t n, float scale,
                          float* const* ps) {
  int32_t first = 0;
  for (int64_t j = 0; j < nkv[nq - 1]; ++j) {
    while (nkv[first] <= j) ++first;
    const auto kr = k(j);
    if (j + k_prefetch_rows < nkv[nq - 1]) prefetch_elems(k(j + k_prefetch_rows), n);
    int32_t i = first;
    for (; i + 3 <= nq; i += 3) qk_group<3>(qs + i, kr, n, scale, ps + i, j);
    if (nq - i == 2) qk_group<2>(qs + i, kr, n, scale, ps + i, j);
    else if (nq - i == 1) qk_group<1>(qs + i, kr, n, scale, ps + i, j);
  }
}

// V rows [jb, je) (jb % 8 == 0) of the tile's KV head copied lane-major: the W-float piece of dims
// [dp * W, dp * W + W) of position j sits at vp + ((dp * 8 + j % 8) * lb + (j - jb) / 8) * W, so the positions of
// one lane are contiguous for each piece. lb = k_block / 8.
template <int W, class Rows>
SPINDLE_AVX2 void pack_v_block(Rows v, int64_t jb, int64_t je, int32_t dv, float* vp) {
  constexpr int64_t lb = k_block / 8;
  for (int64_t j = jb; j < je; ++j) {
    const auto r = v(j);
    if (j + k_prefetch_rows < je) prefetch_elems(v(j + k_prefetch_rows), dv);
    float* dst = vp + ((j % 8) * lb + (j - jb) / 8) * W;
    for (int32_t d = 0; d < dv; d += W, dst += 8 * lb * W)
      for (int c = 0; c < W; c += 8) _mm256_storeu_ps(dst + c, load8(r + d + c));
  }
}

// Adds block [jb, je) of positions to the lane accumulators of NQ queries (nkv non-decreasing), 8 * C dims at
// a time: for each lane the NQ chains run together over the positions all of them attend (one V load per
// position), then each longer query continues its own chain. acc[i]: query i's [8][dv] lane sums (in / out).
template <int NQ, int C>
SPINDLE_AVX2 void kqv_group_block(const float* const* ps, const int64_t* nkv, const float* vp, int64_t jb,
                                  int64_t je, int32_t dv, float* const* acc) {
  constexpr int W = 8 * C;
  constexpr int64_t lb = k_block / 8;
  const int64_t e0 = std::min(je, nkv[0]);
  for (int32_t d = 0; d < dv; d += W) {
    for (int l = 0; l < 8; ++l) {
      const float* col = vp + (((int64_t)d / W * 8 + l) * lb) * W;  // positions jb + l + 8k, k = 0, 1, ...
      __m256 a[NQ][C];
#pragma GCC unroll 8
      for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) a[i][c] = _mm256_loadu_ps(acc[i] + l * dv + d + 8 * c);
      int64_t j = jb + l;
      const float* x_at = col;
      for (; j < e0; j += 8, x_at += W) {
        __m256 x[C];
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) x[c] = _mm256_loadu_ps(x_at + 8 * c);
#pragma GCC unroll 8
        for (int i = 0; i < NQ; ++i) {
          const __m256 b = _mm256_broadcast_ss(ps[i] + j);
#pragma GCC unroll 2
          for (int c = 0; c < C; ++c) a[i][c] = _mm256_fmadd_ps(x[c], b, a[i][c]);
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < NQ; ++i)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc[i] + l * dv + d + 8 * c, a[i][c]);
      // the longer queries' chains go on alone (at most the tile's last tokens' positions)
      for (int i = 1; i < NQ; ++i) {
        const int64_t ei = std::min(je, nkv[i]);
        for (int c = 0; c < C; ++c) {
          __m256 t = _mm256_loadu_ps(acc[i] + l * dv + d + 8 * c);
          const float* y = x_at + 8 * c;
          for (int64_t jj = j; jj < ei; jj += 8, y += W) t = _mm256_fmadd_ps(_mm256_loadu_ps(y), _mm256_broadcast_ss(ps[i] + jj), t);
          _mm256_storeu_ps(acc[i] + l * dv + d + 8 * c, t);
        }
      }
    }
  }
}

template <int C>
SPINDLE_AVX2 void kqv_block(const float* const* ps, const int64_t* nkv, int32_t nq, const float* vp, int64_t jb,
                            int64_t je, int32_t dv, float* const* acc) {
  int32_t i = 0;
  while (i < nq && nkv[i] <= jb) ++i;  // queries that attend nothing of this block
  for (; i + 4 <= nq; i += 4) kqv_group_block<4, C>(ps + i, nkv + i, vp, jb, je, dv, acc + i);
  switch (nq - i) {
    case 3: kqv_group_block<3, C>(ps + i, nkv + i, vp, jb, je, dv, acc + i); break;
    case 2: kqv_group_block<2, C>(ps + i, nkv + i, vp, jb, je, dv, acc + i); break;
    case 1: kqv_group_block<1, C>(ps + i, nkv + i, vp, jb, je, dv, acc + i); break;
    default: break;
  }
}

// outs[i][d] = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) of query i's lane sums a_l[d].
SPINDLE_AVX2 void kqv_reduce(const float* acc, int32_t dv, float* out) {
  for (int32_t d = 0; d < dv; d += 8) {
    const float* t = acc + d;
    const __m256 s04 = _mm256_add_ps(_mm256_loadu_ps(t + 0 * dv), _mm256_loadu_ps(t + 4 * dv));
    const __m256 s15 = _mm256_add_ps(_mm256_loadu_ps(t + 1 * dv), _mm256_loadu_ps(t + 5 * dv));
    const __m256 s26 = _mm256_add_ps(_mm256_loadu_ps(t + 2 * dv), _mm256_loadu_ps(t + 6 * dv));
    const __m256 s37 = _mm256_add_ps(_mm256_loadu_ps(t + 3 * dv), _mm256_loadu_ps(t + 7 * dv));
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(s04, s26), _mm256_add_ps(s15, s37)));
  }
}

// All tile queries' outputs, k_block positions at a time (V block packed once, used by every query).
// acc: [nq][8][dv] zeroed lane sums, vp: [k_block * dv] packing space.
template <class Rows>
SPINDLE_AVX2 void kqv_tile(const float* const* ps, const int64_t* nkv, int32_t nq, Rows v, int32_t dv, float* vp,
                           float* const* acc, float* const* outs) {
  const bool c2 = dv % 16 == 0;
  for (int64_t jb = 0; jb < nkv[nq - 1]; jb += k_block) {
    const int64_t je = std::min(jb + k_block, nkv[nq - 1]);
    if (c2) pack_v_block<16>(v, jb, je, dv, vp), kqv_block<2>(ps, nkv, nq, vp, jb, je, dv, acc);
    else pack_v_block<8>(v, jb, je, dv, vp), kqv_block<1>(ps, nkv, nq, vp, jb, je, dv, acc);
  }
  for (int32_t i = 0; i < nq; ++i) kqv_reduce(acc[i], dv, outs[i]);
}

// The tile's scores (key-major), each query's softmax, then its outputs over packed V blocks, with K / V rows of
// element type E in either row form. acc: [nq][8][dv] lane sums (zeroed here), vp: [k_block * dv].
template <class E>
SPINDLE_AVX2 void scores_then_outputs(const attention_params& p, const float* const* qs, const int64_t* nkv,
                                      int32_t nq, const kv_rows& k, const kv_rows& v, float* const* ps,
                                      float* const* acc, float* vp, float* const* outs) {
  if (k.table) qk_tile(qs, nkv, nq, table_of<E>(k), p.head_dim_k, p.scale, ps);
  else qk_tile(qs, nkv, nq, strided_of<E>(k), p.head_dim_k, p.scale, ps);
  for (int32_t i = 0; i < nq; ++i) ops_attention_softmax_avx2(ps[i], nkv[i]);
  std::fill(acc[0], acc[0] + (int64_t)nq * 8 * p.head_dim_v, 0.0f);
  if (v.table) kqv_tile(ps, nkv, nq, table_of<E>(v), p.head_dim_v, vp, acc, outs);
  else kqv_tile(ps, nkv, nq, strided_of<E>(v), p.head_dim_v, vp, acc, outs);
}

}  // namespace

// Scores of all queries (key-major), softmax per query, then the outputs over packed V blocks.
SPINDLE_AVX2 void attention_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q,
                                      const kv_rows& k, const kv_rows& v, float* scratch, float* out) {
  const int64_t nq = tile.n_t * tile.n_h;
  if (nq <= 0) return;
  if (nq > k_attention_tile_max_queries) {  // not a tile attention_make_tiling makes: the per-item kernel
    for (int64_t t = tile.t0; t < tile.t0 + tile.n_t; ++t) {
      for (int32_t h = tile.h0; h < tile.h0 + tile.n_h; ++h) {
        ops_attention_head_kv_avx2(q + (t * p.n_head + h) * p.head_dim_k, k, v, p.n_past + t + 1, p.head_dim_k,
                                   p.head_dim_v, p.scale, scratch, out + (t * p.n_head + h) * p.head_dim_v);
      }
    }
    return;
  }
  const float* qs[k_attention_tile_max_queries];
  float* outs[k_attention_tile_max_queries];
  float* ps[k_attention_tile_max_queries];
  int64_t nkv[k_attention_tile_max_queries];
  const int64_t n_pad = round8(p.n_past + tile.t0 + tile.n_t);
  for (int32_t i = 0; i < (int32_t)nq; ++i) {
    const int64_t t = tile.t0 + i / tile.n_h, h = tile.h0 + i % tile.n_h;
    qs[i] = q + (t * p.n_head + h) * p.head_dim_k;
    outs[i] = out + (t * p.n_head + h) * p.head_dim_v;
    ps[i] = scratch + (int64_t)i * n_pad;
    nkv[i] = p.n_past + t + 1;
  }
  float* item_scratch = scratch + (int64_t)nq * n_pad;
  if (p.head_dim_k % 32 != 0 || p.head_dim_v % 8 != 0) {
    // shapes the tiled kernels do not cover: the per-item kernel itself, query by query
    for (int32_t i = 0; i < nq; ++i) {
      ops_attention_head_kv_avx2(qs[i], k, v, nkv[i], p.head_dim_k, p.head_dim_v, p.scale, item_scratch, outs[i]);
    }
    return;
  }
  float* acc[k_attention_tile_max_queries];
  for (int32_t i = 0; i < nq; ++i) acc[i] = item_scratch + (int64_t)i * 8 * p.head_dim_v;
  float* vp = item_scratch + (int64_t)nq * 8 * p.head_dim_v;  // [k_block * head_dim_v]
  with_kv_elem(k.type, [&](auto e) {
    scores_then_outputs<decltype(e)>(p, qs, nkv, (int32_t)nq, k, v, ps, acc, vp, outs);
  });
}

#else  // no x86 kernels: never called (cpu_level_supported(avx2) is false); the per-item kernel query by query

void attention_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q, const kv_rows& k,
                         const kv_rows& v, float* scratch, float* out) {
  for (int64_t t = tile.t0; t < tile.t0 + tile.n_t; ++t) {
    for (int32_t h = tile.h0; h < tile.h0 + tile.n_h; ++h) {
      ops_attention_head_kv(q + (t * p.n_head + h) * p.head_dim_k, k, v, p.n_past + t + 1, p.head_dim_k,
                            p.head_dim_v, p.scale, scratch, out + (t * p.n_head + h) * p.head_dim_v);
    }
  }
}

#endif

}  // namespace spindle
