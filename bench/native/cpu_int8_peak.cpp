// The int8 multiply-accumulate ceiling of this CPU's cores: vpdpbusd (AVX-512 VNNI) on 512-bit and 256-bit
// registers with enough independent accumulators to be throughput-bound, one thread per core, no memory traffic.
// It bounds every int8 matmul kernel (q4_K / q6_K / q8_0 dots against q8 activations): a batch of T tokens of a
// model of M multiply-accumulates per token needs at least T * M / (cores x ceiling) seconds.
//   spindle_cpu_int8_peak [threads=2] [seconds=2]
#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// iters x 24 zmm vpdpbusd (64 MACs each); returns a value that depends on every accumulator.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int zmm_loop(long iters) {
  __m512i a[24];
  for (int i = 0; i < 24; ++i) a[i] = _mm512_set1_epi32(i);
  const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
  for (long k = 0; k < iters; ++k) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm512_dpbusd_epi32(a[i], w, x);
    asm volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]));
  }
  __m512i s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm512_add_epi32(s, a[i]);
  return _mm512_reduce_add_epi32(s);
}

// iters x 24 ymm vpdpbusd (32 MACs each).
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vl"))) int ymm_loop(long iters) {
  __m256i a[24];
  for (int i = 0; i < 24; ++i) a[i] = _mm256_set1_epi32(i);
  const __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(5);
  for (long k = 0; k < iters; ++k) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) a[i] = _mm256_dpbusd_epi32(a[i], w, x);
    asm volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]));
  }
  alignas(32) int out[8];
  __m256i s = a[0];
  for (int i = 1; i < 24; ++i) s = _mm256_add_epi32(s, a[i]);
  _mm256_store_si256((__m256i*)out, s);
  return out[0];
}

// GMAC/s of `threads` threads running loop for about `seconds`.
double measure(int (*loop)(long), int macs_per_iter, int threads, double seconds) {
  const long probe = 1000000;
  double t = now_s();
  loop(probe);
  const long iters = (long)(probe * seconds / std::max(1e-6, now_s() - t));
  std::atomic<int> sink{0};
  std::vector<std::thread> pool;
  t = now_s();
  for (int i = 0; i < threads; ++i) pool.emplace_back([&] { sink += loop(iters); });
  for (auto& th : pool) th.join();
  return (double)iters * macs_per_iter * threads / (now_s() - t) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vl")) {
    std::printf("no AVX-512 VNNI on this CPU\n");
    return 0;
  }
  const double z = measure(zmm_loop, 24 * 64, threads, seconds), y = measure(ymm_loop, 24 * 32, threads, seconds);
  std::printf("int8 vpdpbusd ceiling, %d threads: zmm %.1f GMAC/s (%.1f per thread), ymm %.1f GMAC/s (%.1f per thread)\n",
              threads, z, z / threads, y, y / threads);
  return 0;
}
