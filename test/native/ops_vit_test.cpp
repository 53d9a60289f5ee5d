// The ViT encoder's backend ops on the CPU against plain double-precision loops: layer_norm (with / without weight
// and bias, odd widths, in place), gelu / gelu_quick (a wide range of x, huge |x|), non-causal attention (1 / 7 / 256
// tokens, head dims 64 / 72, MHA and GQA, contiguous and paged), and F16 / F32 matmul at the patch-embedding and
// projector widths. Batch invariance (a row alone == inside a larger call, 1 thread == 2 threads) is checked
// bitwise. Every kernel level this CPU runs is exercised directly where the op has one (portable and AVX2).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/attention_paged.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/ops.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<float> uniform(size_t n, std::mt19937& g, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

// ---- layer_norm ----

// y = (x - mean) / sqrt(var + eps) * w + b in double, var the population variance.
std::vector<double> layer_norm_ref(const std::vector<float>& x, const float* w, const float* b, int64_t rows,
                                   int64_t n, float eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i) mean += xr[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= (double)n;
    const double s = 1.0 / std::sqrt(var + (double)eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (xr[i] - mean) * s * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
  }
  return y;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::isnan(a[i]) ? INFINITY : std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

// Tolerance: outputs are of order 1 (|w| <= 2, |b| <= 1); f32 rounding of mean, x - mean, the scale and the two
// products is a few 1e-7, so max |y - ref| <= 4e-6.
TEST_CASE("vit ops: layer_norm vs a double loop (w / b optional, widths 1152 / 13 / 1 / 4304), in place, invariant") {
  auto be = make_cpu_backend(2), be1 = make_cpu_backend(1);
  std::mt19937 g(11);
  const float eps = 1e-6f;
  for (int64_t n : {1152, 13, 1, 8, 4304}) {
    const int64_t rows = 9;
    std::vector<float> x = uniform((size_t)(rows * n), g, -2.0f, 4.0f);  // mean ~1: the centring matters
    const std::vector<float> w = uniform((size_t)n, g, -2.0f, 2.0f), b = uniform((size_t)n, g, -1.0f, 1.0f);
    for (int mode = 0; mode < 4; ++mode) {
      const float* wp = mode & 1 ? w.data() : nullptr;
      const float* bp = mode & 2 ? b.data() : nullptr;
      const std::vector<double> ref = layer_norm_ref(x, wp, bp, rows, n, eps);
      std::vector<float> y(x.size()), y1(x.size()), yin = x, alone((size_t)n);
      be->layer_norm(x.data(), wp, bp, y.data(), rows, n, eps);
      CHECK(max_abs_diff(y, ref) <= 4e-6);
      be1->layer_norm(x.data(), wp, bp, y1.data(), rows, n, eps);
      CHECK(same_bits(y.data(), y1.data(), y.size()));
      be->layer_norm(yin.data(), wp, bp, yin.data(), rows, n, eps);  // y aliases x
      CHECK(same_bits(y.data(), yin.data(), y.size()));
      be->layer_norm(x.data() + 4 * n, wp, bp, alone.data(), 1, n, eps);  // row 4 alone
      CHECK(same_bits(alone.data(), y.data() + 4 * n, (size_t)n));
      // both kernel levels directly
      std::vector<float> yp(x.size());
      for (int64_t r = 0; r < rows; ++r) ops_layer_norm_row(x.data() + r * n, wp, bp, yp.data() + r * n, n, eps);
      CHECK(max_abs_diff(yp, ref) <= 4e-6);
      if (cpu_level_supported(cpu_level::avx2)) {
        for (int64_t r = 0; r < rows; ++r) ops_layer_norm_row_avx2(x.data() + r * n, wp, bp, yp.data() + r * n, n, eps);
        CHECK(max_abs_diff(yp, ref) <= 4e-6);
      }
    }
  }
  // a constant row: variance 0, y = b
  std::vector<float> c(16, 3.25f), y(16);
  const std::vector<float> b = uniform(16, g, -1.0f, 1.0f);
  be->layer_norm(c.data(), nullptr, b.data(), y.data(), 1, 16, eps);
  CHECK(same_bits(y.data(), b.data(), 16));
}

// ---- gelu / gelu_quick ----

namespace {

constexpr double k_pi = 3.14159265358979323846;

// gelu in double: 0.5 x (1 + tanh(u)) written as x / (1 + exp(-2u)) (the same function, no cancellation for
// negative x, where 1 + tanh(u) loses every digit even in double below x ~ -6).
double gelu_ref(double x) {
  const double u = std::sqrt(2.0 / k_pi) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
double gelu_tanh_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / k_pi) * (x + 0.044715 * x * x * x))); }
double gelu_quick_ref(double x) { return x / (1.0 + std::exp(-1.702 * x)); }

