// 16-bit K / V stores on the CPU (kv_type f16 / bf16): store_kv rounds each value to nearest even (fp16.h's
// bits), and attention over a 16-bit store gives, bit for bit, attention over an f32 store holding the same
// rounded values, on every path (the active level's tiled or per-item kernels through attention_paged and
// attention() over a contiguous cache with 1 and 2 threads, the AVX2 per-item kernel, the portable kernel), for head
// dims the fast kernels cover and ones they leave to fallbacks; and the plain reference reads the 16-bit store too.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_paged.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/ops.h"
#include "harness.h"

using namespace spindle;

namespace {

struct shape {
  int32_t n_head, n_head_kv, dk, dv;
  int64_t n_past, n_tokens;
};

const shape k_shapes[] = {
    {32, 8, 64, 64, 0, 40},     // llama-1B-like prompt
    {32, 8, 64, 64, 300, 1},    // decode over more than one V block (256 positions)
    {16, 8, 128, 128, 17, 9},   // qwen3-like chunk after a prefix
    {4, 2, 96, 40, 7, 23},      // dv % 16 != 0 (8-dim chunks)
    {4, 2, 40, 20, 5, 11},      // dims the tiled kernels leave to the per-item kernel's fallbacks
    {4, 1, 36, 12, 2, 3},       // dv % 8 != 0: the per-item kernel's scalar tail
};

// The attention parameters of a shape; row strides padded by k_pad / v_pad elements.
attention_params params_of(const shape& s, int64_t k_pad = 0, int64_t v_pad = 0) {
  attention_params a;
  a.n_head = s.n_head;
  a.n_head_kv = s.n_head_kv;
  a.head_dim_k = s.dk;
  a.head_dim_v = s.dv;
  a.n_past = s.n_past;
  a.n_tokens = s.n_tokens;
  a.k_row_stride = (int64_t)s.n_head_kv * s.dk + k_pad;
  a.v_row_stride = (int64_t)s.n_head_kv * s.dv + v_pad;
  a.scale = 1.0f / std::sqrt((float)s.dk);
  return a;
}

float widen(kv_type t, uint16_t bits) { return t == kv_type::f16 ? fp16_to_f32(bits) : bf16_to_f32(bits); }
uint16_t round16(kv_type t, float x) { return t == kv_type::f16 ? f32_to_fp16(x) : f32_to_bf16(x); }

// A paged store of n_blocks blocks (positions in reversed block order) written through store_kv in `t`, and the
// f32 store holding the same values widened back.
struct paged_pair {
  paged_attention_params p;
  std::vector<int32_t> table;
  std::vector<float> k16, v16, k32, v32, q;
  paged_pair(cpu_backend& be, const shape& s, kv_type t, uint32_t seed) {
    const int32_t bs = 16;
    const int64_t n_pos = s.n_past + s.n_tokens, n_used = (n_pos + bs - 1) / bs;
    p.attn = params_of(s);
    p.block_size = bs;
    p.n_blocks = (int32_t)n_used;
    table.resize((size_t)n_used);
    for (int64_t b = 0; b < n_used; ++b) table[b] = (int32_t)(n_used - 1 - b);
    p.block_table = table.data();
    p.n_table = (int32_t)n_used;
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    const int64_t kd = p.attn.k_row_stride, vd = p.attn.v_row_stride, rows = n_used * bs;
    std::vector<float> k_new((size_t)(n_pos * kd)), v_new((size_t)(n_pos * vd));
    for (float& x : k_new) x = d(g);
    for (float& x : v_new) x = d(g);
    q.resize((size_t)(s.n_tokens * s.n_head * s.dk));
    for (float& x : q) x = 4.0f * d(g);
    std::vector<int64_t> slot((size_t)n_pos);
    for (int64_t j = 0; j < n_pos; ++j) slot[j] = attention_paged_row(p, j);
    k16.assign((size_t)kv_store_floats(t, rows * kd), NAN);
    v16.assign((size_t)kv_store_floats(t, rows * vd), NAN);
    be.store_kv(k16.data(), v16.data(), slot.data(), k_new.data(), v_new.data(), n_pos, kd, vd, t);
    p.attn.kv = t;
    k32.assign((size_t)(rows * kd), NAN);
    v32.assign((size_t)(rows * vd), NAN);
    const uint16_t* kb = reinterpret_cast<const uint16_t*>(k16.data());
    const uint16_t* vb = reinterpret_cast<const uint16_t*>(v16.data());
    for (int64_t j = 0; j < n_pos; ++j) {
      for (int64_t e = 0; e < kd; ++e) k32[slot[j] * kd + e] = widen(t, kb[slot[j] * kd + e]);
      for (int64_t e = 0; e < vd; ++e) v32[slot[j] * vd + e] = widen(t, vb[slot[j] * vd + e]);
    }
  }
  paged_attention_params f32_params() const {
    paged_attention_params r = p;
    r.attn.kv = kv_type::f32;
    return r;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every (token, head) through one per-item kernel over the pair's 16-bit rows and over its f32 rows.
template <class Kernel>
void check_per_item(const paged_pair& pp, Kernel kernel) {
  const attention_params& a = pp.p.attn;
  const int32_t group = a.n_head / a.n_head_kv;
  const int64_t n_pos = a.n_past + a.n_tokens;
  std::vector<const void*> k16((size_t)n_pos), v16((size_t)n_pos), k32((size_t)n_pos), v32((size_t)n_pos);
  for (int64_t j = 0; j < n_pos; ++j) {
    const int64_t r = attention_paged_row(pp.p, j);
    k16[j] = reinterpret_cast<const uint16_t*>(pp.k16.data()) + r * a.k_row_stride;
    v16[j] = reinterpret_cast<const uint16_t*>(pp.v16.data()) + r * a.v_row_stride;
    k32[j] = pp.k32.data() + r * a.k_row_stride;
    v32[j] = pp.v32.data() + r * a.v_row_stride;
  }
  std::vector<float> scratch((size_t)ops_attention_scratch(n_pos, a.head_dim_v) + 64);
  std::vector<float> got((size_t)a.head_dim_v), want((size_t)a.head_dim_v);
  bool all_same = true;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int32_t h = 0; h < a.n_head; ++h) {
      const int64_t ko = (int64_t)(h / group) * a.head_dim_k, vo = (int64_t)(h / group) * a.head_dim_v;
      const float* qh = pp.q.data() + (t * a.n_head + h) * a.head_dim_k;
      kernel(qh, kv_rows{nullptr, 0, k16.data(), ko, a.kv}, kv_rows{nullptr, 0, v16.data(), vo, a.kv},
             a.n_past + t + 1, a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), got.data());
      kernel(qh, kv_rows{nullptr, 0, k32.data(), ko}, kv_rows{nullptr, 0, v32.data(), vo}, a.n_past + t + 1,
             a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), want.data());
      all_same = all_same && same_bits(got, want);
    }
  }
  CHECK(all_same);
}

}  // namespace

