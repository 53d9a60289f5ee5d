// Sliding-window attention (attention_params::window, gemma3's local layers) on the CPU: each query's output is
// bitwise that of ordinary causal attention over a cache holding only its window's positions, on every path (paged
// and contiguous, 1 and 2 threads, prefill tiles and single decode rows, typed stores), whatever the call is chunked
// into; the plain reference agrees within 1e-5; a window covering the context changes nothing; bad windows throw.
// (Windows on non-causal attention: attention_noncausal_test.cpp.)
#include <string>

#include "kv_store_pair.h"

using namespace kv_store_test;

namespace {

// (shape, window) cases: prompts longer than the window, decode rows deep into a context, a chunk that starts
// mid-window, gemma3's 256-dim heads with one KV head; windows of 1, under a block (16), across blocks, and over all.
struct window_case {
  shape s;
  int32_t window;
};
const window_case k_cases[] = {
    {{4, 2, 64, 64, 0, 50}, 1},     {{4, 2, 64, 64, 0, 50}, 7},      {{4, 2, 64, 64, 0, 50}, 33},
    {{8, 2, 64, 64, 100, 1}, 16},   {{8, 2, 64, 64, 100, 1}, 64},    {{4, 1, 32, 32, 37, 9}, 5},
    {{4, 1, 32, 32, 37, 9}, 40},    {{4, 1, 256, 256, 0, 40}, 12},   {{4, 1, 256, 256, 30, 3}, 17},
};

// Query t of the pair alone, ordinary causal attention over a contiguous f32 cache of its window's rows only.
std::vector<float> one_query_over_its_window(cpu_backend& be, const paged_pair& pp, int64_t t, int32_t window) {
  const attention_params& a = pp.p.attn;
  const int64_t pos = a.n_past + t, first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  std::vector<float> k, v;
  for (int64_t j = first; j <= pos; ++j) {
    const int64_t r = attention_paged_row(pp.p, j);
    k.insert(k.end(), pp.k32.begin() + r * a.k_row_stride, pp.k32.begin() + (r + 1) * a.k_row_stride);
    v.insert(v.end(), pp.v32.begin() + r * a.v_row_stride, pp.v32.begin() + (r + 1) * a.v_row_stride);
  }
  attention_params one = a;
  one.kv = kv_type::f32;
  one.n_past = pos - first;
  one.n_tokens = 1;
  std::vector<float> out((size_t)a.n_head * a.head_dim_v, NAN);
  be.attention(one, pp.q.data() + t * a.n_head * a.head_dim_k, k.data(), v.data(), out.data());
  return out;
}

}  // namespace

TEST_CASE("attention window: each query equals causal attention over its window alone, on every path and store type") {
  cpu_backend one(1), two(2);
  for (kv_type t : {kv_type::f32, kv_type::f16, kv_type::bf16, kv_type::q8_0, kv_type::q4_0, kv_type::fp8_e4m3}) {
    for (const window_case& c : k_cases) {
      const shape& s = c.s;
      paged_pair pp(two, s, t, 7u + (uint32_t)c.window);
      pp.p.attn.window = c.window;
      const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv), row = (size_t)s.n_head * s.dv;
      std::vector<float> got(n_out, NAN), got1(n_out, NAN), ref(n_out, NAN);
      two.attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), got.data());
      one.attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), got1.data());
      CHECK(same_bits(got, got1));
      bool each_is_its_window = true;
      for (int64_t tok = 0; tok < s.n_tokens; ++tok) {
        const std::vector<float> want = one_query_over_its_window(two, pp, tok, c.window);
        each_is_its_window = each_is_its_window && std::memcmp(want.data(), got.data() + tok * row, row * 4) == 0;
      }
      CHECK(each_is_its_window);
      attention_paged_ref(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), ref.data());
      double d = 0;
      for (size_t i = 0; i < n_out; ++i) d = std::max(d, (double)std::fabs(ref[i] - got[i]));
      CHECK(d < 1e-5);
      // the same call cut into chunks of 4 tokens: the same bits (batch invariance)
      std::vector<float> chunked(n_out, NAN);
      for (int64_t t0 = 0; t0 < s.n_tokens; t0 += 4) {
        paged_attention_params part = pp.p;
        part.attn.n_past = s.n_past + t0;
        part.attn.n_tokens = std::min<int64_t>(4, s.n_tokens - t0);
        two.attention_paged(part, pp.q.data() + t0 * s.n_head * s.dk, pp.ks.data(), pp.vs.data(),
                            chunked.data() + t0 * row);
      }
      CHECK(same_bits(chunked, got));
      // a window as long as the context is no window
      std::vector<float> whole(n_out, NAN), wide(n_out, NAN);
      paged_attention_params all = pp.p;
      all.attn.window = 0;
      two.attention_paged(all, pp.q.data(), pp.ks.data(), pp.vs.data(), whole.data());
      all.attn.window = (int32_t)(s.n_past + s.n_tokens);
      two.attention_paged(all, pp.q.data(), pp.ks.data(), pp.vs.data(), wide.data());
      CHECK(same_bits(whole, wide));
      if (c.window >= s.n_past + s.n_tokens) CHECK(same_bits(whole, got));
    }
  }
}

TEST_CASE("attention window: a contiguous cache gives the paged store's bits") {
  cpu_backend be(2);
  for (const window_case& c : k_cases) {
    paged_pair pp(be, c.s, kv_type::f32, 99u);
    pp.p.attn.window = c.window;
    const attention_params& a = pp.p.attn;
    const int64_t n_pos = a.n_past + a.n_tokens;
    std::vector<float> k, v;  // positions in order, contiguous
    for (int64_t j = 0; j < n_pos; ++j) {
      const int64_t r = attention_paged_row(pp.p, j);
      k.insert(k.end(), pp.k32.begin() + r * a.k_row_stride, pp.k32.begin() + (r + 1) * a.k_row_stride);
      v.insert(v.end(), pp.v32.begin() + r * a.v_row_stride, pp.v32.begin() + (r + 1) * a.v_row_stride);
    }
    const size_t n_out = (size_t)(a.n_tokens * a.n_head * a.head_dim_v);
    std::vector<float> paged(n_out, NAN), contiguous(n_out, NAN);
    be.attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), paged.data());
    be.attention(a, pp.q.data(), k.data(), v.data(), contiguous.data());
    CHECK(same_bits(paged, contiguous));
  }
}

TEST_CASE("attention window: a negative window throws (on non-causal attention too)") {
  cpu_backend be(1);
  paged_pair pp(be, {4, 2, 32, 32, 0, 4}, kv_type::f32, 3u);
  std::vector<float> out(4 * 4 * 32);
  pp.p.attn.window = -1;
  CHECK_THROWS_WITH(be.attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), out.data()), "sliding window");
  CHECK_THROWS_WITH(attention_paged_ref(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), out.data()), "sliding window");
  attention_params a = pp.p.attn;
  a.n_past = 0;
  CHECK_THROWS_WITH(be.attention(a, pp.q.data(), pp.k32.data(), pp.v32.data(), out.data()), "sliding window");
  pp.p.attn.causal = false;
  CHECK_THROWS_WITH(be.attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), out.data()), "sliding window");
  a.causal = false;
  CHECK_THROWS_WITH(be.attention(a, pp.q.data(), pp.k32.data(), pp.v32.data(), out.data()), "sliding window");
}
