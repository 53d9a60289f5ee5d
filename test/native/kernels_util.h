// Helpers for the CPU kernel tests: random but valid weight rows for each type, activation rows in the
// kernel formats and their exact f32 values, and the list of SIMD levels this CPU can run.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/vec_dot.h"

namespace kernels_test {

using namespace spindle;

// The types of quants_more.h (the ones added after the first five quantized types: their dequantizers and
// reference dots are checked against an independent decoder).
inline const std::vector<ggml_type>& quants_more_types() {
  static const std::vector<ggml_type> types = {ggml_type::Q4_1, ggml_type::Q5_0, ggml_type::Q5_1,
                                               ggml_type::IQ4_NL, ggml_type::Q2_K, ggml_type::Q3_K,
                                               ggml_type::Q5_K, ggml_type::IQ4_XS};
  return types;
}

// Every weight type the CPU backend computes with.
inline const std::vector<ggml_type>& weight_types() {
  static const std::vector<ggml_type> types = {
      ggml_type::F32,  ggml_type::F16,  ggml_type::BF16,   ggml_type::Q8_0, ggml_type::Q4_0, ggml_type::Q4_1,
      ggml_type::Q5_0, ggml_type::Q5_1, ggml_type::IQ4_NL, ggml_type::Q2_K, ggml_type::Q3_K, ggml_type::Q4_K,
      ggml_type::Q5_K, ggml_type::Q6_K, ggml_type::IQ4_XS};
  return types;
}

inline std::vector<cpu_level> supported_levels() {
  std::vector<cpu_level> out;
  for (cpu_level l : {cpu_level::scalar, cpu_level::avx2, cpu_level::avx512})
    if (cpu_level_supported(l)) out.push_back(l);
  return out;
}

inline uint16_t random_scale(std::mt19937& rng, float lo, float hi) {
  return f32_to_fp16(std::uniform_real_distribution<float>(lo, hi)(rng));
}

// n_rows rows of n elements of `type`, every byte random except the fp16/bf16 values and block scales,
// which are kept finite and moderate.
inline std::vector<uint8_t> random_rows(ggml_type type, int64_t n_rows, int64_t n, std::mt19937& rng) {
  const size_t row = cpu_row_bytes(type, n);
  std::vector<uint8_t> data(row * n_rows);
  for (auto& b : data) b = (uint8_t)rng();
  std::normal_distribution<float> normal(0.0f, 1.0f);
  uint8_t* p = data.data();
  const int64_t count = n_rows * (n / cpu_block_size(type));
  for (int64_t i = 0; i < count; ++i) {
    switch (type) {
      case ggml_type::F32: ((float*)p)[i] = normal(rng); break;
      case ggml_type::F16: ((uint16_t*)p)[i] = f32_to_fp16(normal(rng)); break;
      case ggml_type::BF16: ((uint16_t*)p)[i] = f32_to_bf16(normal(rng)); break;
      case ggml_type::Q8_0: ((block_q8_0*)p)[i].d = random_scale(rng, 0.001f, 0.02f); break;
      case ggml_type::Q4_0: ((block_q4_0*)p)[i].d = random_scale(rng, 0.01f, 0.2f); break;
      case ggml_type::Q4_K:
        ((block_q4_K*)p)[i].d = random_scale(rng, 0.001f, 0.01f);
        ((block_q4_K*)p)[i].dmin = random_scale(rng, 0.001f, 0.01f);
        break;
      case ggml_type::Q6_K: ((block_q6_K*)p)[i].d = random_scale(rng, 0.0001f, 0.001f); break;
      case ggml_type::Q4_1:
        ((block_q4_1*)p)[i].d = random_scale(rng, 0.01f, 0.2f);
        ((block_q4_1*)p)[i].m = random_scale(rng, -1.5f, 0.0f);
        break;
      case ggml_type::Q5_0: ((block_q5_0*)p)[i].d = random_scale(rng, 0.005f, 0.1f); break;
      case ggml_type::Q5_1:
        ((block_q5_1*)p)[i].d = random_scale(rng, 0.005f, 0.1f);
        ((block_q5_1*)p)[i].m = random_scale(rng, -1.5f, 0.0f);
        break;
      case ggml_type::Q2_K:
        ((block_q2_K*)p)[i].d = random_scale(rng, 0.005f, 0.05f);
        ((block_q2_K*)p)[i].dmin = random_scale(rng, 0.005f, 0.05f);
        break;
      case ggml_type::Q3_K: ((block_q3_K*)p)[i].d = random_scale(rng, 0.0005f, 0.005f); break;
      case ggml_type::Q5_K:
        ((block_q5_K*)p)[i].d = random_scale(rng, 0.0005f, 0.005f);
        ((block_q5_K*)p)[i].dmin = random_scale(rng, 0.001f, 0.01f);
        break;
      case ggml_type::IQ4_NL: ((block_iq4_nl*)p)[i].d = random_scale(rng, 0.0005f, 0.01f); break;
      case ggml_type::IQ4_XS: ((block_iq4_xs*)p)[i].d = random_scale(rng, 0.00005f, 0.0005f); break;
      default: break;
    }
  }
  return data;
}

// n_tokens rows of n activations: mostly N(0, 1) with a few larger outliers.
inline std::vector<float> random_activations(int64_t n_tokens, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_tokens * n);
  for (auto& v : x) v = normal(rng) * ((rng() % 64) == 0 ? 8.0f : 1.0f);
  return x;
}

