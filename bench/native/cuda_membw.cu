// Device memory bandwidth of the GPU, for the decode floor (bytes read per token / bandwidth): a 2 GiB
// device-to-device copy timed with events, counting bytes read plus bytes written; median of 20 after warm-up.
//   spindle_cuda_membw
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cuda_membw: no GPU memory (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(e0);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (i >= 5) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double s = ms[ms.size() / 2] / 1e3;
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s: device-to-device copy %.0f GB/s (read + write of %zu MiB, median of %zu)\n", prop.name,
              2.0 * bytes / s / 1e9, bytes >> 20, ms.size());
  return 0;
}
