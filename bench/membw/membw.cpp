// Streaming-read memory bandwidth on T threads: the decode floor is bandwidth / model bytes tokens/s.
// Each thread sums its own contiguous share of a buffer much larger than the caches with 256-bit loads (when
// built with AVX2) and four independent accumulators; best of R passes. The buffer is 2 MiB aligned and asks for
// transparent huge pages, as Spindle's packed weight copies do, so TLB misses do not understate the floor.
// Build: g++ -O3 -march=native -std=c++17 bench/membw/membw.cpp -o membw -lpthread
// Usage: membw [threads=2] [MiB=1024] [passes=7]  -> prints {"threads":T,"bytes":B,"gbps":X}
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

// Sum of n 32-byte chunks starting at p (32-byte aligned).
static uint64_t sum_range(const uint8_t* p, size_t n) {
#if defined(__AVX2__)
  const __m256i* v = (const __m256i*)p;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;  // independent chains: the loads set the pace
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(v + i + 1));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(v + i + 2));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(v + i + 3));
  }
  for (; i < n; ++i) a0 = _mm256_add_epi64(a0, _mm256_load_si256(v + i));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256((__m256i*)lanes, _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
#else
  const uint64_t* w = (const uint64_t*)p;
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i < 4 * n; i += 4) { a0 += w[i]; a1 += w[i + 1]; a2 += w[i + 2]; a3 += w[i + 3]; }
  return a0 + a1 + a2 + a3;
#endif
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const size_t mib = argc > 2 ? size_t(std::max(64, std::atoi(argv[2]))) : 1024;
  const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 7;
  const size_t bytes = mib << 20, chunks = bytes / 32;
  uint8_t* buf = (uint8_t*)std::aligned_alloc(size_t(2) << 20, bytes);
  if (buf == nullptr) {
    std::fprintf(stderr, "membw: cannot allocate %zu MiB\n", mib);
    return 1;
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  (void)madvise(buf, bytes, MADV_HUGEPAGE);
#endif
  for (size_t i = 0; i < bytes / 8; ++i) ((uint64_t*)buf)[i] = i;  // touch every page before timing
  std::vector<uint64_t> sums(size_t(threads), 0);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t lo = chunks * size_t(t) / size_t(threads), hi = chunks * size_t(t + 1) / size_t(threads);
        sums[size_t(t)] += sum_range(buf + lo * 32, hi - lo);
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(bytes) / s / 1e9);
  }
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  std::free(buf);
  std::printf("{\"threads\":%d,\"bytes\":%zu,\"gbps\":%.2f,\"check\":%llu}\n", threads, bytes, best,
              (unsigned long long)(check & 0xff));
  return 0;
}
