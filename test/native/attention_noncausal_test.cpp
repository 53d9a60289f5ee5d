// Non-causal attention over the KV cache on the CPU (attention_params::causal = false: gemma3's image spans, whose
// rows see each other): every K / V store type, with and without a sliding window (the query at P attends keys
// [max(0, P - window + 1), n_past + n_tokens)), n_past 0 and > 0, GQA. Each call agrees with the plain reference
// within 1e-5 and has the same bits on 1 and 2 threads; each query has the bits of a one-token causal call over
// exactly its keys (the per-item kernel's), except where the bidirectional AVX2 tiles of an f32 encoder call take it;
// a contiguous cache gives the paged store's bits; and an attention_paged_batch of a causal segment, a non-causal one
// and a causal one (a prompt chunk with an image span) gives each its own call's bits, its causal rows those of
// one causal call over the whole chunk.
// Run under SPINDLE_CPU_FEATURES=scalar and =avx2 too: the portable per-item kernel and the AVX2 one (the level is
// read once per process).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <vector>

#include "kv_store_pair.h"

using namespace kv_store_test;

namespace {

// GQA shapes (4 query heads over 2 KV heads) of whole 32-value blocks (every store type): a prompt from position 0,
// a chunk after a prefix with dv != dk, a chunk across several 16-row blocks.
const shape k_block_dim_shapes[] = {{4, 2, 64, 64, 0, 12}, {4, 2, 64, 32, 21, 9}, {4, 2, 32, 64, 40, 17}};
// Head dims the per-item kernels' fallbacks take (not whole blocks: the other store types only).
const shape k_odd_dim_shape = {4, 2, 40, 20, 5, 11};

// The shapes for store type t.
std::vector<shape> shapes_for(kv_type t) {
  std::vector<shape> s(std::begin(k_block_dim_shapes), std::end(k_block_dim_shapes));
  if (!kv_blocked(t)) s.push_back(k_odd_dim_shape);
  return s;
}

// Windows for a call of n_pos positions: none, under the call (3, 5), exactly over it, far past it.
std::vector<int32_t> windows_for(int64_t n_pos) { return {0, 3, 5, (int32_t)n_pos, 1 << 20}; }

// Whether a non-causal call runs through the bidirectional AVX2 tiles (attention_bidir.h: an f32 cache and no
// window that drops a key), whose arithmetic is their own; every other non-causal call gives each query the
// per-item kernel's bits.
bool bidir_tiles(const attention_params& a) {
  return (int)cpu_active_level() >= (int)cpu_level::avx2 && a.kv == kv_type::f32 &&
         (a.window == 0 || a.n_past + a.n_tokens <= a.window);
}

// The first key the query at position pos attends (0 without a window), counted out by the test.
int64_t first_key(int64_t pos, int32_t window) { return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0; }

// Positions [first, end) of the pair's typed store, as a contiguous cache of the same type (row bytes copied).
std::vector<float> typed_rows(const paged_pair& pp, const std::vector<float>& store, int64_t stride, int64_t first,
                              int64_t end) {
  const kv_type t = pp.p.attn.kv;
  const int64_t row_bytes = kv_bytes(t, stride);
  std::vector<float> out((size_t)kv_store_floats(t, (end - first) * stride), NAN);
  const char* src = reinterpret_cast<const char*>(store.data());
  char* dst = reinterpret_cast<char*>(out.data());
  for (int64_t j = first; j < end; ++j) {
    std::memcpy(dst + (j - first) * row_bytes, src + attention_paged_row(pp.p, j) * row_bytes, (size_t)row_bytes);
  }
  return out;
}

// Query t of the pair's non-causal call alone: a one-token causal call at the last position over a contiguous
// cache (of the store's type) holding exactly the query's keys.
std::vector<float> one_query_over_its_keys(cpu_backend& be, const paged_pair& pp, int64_t t) {
  const attention_params& a = pp.p.attn;
  const int64_t first = first_key(a.n_past + t, a.window), end = a.n_past + a.n_tokens;
  const std::vector<float> k = typed_rows(pp, pp.ks, a.k_row_stride, first, end);
  const std::vector<float> v = typed_rows(pp, pp.vs, a.v_row_stride, first, end);
  attention_params one = a;
  one.causal = true;
  one.window = 0;
  one.n_past = end - first - 1;
  one.n_tokens = 1;
  std::vector<float> out((size_t)a.n_head * a.head_dim_v, NAN);
  be.attention(one, pp.q.data() + t * a.n_head * a.head_dim_k, k.data(), v.data(), out.data());
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, (double)std::fabs(a[i] - b[i]));
  return a.size() == b.size() ? d : INFINITY;
}

