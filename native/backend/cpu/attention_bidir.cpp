// Non-causal attention tiles (see attention_bidir.h). Lane i of every register holds query i of the tile: the
// scores are a small GEMM with K rows broadcast element by element (NK keys x 16 queries of fma chains over the
// head dims), the weighted sum one with V rows broadcast (ND dims x 16 queries of fma chains over the positions,
// positions in blocks so the probabilities and V rows of a block stay in L1).
// Invariant: the register blocking (NK, ND, pairs of 8-lane vectors, blocks of positions) only changes which
// independent chains run together, never the operations of one chain: bitwise the contract of attention_bidir.h.
#include "backend/cpu/attention_bidir.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/attention_avx2_inl.h"
#include "backend/cpu/expf_avx2_inl.h"

namespace spindle {

namespace {

constexpr int64_t k_lanes = 16;     // queries per register pair
constexpr int64_t k_pos_block = 64;  // positions per block of the weighted sum
constexpr int k_keys = 6;           // key rows per score micro-kernel (12 accumulators)
constexpr int k_dims = 6;           // V dims per weighted-sum micro-kernel (12 accumulators)

int64_t round_lanes(int64_t n) { return (n + k_lanes - 1) / k_lanes * k_lanes; }

// Queries of a tile at most (the tiling's n_h * n_t, capped at k_attention_tile_max_queries), rounded to lanes.
int64_t lanes_for(const attention_tiling& tl) {
  return round_lanes(std::min<int64_t>((int64_t)tl.n_h * tl.n_t, k_attention_tile_max_queries));
}

}  // namespace

int64_t attention_bidir_scratch(const attention_params& p, const attention_tiling& tl) {
  const int64_t n_kv = p.n_past + p.n_tokens;
  // q^T [dk][nl], scores^T [n_kv][nl], out^T [dv][nl], 1 / sum [nl]
  return ((int64_t)p.head_dim_k + n_kv + p.head_dim_v + 1) * lanes_for(tl);
}

#if SPINDLE_HAVE_X86_KERNELS

namespace {

// st[j][0, 16) = scale * (q_i . k_j) for the NK keys j0 .. j0 + NK - 1: chains over d ascending from 0.
// qt: [dk][nl] queries of this lane pair, st: [n_kv][nl] (both offset to the pair).
template <int NK, class Rows>
SPINDLE_AVX2 inline void qk_micro(const float* qt, int64_t nl, Rows k, int64_t j0, int32_t dk, float scale,
                                  float* st) {
  const float* kr[NK];
#pragma GCC unroll 8
  for (int kk = 0; kk < NK; ++kk) kr[kk] = k(j0 + kk);
  __m256 a[NK][2];
#pragma GCC unroll 8
  for (int kk = 0; kk < NK; ++kk) a[kk][0] = a[kk][1] = _mm256_setzero_ps();
  for (int32_t d = 0; d < dk; ++d) {
    const __m256 q0 = _mm256_loadu_ps(qt + d * nl), q1 = _mm256_loadu_ps(qt + d * nl + 8);
#pragma GCC unroll 8
    for (int kk = 0; kk < NK; ++kk) {
      const __m256 b = _mm256_broadcast_ss(kr[kk] + d);
      a[kk][0] = _mm256_fmadd_ps(q0, b, a[kk][0]);
      a[kk][1] = _mm256_fmadd_ps(q1, b, a[kk][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int kk = 0; kk < NK; ++kk) {
    _mm256_storeu_ps(st + (j0 + kk) * nl, _mm256_mul_ps(a[kk][0], sc));
    _mm256_storeu_ps(st + (j0 + kk) * nl + 8, _mm256_mul_ps(a[kk][1], sc));
  }
}

template <class Rows>
SPINDLE_AVX2 void qk_tile(const float* qt, int64_t nl, Rows k, int64_t n_kv, int32_t dk, float scale, float* st) {
  int64_t j0 = 0;
  for (; j0 + k_keys <= n_kv; j0 += k_keys) {
    for (int64_t i = 0; i < nl; i += k_lanes) qk_micro<k_keys>(qt + i, nl, k, j0, dk, scale, st + i);
  }
  for (int64_t i = 0; i < nl; i += k_lanes) {
    switch (n_kv - j0) {
      case 5: qk_micro<5>(qt + i, nl, k, j0, dk, scale, st + i); break;
      case 4: qk_micro<4>(qt + i, nl, k, j0, dk, scale, st + i); break;
      case 3: qk_micro<3>(qt + i, nl, k, j0, dk, scale, st + i); break;
      case 2: qk_micro<2>(qt + i, nl, k, j0, dk, scale, st + i); break;
      case 1: qk_micro<1>(qt + i, nl, k, j0, dk, scale, st + i); break;
      default: break;
    }
  }
}

// Per lane over st [n_kv][nl]: the max, e_j = expf8(s_j - max) in place, the sum of e_j in double (j ascending),
// inv = (float)(1 / sum).
SPINDLE_AVX2 void softmax_lanes(float* st, int64_t n_kv, int64_t nl, float* inv) {
  for (int64_t c = 0; c < nl; c += 8) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n_kv; ++j) m = _mm256_max_ps(m, _mm256_loadu_ps(st + j * nl + c));
    __m256d lo = _mm256_setzero_pd(), hi = lo;
    for (int64_t j = 0; j < n_kv; ++j) {
      const __m256 e = expf8(_mm256_sub_ps(_mm256_loadu_ps(st + j * nl + c), m));
      _mm256_storeu_ps(st + j * nl + c, e);
      lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
      hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const __m256d one = _mm256_set1_pd(1.0);
    const __m128 ilo = _mm256_cvtpd_ps(_mm256_div_pd(one, lo)), ihi = _mm256_cvtpd_ps(_mm256_div_pd(one, hi));
    _mm256_storeu_ps(inv + c, _mm256_insertf128_ps(_mm256_castps128_ps256(ilo), ihi, 1));
  }
}

// ot[d0 + dd][0, 16) += e_j[0, 16) * v_j[d0 + dd] for j in [jb, je), ND dims: the chains continue from ot.
// st: [n_kv][nl] probabilities, ot: [dv][nl] (both offset to the lane pair).
template <int ND, class Rows>
SPINDLE_AVX2 inline void pv_micro(const float* st, int64_t nl, Rows v, int64_t jb, int64_t je, int32_t d0, float* ot) {
  __m256 a[ND][2];
#pragma GCC unroll 8
  for (int dd = 0; dd < ND; ++dd) {
    a[dd][0] = _mm256_loadu_ps(ot + (d0 + dd) * nl);
    a[dd][1] = _mm256_loadu_ps(ot + (d0 + dd) * nl + 8);
  }
  for (int64_t j = jb; j < je; ++j) {
    const float* vr = v(j) + d0;
    const __m256 p0 = _mm256_loadu_ps(st + j * nl), p1 = _mm256_loadu_ps(st + j * nl + 8);
#pragma GCC unroll 8
    for (int dd = 0; dd < ND; ++dd) {
      const __m256 b = _mm256_broadcast_ss(vr + dd);
      a[dd][0] = _mm256_fmadd_ps(p0, b, a[dd][0]);
      a[dd][1] = _mm256_fmadd_ps(p1, b, a[dd][1]);
    }
  }
#pragma GCC unroll 8
  for (int dd = 0; dd < ND; ++dd) {
    _mm256_storeu_ps(ot + (d0 + dd) * nl, a[dd][0]);
    _mm256_storeu_ps(ot + (d0 + dd) * nl + 8, a[dd][1]);
  }
}

template <class Rows>
SPINDLE_AVX2 void pv_tile(const float* st, int64_t nl, Rows v, int64_t n_kv, int32_t dv, float* ot) {
  std::fill(ot, ot + (int64_t)dv * nl, 0.0f);
  const int32_t d6 = dv - dv % k_dims;
  for (int64_t jb = 0; jb < n_kv; jb += k_pos_block) {
    const int64_t je = std::min(n_kv, jb + k_pos_block);
    for (int64_t i = 0; i < nl; i += k_lanes) {
      for (int32_t d0 = 0; d0 < d6; d0 += k_dims) pv_micro<k_dims>(st + i, nl, v, jb, je, d0, ot + i);
      switch (dv - d6) {
        case 5: pv_micro<5>(st + i, nl, v, jb, je, d6, ot + i); break;
        case 4: pv_micro<4>(st + i, nl, v, jb, je, d6, ot + i); break;
        case 3: pv_micro<3>(st + i, nl, v, jb, je, d6, ot + i); break;
        case 2: pv_micro<2>(st + i, nl, v, jb, je, d6, ot + i); break;
        case 1: pv_micro<1>(st + i, nl, v, jb, je, d6, ot + i); break;
        default: break;
      }
    }
  }
}

// One group of at most k_attention_tile_max_queries queries: q^T packed (lanes past nq zero), scores, softmax,
// weighted sum, then out rows = out^T columns * (1 / sum).
template <class Rows>
SPINDLE_AVX2 void bidir_group(const attention_params& p, const float* const* qs, float* const* outs, int64_t nq,
                              Rows k, Rows v, float* scratch) {
  const int64_t n_kv = p.n_past + p.n_tokens, nl = round_lanes(nq);
  const int32_t dk = p.head_dim_k, dv = p.head_dim_v;
  float* qt = scratch;                 // [dk][nl]
  float* st = qt + (int64_t)dk * nl;   // [n_kv][nl]
  float* ot = st + n_kv * nl;          // [dv][nl]
  float* inv = ot + (int64_t)dv * nl;  // [nl]
  for (int32_t d = 0; d < dk; ++d) {
    for (int64_t i = 0; i < nl; ++i) qt[d * nl + i] = i < nq ? qs[i][d] : 0.0f;
  }
  qk_tile(qt, nl, k, n_kv, dk, p.scale, st);
  softmax_lanes(st, n_kv, nl, inv);
  pv_tile(st, nl, v, n_kv, dv, ot);
  for (int64_t i = 0; i < nq; ++i) {
    const __m128 s = _mm_set_ss(inv[i]);
    for (int32_t d = 0; d < dv; ++d) outs[i][d] = _mm_cvtss_f32(_mm_mul_ss(_mm_set_ss(ot[d * nl + i]), s));
  }
}

template <class Rows>
SPINDLE_AVX2 void bidir_tile(const attention_params& p, const attention_tile& tile, const float* q, Rows k, Rows v,
                             float* scratch, float* out) {
  const float* qs[k_attention_tile_max_queries];
  float* outs[k_attention_tile_max_queries];
  int64_t nq = 0;
  for (int64_t t = tile.t0; t < tile.t0 + tile.n_t; ++t) {
    for (int32_t h = tile.h0; h < tile.h0 + tile.n_h; ++h) {
      qs[nq] = q + (t * p.n_head + h) * p.head_dim_k;
      outs[nq] = out + (t * p.n_head + h) * p.head_dim_v;
      if (++nq == k_attention_tile_max_queries) bidir_group(p, qs, outs, nq, k, v, scratch), nq = 0;
    }
  }
  if (nq > 0) bidir_group(p, qs, outs, nq, k, v, scratch);
}

}  // namespace

SPINDLE_AVX2 void attention_bidir_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q,
                                            const kv_rows& k, const kv_rows& v, float* scratch, float* out) {
  if (p.n_past + p.n_tokens <= 0) return;
  if (k.table) {
    bidir_tile(p, tile, q, table_of<float>(k), table_of<float>(v), scratch, out);
  } else {
    bidir_tile(p, tile, q, strided_of<float>(k), strided_of<float>(v), scratch, out);
  }
}

#else  // no x86 kernels: never called (cpu_level_supported(avx2) is false); the portable kernel per query

void attention_bidir_tile_avx2(const attention_params& p, const attention_tile& tile, const float* q,
                               const kv_rows& k, const kv_rows& v, float* scratch, float* out) {
  for (int64_t t = tile.t0; t < tile.t0 + tile.n_t; ++t) {
    for (int32_t h = tile.h0; h < tile.h0 + tile.n_h; ++h) {
      ops_attention_head_kv(q + (t * p.n_head + h) * p.head_dim_k, k, v, p.n_past + p.n_tokens, p.head_dim_k,
                            p.head_dim_v, p.scale, scratch, out + (t * p.n_head + h) * p.head_dim_v);
    }
  }
}

#endif

}  // namespace spindle
