// Reference (scalar) dot products, the activation formats, and the scalar tile kernels built from them.
// Invariant: every integer product is summed exactly in int32 per block; floats enter only as
// (weight scale * activation scale) * block sum, added to one running f32 sum in block order.
#include <cstring>
#include <string>

#include "backend/cpu/fp16.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_avx2.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/vec_dot.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

static std::string type_label(ggml_type t) { return "ggml type " + std::to_string((uint32_t)t); }

ggml_type cpu_activation_type(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return ggml_type::F32;
    case ggml_type::F16: return ggml_type::F16;
    case ggml_type::BF16: return ggml_type::BF16;
    case ggml_type::Q8_0:
    case ggml_type::Q4_0:
    case ggml_type::Q5_0:
    case ggml_type::IQ4_NL: return ggml_type::Q8_0;
    case ggml_type::Q4_1:
    case ggml_type::Q5_1: return ggml_type::Q8_1;
    case ggml_type::Q2_K:
    case ggml_type::Q3_K:
    case ggml_type::Q4_K:
    case ggml_type::Q5_K:
    case ggml_type::Q6_K:
    case ggml_type::IQ4_XS: return ggml_type::Q8_K;
    default: throw error("cpu backend: no matmul kernel for " + type_label(wtype));
  }
}

int64_t cpu_block_size(ggml_type type) {
  switch (type) {
    case ggml_type::F32: case ggml_type::F16: case ggml_type::BF16: return 1;
    case ggml_type::Q8_0: case ggml_type::Q4_0: case ggml_type::Q8_1: case ggml_type::Q4_1:
    case ggml_type::Q5_0: case ggml_type::Q5_1: case ggml_type::IQ4_NL: return 32;
    case ggml_type::Q4_K: case ggml_type::Q6_K: case ggml_type::Q8_K: case ggml_type::Q2_K:
    case ggml_type::Q3_K: case ggml_type::Q5_K: case ggml_type::IQ4_XS: return QK_K;
    default: throw error("cpu backend: unsupported " + type_label(type));
  }
}

static size_t block_bytes(ggml_type type) {
  switch (type) {
    case ggml_type::F32: return 4;
    case ggml_type::F16: case ggml_type::BF16: return 2;
    case ggml_type::Q8_0: return sizeof(block_q8_0);
    case ggml_type::Q4_0: return sizeof(block_q4_0);
    case ggml_type::Q4_K: return sizeof(block_q4_K);
    case ggml_type::Q6_K: return sizeof(block_q6_K);
    case ggml_type::Q8_K: return sizeof(block_q8_K);
    case ggml_type::Q8_1: return sizeof(block_q8_1);
    case ggml_type::Q4_1: return sizeof(block_q4_1);
    case ggml_type::Q5_0: return sizeof(block_q5_0);
    case ggml_type::Q5_1: return sizeof(block_q5_1);
    case ggml_type::Q2_K: return sizeof(block_q2_K);
    case ggml_type::Q3_K: return sizeof(block_q3_K);
    case ggml_type::Q5_K: return sizeof(block_q5_K);
    case ggml_type::IQ4_NL: return sizeof(block_iq4_nl);
    case ggml_type::IQ4_XS: return sizeof(block_iq4_xs);
    default: throw error("cpu backend: unsupported " + type_label(type));
  }
}

size_t cpu_row_bytes(ggml_type type, int64_t n) {
  const int64_t bs = cpu_block_size(type);
  if (n < 0 || n % bs != 0)
    throw error("cpu backend: row of " + std::to_string(n) + " elements is not a multiple of the block size " +
                std::to_string(bs) + " of " + type_label(type));
  return (size_t)checked_mul((uint64_t)(n / bs), block_bytes(type), "cpu row size");
}

static bool avx2_quantizers() {
  static const bool on = (int)cpu_active_level() >= (int)cpu_level::avx2;
  return on;
}

