// Row-wise and elementwise ops of the CUDA backend (see backend.h for each op's contract). Each output row is
// computed by one block (norms, softmax) or one thread per element, with fixed reduction trees, so results do
// not depend on how many rows a call holds.
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kv_element.cuh"
#include "backend/cuda/argmax_rows.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/quantize_act.cuh"
#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"
#include "backend/pack_x32.h"

namespace spindle {

namespace {

constexpr int k_threads = 256;

template <class Q>
__global__ void get_rows_x32(const uint8_t* w, int64_t n_units, int64_t n_in, const int32_t* ids, int64_t n,
                             float* out) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.y, e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || e >= n_in) return;
  const int64_t r = ids[i], g = r / k_warp, u = e / Q::unit_values;
  const uint8_t* gb = w + ((uint64_t)g * n_units + u) * (k_warp * Q::unit_bytes);
  out[i * n_in + e] = Q::value(gb, (int)(r % k_warp), (int)(e % Q::unit_values));
}

template <class Q>
void launch_get_rows(cuda_backend& be, const backend_weight& t, int64_t n_units, const int32_t* ids, int64_t n,
                     float* out) {
  for (int64_t i0 = 0; i0 < n; i0 += 65535) {  // grid.y limit
    const int64_t m = n - i0 < 65535 ? n - i0 : 65535;
    be.launch("get_rows_x32", get_rows_x32<Q>, dim3(grid_for(t.n_in, k_threads), (unsigned)m), dim3(k_threads),
              (const uint8_t*)t.data, n_units, t.n_in, ids + i0, m, out + i0 * t.n_in);
  }
}

__global__ void copy_rows_kernel(float* dst, const int64_t* dst_rows, const float* src, const int64_t* src_rows,
                                 int64_t width) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = blockIdx.y, e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= width) return;
  const int64_t d = dst_rows ? dst_rows[i] : i, s = src_rows ? src_rows[i] : i;
  dst[d * width + e] = src[s * width + e];
}

__global__ void scale_rows_kernel(float* x, const float* s, int64_t n_rows, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_rows * n) x[i] = x[i] * s[i / n];
}