// x over [-12, 12] finely, plus huge and tiny magnitudes, plus an odd count so the masked tail is used.
std::vector<float> gelu_inputs() {
  std::vector<float> x;
  for (int i = -120000; i <= 120000; ++i) x.push_back((float)i * 1e-4f);
  for (float v : {15.0f, 30.0f, 100.0f, 1e4f, 1e13f, 1e20f, 3e38f, 1e-20f, 1e-40f, 0.0f}) {
    x.push_back(v);
    x.push_back(-v);
  }
  x.push_back(0.3f);
  return x;
}

// max over x of |y - ref| / (|ref| + 1e-6): the relative error, with outputs under 1e-6 (gelu at x < -4.3) held to
// an absolute bound instead.
template <class Ref>
double gelu_err(const std::vector<float>& x, const std::vector<float>& y, Ref ref) {
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i])) return INFINITY;
    const double r = ref((double)x[i]);
    m = std::max(m, std::fabs(y[i] - r) / (std::fabs(r) + 1e-6));
  }
  return m;
}

}  // namespace

// Tolerance: |y - ref| <= 3e-6 (|ref| + 1e-6). Most of the error is u rounded to f32: exp(-2u) then carries about
// |2u| * 6e-8 relative error, which grows for negative x as y vanishes (measured: 1.5e-6 at x = -3.7, y = -2e-4;
// without the 1e-6 floor 3.2e-6 at x = -5.2, y = -4e-9). The literal f32 tanh form is far worse there (1 + tanh(u)
// cancels: 7e-2 by the same measure). Huge positive x give x, huge negative x give (-)0.
TEST_CASE("vit ops: gelu (tanh form) and gelu_quick within 3e-6 of a double formula, any position, in place") {
  auto be = make_cpu_backend(2), be1 = make_cpu_backend(1);
  const std::vector<float> x = gelu_inputs();
  const int64_t n = (int64_t)x.size();
  for (int op = 0; op < 2; ++op) {
    const auto run = [&](backend& b, const float* in, float* out, int64_t m) {
      if (op == 0) b.gelu(in, out, m);
      else b.gelu_quick(in, out, m);
    };
    std::vector<float> y((size_t)n), y1((size_t)n), yin = x;
    run(*be, x.data(), y.data(), n);
    const double err = op == 0 ? gelu_err(x, y, gelu_ref) : gelu_err(x, y, gelu_quick_ref);
    std::printf("  %s: max relative error %.3g\n", op == 0 ? "gelu" : "gelu_quick", err);
    CHECK(err <= 3e-6);
    run(*be1, x.data(), y1.data(), n);
    CHECK(same_bits(y.data(), y1.data(), y.size()));
    run(*be, yin.data(), yin.data(), n);
    CHECK(same_bits(y.data(), yin.data(), y.size()));
    for (int64_t off : {1, 3, 5, 8}) {  // any start and length: each element's bits depend on its value only
      std::vector<float> part(13);
      run(*be, x.data() + 1000 + off, part.data(), 13);
      CHECK(same_bits(part.data(), y.data() + 1000 + off, 13));
    }
    for (size_t i = 0; i < x.size(); ++i) {  // huge |x|: x itself, or (-)0
      if (std::fabs(x[i]) >= 100.0f) CHECK(y[i] == (x[i] > 0 ? x[i] : 0.0f));
    }
    // both kernel levels directly
    std::vector<float> yp((size_t)n);
    if (op == 0) ops_gelu_vec(x.data(), yp.data(), n);
    else ops_gelu_quick_vec(x.data(), yp.data(), n);
    CHECK((op == 0 ? gelu_err(x, yp, gelu_ref) : gelu_err(x, yp, gelu_quick_ref)) <= 3e-6);
    if (cpu_level_supported(cpu_level::avx2)) {
      if (op == 0) ops_gelu_avx2(x.data(), yp.data(), n);
      else ops_gelu_quick_avx2(x.data(), yp.data(), n);
      CHECK((op == 0 ? gelu_err(x, yp, gelu_ref) : gelu_err(x, yp, gelu_quick_ref)) <= 3e-6);
    }
  }
  // the double reference is the literal tanh form where that form is accurate
  for (double v = -5.0; v <= 12.0; v += 0.01) CHECK(std::fabs(gelu_ref(v) - gelu_tanh_ref(v)) <= 1e-12 * (std::fabs(v) + 1));
}

