// Streaming-read memory bandwidth on T threads: the decode floor is bandwidth / model bytes tokens/s.
// Each thread sums its own contiguous share of a buffer much larger than the caches; best of R passes.
// Build: g++ -O3 -march=native -std=c++17 bench/membw/membw.cpp -o membw -lpthread
// Usage: membw [threads=2] [MiB=1024] [passes=7]  -> prints {"threads":T,"bytes":B,"gbps":X}
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

static uint64_t sum_range(const uint64_t* p, size_t n) {
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;  // independent chains so the loads, not the adds, set the pace
  size_t i = 0;
  for (; i + 4 <= n; i += 4) { a0 += p[i]; a1 += p[i + 1]; a2 += p[i + 2]; a3 += p[i + 3]; }
  for (; i < n; ++i) a0 += p[i];
  return a0 + a1 + a2 + a3;
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const size_t mib = argc > 2 ? size_t(std::max(64, std::atoi(argv[2]))) : 1024;
  const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 7;
  const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);  // words
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // touch every page before timing
  std::vector<uint64_t> sums(size_t(threads), 0);
  double best = 0;
  for (int pass = 0; pass < passes; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t lo = n * size_t(t) / size_t(threads), hi = n * size_t(t + 1) / size_t(threads);
        sums[size_t(t)] += sum_range(buf.data() + lo, hi - lo);
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, double(n * sizeof(uint64_t)) / s / 1e9);
  }
  uint64_t check = 0;
  for (uint64_t s : sums) check += s;
  std::printf("{\"threads\":%d,\"bytes\":%zu,\"gbps\":%.2f,\"check\":%llu}\n", threads, n * sizeof(uint64_t), best,
              (unsigned long long)(check & 0xff));
  return 0;
}
