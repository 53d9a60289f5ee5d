// A fixed pool of worker threads for data-parallel kernels.
// Invariant: run() returns only after every thread finished fn; the calling thread takes part as thread 0, so
// size() threads work in all. Between jobs a worker spins for a short bounded time (k_spin_us, so the next op
// of a forward pass starts without a futex wake-up), then blocks on a condition variable: an idle pool uses
// no CPU. run() likewise spins briefly for the workers to finish before it blocks.
#pragma once
#include <atomic>
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

  static constexpr int k_spin_us = 50;  // microseconds a thread polls before it blocks

 private:
  void worker_loop(int ith);
  bool wait_for_job(uint64_t seen);  // false when stopping
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<const std::function<void(int, int)>*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) for every run()
  std::atomic<int> pending_{0};          // workers still running the current job
  int sleepers_ = 0;                     // workers blocked on wake_ (under mutex_)
  bool stopping_ = false;                // under mutex_
  std::atomic<bool> stopping_flag_{false};
};

}  // namespace spindle