// geglu (gemma3's gated FFN): gelu(gate) * up, each element the gelu op's bits times up in one f32 multiply, so within
// the gelu bound (3e-6, plus the product's rounding) of the double formula; any split, 1 or 2 threads, y aliasing
// gate or up.
TEST_CASE("ops: geglu is gelu(gate) * up with gelu's bits, within 3e-6 of a double formula, in place either way") {
  auto be = make_cpu_backend(2), be1 = make_cpu_backend(1);
  const std::vector<float> gate = gelu_inputs();
  const int64_t n = (int64_t)gate.size();
  std::vector<float> up((size_t)n);
  for (int64_t i = 0; i < n; ++i) up[i] = 0.5f + (float)((i * 7919) % 1000) * 1e-3f * (i % 2 ? 1.0f : -1.0f);
  std::vector<float> g((size_t)n), want((size_t)n), y((size_t)n), y1((size_t)n);
  be->gelu(gate.data(), g.data(), n);
  for (int64_t i = 0; i < n; ++i) want[i] = g[i] * up[i];
  be->geglu(gate.data(), up.data(), y.data(), n);
  CHECK(same_bits(y.data(), want.data(), y.size()));
  be1->geglu(gate.data(), up.data(), y1.data(), n);
  CHECK(same_bits(y1.data(), want.data(), y1.size()));
  std::vector<float> in_gate = gate, in_up = up;
  be->geglu(in_gate.data(), up.data(), in_gate.data(), n);
  be->geglu(gate.data(), in_up.data(), in_up.data(), n);
  CHECK(same_bits(in_gate.data(), want.data(), want.size()));
  CHECK(same_bits(in_up.data(), want.data(), want.size()));
  for (int64_t off : {1, 3, 5, 8, 300}) {  // any start and length
    std::vector<float> part(517);
    be->geglu(gate.data() + 1000 + off, up.data() + 1000 + off, part.data(), 517);
    CHECK(same_bits(part.data(), want.data() + 1000 + off, part.size()));
  }
  double m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double r = gelu_ref((double)gate[i]) * (double)up[i];
    if (std::fabs(r) > 3.4e38) {  // past f32's range: the f32 product is infinite
      CHECK(std::isinf(y[i]));
      continue;
    }
    m = std::max(m, std::fabs(y[i] - r) / (std::fabs(r) + 1e-6));
  }
  std::printf("  geglu: max relative error %.3g\n", m);
  CHECK(m <= 3.2e-6);
}

// ---- non-causal attention ----

