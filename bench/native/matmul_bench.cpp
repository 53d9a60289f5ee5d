// Micro-benchmark of cpu_matmul: weight streaming for one token (GB/s of weight bytes) and throughput for a
// batch of tokens (GMAC/s), for each weight type and SIMD level this CPU runs, from the file's row layout and
// (where the level has packed kernels) from the packed copy; F32 / F16 / BF16 batches from the level's panel
// threshold are packed into panels inside each call (panel.h), which the "rows" figures include. The variants of a type alternate within every
// repetition and each figure is the best repetition, so slow phases of a shared machine hit them alike.
// Not part of the CMake build; compile by hand from the repository root:
//   g++ -std=c++17 -O3 -Inative bench/native/matmul_bench.cpp native/backend/cpu/{cpu_features,matmul,\
//     matmul_panel,panel_ref,panel_avx2,panel_avx512,panel_avx512_bf16,panel_pack_avx2,panel_pack_avx512,quants,\
//     quants_avx2,repack,thread_pool,vec_dot_ref,vec_dot_avx2,vec_dot_avx2_float,vec_dot_avx2_packed,\
//     vec_dot_avx2_packed_q6,vec_dot_avx512,vec_dot_avx512_float,vec_dot_avx512_packed}.cpp -o /tmp/matmul_bench \
//     -lpthread
//   /tmp/matmul_bench [n_out=2048 n_in=8192 threads=2 [levels=all [types=all [batch=64 [reps=10]]]]]
//   levels e.g. avx2,avx512; types e.g. q4_K,q6_K,q8_0
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"

using namespace spindle;

namespace {

// Random weights with sane fp16 scales (the values do not matter for speed, only that they are finite).
std::vector<uint8_t> make_weights(ggml_type t, int64_t n_out, int64_t n_in) {
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
double now_s(bool cpu_clock) {
  if (cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct variant {
  cpu_level level;
  const packed_weight* packed;
  std::string name;
  double best_1 = 1e30, best_n = 1e30;  // seconds
};

double time_once(const variant& v, thread_pool& pool, ggml_type t, const std::vector<uint8_t>& w, int64_t n_out,
                 int64_t n_in, const std::vector<float>& x, int64_t n_tok, std::vector<float>& y) {
  const double t0 = now_s(pool.size() == 1);
  cpu_matmul_at_level(v.level, pool, t, w.data(), n_out, n_in, x.data(), n_tok, y.data(), v.packed);
  return now_s(pool.size() == 1) - t0;
}

// Seconds to stream-read the weight bytes once on the pool (each thread sums its share): the bandwidth bound a
// one-token matmul of the same bytes can approach.
double time_read(thread_pool& pool, const std::vector<uint8_t>& w) {
  std::vector<uint64_t> sink((size_t)pool.size() * 8);
  const double t0 = now_s(pool.size() == 1);
  pool.run([&](int ith, int nth) {
    int64_t b, e;
    thread_pool::split((int64_t)(w.size() / 32), ith, nth, &b, &e);
    const uint64_t* p = (const uint64_t*)w.data();
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int64_t i = 4 * b; i < 4 * e; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
    sink[(size_t)ith * 8] = s0 ^ s1 ^ s2 ^ s3;
  });
  const double dt = now_s(pool.size() == 1) - t0;
  volatile uint64_t keep = sink[0];
  (void)keep;
  return dt;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n_out = argc > 1 ? std::atoll(argv[1]) : 2048, n_in = argc > 2 ? std::atoll(argv[2]) : 8192;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const char* level_filter = argc > 4 && std::strcmp(argv[4], "all") ? argv[4] : nullptr;
  const char* type_filter = argc > 5 && std::strcmp(argv[5], "all") ? argv[5] : nullptr;
  const int64_t batch = argc > 6 ? std::atoll(argv[6]) : 64;
  const int reps = argc > 7 ? std::atoi(argv[7]) : 10;
  thread_pool pool(threads);
  std::vector<float> x(batch * n_in), y(batch * n_out);
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng);
  std::printf("W [%lld out, %lld in], %d threads (%s clock), best of %d\n", (long long)n_out, (long long)n_in,
              threads, threads == 1 ? "thread cpu" : "wall", reps);
  std::printf("%-7s %-14s %9s %10s %11s %10s %12s\n", "type", "kernels", "MB", "1 tok ms", "1 tok GB/s",
              ("tok " + std::to_string(batch)).c_str(), "GMAC/s");
  const ggml_type types[] = {ggml_type::Q4_K, ggml_type::Q6_K, ggml_type::Q8_0, ggml_type::Q4_0,
                             ggml_type::F16,  ggml_type::BF16, ggml_type::F32};
  const char* names[] = {"q4_K", "q6_K", "q8_0", "q4_0", "f16", "bf16", "f32"};
  for (int ti = 0; ti < 7; ++ti) {
    if (type_filter && !std::strstr(type_filter, names[ti])) continue;
    const std::vector<uint8_t> w = make_weights(types[ti], n_out, n_in);
    std::vector<std::unique_ptr<packed_weight>> owned;
    std::vector<variant> vs;
    for (cpu_level level : {cpu_level::scalar, cpu_level::avx2, cpu_level::avx512}) {
      if (!cpu_level_supported(level) || (level_filter && !std::strstr(level_filter, cpu_level_name(level)))) continue;
      vs.push_back({level, nullptr, std::string(cpu_level_name(level)) + " rows"});
      owned.push_back(cpu_pack_weight(level, pool, types[ti], w.data(), n_out, n_in));
      if (owned.back()) vs.push_back({level, owned.back().get(), std::string(cpu_level_name(level)) + " packed"});
    }
    for (auto& v : vs) time_once(v, pool, types[ti], w, n_out, n_in, x, batch, y);  // warm-up
    double best_read = 1e30;
    for (int r = 0; r < reps; ++r) {
      best_read = std::min(best_read, time_read(pool, w));
      for (auto& v : vs) {
        const bool slow = v.level == cpu_level::scalar;
        if (slow && r >= 2) continue;
        for (int k = 0; k < (slow ? 1 : 5); ++k)
          v.best_1 = std::min(v.best_1, time_once(v, pool, types[ti], w, n_out, n_in, x, 1, y));
        v.best_n = std::min(v.best_n, time_once(v, pool, types[ti], w, n_out, n_in, x, batch, y));
      }
    }
    std::printf("%-7s %-14s %9.1f %10.3f %11.1f\n", names[ti], "(read bytes)", w.size() / 1e6, best_read * 1e3,
                w.size() / best_read / 1e9);
    for (const auto& v : vs)
      std::printf("%-7s %-14s %9.1f %10.3f %11.1f %10.3f %12.1f   1 tok at %.0f%% of read\n", names[ti],
                  v.name.c_str(), w.size() / 1e6, v.best_1 * 1e3, w.size() / v.best_1 / 1e9, v.best_n * 1e3,
                  (double)batch * n_out * n_in / v.best_n / 1e9, 100.0 * best_read / v.best_1);
  }
  return 0;
}
