// Tests of the threaded CPU backend ops: bitwise equal to the single-row kernels whatever the thread count
// and however the rows are batched (the batch-invariance promise of backend.h).
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/ops.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<float> rnd(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v((size_t)n);
  for (auto& x : v) x = dist(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The single-row kernels the backend runs at this CPU's active level.
bool use_avx2() { return (int)cpu_active_level() >= (int)cpu_level::avx2; }
void softmax_row(float* x, int64_t n, float scale) {
  use_avx2() ? ops_softmax_row_avx2(x, n, scale) : ops_softmax_row(x, n, scale);
}
void swiglu(const float* g, const float* u, float* y, int64_t n) {
  use_avx2() ? ops_swiglu_avx2(g, u, y, n) : ops_swiglu(g, u, y, n);
}
void rope_head(float* x, const float* cache, int32_t n_rot, bool neox) {
  use_avx2() ? ops_rope_head_avx2(x, cache, n_rot, neox) : ops_rope_head(x, cache, n_rot, neox);
}
void attention_head(const float* q, const float* k, int64_t ks, const float* v, int64_t vs, int64_t n_kv, int32_t dk,
                    int32_t dv, float scale, float* out) {
  std::vector<float> scratch(ops_attention_scratch(n_kv, dv));
  if (use_avx2()) ops_attention_head_avx2(q, k, ks, v, vs, n_kv, dk, dv, scale, scratch.data(), out);
  else ops_attention_head(q, k, ks, v, vs, n_kv, dk, dv, scale, scratch.data(), out);
}

}  // namespace

TEST_CASE("cpu backend: elementwise and row ops are thread-count invariant") {
  cpu_backend one(1), three(3);
  CHECK_EQ(three.n_threads(), 3);
  CHECK(std::string(one.name()) == "cpu");
  const int64_t rows = 37, n = 1000;  // large enough to take the threaded path
  auto x = rnd(rows * n, 1), w = rnd(n, 2), g = rnd(rows * n, 3);
  for (backend* be : {(backend*)&one, (backend*)&three}) {
    std::vector<float> y(rows * n), s = x, a(rows * n), sw(rows * n), b = x;
    be->rms_norm(x.data(), w.data(), y.data(), rows, n, 1e-5f);
    be->softmax(s.data(), rows, n, 0.7f);
    be->add(x.data(), g.data(), a.data(), rows * n);
    be->swiglu(g.data(), x.data(), sw.data(), rows * n);
    be->add_row_vector(b.data(), w.data(), rows, n);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> ry(n), rs(x.begin() + r * n, x.begin() + (r + 1) * n);
      ops_rms_norm_row(x.data() + r * n, w.data(), ry.data(), n, 1e-5f);
      softmax_row(rs.data(), n, 0.7f);
      CHECK(std::memcmp(ry.data(), y.data() + r * n, n * sizeof(float)) == 0);
      CHECK(std::memcmp(rs.data(), s.data() + r * n, n * sizeof(float)) == 0);
      for (int64_t i = 0; i < n; ++i) CHECK_EQ(b[r * n + i], x[r * n + i] + w[i]);
    }
    std::vector<float> sw_one_call(rows * n);
    swiglu(g.data(), x.data(), sw_one_call.data(), rows * n);  // the threaded split must not change a bit
    CHECK(same_bits(sw, sw_one_call));
    for (int64_t i = 0; i < rows * n; ++i) {
      CHECK_EQ(a[i], x[i] + g[i]);
      CHECK_NEAR(sw[i], ops_silu(g[i]) * x[i], 1e-6 * (1 + std::fabs(sw[i])));
    }
  }
}

TEST_CASE("cpu backend: rope per row uses that row's position; invariant to batching and threads") {
  cpu_backend one(1), three(3);
  const int64_t rows = 9;
  const int32_t n_head = 3, head_dim = 8;
  rope_params p;
  p.n_rot = 8;
  p.freq_base = 1e6f;
  p.neox = true;
  auto x = rnd(rows * n_head * head_dim, 4);
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = (int32_t)(r * 7 + 3);
  std::vector<float> a = x, b = x;
  one.rope(a.data(), rows, n_head, head_dim, pos.data(), p);
  three.rope(b.data(), rows, n_head, head_dim, pos.data(), p);
  CHECK(same_bits(a, b));
  std::vector<float> cache(8);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> c(x.begin() + r * 24, x.begin() + (r + 1) * 24);
    ops_rope_cache(pos[r], p, cache.data());
    for (int h = 0; h < n_head; ++h) rope_head(c.data() + h * head_dim, cache.data(), 8, true);
    CHECK(std::memcmp(c.data(), a.data() + r * 24, 24 * sizeof(float)) == 0);
  }
  p.n_rot = 9;
  CHECK_THROWS_WITH(one.rope(a.data(), rows, n_head, head_dim, pos.data(), p), "n_rot");
}

