// cuda_backend::launch: every kernel of the backend goes through here. Outside a recorded step the kernel is
// launched at once; inside one (graph_begin .. graph_end, step_graph.cu) the launch is kept as an op to run
// at graph_end, and its kernel, grid, block and argument bytes are appended to the step's signature, which is
// what decides whether a step may replay an earlier step's graph.
// Invariant: kernel argument structs have no padding bytes (each says so with a static_assert), so equal
// launches give equal signatures.
#pragma once
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace spindle {

// One kernel launch; with pdl (sm_90+), as a programmatic dependent of the kernel before it in the stream (every
// kernel starts with pdl_begin(), cuda_common.cuh).
template <typename... KArgs, typename... Vals>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                          const Vals&... v) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, v...);
}

template <typename... KArgs, typename... Args>
void cuda_backend::launch(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, Args&&... args) {
  launch_smem(name, kernel, grid, block, 0, std::forward<Args>(args)...);
}

template <typename... KArgs, typename... Args>
void cuda_backend::launch_smem(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                               Args&&... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  qx_of_ = nullptr;  // any kernel may write the activations the last quantization came from
  using arg_tuple = std::tuple<std::decay_t<KArgs>...>;
  arg_tuple a(std::forward<Args>(args)...);  // converted to the kernel's parameter types now
  const bool pdl = pdl_;
  if (!recording()) {
    cuda_check(std::apply([&](auto&... v) { return launch_kernel(kernel, grid, block, smem, stream_, pdl, v...); }, a), name);
    return;
  }
  const void* fn = (const void*)kernel;
  const unsigned shape[7] = {grid.x, grid.y, grid.z, block.x, block.y, block.z, (unsigned)smem};
  sig_add(&fn, sizeof fn);
  sig_add(shape, sizeof shape);
  std::apply([&](const auto&... v) { (sig_add(&v, sizeof v), ...); }, a);
  cudaStream_t s = stream_;
  enqueue(nullptr, 0, [kernel, grid, block, smem, a, name, s, pdl]() {
    cuda_check(std::apply([&](const auto&... v) { return launch_kernel(kernel, grid, block, smem, s, pdl, v...); }, a), name);
  });
}

}  // namespace spindle
