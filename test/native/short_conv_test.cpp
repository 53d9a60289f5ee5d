// Tests of backend::short_conv (LFM2's gated short convolution, backend/cpu/short_conv.cpp): the reference
// against an independent double-precision computation over the whole history, the AVX2 kernel bit for bit
// against the reference (llama.cpp's operation order), the portable kernel within rounding, the carried state
// (chunks == one call, bitwise), thread-count independence, and argument checks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/short_conv.h"
#include "harness.h"

using namespace spindle;

namespace {

struct conv_case {
  int64_t n_tokens, n_ch;
  int32_t l_cache;
  std::vector<float> bcx, w, state;  // [n_tokens, 3 n_ch], [l_cache, n_ch], [l_cache - 1, n_ch]
};

conv_case make_case(int64_t n_tokens, int64_t n_ch, int32_t l_cache, uint32_t seed, bool zero_state = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  conv_case c{n_tokens, n_ch, l_cache, {}, {}, {}};
  c.bcx.resize(size_t(n_tokens * 3 * n_ch));
  c.w.resize(size_t(l_cache * n_ch));
  c.state.resize(size_t((l_cache - 1) * n_ch));
  for (float& v : c.bcx) v = nd(rng);
  for (float& v : c.w) v = nd(rng) * 0.5f;
  for (float& v : c.state) v = zero_state ? 0.0f : nd(rng);
  return c;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// y and the final state computed in double from the whole history: state rows, then B*X of every token.
void history_double(const conv_case& c, std::vector<double>& y, std::vector<double>& state) {
  const int32_t d = c.l_cache - 1;
  const int64_t n = c.n_ch;
  std::vector<double> hist(size_t((d + c.n_tokens) * n));
  for (int64_t i = 0; i < d * n; ++i) hist[i] = c.state[i];
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t ch = 0; ch < n; ++ch)
      hist[(d + t) * n + ch] = double(c.bcx[t * 3 * n + ch]) * c.bcx[t * 3 * n + 2 * n + ch];
  y.assign(size_t(c.n_tokens * n), 0.0);
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t ch = 0; ch < n; ++ch) {
      double acc = 0;
      for (int32_t k = 0; k < c.l_cache; ++k) acc += c.w[k * n + ch] * hist[(t + k) * n + ch];
      y[t * n + ch] = acc * c.bcx[t * 3 * n + n + ch];
    }
  state.assign(hist.end() - d * n, hist.end());
}

}  // namespace

TEST_CASE("short_conv: reference equals the whole-history computation in double") {
  for (int32_t l : {2, 3, 4, 5, 9, 13}) {
    for (int64_t n_tokens : {1, 2, 6}) {
      conv_case c = make_case(n_tokens, 19, l, uint32_t(l * 100 + n_tokens));
      std::vector<double> y_want, s_want;
      history_double(c, y_want, s_want);
      std::vector<float> y(size_t(n_tokens * c.n_ch)), state = c.state;
      short_conv_ref(c.bcx.data(), n_tokens, c.n_ch, l, c.w.data(), state.data(), y.data());
      double max_err = 0, max_state_err = 0;
      for (size_t i = 0; i < y.size(); ++i) max_err = std::max(max_err, std::fabs(y[i] - y_want[i]));
      for (size_t i = 0; i < state.size(); ++i) max_state_err = std::max(max_state_err, std::fabs(state[i] - s_want[i]));
      CHECK(max_err < 1e-4);
      CHECK(max_state_err < 1e-6);  // B*X rounded to f32 once
    }
  }
}

TEST_CASE("short_conv: the current token is tap l_cache - 1, earlier tokens the taps before it") {
  // one channel, B = 1, C = 1, X = token index + 1, w = (100, 10, 1): y[t] = 100 x[t-2] + 10 x[t-1] + x[t]
  const int64_t n = 4;
  std::vector<float> bcx, w = {100, 10, 1}, state = {7, 8}, y(n);
  for (int64_t t = 0; t < n; ++t) bcx.insert(bcx.end(), {1.0f, 1.0f, float(t + 1)});
  short_conv_ref(bcx.data(), n, 1, 3, w.data(), state.data(), y.data());
  CHECK_EQ(y[0], 100 * 7 + 10 * 8 + 1.0f);
  CHECK_EQ(y[1], 100 * 8 + 10 * 1 + 2.0f);
  CHECK_EQ(y[2], 100 * 1 + 10 * 2 + 3.0f);
  CHECK_EQ(y[3], 100 * 2 + 10 * 3 + 4.0f);
  CHECK_EQ(state[0], 3.0f);
  CHECK_EQ(state[1], 4.0f);
  // fewer new tokens than d: the state shifts
  std::vector<float> one = {2.0f, 1.0f, 5.0f}, y1(1), st = {7, 8};
  short_conv_ref(one.data(), 1, 1, 3, w.data(), st.data(), y1.data());
  CHECK_EQ(y1[0], 100 * 7 + 10 * 8 + 10.0f);  // C = 1, bx = B * X = 10
  CHECK_EQ(st[0], 8.0f);
  CHECK_EQ(st[1], 10.0f);
}

