// The 16-bit float tensor-core instruction of the attention kernels over f16 / bf16 K / V stores (sm_80+
// mma.sync m16n8k16, f16 x f16 or bf16 x bf16 -> f32 accumulators), and the f32 <-> 16-bit conversions that feed it.
// Fragment layout (lane = 4g + t, two 16-bit values per register, the lower index in the low half):
//   a0 = A[g][2t, 2t + 1], a1 = A[g + 8][2t, 2t + 1], a2 = A[g][2t + 8, 2t + 9], a3 = A[g + 8][2t + 8, 2t + 9];
//   b0 = B[2t, 2t + 1][g], b1 = B[2t + 8, 2t + 9][g]; c0, c1 = C[g][2t, 2t + 1], c2, c3 = C[g + 8][2t, 2t + 1].
// SPINDLE_CUDA_HOST_EMULATION (host tests): conversions from backend/cpu/fp16.h (round to nearest even, as the
// device's _rn conversions) and the instruction from test/native/cuda_host_shim.h's warp emulation (exact products,
// the sum rounded once: the device's accumulation order and rounding inside the instruction may differ in the last
// bits, which is why host tests of this code compare within a tolerance).
#pragma once
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace spindle {

template <typename T>
constexpr bool is_bf16_v = std::is_same<T, __nv_bfloat16>::value;

// x rounded to nearest even in T (__half or __nv_bfloat16), as its bits.
template <typename T>
__device__ __forceinline__ uint16_t to16(float x) {
#if defined(__CUDA_ARCH__)
  if constexpr (is_bf16_v<T>) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  else return __half_as_ushort(__float2half_rn(x));
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  if constexpr (is_bf16_v<T>) return f32_to_bf16(x);
  else return f32_to_fp16(x);
#else
  (void)x;
  return 0;
#endif
}

// The value of T's bits u (exact).
template <typename T>
__device__ __forceinline__ float from16(uint16_t u) {
#if defined(__CUDA_ARCH__)
  if constexpr (is_bf16_v<T>) return __uint_as_float((uint32_t)u << 16);
  else return __half2float(__ushort_as_half(u));
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  if constexpr (is_bf16_v<T>) return bf16_to_f32(u);
  else return fp16_to_f32(u);
#else
  (void)u;
  return 0.0f;
#endif
}

// Two floats as register pairs: hi = (x0, x1) rounded to T, lo = the remainders x - hi (exact in f32) rounded to
// T, so x ~ hi + lo to about twice T's precision; x0 in the low halves.
template <typename T>
__device__ __forceinline__ void split_pair16(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const uint16_t h0 = to16<T>(x0), h1 = to16<T>(x1);
  const uint16_t l0 = to16<T>(__fsub_rn(x0, from16<T>(h0))), l1 = to16<T>(__fsub_rn(x1, from16<T>(h1)));
  hi = (uint32_t)h0 | (uint32_t)h1 << 16;
  lo = (uint32_t)l0 | (uint32_t)l1 << 16;
}

// d += A . B (m16n8k16, f32 accumulators).
template <typename T>
__device__ __forceinline__ void mma_k16_f32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (is_bf16_v<T>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#elif defined(__CUDA_ARCH__)
#error "mma_k16_f32: 16-bit mma.sync needs sm_80 or newer (SPINDLE_CUDA_ARCHITECTURES)"
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::mma_f16(d, a, b0, b1, is_bf16_v<T>);
#else
  (void)d, (void)a, (void)b0, (void)b1;
#endif
}

}  // namespace spindle