TEST_CASE("kv16: store_kv rounds each value to nearest even into its row; f32 rows are copies") {
  cpu_backend be(1);
  const int64_t kd = 5, vd = 3, n = 2;
  const std::vector<float> k_new = {1.0f, 1.0009766f, 65504.0f, 70000.0f, -3.1415927f,
                                    1e-6f, -0.0f, 2.0f, 0.33333334f, 123.456f};
  const std::vector<float> v_new = {0.1f, -0.2f, 0.3f, 1e-8f, 5.5f, -7.25f};
  const std::vector<int64_t> rows = {3, 1};
  for (kv_type t : {kv_type::f16, kv_type::bf16}) {
    std::vector<float> ks((size_t)kv_store_floats(t, 4 * kd), 0.0f), vs((size_t)kv_store_floats(t, 4 * vd), 0.0f);
    be.store_kv(ks.data(), vs.data(), rows.data(), k_new.data(), v_new.data(), n, kd, vd, t);
    const uint16_t* kb = reinterpret_cast<const uint16_t*>(ks.data());
    const uint16_t* vb = reinterpret_cast<const uint16_t*>(vs.data());
    bool ok = true;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t e = 0; e < kd; ++e) ok = ok && kb[rows[i] * kd + e] == round16(t, k_new[i * kd + e]);
      for (int64_t e = 0; e < vd; ++e) ok = ok && vb[rows[i] * vd + e] == round16(t, v_new[i * vd + e]);
    }
    for (int64_t e = 0; e < kd; ++e) ok = ok && kb[0 * kd + e] == 0 && kb[2 * kd + e] == 0;  // other rows untouched
    CHECK(ok);
  }
  CHECK(fp16_to_f32(f32_to_fp16(70000.0f)) == INFINITY);  // past half's range: inf, as F16C
  std::vector<float> ks(4 * kd, 0.0f), vs(4 * vd, 0.0f);
  be.store_kv(ks.data(), vs.data(), rows.data(), k_new.data(), v_new.data(), n, kd, vd, kv_type::f32);
  CHECK(std::memcmp(&ks[3 * kd], &k_new[0], kd * sizeof(float)) == 0);
  CHECK(std::memcmp(&vs[1 * vd], &v_new[vd], vd * sizeof(float)) == 0);
  CHECK(be.supports_kv(kv_type::f16) && be.supports_kv(kv_type::bf16) && be.supports_kv(kv_type::f32));
}

