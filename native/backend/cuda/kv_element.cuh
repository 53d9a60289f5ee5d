// The C++ element type of a K / V store (backend.h's kv_type), for host code that instantiates a kernel per type:
// with_kv_element(kv, f) calls f(T{}) with T float, __half, __nv_bfloat16, kv_e4m3 or kv_e5m2 (a byte per value:
// vLLM's fp8 caches at scale 1). Attention computes 16-bit and fp8 stores with the f16 / bf16 tensor-core code:
// kv_mma_t<T> is the 16-bit type their values are widened to (an fp8 value is exactly a half), and load4_kv16 reads
// four stored values as those halves' bits.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "backend/backend.h"
#include "common/error.h"

namespace spindle {

// fp8 K / V elements as stored: e4m3 ("fn": +-448, NaN 0x7f) and e5m2 (the high byte of a half).
struct kv_e4m3 {
  uint8_t bits;
};
struct kv_e5m2 {
  uint8_t bits;
};

template <typename T>
constexpr bool is_kv_fp8_v = std::is_same<T, kv_e4m3>::value || std::is_same<T, kv_e5m2>::value;

// The tensor cores' type for a store of T: T itself, __half for the fp8 types.
template <typename T>
using kv_mma_t = std::conditional_t<is_kv_fp8_v<T>, __half, T>;

template <class F>
void with_kv_element(kv_type kv, F&& f) {
  if (kv == kv_type::f16) f(__half{});
  else if (kv == kv_type::bf16) f(__nv_bfloat16{});
  else if (kv == kv_type::fp8_e4m3) f(kv_e4m3{});
  else if (kv == kv_type::fp8_e5m2) f(kv_e5m2{});
  else if (kv == kv_type::f32) f(float{});
  else throw error("cuda: no K / V store of type " + std::to_string((int)kv) +
                   " (f32, f16, bf16, fp8_e4m3, fp8_e5m2; supports_kv says so)");
}

#if defined(__CUDACC__)
// One value into a store of T: rounded to nearest even (fp8: saturating to the largest finite value, NaN kept, as
// vLLM's stores convert; the CPU's cpu/fp8.h gives the same bits).
__device__ __forceinline__ void put_kv(float* p, float v) { *p = v; }
__device__ __forceinline__ void put_kv(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void put_kv(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void put_kv(kv_e4m3* p, float v) {
  p->bits = (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ void put_kv(kv_e5m2* p, float v) {
  p->bits = (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
}

// Two fp8 bytes (x0 in the low byte) as two halves' bits, x0's in the low half (exact). e4m3: each byte's magnitude
// shifted under the half's sign reads as the value / 256 (the exponent field then has bias 15 instead of 7,
// subnormals included; NaN codes made a half NaN), times 256 in half arithmetic (exact: a power of two, no
// overflow, subnormal halves kept); the CPU's fp8_e4m3_as_fp16_div256 and load8 build the same bits. Branch-free
// on every architecture (CUDA's own conversion is one instruction from sm_89 but ~70 with a loop before it).
__device__ __forceinline__ uint32_t e4m3_as_half_div256(uint32_t b) {
  const uint32_t h = (b & 0x80u) << 8 | (b & 0x7fu) << 7;
  return (b & 0x7fu) == 0x7fu ? h | 0x7e00u : h;
}
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint16_t x, kv_e4m3) {
  const uint32_t w = e4m3_as_half_div256(x & 0xffu) | e4m3_as_half_div256((uint32_t)x >> 8) << 16;
  const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&w), __float2half2_rn(256.0f));
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint16_t x, kv_e5m2) {
  return (uint32_t)(x & 0xff) << 8 | (uint32_t)(x >> 8) << 24;
}

// Four stored values p[d .. d + 4) of a row of n (zeros past n) as two words of kv_mma_t<T> bits, the lower index in
// the low half; vec: p aligned to 4 values and n a multiple of 4. T: a 16-bit type or an fp8 one.
template <typename T>
__device__ __forceinline__ uint2 load4_kv16(const T* p, int d, int n, bool vec) {
  if constexpr (is_kv_fp8_v<T>) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(p);
    uint32_t w;
    if (vec && d + 4 <= n) {
      w = *reinterpret_cast<const uint32_t*>(b + d);
    } else {
      w = 0;  // 0: +0 in either fp8 type
      for (int i = 0; i < 4; ++i) w |= (d + i < n ? (uint32_t)b[d + i] : 0u) << (8 * i);
    }
    return make_uint2(fp8x2_to_half2((uint16_t)(w & 0xffff), T{}), fp8x2_to_half2((uint16_t)(w >> 16), T{}));
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    if (vec && d + 4 <= n) return *reinterpret_cast<const uint2*>(h + d);
    const uint32_t u0 = d < n ? h[d] : 0u, u1 = d + 1 < n ? h[d + 1] : 0u;  // 0: +0 in either type
    const uint32_t u2 = d + 2 < n ? h[d + 2] : 0u, u3 = d + 3 < n ? h[d + 3] : 0u;
    return make_uint2(u0 | u1 << 16, u2 | u3 << 16);
  }
}
#endif

}  // namespace spindle