// Calls check(c, y_ref, s_ref) for every kernel comparison case, with the reference's output and state.
template <class Check>
void for_each_kernel_case(Check&& check) {
  for (int32_t l : {2, 3, 4, 5, 8, 9, 12, 13}) {
    for (int64_t n_ch : {1, 7, 8, 13, 64}) {
      for (int64_t n_tokens : {0, 1, 5}) {
        const conv_case c = make_case(n_tokens, n_ch, l, uint32_t(l * 1000 + n_ch * 10 + n_tokens));
        std::vector<float> y_ref(size_t(n_tokens * n_ch)), s_ref = c.state;
        short_conv_ref(c.bcx.data(), n_tokens, n_ch, l, c.w.data(), s_ref.data(), y_ref.data());
        check(c, y_ref, s_ref);
      }
    }
  }
}

TEST_CASE("short_conv: portable kernel within rounding of the reference") {
  for_each_kernel_case([](const conv_case& c, const std::vector<float>& y_ref, const std::vector<float>& s_ref) {
    std::vector<float> y(y_ref.size()), s = c.state;
    short_conv_range(c.bcx.data(), c.n_tokens, c.n_ch, c.l_cache, c.w.data(), s.data(), y.data(), 0, c.n_ch);
    CHECK(same_bits(s, s_ref));
    for (size_t i = 0; i < y.size(); ++i) CHECK_NEAR(y[i], y_ref[i], 1e-5 * (1 + std::fabs(y_ref[i])));
  });
}

TEST_CASE("short_conv: AVX2 kernel is bitwise the reference") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 kernel needs a CPU with AVX2");
  for_each_kernel_case([](const conv_case& c, const std::vector<float>& y_ref, const std::vector<float>& s_ref) {
    std::vector<float> ya(y_ref.size()), sa = c.state;
    short_conv_range_avx2(c.bcx.data(), c.n_tokens, c.n_ch, c.l_cache, c.w.data(), sa.data(), ya.data(), 0, c.n_ch);
    CHECK(same_bits(ya, y_ref));
    CHECK(same_bits(sa, s_ref));
  });
}

TEST_CASE("short_conv: chunks with the carried state equal one call, bitwise, at any thread count") {
  const int64_t n_tokens = 300, n_ch = 200;  // 60000 outputs: the threaded path runs
  for (int32_t l : {3, 4}) {
    conv_case c = make_case(n_tokens, n_ch, l, uint32_t(77 + l), /*zero_state=*/true);
    std::vector<float> y_one(size_t(n_tokens * n_ch)), s_one = c.state;
    auto be1 = make_cpu_backend(1);
    be1->short_conv(c.bcx.data(), n_tokens, n_ch, l, c.w.data(), s_one.data(), y_one.data());
    for (int threads : {1, 3}) {
      auto be = make_cpu_backend(threads);
      std::vector<float> y(y_one.size()), s = c.state;
      be->short_conv(c.bcx.data(), n_tokens, n_ch, l, c.w.data(), s.data(), y.data());
      CHECK(same_bits(y, y_one));
      CHECK(same_bits(s, s_one));
      std::vector<float> yc(y_one.size()), sc = c.state;
      int64_t at = 0;
      for (int64_t chunk : {1, 2, 1, 37, 5, 200, 1, 53}) {  // sums to 300
        be->short_conv(c.bcx.data() + at * 3 * n_ch, chunk, n_ch, l, c.w.data(), sc.data(), yc.data() + at * n_ch);
        at += chunk;
      }
      CHECK_EQ(at, n_tokens);
      CHECK(same_bits(yc, y_one));
      CHECK(same_bits(sc, s_one));
    }
  }
}

TEST_CASE("short_conv: invalid arguments throw") {
  auto be = make_cpu_backend(1);
  std::vector<float> bcx(6, 1.0f), w(3, 1.0f), state(2, 0.0f), y(2);
  CHECK_THROWS_WITH(be->short_conv(bcx.data(), 1, 2, 1, w.data(), state.data(), y.data()), "l_cache >= 2");
  CHECK_THROWS_WITH(be->short_conv(bcx.data(), -1, 2, 3, w.data(), state.data(), y.data()), "n_tokens >= 0");
  CHECK_THROWS_WITH(be->short_conv(nullptr, 1, 2, 3, w.data(), state.data(), y.data()), "null buffer");
  CHECK_THROWS_WITH(be->short_conv(bcx.data(), 1, 2, 3, w.data(), nullptr, y.data()), "null buffer");
}