__global__ void add_row_vector_kernel(float* x, const float* b, int64_t n_rows, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n_rows * n) x[i] = x[i] + b[i % n];
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* y, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float g = gate[i];
    y[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// One block per row: y = x / sqrt(mean(x^2) + eps) [* w].
__global__ void rms_norm_kernel(const float* x, const float* w, float* y, int64_t n, float eps) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float red[32];
  const float* xr = x + (int64_t)blockIdx.x * n;
  float* yr = y + (int64_t)blockIdx.x * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum = __fmaf_rn(xr[i], xr[i], sum);
  sum = block_sum(sum, red);
  const float scale = 1.0f / sqrtf(sum / (float)n + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
}

// add then rms_norm in one pass per row, with rms_norm_kernel's arithmetic: x = r + x, then y = x * scale [* w].
// y may alias r (every r element is read, by the thread that owns it, before any y is written).
// qx non-null: y is also quantized for the matmuls that read it next (q / k / v, gate / up), with the bits of
// their own quantization kernels; n and blockDim.x are then multiples of 32, so each warp's 32 values of a pass
// are one sub-block. sx non-null: per 32 values (quantize32; qx [n_rows, n], dx / sx [n_rows, n / 32]). bx
// non-null: per 256 (q8_scale / q8_value with the amax of each 32 values kept in shared memory; n a multiple of
// 256, at most k_norm_q8_256_max; dx [n_rows, n / 256], bx [n_rows, n / 32]).
constexpr int64_t k_norm_q8_256_max = 16384;
// K > 0: n <= K * blockDim.x, and each thread keeps its K values of x and y in registers between the passes (K = 0:
// any n, the passes read them back from memory). The same values either way, so the same bits.
template <int K>
__global__ void add_rms_norm_kernel(float* x, const float* r, const float* w, float* y, int64_t n, float eps,
                                    int8_t* qx, float* dx, float* sx, int32_t* bx) {
  pdl_begin();
  __shared__ float red[32];
  __shared__ float sub_amax[k_norm_q8_256_max / 32];
  float* xr = x + (int64_t)blockIdx.x * n;
  const float* rr = r + (int64_t)blockIdx.x * n;
  float* yr = y + (int64_t)blockIdx.x * n;
  constexpr int KR = K > 0 ? K : 1;
  float xs[KR], ys[KR];  // this thread's values i = threadIdx.x + k blockDim.x (K > 0)
  // the thread's k-th value index, and whether there is one (K = 0: every i < n, k counting on)
  const auto index = [&](int k) { return (int64_t)threadIdx.x + (int64_t)k * blockDim.x; };
  const auto more = [&](int k) { return K > 0 ? k < K : index(k) < n; };
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; more(k); ++k) {
    const int64_t i = index(k);
    if (i >= n) break;
    const float v = rr[i] + xr[i];
    xr[i] = v;
    sum = __fmaf_rn(v, v, sum);
    if constexpr (K > 0) xs[k] = v;
  }
  sum = block_sum(sum, red);
  const float scale = 1.0f / sqrtf(sum / (float)n + eps);
  const int64_t b0 = (int64_t)blockIdx.x * (n / 32);
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; more(k); ++k) {
    const int64_t i = index(k);
    if (i >= n) break;
    const float xv = K > 0 ? xs[k % KR] : xr[i];
    const float v = w ? xv * scale * w[i] : xv * scale;
    yr[i] = v;
    if constexpr (K > 0) ys[k] = v;
    if (sx) quantize32(v, qx + (int64_t)blockIdx.x * n + i, dx + b0 + i / 32, sx + b0 + i / 32);  // uniform
    if (bx) {
      const float a = warp_amax(v);  // as quantize256_block's (the same amax)
      if (lane == 0) sub_amax[i / 32] = a;
    }
  }
  if (!bx) return;
  __syncthreads();
#pragma unroll
  for (int k = 0; more(k); ++k) {
    const int64_t i = index(k);
    if (i >= n) break;
    const float v = K > 0 ? ys[k % KR] : yr[i];  // this thread's own value
    const int64_t g = i / 256;
    const float amax = group_amax(sub_amax + 8 * g), d = q8_scale(amax);
    quantize_piece(v, amax, d, qx + (int64_t)blockIdx.x * n + i, bx + b0 + i / 32);
    if (i % 256 == 0) dx[(int64_t)blockIdx.x * (n / 256) + g] = d;
  }
}

// One block per row: out[r] = argmax_first(x + r * stride, n) (argmax_rows.cuh).
__global__ void argmax_rows_kernel(const float* x, int64_t stride, int64_t n, int32_t* out) {
  pdl_begin();
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  argmax_row_block(x, stride, n, out, sv, si);
}

// Long rows: a block per slice of `slice` values of row blockIdx.y (argmax_rows.cuh).
__global__ void argmax_slices_kernel(const float* x, int64_t stride, int64_t n, int64_t slice, float* part,
                                     int32_t* done, int32_t* out) {
  pdl_begin();
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  __shared__ int last;
  argmax_slice_block(x, stride, n, slice, part, done, out, sv, si, &last);
}

// copy_rows of K (blockIdx.z 0) and V (1) rows into their cache slots in one launch, stores of element type T.
template <typename T>
__global__ void store_kv_kernel(T* k_store, T* v_store, const int64_t* rows, const float* k_new, const float* v_new,
                                int64_t k_dim, int64_t v_dim) {
  pdl_begin();
  const int64_t i = blockIdx.y, e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const bool is_v = blockIdx.z == 1;
  const int64_t width = is_v ? v_dim : k_dim;
  if (e >= width) return;
  put_kv((is_v ? v_store : k_store) + rows[i] * width + e, (is_v ? v_new : k_new)[i * width + e]);
}

