// The CUDA device vocabulary that the x32 readers and the mmv8 row code use (native/backend/cuda/*.cuh), in plain
// C++ with the device's integer and IEEE float semantics, so host tests run that device code unchanged:
//   - intrinsics: __dp4a, __vsubss4, __byte_perm, the _rn float operations, __half / __half2 / bf16, int4;
//   - threads: threadIdx / blockIdx / blockDim / gridDim (per emulated thread), __syncthreads and __shfl_xor_sync
//     over one block whose threads are std::threads (run_block), so warp shuffles and block barriers behave as on
//     the device; atomicAdd, __threadfence and __ldcg for the blocks of a grid run one after another.
// Include before the .cuh files; compile the test with -ffp-contract=off (no fused multiply-adds the device would
// not do) and -fno-strict-aliasing (the readers load through int4 / __half pointers).
#pragma once
#define SPINDLE_CUDA_HOST_EMULATION 1
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/cpu/fp16.h"

#define __device__
#define __host__
#define __forceinline__ inline
struct int4 {
  int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
struct uint2 {
  unsigned x, y;
};
struct uint4 {
  unsigned x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct __half {
  uint16_t bits;
};
struct __half2 {
  __half lo, hi;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) { return spindle::fp16_to_f32(h.bits); }
inline float __low2float(__half2 h) { return __half2float(h.lo); }
inline float __high2float(__half2 h) { return __half2float(h.hi); }
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = (uint32_t)b.bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE single operations, rounded to nearest (this file is compiled with -ffp-contract=off: no fused forms).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int2float_rn(int v) { return (float)v; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
using std::isfinite;
using std::isnan;
inline int8_t byte_of(uint32_t v, int k) { return (int8_t)(uint8_t)(v >> (8 * k)); }
// c + the sum of the four signed byte products.
inline int __dp4a(int a, int b, int c) {
  for (int k = 0; k < 4; ++k) c += byte_of((uint32_t)a, k) * byte_of((uint32_t)b, k);
  return c;
}
// Per byte: a - b, saturated to [-128, 127].
inline int __vsubss4(int a, int b) {
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    int v = byte_of((uint32_t)a, k) - byte_of((uint32_t)b, k);
    v = v < -128 ? -128 : v > 127 ? 127 : v;
    r |= (uint32_t)(uint8_t)v << (8 * k);
  }
  return (int)r;
}
// Byte k of the result: byte (selector nibble k & 7) of y:x (the readers never set a selector's bit 3).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t v = (uint64_t)x | ((uint64_t)y << 32);
  unsigned r = 0;
  for (int k = 0; k < 4; ++k) r |= (unsigned)((v >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
  return r;
}

// ---- threads of one block ----
struct dim3_host {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local dim3_host threadIdx, blockIdx, blockDim, gridDim;

// Global memory shared by blocks: an atomic add, a fence, and L2 loads (plain loads: the emulated blocks of a
// grid run one after another).
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <typename T>
inline T __ldcg(const T* p) { return *p; }

namespace cuda_host {

// cp.async done at once: n bytes, or zeros when !valid.
inline void copy_or_zero(void* dst, const void* src, size_t n, bool valid) {
  if (valid) std::memcpy(dst, src, n);
  else std::memset(dst, 0, n);
}

// A reusable barrier for n threads (generation counted).
class barrier {
 public:
  explicit barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const uint64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t gen_ = 0;
};

// The running block: its barrier, and per warp two exchange buffers for shuffles (one barrier per shuffle: a
// value written at shuffle i is read before any thread can write the same buffer at shuffle i + 2).
struct block_state {
  explicit block_state(int n_threads)
      : all(n_threads), warp_barriers((size_t)(n_threads / 32)), exchange((size_t)(n_threads / 32)) {
    for (auto& w : warp_barriers) w = std::make_unique<barrier>(32);
  }
  barrier all;
  std::vector<std::unique_ptr<barrier>> warp_barriers;
  struct slots {
    int v[2][32] = {};
    int mma[2][32][6] = {};  // a0 a1 a2 a3 b0 b1 of each lane
  };
  std::vector<slots> exchange;
};
inline thread_local block_state* current_block = nullptr;
inline thread_local int shuffle_phase = 0;  // of every warp-wide exchange (shuffles and mma)

// An mma's fragments meeting in the warp's exchange: this lane's six registers (a0 a1 a2 a3 b0 b1) are published,
// and once all 32 lanes have, every lane's are returned ([lane][6]). They stay valid until this lane's next
// exchange: a lane can only write the same buffer again after passing the barrier of the exchange between.
inline const int (*warp_fragments(const int (&regs)[6]))[6] {
  block_state& st = *current_block;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, ph = shuffle_phase;
  std::memcpy(st.exchange[(size_t)warp].mma[ph][lane], regs, sizeof(regs));
  st.warp_barriers[(size_t)warp]->wait();
  shuffle_phase = 1 - ph;
  return st.exchange[(size_t)warp].mma[ph];
}

// mma.sync m16n8k32 (k == 32) or m16n8k16 (k == 16), s8 x s8 -> s32, as every lane of the warp calls it: the lanes'
// fragments (mma_int8.cuh's layout, lane = 4g + t4) meet in the warp's exchange, then each lane computes its c0..c3
// = C[g][2t4], C[g][2t4 + 1], C[g + 8][2t4], C[g + 8][2t4 + 1] (plus c when acc).
inline void mma_s8(int (&c)[4], int k, int a0, int a1, int a2, int a3, int b0, int b1, bool acc) {
  const int (*frags)[6] = warp_fragments({a0, a1, a2, a3, b0, b1});
  const int lane = (int)threadIdx.x % 32;
  int8_t A[16][32] = {}, B[32][8] = {};
  const auto byte = [](int v, int i) { return (int8_t)(uint8_t)((uint32_t)v >> (8 * i)); };
  for (int l = 0; l < 32; ++l) {
    const int* f = frags[l];
    const int G = l / 4, T = l % 4;
    for (int i = 0; i < 4; ++i) {
      A[G][4 * T + i] = byte(f[0], i);
      A[G + 8][4 * T + i] = byte(f[1], i);
      B[4 * T + i][G] = byte(f[4], i);
      if (k == 32) {
        A[G][16 + 4 * T + i] = byte(f[2], i);
        A[G + 8][16 + 4 * T + i] = byte(f[3], i);
        B[16 + 4 * T + i][G] = byte(f[5], i);
      }
    }
  }
  const int g = lane / 4, t = lane % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    int sum = 0;
    for (int kk = 0; kk < k; ++kk) sum += A[rows[e]][kk] * B[kk][cols[e]];
    c[e] = (acc ? c[e] : 0) + sum;
  }
}

// mma.sync m16n8k16 with f16 (or bf16) inputs and f32 accumulators, as every lane of the warp calls it (mma_f16.cuh's
// layout): the products exact, each output's sum (its accumulator first, then k in order) in double, rounded once.
inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool bf16) {
  const int (*frags)[6] = warp_fragments({(int)a[0], (int)a[1], (int)a[2], (int)a[3], (int)b0, (int)b1});
  const int lane = (int)threadIdx.x % 32;
  double A[16][16] = {}, B[16][8] = {};
  const auto half = [bf16](int v, int i) {
    const uint16_t u = (uint16_t)((uint32_t)v >> (16 * i));
    return (double)(bf16 ? spindle::bf16_to_f32(u) : spindle::fp16_to_f32(u));
  };
  for (int l = 0; l < 32; ++l) {
    const int* f = frags[l];
    const int G = l / 4, T = l % 4;
    for (int i = 0; i < 2; ++i) {
      A[G][2 * T + i] = half(f[0], i);
      A[G + 8][2 * T + i] = half(f[1], i);
      A[G][2 * T + 8 + i] = half(f[2], i);
      A[G + 8][2 * T + 8 + i] = half(f[3], i);
      B[2 * T + i][G] = half(f[4], i);
      B[2 * T + 8 + i][G] = half(f[5], i);
    }
  }
  const int g = lane / 4, t = lane % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int e = 0; e < 4; ++e) {
    double sum = d[e];
    for (int kk = 0; kk < 16; ++kk) sum += A[rows[e]][kk] * B[kk][cols[e]];
    d[e] = (float)sum;
  }
}

// Runs fn on n_threads threads (a multiple of 32) as block (bx, by) of a grid of `grid` blocks: threadIdx.x
// 0 .. n_threads - 1.
inline void run_block(int n_threads, unsigned bx, unsigned by, const std::function<void()>& fn,
                      dim3_host grid = dim3_host{1, 1, 1}) {
  block_state st(n_threads);
  std::vector<std::thread> threads;
  threads.reserve((size_t)n_threads);
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] {
      threadIdx = dim3_host{(unsigned)t, 0, 0};
      blockIdx = dim3_host{bx, by, 0};
      blockDim = dim3_host{(unsigned)n_threads, 1, 1};
      gridDim = grid;
      current_block = &st;
      shuffle_phase = 0;
      fn();
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace cuda_host

inline void __syncthreads() { cuda_host::current_block->all.wait(); }

// Lane lane ^ m's value (every lane of the warp calls it with the same m, as the device requires).
inline int __shfl_xor_sync(unsigned, int v, int m);
inline float __shfl_xor_sync(unsigned mask, float v, int m) {
  int bits;
  std::memcpy(&bits, &v, 4);
  bits = __shfl_xor_sync(mask, bits, m);
  std::memcpy(&v, &bits, 4);
  return v;
}
// Lane lane - d's value (the lane's own below d), every lane of the warp calling it with the same d.
inline int __shfl_up_sync(unsigned, int v, int d) {
  cuda_host::block_state& st = *cuda_host::current_block;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, ph = cuda_host::shuffle_phase;
  st.exchange[(size_t)warp].v[ph][lane] = v;
  st.warp_barriers[(size_t)warp]->wait();
  const int got = lane >= d ? st.exchange[(size_t)warp].v[ph][lane - d] : v;
  cuda_host::shuffle_phase = 1 - ph;
  return got;
}
inline int __shfl_xor_sync(unsigned, int v, int m) {
  cuda_host::block_state& st = *cuda_host::current_block;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, ph = cuda_host::shuffle_phase;
  st.exchange[(size_t)warp].v[ph][lane] = v;
  st.warp_barriers[(size_t)warp]->wait();
  const int got = st.exchange[(size_t)warp].v[ph][lane ^ m];
  cuda_host::shuffle_phase = 1 - ph;
  return got;
}
