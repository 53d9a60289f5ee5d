// A fixed pool of worker threads for data-parallel kernels.
// Invariant: run() returns only after every thread finished fn; idle workers block on a condition variable
// (no spinning while nothing runs); the calling thread takes part as thread 0, so size() threads work in all.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spindle {

class thread_pool {
 public:
  explicit thread_pool(int n_threads);  // n_threads >= 1; the caller counts as one of them
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int size() const { return n_threads_; }
  // Calls fn(ith, nth) once on each of the nth = size() threads and waits for all of them.
  // Not re-entrant: fn must not call run() on the same pool.
  void run(const std::function<void(int ith, int nth)>& fn);

  // Splits [0, n) into nth nearly equal contiguous ranges; returns thread ith's [begin, end).
  static void split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end);

 private:
  void worker_loop(int ith);
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int, int)>* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped for every run()
  int pending_ = 0;          // workers still running the current job
  bool stopping_ = false;
};

}  // namespace spindle