// One block per row: mean, then the variance of (x - mean), each a block_sum; y = (x - mean) * scale [* w] [+ b].
// y may alias x (each thread rewrites only the elements it read last).
__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float red[32];
  const float* xr = x + (int64_t)blockIdx.x * n;
  float* yr = y + (int64_t)blockIdx.x * n;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
  const float mean = block_sum(sum, red) / (float)n;
  float sum2 = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] - mean;
    sum2 = __fmaf_rn(v, v, sum2);
  }
  const float scale = 1.0f / sqrtf(block_sum(sum2, red) / (float)n + eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float t = (xr[i] - mean) * scale;
    if (w) t = t * w[i];
    if (b) t = t + b[i];
    yr[i] = t;
  }
}

// gelu (tanh form) as x / (1 + exp(-2u)), u = sqrt(2/pi) x (1 + 0.044715 x^2): the CPU's ops_gelu. gelu_kernel and
// geglu_kernel both compute it here, so geglu's gelu has gelu's bits.
__device__ __forceinline__ float gelu_value(float v) {
  const float u = 0.79788456080286535588f * v * (1.0f + 0.044715f * v * v);
  return v / (1.0f + expf(-2.0f * u));
}

__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu_value(x[i]);
}

// geglu = gelu(gate) * up (the gelu rounded first, then one multiply).
__global__ void geglu_kernel(const float* gate, const float* up, float* y, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fmul_rn(gelu_value(gate[i]), up[i]);
}

// gelu_quick = x / (1 + exp(-1.702 x)).
__global__ void gelu_quick_kernel(const float* x, float* y, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / (1.0f + expf(-1.702f * x[i]));
}

// MoE sigmoid gating in place: 1 / (1 + exp(-x)) (the device's expf: within a few ulps of the CPU's).
__global__ void sigmoid_kernel(float* x, int64_t n) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x[i])));
}

// One block per row: x = softmax(x * scale).
__global__ void softmax_kernel(float* x, int64_t n, float scale) {
  pdl_begin();  // programmatic dependent launch: wait for the previous kernel, let the next start launching
  __shared__ float red[32];
  float* xr = x + (int64_t)blockIdx.x * n;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, xr[i] * scale);
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(xr[i] * scale - mx);
    xr[i] = e;
    sum += e;
  }
  sum = block_sum(sum, red);
  const float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) xr[i] *= inv;
}

// Rotates pair j of one head h (head_dim floats) in place, returning where the two values went (offsets in the
// head). The angle follows ops_rope_cache: theta_j = pos * ts^j built by repeated f32 multiplication,
// angle = freq_scale * (theta_j / ff_j).
struct rope_pair_at {
  int32_t a, b;
};
__device__ __forceinline__ rope_pair_at rope_pair(float* h, int32_t j, int32_t pos, int32_t n_rot, float theta_scale,
                                                  float freq_scale, bool neox, const float* ff) {
  const int32_t half = n_rot / 2;
  float theta = (float)pos;
  for (int32_t kk = 0; kk < j; ++kk) theta *= theta_scale;
  const float angle = freq_scale * (theta / (ff ? ff[j] : 1.0f));
  const float c = cosf(angle), s = sinf(angle);
  const rope_pair_at at = neox ? rope_pair_at{j, j + half} : rope_pair_at{2 * j, 2 * j + 1};
  const float x0 = h[at.a], x1 = h[at.b];
  h[at.a] = x0 * c - x1 * s;
  h[at.b] = x0 * s + x1 * c;
  return at;
}

// One thread per (row, head, rotated pair j) of q, then of k (n_head_k 0: q only).
__global__ void rope_kernel(float* q, float* k, int64_t n_rows, int32_t n_head_q, int32_t n_head_k, int32_t head_dim,
                            const int32_t* pos, int32_t n_rot, float theta_scale, float freq_scale, bool neox,
                            const float* ff) {
  pdl_begin();
  const int32_t half = n_rot / 2;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t n_q = n_rows * n_head_q * half;
  float* x = q;
  int32_t n_head = n_head_q;
  if (i >= n_q) {
    i -= n_q;
    x = k;
    n_head = n_head_k;
    if (i >= n_rows * n_head_k * half) return;
  }
  const int32_t j = (int32_t)(i % half);
  const int64_t rh = i / half, row = rh / n_head;
  rope_pair(x + rh * head_dim, j, pos[row], n_rot, theta_scale, freq_scale, neox, ff);
}

