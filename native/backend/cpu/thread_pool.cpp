// Invariant: a worker runs each job generation exactly once; run() returns (or rethrows the first exception
// a thread raised) only after pending_ reaches zero. Wake-ups cannot be lost: generation_ changes and
// sleepers_ is read under mutex_, and a worker re-checks generation_ under mutex_ before it blocks.
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPINDLE_CPU_RELAX() _mm_pause()
#else
#define SPINDLE_CPU_RELAX() std::this_thread::yield()
#endif

#include "common/error.h"

namespace spindle {

namespace {

// Polls done() for at most k_spin_us; true as soon as it holds.
template <typename F>
bool spin_until(F&& done) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::microseconds(thread_pool::k_spin_us);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      SPINDLE_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= limit) return done();
  }
}

}  // namespace

thread_pool::thread_pool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stopping_flag_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  // An exception must neither escape a worker (std::terminate) nor leave run() while workers still use fn:
  // the first one is kept and rethrown after every thread finished.
  std::exception_ptr first_error;
  std::mutex error_mutex;
  const std::function<void(int, int)> guarded = [&](int ith, int nth) {
    try {
      fn(ith, nth);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  int sleepers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_.store(&guarded, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    sleepers = sleepers_;
  }
  if (sleepers > 0) wake_.notify_all();
  guarded(0, n_threads_);
  if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  job_.store(nullptr, std::memory_order_relaxed);
  if (first_error) std::rethrow_exception(first_error);
}

bool thread_pool::wait_for_job(uint64_t seen) {
  const auto ready = [&] {
    return stopping_flag_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
  };
  if (!spin_until(ready)) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++sleepers_;
    wake_.wait(lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
    --sleepers_;
  }
  return !stopping_flag_.load(std::memory_order_acquire);
}

void thread_pool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    if (!wait_for_job(seen)) return;
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int, int)>* job = job_.load(std::memory_order_relaxed);
    (*job)(ith, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // run() may be blocking on done_
      done_.notify_one();
    }
  }
}

void thread_pool::split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = n / nth, rest = n % nth;
  *begin = ith * per + std::min<int64_t>(ith, rest);
  *end = *begin + per + (ith < rest ? 1 : 0);
}

}  // namespace spindle