void cpu_convert_activation(ggml_type act_type, const float* x, void* dst, int64_t n) {
  switch (act_type) {
    case ggml_type::F32: std::memcpy(dst, x, (size_t)n * sizeof(float)); return;
    case ggml_type::F16: convert_row_f16(x, (uint16_t*)dst, n); return;
    case ggml_type::BF16: convert_row_bf16(x, (uint16_t*)dst, n); return;
    // the AVX2 quantizers give the scalar ones' bits; SPINDLE_CPU_FEATURES=scalar keeps the plain code
    case ggml_type::Q8_0:
      if (avx2_quantizers()) quantize_row_q8_0_avx2(x, (block_q8_0*)dst, n);
      else quantize_row_q8_0(x, (block_q8_0*)dst, n);
      return;
    case ggml_type::Q8_K:
      if (avx2_quantizers()) quantize_row_q8_K_avx2(x, (block_q8_K*)dst, n);
      else quantize_row_q8_K(x, (block_q8_K*)dst, n);
      return;
    case ggml_type::Q8_1: quantize_row_q8_1(x, (block_q8_1*)dst, n); return;
    default: throw error("cpu backend: no activation format " + type_label(act_type));
  }
}

float vec_dot_f32_ref(int64_t n, const void* w, const void* x) {
  const float *a = (const float*)w, *b = (const float*)x;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float vec_dot_f16_ref(int64_t n, const void* w, const void* x) {
  const uint16_t *a = (const uint16_t*)w, *b = (const uint16_t*)x;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_f32(a[i]) * fp16_to_f32(b[i]);
  return sum;
}

float vec_dot_bf16_ref(int64_t n, const void* w, const void* x) {
  const uint16_t *a = (const uint16_t*)w, *b = (const uint16_t*)x;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(a[i]) * bf16_to_f32(b[i]);
  return sum;
}

float vec_dot_q8_0_ref(int64_t n, const void* w, const void* x) {
  const block_q8_0 *a = (const block_q8_0*)w, *b = (const block_q8_0*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK8_0; ++k) {
    int isum = 0;
    for (int j = 0; j < QK8_0; ++j) isum += a[k].qs[j] * b[k].qs[j];
    sum += (fp16_to_f32(a[k].d) * fp16_to_f32(b[k].d)) * (float)isum;
  }
  return sum;
}

float vec_dot_q4_0_ref(int64_t n, const void* w, const void* x) {
  const block_q4_0* a = (const block_q4_0*)w;
  const block_q8_0* b = (const block_q8_0*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK4_0; ++k) {
    int isum = 0;
    for (int j = 0; j < QK4_0 / 2; ++j) {
      isum += ((a[k].qs[j] & 0x0f) - 8) * b[k].qs[j];
      isum += ((a[k].qs[j] >> 4) - 8) * b[k].qs[j + QK4_0 / 2];
    }
    sum += (fp16_to_f32(a[k].d) * fp16_to_f32(b[k].d)) * (float)isum;
  }
  return sum;
}

// sum_j d*sc[j] * (q . y)_j  -  sum_j dmin*m[j] * (sum of y in sub-block j), times the activation scale.
float vec_dot_q4_K_ref(int64_t n, const void* w, const void* x) {
  const block_q4_K* a = (const block_q4_K*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {  // sub-block j: elements 32j..32j+32, nibbles of qs[32*(j/2) ..]
      uint8_t sc, m;
      q4_K_scale_min(j, a[k].scales, &sc, &m);
      const uint8_t* q = a[k].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int s = 0;
      for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0x0f) * b[k].qs[32 * j + l];
      isum += sc * s;
      msum += m * (b[k].bsums[2 * j] + b[k].bsums[2 * j + 1]);
    }
    const float dy = b[k].d;
    sum += (fp16_to_f32(a[k].d) * dy) * (float)isum - (fp16_to_f32(a[k].dmin) * dy) * (float)msum;
  }
  return sum;
}

// sum_g d*scales[g] * ((q - 32) . y)_g over the 16 groups of 16, times the activation scale.
float vec_dot_q6_K_ref(int64_t n, const void* w, const void* x) {
  const block_q6_K* a = (const block_q6_K*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    int isum = 0;
    for (int i = 0; i < QK_K; ++i) {
      const int h = i / 128, c = (i % 128) / 32, l = i % 32;  // half, quarter, lane
      const uint8_t lo = a[k].ql[64 * h + 32 * (c % 2) + l];
      const uint8_t hi = a[k].qh[32 * h + l];
      const int q = (((c < 2) ? (lo & 0x0f) : (lo >> 4)) | (((hi >> (2 * c)) & 3) << 4)) - 32;
      isum += a[k].scales[i / 16] * q * b[k].qs[i];
    }
    sum += (fp16_to_f32(a[k].d) * b[k].d) * (float)isum;
  }
  return sum;
}