// rope_kernel and store_kv_kernel in one launch: block row y = token i; thread e of the row takes q pair e, then
// k pair e - n_q (rotated in k_new and written to k's slot), then a k dim past n_rot (copied), then a v dim.
template <typename T>
__global__ void rope_store_kv_kernel(float* q, float* k_new, const float* v_new, int32_t n_head_q, int32_t n_head_k,
                                     int32_t head_dim, const int32_t* pos, int32_t n_rot, float theta_scale,
                                     float freq_scale, bool neox, const float* ff, T* k_store, T* v_store,
                                     const int64_t* rows, int64_t v_dim) {
  pdl_begin();
  const int64_t i = blockIdx.y;
  int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int32_t half = n_rot / 2, pass = head_dim - n_rot;
  const int64_t k_dim = (int64_t)n_head_k * head_dim, n_q = (int64_t)n_head_q * half, n_k = (int64_t)n_head_k * half;
  if (e < n_q) {
    rope_pair(q + (i * n_head_q + e / half) * head_dim, (int32_t)(e % half), pos[i], n_rot, theta_scale, freq_scale,
              neox, ff);
    return;
  }
  e -= n_q;
  T* ks = k_store + rows[i] * k_dim;
  const float* kn = k_new + i * k_dim;
  if (e < n_k) {
    const int64_t h = e / half;
    const rope_pair_at at = rope_pair(k_new + i * k_dim + h * head_dim, (int32_t)(e % half), pos[i], n_rot,
                                      theta_scale, freq_scale, neox, ff);
    put_kv(ks + h * head_dim + at.a, kn[h * head_dim + at.a]);
    put_kv(ks + h * head_dim + at.b, kn[h * head_dim + at.b]);
    return;
  }
  e -= n_k;
  if (e < (int64_t)n_head_k * pass) {
    const int64_t d = (e / pass) * head_dim + n_rot + e % pass;
    put_kv(ks + d, kn[d]);
    return;
  }
  e -= (int64_t)n_head_k * pass;
  if (e < v_dim) put_kv(v_store + rows[i] * v_dim + e, v_new[i * v_dim + e]);
}

}  // namespace

void cuda_backend::get_rows(const backend_weight& table, const int32_t* ids, int64_t n, float* out) {
  if (n <= 0) return;
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= table.n_out) throw error("get_rows: row id " + std::to_string(ids[i]) + " out of range");
  }
  const int32_t* d_ids = stage(ids, n);
  const int64_t n_units = x32_shape_of(table.type, table.n_in, table.n_out).n_units;
  switch (table.type) {
    case ggml_type::F32: launch_get_rows<x32_f32>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::F16: launch_get_rows<x32_f16>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::BF16: launch_get_rows<x32_bf16>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q8_0: launch_get_rows<x32_q8_0>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q4_0: launch_get_rows<x32_q4_0>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q4_K: launch_get_rows<x32_q4_K>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q6_K: launch_get_rows<x32_q6_K>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q4_1: launch_get_rows<x32_q4_1>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q5_0: launch_get_rows<x32_q5_0>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q5_1: launch_get_rows<x32_q5_1>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::IQ4_NL: launch_get_rows<x32_iq4_nl>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q2_K: launch_get_rows<x32_q2_K>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q3_K: launch_get_rows<x32_q3_K>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::Q5_K: launch_get_rows<x32_q5_K>(*this, table, n_units, d_ids, n, out); break;
    case ggml_type::IQ4_XS: launch_get_rows<x32_iq4_xs>(*this, table, n_units, d_ids, n, out); break;
    default: throw error("get_rows: unsupported table type");
  }
}

