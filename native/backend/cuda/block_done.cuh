// Cross-block completion in one launch: the blocks sharing a piece of work (K segments of a matmul tile, chunks of
// an attention tile, slices of an argmax row) each write their share, count themselves done on a counter, and the
// last to finish combines the shares. Device code; the host emulation (test/native/cuda_host_shim.h) runs it too.
#pragma once
#include <cstdint>

namespace spindle {

// Whether this block is the last of `count` blocks counted on *counter: every thread of every such block calls it
// after writing its share (the writes are fenced before the count), and only the last block's threads go on to
// read the others' shares (with __ldcg: past L1, which is not coherent across SMs). The last block puts the counter
// back to 0 for the next launch, which waits for this one to finish (programmatic dependent launches too).
// *last: an int of shared memory.
__device__ __forceinline__ bool last_block_done(int32_t* counter, int count, int* last) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    *last = atomicAdd(counter, 1) == count - 1;
    if (*last) *counter = 0;
  }
  __syncthreads();
  if (!*last) return false;
  __threadfence();
  return true;
}

}  // namespace spindle
