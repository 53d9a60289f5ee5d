// cuda_backend: device, stream, memory, weight upload and host-argument staging (see cuda_backend.h).
// Invariant: a failing CUDA call throws spindle::error; memory handed out is zeroed (alloc_f32) and freed once.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_common.cuh"
#include "backend/pack_x32.h"
#include "common/checked_math.h"

namespace spindle {

template <typename T>
T* device_scratch<T>::reserve(int64_t n, std::vector<void*>* keep_old) {
  if (n <= capacity) return data;
  if (data && keep_old) {
    keep_old->push_back(data);  // recorded ops point at it
  } else if (data) {
    SPINDLE_CUDA_CHECK(cudaDeviceSynchronize());  // a queued op may still read the old buffer
    SPINDLE_CUDA_CHECK(cudaFree(data));
  }
  data = nullptr;
  capacity = 0;
  const int64_t grown = n < 1024 ? 1024 : n + n / 2;
  SPINDLE_CUDA_CHECK(cudaMalloc((void**)&data, (size_t)grown * sizeof(T)));
  capacity = grown;
  return data;
}

template <typename T>
device_scratch<T>::~device_scratch() {
  if (data) cudaFree(data);
}

template struct device_scratch<float>;
template struct device_scratch<int8_t>;
template struct device_scratch<int32_t>;
template struct device_scratch<double>;

cuda_backend::cuda_backend(int device) : device_(device) {
  SPINDLE_CUDA_CHECK(cudaSetDevice(device));
  SPINDLE_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  SPINDLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const size_t counters = (size_t)(k_attn_done_max + k_argmax_done_max) * sizeof(int32_t);
  SPINDLE_CUDA_CHECK(cudaMalloc((void**)&done_counters_, counters));
  SPINDLE_CUDA_CHECK(cudaMemset(done_counters_, 0, counters));
  graph_setup_from_env();
}

cuda_backend::~cuda_backend() {
  if (stream_) cudaStreamSynchronize(stream_);
  graph_teardown();
  for (void* p : outgrown_) cudaFree(p);
  for (void* p : freed_while_recording_) cudaFree(p);
  for (void* w : weights_) cudaFree(w);
  if (ring_host_) cudaFreeHost(ring_host_);
  if (ring_dev_) cudaFree(ring_dev_);
  if (done_counters_) cudaFree(done_counters_);
  if (stream_) cudaStreamDestroy(stream_);
}

bool cuda_backend::supports_type(ggml_type type) const { return x32_format_of(type) != nullptr; }

bool cuda_backend::device_memory(uint64_t* free_bytes, uint64_t* total_bytes) const {
  size_t f = 0, t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) return false;
  *free_bytes = f;
  *total_bytes = t;
  return true;
}

float* cuda_backend::alloc_f32(int64_t n) {
  if (n < 0) throw error("cuda backend: negative allocation size");
  const uint64_t bytes = checked_mul((uint64_t)(n == 0 ? 1 : n), sizeof(float), "cuda backend allocation");
  float* p = nullptr;
  if (cudaMalloc((void**)&p, bytes) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state of the failed allocation
    throw error("cuda backend: out of device memory allocating " + std::to_string(bytes) + " bytes");
  }
  const struct {
    int op;
    int pad;
    void* p;
    uint64_t bytes;
  } sig{1, 0, p, bytes};
  cudaStream_t s = stream_;
  enqueue(&sig, sizeof sig, [p, bytes, s] { SPINDLE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s)); });
  return p;
}

void cuda_backend::free_f32(float* p) {
  if (!p) return;
  if (recording()) {  // recorded ops may still use it: freed once the stream is next drained
    freed_while_recording_.push_back(p);
    return;
  }
  cudaStreamSynchronize(stream_);
  queue_drained();
  cudaFree(p);
  qx_of_ = nullptr;  // a later buffer at this address is other activations
}

void cuda_backend::upload(float* dst, const float* src, int64_t n) {
  if (n <= 0) return;
  leave_recording();
  qx_of_ = nullptr;
  SPINDLE_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, stream_));
  SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  queue_drained();
}

void cuda_backend::download(float* dst, const float* src, int64_t n) {
  if (n <= 0) return;
  leave_recording();
  SPINDLE_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  queue_drained();
}

void cuda_backend::queue_drained() {
  ring_used_ = 0;
  if (!recording()) {
    for (void* p : freed_while_recording_) cudaFree(p);
    freed_while_recording_.clear();
  }
}

void cuda_backend::copy(float* dst, const float* src, int64_t n) {
  if (n <= 0 || dst == src) return;
  const struct {
    int op;
    int pad;
    float* dst;
    const float* src;
    int64_t n;
  } sig{2, 0, dst, src, n};
  cudaStream_t s = stream_;
  enqueue(&sig, sizeof sig, [dst, src, n, s] {
    SPINDLE_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  });
}

backend_weight cuda_backend::upload_weight(ggml_type type, const void* host_data, int64_t n_in, int64_t n_out) {
  std::vector<uint8_t> packed;
  x32_pack(type, host_data, n_in, n_out, packed);  // throws on an unsupported type or shape
  void* p = nullptr;
  if (cudaMalloc(&p, packed.size()) != cudaSuccess) {
    cudaGetLastError();
    throw error("cuda backend: out of device memory uploading a " + std::to_string(n_out) + " x " +
                std::to_string(n_in) + " weight (" + std::to_string(packed.size()) + " bytes)");
  }
  const cudaError_t e = cudaMemcpy(p, packed.data(), packed.size(), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(p);
    cuda_check(e, "weight upload");
  }
  weights_.insert(p);
  return backend_weight{type, p, n_in, n_out};
}

void cuda_backend::release_weight(backend_weight& w) {
  void* p = const_cast<void*>(w.data);
  if (p && weights_.count(p)) leave_recording();
  if (p && weights_.erase(p)) {
    cudaStreamSynchronize(stream_);
    cudaFree(p);
  }
  w.data = nullptr;
}

void cuda_backend::sync() {
  leave_recording();
  SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  queue_drained();
}

const void* cuda_backend::stage(const void* host, size_t bytes) {
  if (recording()) return stage_recorded(host, bytes);
  size_t at = (ring_used_ + 15) & ~size_t(15);
  if (at + bytes > ring_cap_) {
    SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // every staged copy consumed: start the ring over
    at = 0;
    if (bytes > ring_cap_) {
      if (ring_host_) cudaFreeHost(ring_host_);
      if (ring_dev_) cudaFree(ring_dev_);
      ring_host_ = ring_dev_ = nullptr;
      ring_cap_ = 0;
      const size_t cap = std::max<size_t>(size_t(1) << 20, 2 * bytes);
      SPINDLE_CUDA_CHECK(cudaMallocHost((void**)&ring_host_, cap));
      SPINDLE_CUDA_CHECK(cudaMalloc((void**)&ring_dev_, cap));
      ring_cap_ = cap;
    }
  }
  std::memcpy(ring_host_ + at, host, bytes);
  SPINDLE_CUDA_CHECK(cudaMemcpyAsync(ring_dev_ + at, ring_host_ + at, bytes, cudaMemcpyHostToDevice, stream_));
  ring_used_ = at + bytes;
  return ring_dev_ + at;
}

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) {
      *why = e == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime needs"
             : e == cudaErrorNoDevice         ? "no CUDA GPU found"
                                              : cudaGetErrorString(e);
    }
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
}

std::unique_ptr<backend> make_cuda_backend(int device) { return std::make_unique<cuda_backend>(device); }

}  // namespace spindle
