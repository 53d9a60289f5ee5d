// Glue between the tile_fn entry point and kernel templates K<NR, NT>::run(const tile_args&).
// Invariant: a kernel template writes each output (r, t) with code that does not depend on NR or NT, so the
// dispatch below (picking the instance for the requested nr x nt) cannot change any output bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backend/cpu/vec_dot.h"

namespace spindle {

struct tile_args {
  int64_t n;           // elements per row
  const uint8_t* w;    // first weight row
  size_t ws;           // bytes between weight rows
  const uint8_t* x;    // first activation row
  size_t xs;           // bytes between activation rows
  float* y;            // y[t * ys + r]
  int64_t ys;
};

template <template <int, int> class K, int NR, int NT>
inline void call_tile(int nr, int nt, const tile_args& a) {
  if constexpr (NR > 1) {
    if (nr < NR) return call_tile<K, NR - 1, NT>(nr, nt, a);
  }
  if constexpr (NT > 1) {
    if (nt < NT) return call_tile<K, NR, NT - 1>(nr, nt, a);
  }
  K<NR, NT>::run(a);
}

template <template <int, int> class K, int MR, int MT>
void tile_entry(int64_t n, const uint8_t* w, size_t ws, int nr, const uint8_t* x, size_t xs, int nt, float* y,
                int64_t ys) {
  call_tile<K, MR, MT>(nr, nt, tile_args{n, w, ws, x, xs, y, ys});
}

template <template <int, int> class K, int MR, int MT>
tile_kernel make_tile_kernel() {
  return tile_kernel{&tile_entry<K, MR, MT>, MR, MT};
}

// Packed kernels K<NT>::run(n, group, x, x_stride, y, y_stride): nt in [1, MT] runs the instance for exactly nt
// tokens (each output's operations do not depend on NT).
template <template <int> class K, int MT>
void packed_entry(int64_t n, const uint8_t* group, const uint8_t* x, size_t xs, int nt, float* y, int64_t ys) {
  if constexpr (MT > 1) {
    if (nt < MT) return packed_entry<K, MT - 1>(n, group, x, xs, nt, y, ys);
  }
  K<MT>::run(n, group, x, xs, y, ys);
}

}  // namespace spindle
