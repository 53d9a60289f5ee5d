// Helpers of the GPU test suite (spindle_gpu_tests, `npm run test:gpu`): the skip guard, a CPU and a CUDA
// backend side by side (the CPU backend is the reference every CUDA op is checked against), and buffers that
// move host vectors through either backend.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "harness.h"

namespace gpu_test {

using namespace spindle;

// fn()'s result with environment variable `name` set to `value`, unset again afterwards (a CUDA backend reads its
// SPINDLE_CUDA_* switches when it starts: make one inside fn).
template <class Fn>
auto with_env(const char* name, const char* value, Fn fn) -> decltype(fn()) {
  setenv(name, value, 1);
  struct unset_on_exit {
    const char* name;
    ~unset_on_exit() { unsetenv(name); }
  } guard{name};
  return fn();
}

// Skips the current case, naming what is missing, when no CUDA GPU can be used.
#define REQUIRE_GPU()                                      \
  do {                                                     \
    std::string _why;                                      \
    if (!spindle::cuda_usable(&_why)) SKIP(_why);          \
  } while (0)

struct pair {
  std::unique_ptr<backend> cpu = make_backend("cpu", 2);
  std::unique_ptr<backend> gpu = make_backend("cuda", 0);
};

// n floats of backend memory holding `host` (or zeros).
struct buf {
  backend& be;
  backend_buffer mem;
  buf(backend& b, const std::vector<float>& host) : be(b), mem(b, (int64_t)host.size()) {
    be.upload(mem.data(), host.data(), (int64_t)host.size());
  }
  buf(backend& b, int64_t n) : be(b), mem(b, n) {}
  float* p() const { return mem.data(); }
  std::vector<float> get() {
    std::vector<float> out((size_t)mem.size());
    be.sync();
    be.download(out.data(), mem.data(), mem.size());
    return out;
  }
};

inline double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// ||a - b|| / ||b|| (b the reference); infinite when a holds a NaN.
inline double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    d += (a[i] - b[i]) * (a[i] - b[i]);
  }
  const double nb = norm(b);
  return std::sqrt(d) / (nb > 0 ? nb : 1.0);
}

inline std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// max |a - b| / max(max |b|, 1e-30); infinite on a NaN.
inline double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return INFINITY;
    d = std::max(d, (double)std::fabs(a[i] - b[i]));
    m = std::max(m, (double)std::fabs(b[i]));
  }
  return d / std::max(m, 1e-30);
}

inline bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace gpu_test
