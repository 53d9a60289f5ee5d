// Float kernels of the CPU backend (see ops.h). Invariant: fixed reduction order in every function; no state.
#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace spindle {

float ops_dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  const float s0 = (acc[0] + acc[4]) + (acc[1] + acc[5]);
  const float s1 = (acc[2] + acc[6]) + (acc[3] + acc[7]);
  return s0 + s1;
}

void ops_rms_norm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;  // as ggml: f32 squares accumulated in double
  for (int64_t i = 0; i < n; ++i) sum += (double)(x[i] * x[i]);
  const float mean = (float)(sum / (double)n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void ops_layer_norm_row(const float* x, const float* w, const float* b, float* y, int64_t n, float eps) {
  if (n <= 0) return;
  double sum = 0.0;  // as ggml_norm: f32 values accumulated in double
  for (int64_t i = 0; i < n; ++i) sum += (double)x[i];
  const float mean = (float)(sum / (double)n);
  double sum2 = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] - mean;
    y[i] = v;
    sum2 += (double)(v * v);
  }
  const float scale = 1.0f / std::sqrt((float)(sum2 / (double)n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    float t = y[i] * scale;
    if (w) t = t * w[i];
    if (b) t = t + b[i];
    y[i] = t;
  }
}

namespace {
constexpr float k_sqrt_2_over_pi = 0.79788456080286535588f;
constexpr float k_gelu_coef_a = 0.044715f;
constexpr float k_gelu_quick_coef = 1.702f;
}  // namespace

float ops_gelu(float x) {
  const float u = k_sqrt_2_over_pi * x * (1.0f + k_gelu_coef_a * x * x);
  return x / (1.0f + std::exp(-2.0f * u));
}

float ops_gelu_quick(float x) { return x / (1.0f + std::exp(-k_gelu_quick_coef * x)); }

void ops_gelu_vec(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ops_gelu(x[i]);
}

void ops_gelu_quick_vec(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ops_gelu_quick(x[i]);
}

void ops_rope_cache(int64_t pos, const rope_params& p, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / (float)p.n_rot);
  float theta = (float)pos;
  for (int32_t j = 0; j < p.n_rot / 2; ++j) {
    const float ff = p.freq_factors ? p.freq_factors[j] : 1.0f;
    const float angle = p.freq_scale * (theta / ff);
    cache[2 * j + 0] = std::cos(angle);
    cache[2 * j + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void ops_rope_head(float* x, const float* cache, int32_t n_rot, bool neox) {
  const int32_t half = n_rot / 2;
  for (int32_t j = 0; j < half; ++j) {
    const float c = cache[2 * j + 0], s = cache[2 * j + 1];
    float* a = neox ? x + j : x + 2 * j;  // first element of the pair
    float* b = neox ? x + j + half : x + 2 * j + 1;
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * s;
    *b = x0 * s + x1 * c;
  }
}

void ops_softmax_row(float* x, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= scale;
    if (x[i] > max) max = x[i];
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - max);
    x[i] = e;
    sum += (double)e;
  }
  const float inv = (float)(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float ops_silu(float x) { return x / (1.0f + std::exp(-x)); }

void ops_swiglu(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ops_silu(gate[i]) * up[i];
}

void ops_add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

namespace {

// f32 rows are read in place; another row is widened into `wide` first (exact), so the sums are the f32 ones.
template <class E>
const float* widened_row(const kv_rows& r, int64_t j, int32_t n, std::vector<float>& wide) {
  const auto x = r.row_as<E>(j);
  if constexpr (std::is_same_v<E, float>) {
    return x;
  } else {
    for (int32_t i = 0; i < n; ++i) wide[(size_t)i] = kv_to_f32(x[i]);
    return wide.data();
  }
}

template <class E>
void attention_head_rows(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t head_dim_k,
                         int32_t head_dim_v, float scale, float* scores, float* out) {
  thread_local std::vector<float> wide;
  if (wide.size() < (size_t)std::max(head_dim_k, head_dim_v)) wide.resize((size_t)std::max(head_dim_k, head_dim_v));
  for (int64_t j = 0; j < n_kv; ++j) scores[j] = ops_dot_f32(q, widened_row<E>(k, j, head_dim_k, wide), head_dim_k);
  ops_softmax_row(scores, n_kv, scale);
  for (int32_t d = 0; d < head_dim_v; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n_kv; ++j) {
    const float pj = scores[j];
    const float* vj = widened_row<E>(v, j, head_dim_v, wide);
    for (int32_t d = 0; d < head_dim_v; ++d) out[d] += pj * vj[d];
  }
}

}  // namespace

void ops_attention_head_kv(const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t head_dim_k,
                           int32_t head_dim_v, float scale, float* scores, float* out) {
  with_kv_elem(k.type, [&](auto e) {
    attention_head_rows<decltype(e)>(q, k, v, n_kv, head_dim_k, head_dim_v, scale, scores, out);
  });
}

void ops_attention_head(const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                        int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v, float scale, float* scores,
                        float* out) {
  ops_attention_head_kv(q, kv_rows{k, k_stride}, kv_rows{v, v_stride}, n_kv, head_dim_k, head_dim_v, scale, scores,
                        out);
}

}  // namespace spindle
