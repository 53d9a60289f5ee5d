// Tiled AVX2 attention: cpu_backend::attention / attention_paged (tiled on AVX2 CPUs) and attention_tile_avx2
// over arbitrary tilings give, bit for bit, the per-item kernel ops_attention_head_kv_avx2 for every
// (token, head), for head dims 64 / 128 / odd, GQA groups 1 / 2 / 4 / 72, n_past 0 and > 0, 1..300 tokens,
// contiguous and paged K / V, 1 and 2 threads; and a token's output does not depend on the rest of the batch.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_paged.h"
#include "backend/cpu/attention_tiled.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_features.h"
#include "harness.h"
#include "kv_store_pair.h"

using namespace spindle;
using kv_store_test::shape;

namespace {

// Random q / K / V (K / V rows padded past n_head_kv * head_dim); q scaled up so some softmax rows are sharp.
struct attn_data {
  attention_params p;
  std::vector<float> q, k, v;
  attn_data(const shape& s, uint32_t seed) : p(kv_store_test::params_of(s, 3, 5)) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    const int64_t n_pos = s.n_past + s.n_tokens;
    q.resize((size_t)(s.n_tokens * s.n_head * s.dk));
    k.resize((size_t)(n_pos * p.k_row_stride));
    v.resize((size_t)(n_pos * p.v_row_stride));
    for (float& x : q) x = 4.0f * d(g);
    for (float& x : k) x = d(g);
    for (float& x : v) x = d(g);
  }
};