// The exact f32 values a converted activation row stands for.
inline std::vector<float> activation_values(ggml_type act, const uint8_t* row, int64_t n) {
  std::vector<float> out(n);
  switch (act) {
    case ggml_type::F32: std::memcpy(out.data(), row, n * sizeof(float)); break;
    case ggml_type::F16: dequantize_row_f16((const uint16_t*)row, out.data(), n); break;
    case ggml_type::BF16: dequantize_row_bf16((const uint16_t*)row, out.data(), n); break;
    case ggml_type::Q8_0: dequantize_row_q8_0((const block_q8_0*)row, out.data(), n); break;
    case ggml_type::Q8_1:
      for (int64_t i = 0; i < n; ++i) {
        const block_q8_1& b = ((const block_q8_1*)row)[i / QK8_1];
        out[i] = fp16_to_f32(b.d) * b.qs[i % QK8_1];
      }
      break;
    case ggml_type::Q8_K:
      for (int64_t i = 0; i < n; ++i) {
        const block_q8_K& b = ((const block_q8_K*)row)[i / QK_K];
        out[i] = b.d * b.qs[i % QK_K];
      }
      break;
    default: break;
  }
  return out;
}

// Converts each token row of x into the activation format of `wtype`: [n_tokens, row bytes].
inline std::vector<uint8_t> convert_activations(ggml_type wtype, const std::vector<float>& x, int64_t n_tokens,
                                                int64_t n) {
  const ggml_type act = cpu_activation_type(wtype);
  const size_t row = cpu_row_bytes(act, n);
  std::vector<uint8_t> out(row * n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) cpu_convert_activation(act, x.data() + t * n, out.data() + t * row, n);
  return out;
}

// sum_i |w_i * x_i| in double: the scale that float summation errors are measured against.
inline double abs_dot(const std::vector<float>& w, const std::vector<float>& x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += std::fabs((double)w[i] * x[i]);
  return s;
}

inline double exact_dot(const std::vector<float>& w, const std::vector<float>& x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += (double)w[i] * x[i];
  return s;
}

// The dot product the kernels stand for, in double: exact_dot, except that for the q8_1 activations of Q4_1 / Q5_1
// each weight block's offset m multiplies the activation block's stored s = fp16(d * sum q) (llama.cpp's
// arithmetic) instead of the exact sum of its values.  wv / xv: the rows' values (cpu_dequantize_row,
// activation_values); w / x: the same rows in their block formats.
inline double reference_dot(ggml_type t, const uint8_t* w, const uint8_t* x, const std::vector<float>& wv,
                            const std::vector<float>& xv) {
  if (cpu_activation_type(t) != ggml_type::Q8_1) return exact_dot(wv, xv);
  const size_t wb = cpu_row_bytes(t, QK8_1);
  double s = 0;
  for (size_t i = 0; i < wv.size(); ++i) {
    const uint8_t* block = w + (i / QK8_1) * wb;
    const double m = fp16_to_f32((uint16_t)(block[2] | (block[3] << 8)));  // m follows d in q4_1 and q5_1
    s += ((double)wv[i] - m) * xv[i];
    if (i % QK8_1 == 0) s += m * fp16_to_f32(((const block_q8_1*)x)[i / QK8_1].s);
  }
  return s;
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace kernels_test