vec_dot_fn vec_dot_ref_for(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return vec_dot_f32_ref;
    case ggml_type::F16: return vec_dot_f16_ref;
    case ggml_type::BF16: return vec_dot_bf16_ref;
    case ggml_type::Q8_0: return vec_dot_q8_0_ref;
    case ggml_type::Q4_0: return vec_dot_q4_0_ref;
    case ggml_type::Q4_K: return vec_dot_q4_K_ref;
    case ggml_type::Q6_K: return vec_dot_q6_K_ref;
    case ggml_type::Q4_1: return vec_dot_q4_1_ref;
    case ggml_type::Q5_0: return vec_dot_q5_0_ref;
    case ggml_type::Q5_1: return vec_dot_q5_1_ref;
    case ggml_type::Q2_K: return vec_dot_q2_K_ref;
    case ggml_type::Q3_K: return vec_dot_q3_K_ref;
    case ggml_type::Q5_K: return vec_dot_q5_K_ref;
    case ggml_type::IQ4_NL: return vec_dot_iq4_nl_ref;
    case ggml_type::IQ4_XS: return vec_dot_iq4_xs_ref;
    default: throw error("cpu backend: no matmul kernel for " + type_label(wtype));
  }
}

template <vec_dot_fn F>
static void scalar_tile(int64_t n, const uint8_t* w, size_t ws, int nr, const uint8_t* x, size_t xs, int nt,
                        float* y, int64_t ys) {
  for (int t = 0; t < nt; ++t)
    for (int r = 0; r < nr; ++r) y[t * ys + r] = F(n, w + r * ws, x + t * xs);
}

tile_kernel tile_kernel_scalar(ggml_type wtype) {
  switch (wtype) {
    case ggml_type::F32: return {scalar_tile<vec_dot_f32_ref>, 1, 1};
    case ggml_type::F16: return {scalar_tile<vec_dot_f16_ref>, 1, 1};
    case ggml_type::BF16: return {scalar_tile<vec_dot_bf16_ref>, 1, 1};
    case ggml_type::Q8_0: return {scalar_tile<vec_dot_q8_0_ref>, 1, 1};
    case ggml_type::Q4_0: return {scalar_tile<vec_dot_q4_0_ref>, 1, 1};
    case ggml_type::Q4_K: return {scalar_tile<vec_dot_q4_K_ref>, 1, 1};
    case ggml_type::Q6_K: return {scalar_tile<vec_dot_q6_K_ref>, 1, 1};
    case ggml_type::Q4_1: return {scalar_tile<vec_dot_q4_1_ref>, 1, 1};
    case ggml_type::Q5_0: return {scalar_tile<vec_dot_q5_0_ref>, 1, 1};
    case ggml_type::Q5_1: return {scalar_tile<vec_dot_q5_1_ref>, 1, 1};
    case ggml_type::Q2_K: return {scalar_tile<vec_dot_q2_K_ref>, 1, 1};
    case ggml_type::Q3_K: return {scalar_tile<vec_dot_q3_K_ref>, 1, 1};
    case ggml_type::Q5_K: return {scalar_tile<vec_dot_q5_K_ref>, 1, 1};
    case ggml_type::IQ4_NL: return {scalar_tile<vec_dot_iq4_nl_ref>, 1, 1};
    case ggml_type::IQ4_XS: return {scalar_tile<vec_dot_iq4_xs_ref>, 1, 1};
    default: return {};
  }
}

tile_kernel cpu_tile_kernel(cpu_level level, ggml_type wtype) {
  if (!cpu_level_supported(level)) return {};
  switch (level) {
    case cpu_level::scalar: return tile_kernel_scalar(wtype);
    case cpu_level::avx2: return tile_kernel_avx2(wtype);
    case cpu_level::avx512: return tile_kernel_avx512(wtype, cpu_detected_features().avx512_bf16);
  }
  return {};
}

packed_kernel cpu_packed_kernel(cpu_level level, ggml_type wtype) {
  if (!cpu_level_supported(level)) return {};
  switch (level) {
    case cpu_level::scalar: return {};  // the scalar level keeps the plain reference sums
    case cpu_level::avx2: return packed_kernel_avx2(wtype);
    case cpu_level::avx512: return packed_kernel_avx512(wtype);
  }
  return {};
}

}  // namespace spindle
