// The int8 tensor-core instructions of the quantized matmuls (sm_80+ mma.sync, s8 x s8 -> s32, exact):
// m16n8k32 (A: 16 rows x 32, four registers; B: 32 x 8 tokens, two) and m16n8k16 (two and one). Fragment layout
// (lane = 4g + t4): a0 = A[g][4t4..], a1 = A[g + 8][4t4..], a2 = A[g][16 + 4t4..], a3 = A[g + 8][16 + 4t4..];
// b0 = B[4t4..][g], b1 = B[16 + 4t4..][g]; c0, c1 = C[g][2t4, 2t4 + 1], c2, c3 = C[g + 8][2t4, 2t4 + 1].
// SPINDLE_CUDA_HOST_EMULATION (host tests): the same results from test/native/cuda_host_shim.h's warp emulation.
#pragma once

namespace spindle {

// c = A . B
__device__ __forceinline__ void mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::mma_s8(c, 32, a0, a1, a2, a3, b0, b1, false);
#endif
}

// c += A . B (the accumulator chained through the tensor core).
__device__ __forceinline__ void mma_k32_acc(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::mma_s8(c, 32, a0, a1, a2, a3, b0, b1, true);
#endif
}

// c = A . B over 16 values of K: a0 = A[g][4t4..], a1 = A[g + 8][4t4..]; b0 = B[4t4..][g].
__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};"
               : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
#elif defined(SPINDLE_CUDA_HOST_EMULATION)
  cuda_host::mma_s8(c, 16, a0, a1, 0, 0, b0, 0, false);
#endif
}

}  // namespace spindle