std::vector<float> paged_out(cpu_backend& be, const paged_attention_params& p, const paged_pair& pp) {
  std::vector<float> out((size_t)(p.attn.n_tokens * p.attn.n_head * p.attn.head_dim_v), NAN);
  be.attention_paged(p, pp.q.data(), pp.ks.data(), pp.vs.data(), out.data());
  return out;
}

}  // namespace

TEST_CASE("attention non-causal: every store type and window as the reference, 1 thread == 2, each query over its keys alone") {
  cpu_backend one(1), two(2);
  uint32_t seed = 300;
  int checked_alone = 0;
  for (kv_type t : k_kv_types) {
    for (const shape& s : shapes_for(t)) {
      for (int32_t window : windows_for(s.n_past + s.n_tokens)) {
        paged_pair pp(two, s, t, seed++);
        pp.p.attn.causal = false;
        pp.p.attn.window = window;
        const std::vector<float> got = paged_out(two, pp.p, pp), got1 = paged_out(one, pp.p, pp);
        std::vector<float> ref(got.size(), NAN);
        attention_paged_ref(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), ref.data());
        const double d = max_abs_diff(got, ref);
        if (!(d < 1e-5)) {
          std::printf("  %s store, %lld rows after %lld, dims %d/%d, window %d: max |got - ref| %.2e\n",
                      kv_type_name(t), (long long)s.n_tokens, (long long)s.n_past, s.dk, s.dv, window, d);
        }
        CHECK(d < 1e-5);
        CHECK(same_bits(got, got1));
        if (bidir_tiles(pp.p.attn)) continue;
        const size_t row = (size_t)s.n_head * s.dv;
        bool each_alone = true;
        for (int64_t tok = 0; tok < s.n_tokens; ++tok) {
          const std::vector<float> want = one_query_over_its_keys(two, pp, tok);
          each_alone = each_alone && std::memcmp(want.data(), got.data() + tok * row, row * 4) == 0;
        }
        CHECK(each_alone);
        ++checked_alone;
      }
    }
  }
  CHECK(checked_alone > 0);
}

TEST_CASE("attention non-causal: a window covering the call is no window; a narrower one drops the keys below it") {
  cpu_backend be(2);
  uint32_t seed = 400;
  for (kv_type t : k_kv_types) {
    for (const shape& s : shapes_for(t)) {
      paged_pair pp(be, s, t, seed++);
      pp.p.attn.causal = false;
      const std::vector<float> none = paged_out(be, pp.p, pp);
      for (int32_t covering : {(int32_t)(s.n_past + s.n_tokens), 1 << 20}) {
        pp.p.attn.window = covering;
        CHECK(same_bits(paged_out(be, pp.p, pp), none));
      }
      // a window of 3 over a call whose first query (at n_past >= 3) has keys below its window: that query's output
      // is another one
      if (s.n_past < 3) continue;
      pp.p.attn.window = 3;
      const std::vector<float> narrow = paged_out(be, pp.p, pp);
      const size_t row = (size_t)s.n_head * s.dv;
      CHECK(std::memcmp(narrow.data(), none.data(), row * 4) != 0);
    }
  }
}

TEST_CASE("attention non-causal: a contiguous cache of any store type gives the paged store's bits") {
  cpu_backend be(2);
  uint32_t seed = 500;
  for (kv_type t : k_kv_types) {
    for (const shape& s : shapes_for(t)) {
      for (int32_t window : {0, 5}) {
        paged_pair pp(be, s, t, seed++);
        pp.p.attn.causal = false;
        pp.p.attn.window = window;
        const attention_params& a = pp.p.attn;
        const int64_t n_pos = a.n_past + a.n_tokens;
        const std::vector<float> k = typed_rows(pp, pp.ks, a.k_row_stride, 0, n_pos);
        const std::vector<float> v = typed_rows(pp, pp.vs, a.v_row_stride, 0, n_pos);
        std::vector<float> contiguous((size_t)(a.n_tokens * a.n_head * a.head_dim_v), NAN);
        be.attention(a, pp.q.data(), k.data(), v.data(), contiguous.data());
        CHECK(same_bits(contiguous, paged_out(be, pp.p, pp)));
      }
    }
  }
}

