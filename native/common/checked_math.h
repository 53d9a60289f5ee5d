// Checked size arithmetic for everything read from a file or a request.
// Invariant: a helper either returns the exact mathematical result or throws spindle::error; it never wraps.
#pragma once
#include <cstdint>
#include <string>

#include "common/error.h"

namespace spindle {

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw error(std::string("size overflow in ") + what);
  return r;
}

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw error(std::string("size overflow in ") + what);
  return r;
}

// Rounds x up to a multiple of `alignment` (a power of two).
inline uint64_t checked_align(uint64_t x, uint64_t alignment, const char* what) {
  return checked_add(x, alignment - 1, what) & ~(alignment - 1);
}

}  // namespace spindle
