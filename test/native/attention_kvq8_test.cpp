// q8_0 K / V stores on the CPU (kv_type q8_0: llama.cpp's block_q8_0, 34 bytes per 32 values): store_kv quantizes
// each 32 values as llama.cpp's x86 quantize_row_q8_0 does (d = amax / 127 as f16, q = round-half-even(x * 127 /
// amax)), and attention over a q8_0 store gives, bit for bit, attention over an f32 store holding the dequantized
// values (f16 d x q, exact), on every path: the active level's tiled or per-item kernels through attention_paged
// and attention() over a contiguous cache with 1 and 2 threads, the AVX2 per-item kernel, the portable kernel; the
// plain reference reads the q8_0 store too.
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
    {4, 2, 96, 32, 7, 23},      // dv 32: one 32-wide V chunk
    {4, 1, 32, 64, 2, 3},       // MQA, dk 32
};

// Value i of a q8_0 store, as plain arithmetic (shares nothing with the kernels' readers).
float dequant(const std::vector<float>& store, int64_t i) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(store.data()) + i / 32 * 34;
  uint16_t d;
  std::memcpy(&d, b, 2);
  return fp16_to_f32(d) * (float)(int8_t)b[2 + i % 32];
}

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

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A paged q8_0 store (positions in reversed block order) written through store_kv, and the f32 store of its values.
struct paged_pair {
  paged_attention_params p;
  std::vector<int32_t> table;
  std::vector<float> kq, vq, k32, v32, q;
  paged_pair(cpu_backend& be, const shape& s, uint32_t seed) {
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
    kq.assign((size_t)kv_store_floats(kv_type::q8_0, rows * kd), NAN);
    vq.assign((size_t)kv_store_floats(kv_type::q8_0, rows * vd), NAN);
    be.store_kv(kq.data(), vq.data(), slot.data(), k_new.data(), v_new.data(), n_pos, kd, vd, kv_type::q8_0);
    p.attn.kv = kv_type::q8_0;
    k32.assign((size_t)(rows * kd), NAN);
    v32.assign((size_t)(rows * vd), NAN);
    for (int64_t j = 0; j < n_pos; ++j) {
      for (int64_t e = 0; e < kd; ++e) k32[slot[j] * kd + e] = dequant(kq, slot[j] * kd + e);
      for (int64_t e = 0; e < vd; ++e) v32[slot[j] * vd + e] = dequant(vq, slot[j] * vd + e);
    }
  }
  paged_attention_params f32_params() const {
    paged_attention_params r = p;
    r.attn.kv = kv_type::f32;
    return r;
  }
};

// Every (token, head) through one per-item kernel over the pair's q8_0 rows and over its f32 rows.
template <class Kernel>
void check_per_item(const paged_pair& pp, Kernel kernel) {
  const attention_params& a = pp.p.attn;
  const int32_t group = a.n_head / a.n_head_kv;
  const int64_t n_pos = a.n_past + a.n_tokens;
  std::vector<const void*> kq((size_t)n_pos), vq((size_t)n_pos), k32((size_t)n_pos), v32((size_t)n_pos);
  for (int64_t j = 0; j < n_pos; ++j) {
    const int64_t r = attention_paged_row(pp.p, j);
    kq[j] = reinterpret_cast<const char*>(pp.kq.data()) + kv_bytes(kv_type::q8_0, r * a.k_row_stride);
    vq[j] = reinterpret_cast<const char*>(pp.vq.data()) + kv_bytes(kv_type::q8_0, r * a.v_row_stride);
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
      kernel(qh, kv_rows{nullptr, 0, kq.data(), ko, a.kv}, kv_rows{nullptr, 0, vq.data(), vo, a.kv},
             a.n_past + t + 1, a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), got.data());
      kernel(qh, kv_rows{nullptr, 0, k32.data(), ko}, kv_rows{nullptr, 0, v32.data(), vo}, a.n_past + t + 1,
             a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), want.data());
      all_same = all_same && same_bits(got, want);
    }
  }
  CHECK(all_same);
}

}  // namespace

TEST_CASE("kvq8: store_kv writes quantize_row_q8_0's blocks (llama.cpp's x86 quantizer): scale amax / 127, ties to even") {
  std::vector<float> x(128, 0.0f);
  const float first[] = {127.0f, 2.5f, 3.5f, -2.5f, -127.0f, 63.5f, 0.49f, -0.5f};
  for (int i = 0; i < 8; ++i) x[i] = first[i];  // amax 127: id = 1, so q = round-half-even(x)
  std::mt19937 g(4);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int i = 64; i < 96; ++i) x[i] = d(g);  // block 1 stays zero
  for (int i = 96; i < 128; ++i) x[i] = d(g);
  std::vector<kv_q8> b(4);
  quantize_row_q8_0(x.data(), b.data(), 128);
  CHECK_EQ(b[0].d, f32_to_fp16(1.0f));
  const int8_t want[] = {127, 2, 4, -2, -127, 64, 0, 0};
  CHECK(std::memcmp(b[0].qs, want, 8) == 0);
  CHECK_EQ(b[1].d, 0);
  bool zeros = true;
  for (int i = 0; i < 32; ++i) zeros = zeros && b[1].qs[i] == 0;
  CHECK(zeros);
  float amax = 0;
  for (int i = 64; i < 96; ++i) amax = std::max(amax, std::fabs(x[i]));
  double worst = 0;
  for (int i = 0; i < 32; ++i) worst = std::max(worst, (double)std::fabs(fp16_to_f32(b[2].d) * b[2].qs[i] - x[64 + i]));
  CHECK(worst <= 0.5 * amax / 127 * 1.001 + 1e-6);  // half a step (the f16 scale moves it by at most 2^-11)

  // store_kv: token i's 64 values into row rows[i] (2 blocks a row), other rows untouched, K and V alike
  cpu_backend be(1);
  const std::vector<int64_t> rows = {2, 0};
  std::vector<float> ks((size_t)kv_store_floats(kv_type::q8_0, 3 * 64), 0.0f), vs = ks;
  be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 2, 64, 64, kv_type::q8_0);
  for (const std::vector<float>* s : {&ks, &vs}) {
    const kv_q8* kb = reinterpret_cast<const kv_q8*>(s->data());
    CHECK(std::memcmp(&kb[4], &b[0], 2 * sizeof(kv_q8)) == 0);  // row 2 = token 0 = blocks 0, 1
    CHECK(std::memcmp(&kb[0], &b[2], 2 * sizeof(kv_q8)) == 0);  // row 0 = token 1 = blocks 2, 3
    const kv_q8 zero{};
    CHECK(std::memcmp(&kb[2], &zero, sizeof(kv_q8)) == 0);      // row 1 untouched
    CHECK(std::memcmp(&kb[3], &zero, sizeof(kv_q8)) == 0);
  }
  CHECK_EQ(kv_bytes(kv_type::q8_0, 64), 68);
  CHECK_THROWS_WITH(be.store_kv(ks.data(), vs.data(), rows.data(), x.data(), x.data(), 1, 48, 48, kv_type::q8_0),
                    "multiple of 32");
}