TEST_CASE("kv16: paged attention over a 16-bit store equals the f32 store of the same values bitwise") {
  cpu_backend one(1), two(2);
  uint32_t seed = 1;
  for (kv_type t : {kv_type::f16, kv_type::bf16}) {
    for (const shape& s : k_shapes) {
      const paged_pair pp(one, s, t, seed++);
      const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
      std::vector<float> want(n_out, NAN), ref(n_out, NAN);
      one.attention_paged(pp.f32_params(), pp.q.data(), pp.k32.data(), pp.v32.data(), want.data());
      for (cpu_backend* be : {&one, &two}) {
        std::vector<float> got(n_out, NAN);
        be->attention_paged(pp.p, pp.q.data(), pp.k16.data(), pp.v16.data(), got.data());
        CHECK(same_bits(got, want));
      }
      attention_paged_ref(pp.p, pp.q.data(), pp.k16.data(), pp.v16.data(), ref.data());
      double d = 0;
      for (size_t i = 0; i < n_out; ++i) d = std::max(d, (double)std::fabs(ref[i] - want[i]));
      CHECK(d < 1e-5);
    }
  }
}

TEST_CASE("kv16: the per-item kernels (portable and AVX2) read 16-bit rows as the f32 rows of the same values") {
  uint32_t seed = 50;
  cpu_backend be(1);
  for (kv_type t : {kv_type::f16, kv_type::bf16}) {
    for (const shape& s : k_shapes) {
      const paged_pair pp(be, s, t, seed++);
      check_per_item(pp, [](const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t dk, int32_t dv,
                            float scale, float* scratch, float* out) {
        ops_attention_head_kv(q, k, v, n_kv, dk, dv, scale, scratch, out);
      });
      if (cpu_level_supported(cpu_level::avx2)) check_per_item(pp, ops_attention_head_kv_avx2);
    }
  }
}

TEST_CASE("kv16: attention() over a contiguous 16-bit cache (padded, odd row strides) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 40, 20, 5, 11}, {4, 1, 36, 12, 2, 3},
                          {8, 2, 80, 80, 300, 1}};
  cpu_backend one(1), two(2);
  uint32_t seed = 90;
  for (kv_type t : {kv_type::f16, kv_type::bf16}) {
    for (const shape& s : shapes) {
      const attention_params a = params_of(s, 3, 5);  // odd strides: 16-bit rows start at any 2-byte boundary
      const int64_t n_pos = s.n_past + s.n_tokens;
      std::mt19937 g(seed++);
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      std::vector<float> q((size_t)(s.n_tokens * s.n_head * s.dk)), kf((size_t)(n_pos * a.k_row_stride)),
          vf((size_t)(n_pos * a.v_row_stride));
      for (float& x : q) x = 4.0f * d(g);
      for (float& x : kf) x = d(g);
      for (float& x : vf) x = d(g);
      std::vector<float> k16((size_t)kv_store_floats(t, (int64_t)kf.size())), v16((size_t)kv_store_floats(t, (int64_t)vf.size()));
      one.store_kv(k16.data(), v16.data(), nullptr, kf.data(), vf.data(), n_pos, a.k_row_stride, a.v_row_stride, t);
      const uint16_t* kb = reinterpret_cast<const uint16_t*>(k16.data());
      const uint16_t* vb = reinterpret_cast<const uint16_t*>(v16.data());
      for (size_t i = 0; i < kf.size(); ++i) kf[i] = widen(t, kb[i]);
      for (size_t i = 0; i < vf.size(); ++i) vf[i] = widen(t, vb[i]);
      const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
      std::vector<float> want(n_out, NAN);
      one.attention(a, q.data(), kf.data(), vf.data(), want.data());
      attention_params a16 = a;
      a16.kv = t;
      for (cpu_backend* be : {&one, &two}) {
        std::vector<float> got(n_out, NAN);
        be->attention(a16, q.data(), k16.data(), v16.data(), got.data());
        CHECK(same_bits(got, want));
      }
    }
  }
}

TEST_CASE("kv16: non-causal attention (an encoder's) refuses a 16-bit cache by name") {
  cpu_backend be(1);
  attention_params a;
  a.n_head = a.n_head_kv = 1;
  a.head_dim_k = a.head_dim_v = 8;
  a.k_row_stride = a.v_row_stride = 8;
  a.n_tokens = 2;
  a.causal = false;
  a.kv = kv_type::f16;
  std::vector<float> q(16), kv(16), out(16);
  CHECK_THROWS_WITH(be.attention(a, q.data(), kv.data(), kv.data(), out.data()), "float32");
}
