// Greedy token choice over a row of logits, the one definition every path uses (the engine's sampler, the
// backends' argmax_rows): the first index of the largest value, scanning up from index 0 with `>`. So ties go
// to the smallest index, a NaN never wins over an earlier value, and a NaN at index 0 wins (nothing is `>` it).
#pragma once
#include <cstdint>

namespace spindle {

inline int32_t argmax_first(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return (int32_t)best;
}

}  // namespace spindle