namespace {

struct attn_case {
  attention_params p;
  std::vector<float> q, k, v;
  attn_case(int64_t n_tokens, int64_t n_past, int32_t n_head, int32_t n_head_kv, int32_t hd, uint32_t seed) {
    p.n_tokens = n_tokens;
    p.n_past = n_past;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim_k = hd;
    p.head_dim_v = hd;
    p.k_row_stride = (int64_t)n_head_kv * hd + 3;  // padded rows
    p.v_row_stride = (int64_t)n_head_kv * hd;
    p.scale = 1.0f / std::sqrt((float)hd);
    p.causal = false;
    std::mt19937 g(seed);
    const int64_t n_kv = n_past + n_tokens;
    q = uniform((size_t)(n_tokens * n_head * hd), g, -2.0f, 2.0f);  // some sharp softmax rows
    k = uniform((size_t)(n_kv * p.k_row_stride), g, -1.0f, 1.0f);
    v = uniform((size_t)(n_kv * p.v_row_stride), g, -1.0f, 1.0f);
  }
  std::vector<float> run(backend& be, const attention_params& pp, int64_t q_row0 = 0) const {
    std::vector<float> out((size_t)(pp.n_tokens * pp.n_head * pp.head_dim_v));
    be.attention(pp, q.data() + q_row0 * p.n_head * p.head_dim_k, k.data(), v.data(), out.data());
    return out;
  }
};

// Query rows [t0, t1) of the plain softmax loop over every position (double).
std::vector<double> bidir_ref(const attn_case& c, int64_t t0, int64_t t1) {
  const attention_params& p = c.p;
  const int64_t n_kv = p.n_past + p.n_tokens;
  const int32_t group = p.n_head / p.n_head_kv;
  std::vector<double> out, s((size_t)n_kv);
  for (int64_t t = t0; t < t1; ++t) {
    for (int32_t h = 0; h < p.n_head; ++h) {
      const float* qh = c.q.data() + (t * p.n_head + h) * p.head_dim_k;
      const int64_t ko = (int64_t)(h / group) * p.head_dim_k, vo = (int64_t)(h / group) * p.head_dim_v;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n_kv; ++j) {
        double d = 0;
        for (int32_t i = 0; i < p.head_dim_k; ++i) d += (double)qh[i] * c.k[j * p.k_row_stride + ko + i];
        s[j] = d * p.scale;
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < n_kv; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int32_t d = 0; d < p.head_dim_v; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < n_kv; ++j) acc += s[j] * c.v[j * p.v_row_stride + vo + d];
        out.push_back(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace

// Tolerance: V in [-1, 1]; f32 scores (72-term fma chains), ggml's expf and the f32 weighted sums: measured
// max |out - ref| 1.6e-7 (AVX2) / 1.5e-7 (portable), checked against 2e-6.
TEST_CASE("vit ops: non-causal attention vs a plain softmax loop (1 / 7 / 256 tokens, head dims 64 / 72, GQA)") {
  auto be = make_cpu_backend(2), be1 = make_cpu_backend(1);
  struct shape { int64_t n_tokens, n_past; int32_t n_head, n_head_kv, hd; };
  const shape shapes[] = {{1, 0, 4, 4, 64},   {7, 0, 4, 4, 72},  {256, 0, 4, 4, 64}, {256, 0, 3, 3, 72},
                          {7, 5, 6, 2, 72},   {70, 0, 8, 2, 64}, {33, 0, 2, 2, 13},  {1, 300, 2, 1, 72}};
  uint32_t seed = 100;
  double worst = 0;
  for (const shape& s : shapes) {
    const attn_case c(s.n_tokens, s.n_past, s.n_head, s.n_head_kv, s.hd, seed++);
    const std::vector<float> out = c.run(*be, c.p);
    const double err = max_abs_diff(out, bidir_ref(c, 0, s.n_tokens));
    worst = std::max(worst, err);
    CHECK(err <= 2e-6);
    CHECK(same_bits(out.data(), c.run(*be1, c.p).data(), out.size()));
    // the last m query rows alone (same keys: n_past grows by what they leave out): same bits
    const int64_t m = std::max<int64_t>(1, s.n_tokens / 3);
    attention_params pm = c.p;
    pm.n_tokens = m;
    pm.n_past = c.p.n_past + s.n_tokens - m;
    const std::vector<float> tail = c.run(*be, pm, s.n_tokens - m);
    const int64_t row = (int64_t)s.n_head * s.hd;
    CHECK(same_bits(tail.data(), out.data() + (s.n_tokens - m) * row, (size_t)(m * row)));
    // causal stays causal: row 0 of a causal call attends position 0 .. n_past only
    if (s.n_tokens > 1) {
      attention_params pc = c.p;
      pc.causal = true;
      CHECK(!same_bits(c.run(*be, pc).data(), out.data(), (size_t)row));
    }
  }
  std::printf("  max |out - ref| %.3g\n", worst);
}

TEST_CASE("vit ops: non-causal attention_paged == attention over the same rows") {
  auto be = make_cpu_backend(2);
  const attn_case c(40, 9, 4, 2, 72, 7);
  const int64_t n_kv = 49;
  const int32_t bs = 8, n_table = 7, n_blocks = 10;
  std::vector<int32_t> table = {9, 2, 7, 0, 5, 3, 8};
  std::vector<float> ks((size_t)(n_blocks * bs * c.p.k_row_stride)), vs((size_t)(n_blocks * bs * c.p.v_row_stride));
  for (int64_t j = 0; j < n_kv; ++j) {
    const int64_t r = (int64_t)table[j / bs] * bs + j % bs;
    std::copy_n(c.k.begin() + j * c.p.k_row_stride, c.p.k_row_stride, ks.begin() + r * c.p.k_row_stride);
    std::copy_n(c.v.begin() + j * c.p.v_row_stride, c.p.v_row_stride, vs.begin() + r * c.p.v_row_stride);
  }
  paged_attention_params pp;
  pp.attn = c.p;
  pp.block_table = table.data();
  pp.n_table = n_table;
  pp.block_size = bs;
  pp.n_blocks = n_blocks;
  std::vector<float> out((size_t)(40 * 4 * 72)), ref_out(out.size());
  be->attention_paged(pp, c.q.data(), ks.data(), vs.data(), out.data());
  CHECK(same_bits(out.data(), c.run(*be, c.p).data(), out.size()));
  attention_paged_ref(pp, c.q.data(), ks.data(), vs.data(), ref_out.data());
  CHECK(max_abs_diff(out, std::vector<double>(ref_out.begin(), ref_out.end())) <= 2e-6);
  CHECK(max_abs_diff(out, bidir_ref(c, 0, 40)) <= 2e-6);
}

// The SigLIP2 shape (1024 patches, 16 heads, head dim 72): a few rows against the loop, and the time of one call.
TEST_CASE("vit ops: non-causal attention at the ViT shape 1024 x 16 heads x 72 (timed)") {
  auto be = make_cpu_backend(0);
  const attn_case c(1024, 0, 16, 16, 72, 3);
  std::vector<float> out((size_t)(1024 * 16 * 72));
  be->attention(c.p, c.q.data(), c.k.data(), c.v.data(), out.data());  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  const int reps = 3;
  for (int r = 0; r < reps; ++r) be->attention(c.p, c.q.data(), c.k.data(), c.v.data(), out.data());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  std::printf("  non-causal attention 1024 tok x 16 heads x 72: %.1f ms (%d threads, %s)\n", ms, be->n_threads(),
              cpu_level_name(cpu_active_level()));
  for (int64_t t : {0, 511, 1023}) {
    const std::vector<double> ref = bidir_ref(c, t, t + 1);
    const std::vector<float> got(out.begin() + t * 16 * 72, out.begin() + (t + 1) * 16 * 72);
    CHECK(max_abs_diff(got, ref) <= 1e-5);
  }
}

// ---- matmul at the patch-embedding / projector widths ----

// Tolerance: F32 weights: f32 dots of 768 / 4608 terms, |y - ref| <= 1e-5 * sum |w x|; F16 weights: the CPU rounds
// x to f16 (as llama.cpp), so the reference uses the rounded x, same bound.
TEST_CASE("vit ops: matmul with F32 and F16 weights, n_in 768 and 4608") {
  auto be = make_cpu_backend(2);
  std::mt19937 g(5);
  for (ggml_type t : {ggml_type::F32, ggml_type::F16}) {
    for (int64_t n_in : {768, 4608}) {
      const int64_t n_out = 37, rows = 5;
      const std::vector<float> wf = uniform((size_t)(n_out * n_in), g, -1.0f, 1.0f);
      std::vector<float> x = uniform((size_t)(rows * n_in), g, -1.0f, 1.0f);
      std::vector<uint16_t> wh(wf.size());
      std::vector<float> wv = wf;  // the weight values the kernel sees
      for (size_t i = 0; i < wf.size(); ++i) wh[i] = f32_to_fp16(wf[i]), wv[i] = t == ggml_type::F16 ? fp16_to_f32(wh[i]) : wf[i];
      const void* data = t == ggml_type::F16 ? (const void*)wh.data() : (const void*)wf.data();
      backend_weight w = be->upload_weight(t, data, n_in, n_out);
      std::vector<float> y((size_t)(rows * n_out));
      be->matmul(w, x.data(), rows, y.data());
      double worst = 0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < n_out; ++o) {
          double ref = 0, mag = 0;
          for (int64_t i = 0; i < n_in; ++i) {
            const float xi = t == ggml_type::F16 ? fp16_to_f32(f32_to_fp16(x[r * n_in + i])) : x[r * n_in + i];
            ref += (double)wv[o * n_in + i] * xi;
            mag += std::fabs((double)wv[o * n_in + i] * xi);
          }
          worst = std::max(worst, std::fabs(y[r * n_out + o] - ref) / mag);
        }
      }
      CHECK(worst <= 1e-5);
      be->release_weight(w);
    }
  }
}