TEST_CASE("attention non-causal: a typed store gives the bits of an f32 store of its values, item by item") {
  cpu_backend be(2);
  uint32_t seed = 550;
  int compared = 0;
  for (kv_type t : k_kv_types) {
    if (t == kv_type::f32) continue;
    for (const shape& s : shapes_for(t)) {
      for (int32_t window : {0, 5}) {
        paged_pair pp(be, s, t, seed++);
        pp.p.attn.causal = false;
        pp.p.attn.window = window;
        const paged_attention_params f = pp.f32_params();
        if (bidir_tiles(f.attn)) continue;  // the f32 store's call takes the bidirectional tiles: other arithmetic
        std::vector<float> want((size_t)(s.n_tokens * s.n_head * s.dv), NAN);
        be.attention_paged(f, pp.q.data(), pp.k32.data(), pp.v32.data(), want.data());
        CHECK(same_bits(paged_out(be, pp.p, pp), want));
        ++compared;
      }
    }
  }
  CHECK(compared > 0);
}

// A prompt chunk with an image span, as the engine sends it: rows [0, c0) causal, [c0, c1) the image (non-causal at
// n_past = its start, seeing up to its end), [c1, n) causal again; one attention_paged_batch call.
TEST_CASE("attention non-causal: a batch of causal, non-causal and causal segments == each segment's own call") {
  cpu_backend one(1), two(2);
  uint32_t seed = 600;
  for (kv_type t : k_kv_types) {
    for (int64_t prefix : {0, 10}) {
      for (int32_t window : {0, 5}) {
        const shape s{4, 2, 64, 64, prefix, 29};
        paged_pair pp(two, s, t, seed++);
        pp.p.attn.window = window;
        const int64_t cut[4] = {0, 7, 23, s.n_tokens};  // segment g: chunk rows [cut[g], cut[g + 1])
        std::vector<paged_attention_params> segs(3, pp.p);
        for (int g = 0; g < 3; ++g) {
          segs[g].attn.n_past = prefix + cut[g];
          segs[g].attn.n_tokens = cut[g + 1] - cut[g];
          segs[g].attn.causal = g != 1;
        }
        const size_t row_q = (size_t)s.n_head * s.dk, row_o = (size_t)s.n_head * s.dv;
        const size_t n_out = (size_t)s.n_tokens * row_o;
        std::vector<float> batch(n_out, NAN), batch1(n_out, NAN), alone(n_out, NAN);
        two.attention_paged_batch(segs.data(), 3, pp.q.data(), pp.ks.data(), pp.vs.data(), batch.data());
        one.attention_paged_batch(segs.data(), 3, pp.q.data(), pp.ks.data(), pp.vs.data(), batch1.data());
        CHECK(same_bits(batch, batch1));
        bool image_as_reference = true;
        for (int g = 0; g < 3; ++g) {
          two.attention_paged(segs[g], pp.q.data() + cut[g] * row_q, pp.ks.data(), pp.vs.data(),
                              alone.data() + cut[g] * row_o);
          if (g == 1) {
            std::vector<float> ref((size_t)(cut[2] - cut[1]) * row_o, NAN);
            attention_paged_ref(segs[1], pp.q.data() + cut[1] * row_q, pp.ks.data(), pp.vs.data(), ref.data());
            const std::vector<float> got(batch.begin() + (int64_t)(cut[1] * row_o), batch.begin() + (int64_t)(cut[2] * row_o));
            image_as_reference = max_abs_diff(got, ref) < 1e-5;
          }
        }
        CHECK(same_bits(batch, alone));
        CHECK(image_as_reference);
        // the causal segments' rows: those of one causal call over the whole chunk (the image rows' K / V are the
        // same whoever attends them)
        const std::vector<float> causal = paged_out(two, pp.p, pp);
        const bool before = std::memcmp(batch.data(), causal.data(), cut[1] * row_o * 4) == 0;
        const bool after =
            std::memcmp(batch.data() + cut[2] * row_o, causal.data() + cut[2] * row_o, (cut[3] - cut[2]) * row_o * 4) == 0;
        const bool image_differs =
            std::memcmp(batch.data() + cut[1] * row_o, causal.data() + cut[1] * row_o, (cut[2] - cut[1]) * row_o * 4) != 0;
        CHECK(before);
        CHECK(after);
        CHECK(image_differs);
      }
    }
  }
}