void cuda_backend::copy_rows(float* dst, const int64_t* dst_rows, const float* src, const int64_t* src_rows,
                             int64_t n, int64_t width) {
  if (n <= 0 || width <= 0) return;
  const int64_t* d_dst = dst_rows ? stage(dst_rows, n) : nullptr;
  const int64_t* d_src = src_rows ? stage(src_rows, n) : nullptr;
  for (int64_t i0 = 0; i0 < n; i0 += 65535) {  // grid.y limit
    const int64_t m = std::min<int64_t>(n - i0, 65535);
    launch("copy_rows", copy_rows_kernel, dim3(dim3(grid_for(width, k_threads), (unsigned)m)), dim3(k_threads), 
        dst_rows ? dst : dst + i0 * width, d_dst ? d_dst + i0 : nullptr, src_rows ? src : src + i0 * width,
        d_src ? d_src + i0 : nullptr, width);
  }
}

void cuda_backend::scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return;
  const float* d_s = stage(s, n_rows);
  launch("scale_rows", scale_rows_kernel, dim3(grid_for(n_rows * n, k_threads)), dim3(k_threads), x, d_s, n_rows, n);
}

void cuda_backend::add_row_vector(float* x, const float* b, int64_t n_rows, int64_t n) {
  if (n_rows <= 0 || n <= 0) return;
  launch("add_row_vector", add_row_vector_kernel, dim3(grid_for(n_rows * n, k_threads)), dim3(k_threads), x, b, n_rows, n);
}

void cuda_backend::add(const float* a, const float* b, float* y, int64_t n) {
  if (n <= 0) return;
  launch("add", add_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), a, b, y, n);
}

void cuda_backend::swiglu(const float* gate, const float* up, float* y, int64_t n) {
  if (n <= 0) return;
  launch("swiglu", swiglu_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), gate, up, y, n);
}

void cuda_backend::rms_norm(const float* x, const float* w, float* y, int64_t n_rows, int64_t n, float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (n_rows > 0x7fffffff) throw error("rms_norm: too many rows");
  launch("rms_norm", rms_norm_kernel, dim3((unsigned)n_rows), dim3(n >= 1024 ? 1024 : 128), x, w, y, n, eps);
}

void cuda_backend::layer_norm(const float* x, const float* w, const float* b, float* y, int64_t n_rows, int64_t n,
                              float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (n_rows > 0x7fffffff) throw error("layer_norm: too many rows");
  launch("layer_norm", layer_norm_kernel, dim3((unsigned)n_rows), dim3(n >= 1024 ? 1024 : 128), x, w, b, y, n, eps);
}

void cuda_backend::gelu(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  launch("gelu", gelu_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), x, y, n);
}

void cuda_backend::geglu(const float* gate, const float* up, float* y, int64_t n) {
  if (n <= 0) return;
  launch("geglu", geglu_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), gate, up, y, n);
}

void cuda_backend::gelu_quick(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  launch("gelu_quick", gelu_quick_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), x, y, n);
}

void cuda_backend::sigmoid(float* x, int64_t n) {
  if (n <= 0) return;
  launch("sigmoid", sigmoid_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), x, n);
}

void cuda_backend::softmax(float* x, int64_t n_rows, int64_t n, float scale) {
  if (n_rows <= 0 || n <= 0) return;
  if (n_rows > 0x7fffffff) throw error("softmax: too many rows");
  launch("softmax", softmax_kernel, dim3((unsigned)n_rows), dim3(256), x, n, scale);
}

namespace {
// freq_base^(-2 / n_rot), the factor between successive pairs' angles, once n_rot is checked.
float rope_theta_scale(const rope_params& p, int32_t head_dim) {
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > head_dim) {
    throw error("rope: n_rot must be even and in [2, head_dim], got " + std::to_string(p.n_rot));
  }
  return std::pow(p.freq_base, -2.0f / (float)p.n_rot);
}
}  // namespace