// The per-item kernel for every (token, head) over rows row(j) (contiguous when table is empty).
std::vector<float> per_item(const attn_data& a, const std::vector<const void*>& kt,
                            const std::vector<const void*>& vt) {
  const attention_params& p = a.p;
  const int32_t group = p.n_head / p.n_head_kv;
  std::vector<float> out((size_t)(p.n_tokens * p.n_head * p.head_dim_v));
  std::vector<float> scratch((size_t)ops_attention_scratch(p.n_past + p.n_tokens, p.head_dim_v));
  for (int64_t t = 0; t < p.n_tokens; ++t) {
    for (int32_t h = 0; h < p.n_head; ++h) {
      const int64_t ko = (int64_t)(h / group) * p.head_dim_k, vo = (int64_t)(h / group) * p.head_dim_v;
      const kv_rows k = kt.empty() ? kv_rows{a.k.data() + ko, p.k_row_stride} : kv_rows{nullptr, 0, kt.data(), ko};
      const kv_rows v = vt.empty() ? kv_rows{a.v.data() + vo, p.v_row_stride} : kv_rows{nullptr, 0, vt.data(), vo};
      ops_attention_head_kv_avx2(a.q.data() + (t * p.n_head + h) * p.head_dim_k, k, v, p.n_past + t + 1,
                                 p.head_dim_k, p.head_dim_v, p.scale, scratch.data(),
                                 out.data() + (t * p.n_head + h) * p.head_dim_v);
    }
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const shape k_shapes[] = {
    {16, 8, 128, 128, 0, 300},  // qwen3-0.6B-like prompt
    {32, 8, 64, 64, 0, 77},     // llama-1B-like, group 4
    {32, 8, 64, 64, 45, 1},     // decode
    {8, 8, 128, 128, 13, 37},   // group 1
    {8, 4, 64, 64, 100, 19},    // n_past > 0, group 2
    {4, 1, 128, 128, 3, 129},   // group 4, one KV head
    {6, 3, 64, 64, 0, 1},       // single token, no past
    {4, 2, 96, 40, 7, 23},      // dk % 32 == 0, dv % 16 != 0 (8-dim chunks)
    {4, 2, 40, 20, 5, 11},      // shapes the tiled kernels leave to the per-item kernel
    {72, 1, 64, 64, 2, 9},      // group over the tile's query limit: split over several tiles
    {8, 2, 64, 64, 250, 20},    // query rows ending on both sides of a V block boundary (256 positions)
};

}  // namespace

TEST_CASE("attention tiled: cpu_backend attention equals the per-item avx2 kernel bitwise (1 and 2 threads)") {
  if (!cpu_level_supported(cpu_level::avx2) || (int)cpu_active_level() < (int)cpu_level::avx2)
    SKIP("needs the AVX2 kernels active (a CPU with AVX2, SPINDLE_CPU_FEATURES not below avx2)");
  cpu_backend one(1), two(2);
  uint32_t seed = 1;
  for (const shape& s : k_shapes) {
    const attn_data a(s, seed++);
    const std::vector<float> want = per_item(a, {}, {});
    for (cpu_backend* be : {&one, &two}) {
      std::vector<float> got(want.size(), NAN);
      be->attention(a.p, a.q.data(), a.k.data(), a.v.data(), got.data());
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("attention tiled: paged attention equals the per-item avx2 kernel over the same rows bitwise") {
  if (!cpu_level_supported(cpu_level::avx2) || (int)cpu_active_level() < (int)cpu_level::avx2)
    SKIP("needs the AVX2 kernels active (a CPU with AVX2, SPINDLE_CPU_FEATURES not below avx2)");
  cpu_backend one(1), two(2);
  uint32_t seed = 100;
  for (const shape& s : k_shapes) {
    const attn_data a(s, seed++);
    const int32_t bs = 16;
    const int64_t n_pos = s.n_past + s.n_tokens, n_used = (n_pos + bs - 1) / bs;
    // the store holds the contiguous rows' blocks in reversed order
    paged_attention_params pp;
    pp.attn = a.p;
    pp.block_size = bs;
    pp.n_blocks = (int32_t)n_used;
    std::vector<int32_t> table((size_t)n_used);
    for (int64_t b = 0; b < n_used; ++b) table[b] = (int32_t)(n_used - 1 - b);
    pp.block_table = table.data();
    pp.n_table = (int32_t)n_used;
    std::vector<float> ks((size_t)(n_used * bs * a.p.k_row_stride)), vs((size_t)(n_used * bs * a.p.v_row_stride));
    std::vector<const void*> kt((size_t)n_pos), vt((size_t)n_pos);
    for (int64_t j = 0; j < n_pos; ++j) {
      const int64_t row = attention_paged_row(pp, j);
      std::memcpy(&ks[row * a.p.k_row_stride], &a.k[j * a.p.k_row_stride], a.p.k_row_stride * sizeof(float));
      std::memcpy(&vs[row * a.p.v_row_stride], &a.v[j * a.p.v_row_stride], a.p.v_row_stride * sizeof(float));
      kt[j] = &ks[row * a.p.k_row_stride];
      vt[j] = &vs[row * a.p.v_row_stride];
    }
    const std::vector<float> want = per_item(a, kt, vt);
    CHECK(same_bits(want, per_item(a, {}, {})));  // the rows are the contiguous ones
    for (cpu_backend* be : {&one, &two}) {
      std::vector<float> got(want.size(), NAN);
      be->attention_paged(pp, a.q.data(), ks.data(), vs.data(), got.data());
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("attention tiled: every tiling of the queries gives the per-item bits") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 attention kernel needs a CPU with AVX2");
  const shape shapes[] = {{16, 8, 128, 128, 0, 61}, {32, 8, 64, 64, 21, 40}, {4, 2, 96, 40, 3, 33}};
  uint32_t seed = 200;
  for (const shape& s : shapes) {
    const attn_data a(s, seed++);
    const std::vector<float> want = per_item(a, {}, {});
    const int32_t group = s.n_head / s.n_head_kv;
    for (int64_t n_t : {1, 2, 5, 8, 16, 40}) {  // 40 x group 4: over the tile query limit (per-item fallback)
      for (int32_t n_h : {1, group}) {
        std::vector<float> got(want.size(), NAN);
        attention_tiling tl;
        tl.n_h = n_h;
        tl.n_t = n_t;
        std::vector<float> scratch((size_t)attention_tile_scratch(a.p, tl));
        for (int64_t t0 = 0; t0 < s.n_tokens; t0 += n_t) {
          for (int32_t h0 = 0; h0 < s.n_head; h0 += n_h) {
            attention_tile tile{t0, std::min(n_t, s.n_tokens - t0), h0, n_h};
            const int64_t ko = (int64_t)(h0 / group) * s.dk, vo = (int64_t)(h0 / group) * s.dv;
            attention_tile_avx2(a.p, tile, a.q.data(), kv_rows{a.k.data() + ko, a.p.k_row_stride},
                                kv_rows{a.v.data() + vo, a.p.v_row_stride}, scratch.data(), got.data());
          }
        }
        CHECK(same_bits(got, want));
      }
    }
  }
}

TEST_CASE("attention tiled: a token's output does not depend on the other tokens of its batch") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 attention kernel needs a CPU with AVX2");
  cpu_backend two(2);
  const shape s{16, 8, 128, 128, 5, 50};
  const attn_data a(s, 7);
  std::vector<float> all((size_t)(s.n_tokens * s.n_head * s.dv));
  two.attention(a.p, a.q.data(), a.k.data(), a.v.data(), all.data());
  for (int64_t t : {0, 1, 17, 49}) {
    attention_params p1 = a.p;  // token t alone: a decode step after n_past + t positions
    p1.n_past = s.n_past + t;
    p1.n_tokens = 1;
    std::vector<float> one((size_t)(s.n_head * s.dv));
    two.attention(p1, a.q.data() + t * s.n_head * s.dk, a.k.data(), a.v.data(), one.data());
    CHECK(std::memcmp(one.data(), all.data() + t * s.n_head * s.dv, one.size() * sizeof(float)) == 0);
  }
}
