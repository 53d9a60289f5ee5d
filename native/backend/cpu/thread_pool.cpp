// Invariant: a worker runs each job generation exactly once; run() returns (or rethrows the first exception
// a thread raised) only after pending_ reaches zero.
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <exception>

#include "common/error.h"

namespace spindle {

thread_pool::thread_pool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &guarded;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  guarded(0, n_threads_);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }
  if (first_error) std::rethrow_exception(first_error);
}

void thread_pool::worker_loop(int ith) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(ith, n_threads_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void thread_pool::split(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = n / nth, rest = n % nth;
  *begin = ith * per + std::min<int64_t>(ith, rest);
  *end = *begin + per + (ith < rest ? 1 : 0);
}

}  // namespace spindle