void cuda_backend::rope(float* x, int64_t n_rows, int32_t n_head, int32_t head_dim, const int32_t* pos,
                        const rope_params& p) {
  rope_qk(x, nullptr, n_rows, n_head, 0, head_dim, pos, p);
}

void cuda_backend::rope_qk(float* q, float* k, int64_t n_rows, int32_t n_head_q, int32_t n_head_k, int32_t head_dim,
                           const int32_t* pos, const rope_params& p) {
  if (n_rows <= 0) return;
  const float theta_scale = rope_theta_scale(p, head_dim);  // checks n_rot before anything is staged
  const int32_t* d_pos = stage(pos, n_rows);
  const int64_t n = n_rows * (n_head_q + (k ? n_head_k : 0)) * (p.n_rot / 2);
  launch("rope", rope_kernel, dim3(grid_for(n, k_threads)), dim3(k_threads), q, k, n_rows, n_head_q, k ? n_head_k : 0,
         head_dim, d_pos, p.n_rot, theta_scale, p.freq_scale, p.neox, p.freq_factors);
}

void cuda_backend::add_rms_norm(float* x, const float* r, const float* w, float* y, int64_t n_rows, int64_t n,
                                float eps) {
  if (n_rows <= 0 || n <= 0) return;
  if (n_rows > 0x7fffffff) throw error("add_rms_norm: too many rows");
  const dim3 grid((unsigned)n_rows), block(n >= 1024 ? 1024 : 128);
  const int64_t per_thread = (n + block.x - 1) / block.x;
  const auto kernel = per_thread <= 1   ? add_rms_norm_kernel<1>
                      : per_thread <= 2 ? add_rms_norm_kernel<2>
                      : per_thread <= 4 ? add_rms_norm_kernel<4>
                                        : add_rms_norm_kernel<0>;
  // y quantized too, in the format the last quantized matmul took: the matmuls after it (matmul.cu) find their
  // input ready
  const act_format fmt = next_fmt_;
  if (n % (fmt == act_format::q8_256 ? 256 : 32) != 0 || (fmt == act_format::q8_256 && n > k_norm_q8_256_max)) {
    launch("add_rms_norm", kernel, grid, block, x, r, w, y, n, eps, nullptr, nullptr, nullptr, nullptr);
    return;
  }
  const mmv_act a = q8_view(n_rows, n, fmt);
  launch("add_rms_norm", kernel, grid, block, x, r, w, y, n, eps, (int8_t*)a.qx, (float*)a.dx, (float*)a.sx,
         (int32_t*)a.bx);
  keep_quantized_act(y, n_rows, n, fmt);
}

namespace {
template <typename T>
void launch_store_kv(cuda_backend& be, float* k_store, float* v_store, const int64_t* d_rows, const float* k_new,
                     const float* v_new, int64_t m, int64_t k_dim, int64_t v_dim) {
  be.launch("store_kv", store_kv_kernel<T>, dim3(grid_for(std::max(k_dim, v_dim), k_threads), (unsigned)m, 2),
            dim3(k_threads), (T*)k_store, (T*)v_store, d_rows, k_new, v_new, k_dim, v_dim);
}
template <typename T>
void launch_rope_store_kv(cuda_backend& be, const dim3& grid, float* q, float* k_new, const float* v_new,
                          int32_t n_head_q, int32_t n_head_k, int32_t head_dim, const int32_t* d_pos,
                          const rope_params& p, float theta_scale, float* k_store, float* v_store,
                          const int64_t* d_rows, int64_t v_dim) {
  be.launch("rope_store_kv", rope_store_kv_kernel<T>, grid, dim3(k_threads), q, k_new, v_new, n_head_q, n_head_k,
            head_dim, d_pos, p.n_rot, theta_scale, p.freq_scale, p.neox, p.freq_factors, (T*)k_store, (T*)v_store,
            d_rows, v_dim);
}
}  // namespace