TEST_CASE("kvq8: paged attention over a q8_0 store equals the f32 store of its values bitwise") {
  cpu_backend one(1), two(2);
  uint32_t seed = 1;
  for (const shape& s : k_shapes) {
    const paged_pair pp(one, s, seed++);
    const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
    std::vector<float> want(n_out, NAN), ref(n_out, NAN);
    one.attention_paged(pp.f32_params(), pp.q.data(), pp.k32.data(), pp.v32.data(), want.data());
    for (cpu_backend* be : {&one, &two}) {
      std::vector<float> got(n_out, NAN);
      be->attention_paged(pp.p, pp.q.data(), pp.kq.data(), pp.vq.data(), got.data());
      CHECK(same_bits(got, want));
    }
    attention_paged_ref(pp.p, pp.q.data(), pp.kq.data(), pp.vq.data(), ref.data());
    double d = 0;
    for (size_t i = 0; i < n_out; ++i) d = std::max(d, (double)std::fabs(ref[i] - want[i]));
    CHECK(d < 1e-5);
  }
}

TEST_CASE("kvq8: the per-item kernels (portable and AVX2) read q8_0 rows as the f32 rows of their values") {
  uint32_t seed = 50;
  cpu_backend be(1);
  for (const shape& s : k_shapes) {
    const paged_pair pp(be, s, seed++);
    check_per_item(pp, [](const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t dk, int32_t dv,
                          float scale, float* scratch, float* out) {
      ops_attention_head_kv(q, k, v, n_kv, dk, dv, scale, scratch, out);
    });
    if (cpu_level_supported(cpu_level::avx2)) check_per_item(pp, ops_attention_head_kv_avx2);
  }
}

TEST_CASE("kvq8: attention() over a contiguous q8_0 cache (padded rows) equals the f32 cache of its values") {
  const shape shapes[] = {{32, 8, 64, 64, 600, 1}, {16, 8, 128, 128, 0, 37}, {4, 2, 96, 32, 5, 11}};
  cpu_backend one(1), two(2);
  uint32_t seed = 90;
  for (const shape& s : shapes) {
    const attention_params a = params_of(s, 32, 64);  // padded by whole blocks
    const int64_t n_pos = s.n_past + s.n_tokens;
    std::mt19937 g(seed++);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> q((size_t)(s.n_tokens * s.n_head * s.dk)), kf((size_t)(n_pos * a.k_row_stride)),
        vf((size_t)(n_pos * a.v_row_stride));
    for (float& x : q) x = 4.0f * d(g);
    for (float& x : kf) x = d(g);
    for (float& x : vf) x = d(g);
    std::vector<float> kq((size_t)kv_store_floats(kv_type::q8_0, (int64_t)kf.size()));
    std::vector<float> vq((size_t)kv_store_floats(kv_type::q8_0, (int64_t)vf.size()));
    one.store_kv(kq.data(), vq.data(), nullptr, kf.data(), vf.data(), n_pos, a.k_row_stride, a.v_row_stride, kv_type::q8_0);
    for (size_t i = 0; i < kf.size(); ++i) kf[i] = dequant(kq, (int64_t)i);
    for (size_t i = 0; i < vf.size(); ++i) vf[i] = dequant(vq, (int64_t)i);
    const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
    std::vector<float> want(n_out, NAN);
    one.attention(a, q.data(), kf.data(), vf.data(), want.data());
    attention_params aq = a;
    aq.kv = kv_type::q8_0;
    for (cpu_backend* be : {&one, &two}) {
      std::vector<float> got(n_out, NAN);
      be->attention(aq, q.data(), kq.data(), vq.data(), got.data());
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("kvq8: a paged q8_0 store needs whole blocks per head and row; the encoder refuses it by name") {
  cpu_backend be(1);
  paged_attention_params p;
  p.attn = params_of({4, 2, 40, 40, 0, 1});
  p.attn.kv = kv_type::q8_0;
  int32_t table[1] = {0};
  p.block_table = table;
  p.n_table = 1;
  p.block_size = 16;
  p.n_blocks = 1;
  std::vector<float> q(160), kv(1024), out(160);
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()), "multiples of 32");
  attention_params a = params_of({1, 1, 32, 32, 0, 2});
  a.causal = false;
  a.kv = kv_type::q8_0;
  CHECK_THROWS_WITH(be.attention(a, q.data(), kv.data(), kv.data(), out.data()), "float32");
}