TEST_CASE("cpu backend: causal GQA attention, chunked prefill equals one call") {
  cpu_backend one(1), three(3);
  attention_params p;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim_k = 8;
  p.head_dim_v = 8;
  p.k_row_stride = p.n_head_kv * p.head_dim_k;
  p.v_row_stride = p.n_head_kv * p.head_dim_v;
  p.scale = 1.0f / std::sqrt(8.0f);
  const int64_t n = 11;
  auto q = rnd(n * p.n_head * p.head_dim_k, 5), k = rnd(n * p.k_row_stride, 6), v = rnd(n * p.v_row_stride, 7);
  const int64_t row_out = p.n_head * p.head_dim_v, row_q = p.n_head * p.head_dim_k;
  std::vector<float> full(n * row_out), chunked(n * row_out), threaded(n * row_out);
  p.n_tokens = n;
  p.n_past = 0;
  one.attention(p, q.data(), k.data(), v.data(), full.data());
  three.attention(p, q.data(), k.data(), v.data(), threaded.data());
  CHECK(same_bits(full, threaded));
  for (int64_t start = 0; start < n; start += 4) {  // chunks of 4, 4, 3
    p.n_past = start;
    p.n_tokens = std::min<int64_t>(4, n - start);
    three.attention(p, q.data() + start * row_q, k.data(), v.data(), chunked.data() + start * row_out);
  }
  CHECK(same_bits(full, chunked));
  // token t, head h: equals the single-head kernel over keys 0..t of kv head h / 2
  std::vector<float> out(8);
  for (int64_t t = 0; t < n; ++t) {
    for (int h = 0; h < 4; ++h) {
      attention_head(q.data() + t * row_q + h * 8, k.data() + (h / 2) * 8, p.k_row_stride, v.data() + (h / 2) * 8,
                     p.v_row_stride, t + 1, 8, 8, p.scale, out.data());
      CHECK(std::memcmp(out.data(), full.data() + t * row_out + h * 8, 8 * sizeof(float)) == 0);
    }
  }
  // the first token attends only to itself
  for (int h = 0; h < 4; ++h)
    for (int d = 0; d < 8; ++d) CHECK_EQ(full[h * 8 + d], v[(h / 2) * 8 + d]);
  p.n_head_kv = 3;
  CHECK_THROWS_WITH(one.attention(p, q.data(), k.data(), v.data(), full.data()), "head");
}

TEST_CASE("cpu backend: F32 get_rows and matmul, memory helpers, id checks") {
  cpu_backend be(2);
  const int64_t n_in = 64, n_out = 5;
  auto table = rnd(n_in * n_out, 8);
  backend_weight w = be.upload_weight(ggml_type::F32, table.data(), n_in, n_out);
  CHECK(w.data == table.data());
  std::vector<int32_t> ids = {4, 0, 4};
  std::vector<float> rows(3 * n_in);
  be.get_rows(w, ids.data(), 3, rows.data());
  for (int i = 0; i < 3; ++i)
    CHECK(std::memcmp(rows.data() + i * n_in, table.data() + ids[i] * n_in, n_in * sizeof(float)) == 0);
  std::vector<float> y(3 * n_out);
  be.matmul(w, rows.data(), 3, y.data());
  for (int t = 0; t < 3; ++t)
    for (int o = 0; o < n_out; ++o) {
      double ref = 0;
      for (int i = 0; i < n_in; ++i) ref += (double)table[o * n_in + i] * rows[t * n_in + i];
      CHECK_NEAR(y[t * n_out + o], ref, 1e-4);
    }
  ids[1] = 5;
  CHECK_THROWS_WITH(be.get_rows(w, ids.data(), 3, rows.data()), "out of range");
  ids[1] = -1;
  CHECK_THROWS_WITH(be.get_rows(w, ids.data(), 3, rows.data()), "out of range");
  backend_buffer buf(be, 10);
  CHECK_EQ(buf.size(), (int64_t)10);
  for (int i = 0; i < 10; ++i) CHECK_EQ(buf.data()[i], 0.0f);
  std::vector<float> host = rnd(10, 9), back(10);
  be.upload(buf.data(), host.data(), 10);
  be.download(back.data(), buf.data(), 10);
  CHECK(same_bits(host, back));
  CHECK_THROWS_WITH(be.upload_weight(ggml_type::IQ2_XXS, table.data(), 256, 1), "unsupported");
  CHECK_THROWS_WITH(be.alloc_f32(-1), "negative");
}

TEST_CASE("cpu backend: K / V stores of every type; 16-bit ones take half the floats, fp8 a quarter, blocks 34 / 18 bytes per 32") {
  auto be = make_cpu_backend(1);
  for (const kv_type t : {kv_type::f32, kv_type::f16, kv_type::bf16, kv_type::fp8_e4m3, kv_type::fp8_e5m2,
                          kv_type::q8_0, kv_type::q4_0}) {
    CHECK(be->supports_kv(t));
    kv_type back;
    CHECK(kv_type_of_name(kv_type_name(t), &back) && back == t);
  }
  CHECK_EQ(kv_store_floats(kv_type::f32, 7), 7);
  CHECK_EQ(kv_store_floats(kv_type::f16, 7), 4);
  CHECK_EQ(kv_store_floats(kv_type::bf16, 8), 4);
  CHECK_EQ(kv_store_floats(kv_type::fp8_e4m3, 9), 3);
  CHECK_EQ(kv_store_floats(kv_type::q8_0, 64), 17);
  CHECK_EQ(kv_store_floats(kv_type::q4_0, 64), 9);
}