void cuda_backend::store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new, const float* v_new,
                            int64_t n, int64_t k_dim, int64_t v_dim, kv_type kv) {
  if (n <= 0) return;
  const int64_t* d_rows = stage(rows, n);
  for (int64_t i0 = 0; i0 < n; i0 += 65535) {  // grid.y limit
    const int64_t m = std::min<int64_t>(n - i0, 65535);
    const float* kn = k_new + i0 * k_dim;
    const float* vn = v_new + i0 * v_dim;
    with_kv_element(kv, [&](auto t) {
      launch_store_kv<decltype(t)>(*this, k_store, v_store, d_rows + i0, kn, vn, m, k_dim, v_dim);
    });
  }
}

void cuda_backend::rope_store_kv(float* q, float* k_new, const float* v_new, int64_t n_rows, int32_t n_head_q,
                                 int32_t n_head_k, int32_t head_dim, const int32_t* pos, const rope_params& p,
                                 float* k_store, float* v_store, const int64_t* rows, int64_t v_dim, kv_type kv) {
  if (!fused_) {
    backend::rope_store_kv(q, k_new, v_new, n_rows, n_head_q, n_head_k, head_dim, pos, p, k_store, v_store, rows, v_dim,
                           kv);
    return;
  }
  if (n_rows <= 0) return;
  const float theta_scale = rope_theta_scale(p, head_dim);  // checks n_rot before anything is staged
  const int32_t* d_pos = stage(pos, n_rows);
  const int64_t* d_rows = stage(rows, n_rows);
  // per token: q pairs, k pairs, k dims past n_rot, v dims
  const int64_t per_row = (int64_t)(n_head_q + n_head_k) * (p.n_rot / 2) + (int64_t)n_head_k * (head_dim - p.n_rot) + v_dim;
  const int64_t k_dim = (int64_t)n_head_k * head_dim;
  for (int64_t i0 = 0; i0 < n_rows; i0 += 65535) {  // grid.y limit
    const int64_t m = std::min<int64_t>(n_rows - i0, 65535);
    const dim3 grid(grid_for(per_row, k_threads), (unsigned)m);
    float* qi = q + i0 * n_head_q * head_dim;
    float* ki = k_new + i0 * k_dim;
    const float* vi = v_new + i0 * v_dim;
    with_kv_element(kv, [&](auto t) {
      launch_rope_store_kv<decltype(t)>(*this, grid, qi, ki, vi, n_head_q, n_head_k, head_dim, d_pos + i0, p,
                                        theta_scale, k_store, v_store, d_rows + i0, v_dim);
    });
  }
}

void cuda_backend::argmax_rows(const float* x, int64_t n_rows, int64_t stride, int64_t n, int32_t* out) {
  if (n_rows <= 0) return;
  if (n <= 0 || n > 0x7fffffff || n_rows > 0x7fffffff) throw error("argmax_rows: rows of 1 to 2^31 - 1 values");
  int32_t* ids = argmax_ids_.reserve(n_rows, recording() ? &outgrown_ : nullptr);
  constexpr int64_t slice = 2048;  // values per block of a long row (8 per thread)
  const int64_t slices = (n + slice - 1) / slice;
  if (fused_ && slices >= 4 && slices <= 65535 && n_rows <= k_argmax_done_max) {  // many blocks per row
    float* part = argmax_part_.reserve(2 * n_rows * slices, recording() ? &outgrown_ : nullptr);
    launch("argmax_slices", argmax_slices_kernel, dim3((unsigned)slices, (unsigned)n_rows), dim3(256), x, stride, n,
           slice, part, argmax_done(), ids);
  } else {
    launch("argmax_rows", argmax_rows_kernel, dim3((unsigned)n_rows), dim3(1024), x, stride, n, ids);
  }
  leave_recording();  // the ids go to the host now
  SPINDLE_CUDA_CHECK(cudaMemcpyAsync(out, ids, (size_t)n_rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  SPINDLE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  queue_drained();
}

}  // namespace spindle
