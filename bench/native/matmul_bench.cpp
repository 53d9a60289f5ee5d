// Micro-benchmark of cpu_matmul: weight streaming for one token (GB/s of weight bytes) and throughput for a
// 64-token batch (token-rows per second), for each weight type and each SIMD level this CPU runs.
// Not part of the CMake build; compile by hand from the repository root:
//   g++ -std=c++17 -O3 -Inative bench/native/matmul_bench.cpp native/backend/cpu/{cpu_features,matmul,quants,\
//     thread_pool,vec_dot_ref,vec_dot_avx2,vec_dot_avx2_float,vec_dot_avx512,vec_dot_avx512_float}.cpp \
//     -o /tmp/matmul_bench -lpthread
//   /tmp/matmul_bench [n_out n_in threads [levels]]   (defaults: 2048 8192 2 all; levels e.g. avx2,avx512)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/vec_dot.h"

using namespace spindle;

// Random weights with sane fp16 scales (the values do not matter for speed, only that they are finite).
static std::vector<uint8_t> make_weights(ggml_type t, int64_t n_out, int64_t n_in) {
  std::vector<uint8_t> w(cpu_row_bytes(t, n_in) * n_out);
  std::mt19937 rng(1);
  for (auto& b : w) b = (uint8_t)rng();
  const int64_t bs = cpu_block_size(t), nb = n_out * (n_in / bs);
  for (int64_t i = 0; i < nb; ++i) {
    if (t == ggml_type::Q8_0) ((block_q8_0*)w.data())[i].d = f32_to_fp16(0.01f);
    if (t == ggml_type::Q4_0) ((block_q4_0*)w.data())[i].d = f32_to_fp16(0.01f);
    if (t == ggml_type::Q4_K) ((block_q4_K*)w.data())[i].d = ((block_q4_K*)w.data())[i].dmin = f32_to_fp16(0.01f);
    if (t == ggml_type::Q6_K) ((block_q6_K*)w.data())[i].d = f32_to_fp16(0.01f);
    if (t == ggml_type::F16) ((uint16_t*)w.data())[i] = f32_to_fp16(0.01f * (float)(i % 7));
    if (t == ggml_type::BF16) ((uint16_t*)w.data())[i] = f32_to_bf16(0.01f * (float)(i % 7));
  }
  return w;
}

// Seconds on the calling thread's CPU clock (with 1 thread the pool runs inline, so time spent descheduled
// on a busy machine is left out) or on the wall clock.
static double now_s(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `reps` calls.
static double time_matmul(cpu_level level, thread_pool& pool, ggml_type t, const std::vector<uint8_t>& w,
                          int64_t n_out, int64_t n_in, const std::vector<float>& x, int64_t n_tok, int reps) {
  std::vector<float> y(n_out * n_tok);
  std::vector<double> s;
  for (int i = 0; i < reps + 1; ++i) {
    const double t0 = now_s(pool.size() == 1);
    cpu_matmul_at_level(level, pool, t, w.data(), n_out, n_in, x.data(), n_tok, y.data());
    const double t1 = now_s(pool.size() == 1);
    if (i > 0) s.push_back(t1 - t0);  // the first call warms up
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

int main(int argc, char** argv) {
  const int64_t n_out = argc > 1 ? std::atoll(argv[1]) : 2048, n_in = argc > 2 ? std::atoll(argv[2]) : 8192;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  thread_pool pool(threads);
  std::vector<float> x(64 * n_in);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng);
  std::printf("W [%lld out, %lld in], %d threads (%s clock)\n", (long long)n_out, (long long)n_in, threads,
              threads == 1 ? "thread cpu" : "wall");
  std::printf("%-7s %-7s %10s %12s %14s %16s\n", "type", "level", "MB", "1 tok ms", "1 tok GB/s", "64 tok rows/s");
  const ggml_type types[] = {ggml_type::Q4_K, ggml_type::Q8_0, ggml_type::Q4_0, ggml_type::Q6_K,
                             ggml_type::F16,  ggml_type::BF16, ggml_type::F32};
  const char* names[] = {"q4_K", "q8_0", "q4_0", "q6_K", "f16", "bf16", "f32"};
  for (int ti = 0; ti < 7; ++ti) {
    const std::vector<uint8_t> w = make_weights(types[ti], n_out, n_in);
    for (cpu_level level : {cpu_level::scalar, cpu_level::avx2, cpu_level::avx512}) {
      if (!cpu_level_supported(level)) continue;
      if (argc > 4 && !std::strstr(argv[4], cpu_level_name(level))) continue;
      const double t1 = time_matmul(level, pool, types[ti], w, n_out, n_in, x, 1, level == cpu_level::scalar ? 3 : 30);
      const double t64 = time_matmul(level, pool, types[ti], w, n_out, n_in, x, 64, level == cpu_level::scalar ? 1 : 5);
      std::printf("%-7s %-7s %10.1f %12.3f %14.1f %16.3g\n", names[ti], cpu_level_name(level), w.size() / 1e6,
                  t1 * 1e3, w.size() / t1 / 1e9, 64.0 * n_out / t64);
    }
  }
  return 0;
}
