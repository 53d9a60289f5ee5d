// See lora_kernel.h. The row kernels vectorize along the outputs (baseline SSE2, or AVX2 where the CPU level allows),
// with fp-contract off: every product, sum, scale and add is rounded on its own, as without FMA.
#include "backend/cpu/lora_kernel.h"

#if defined(__clang__)
#pragma clang fp contract(off)  // GCC: the optimize attribute on the row kernels
#endif

#include <algorithm>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/fp16.h"
#include "common/error.h"

namespace spindle {

bool cpu_lora_kernel_type(ggml_type t) { return t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16; }

std::vector<float> cpu_lora_transpose(ggml_type t, const void* b, int64_t n_out, int64_t r) {
  if (!cpu_lora_kernel_type(t)) throw error("cpu_lora_transpose: type is not F32, F16 or BF16");
  const int64_t blocks = (n_out + k_lora_block - 1) / k_lora_block;
  std::vector<float> bt(size_t(blocks * r * k_lora_block), 0.0f);
  for (int64_t o = 0; o < n_out; ++o) {
    for (int64_t j = 0; j < r; ++j) {
      const int64_t i = o * r + j;
      float v;
      if (t == ggml_type::F32) v = static_cast<const float*>(b)[i];
      else if (t == ggml_type::F16) v = fp16_to_f32(static_cast<const uint16_t*>(b)[i]);
      else v = bf16_to_f32(static_cast<const uint16_t*>(b)[i]);
      bt[size_t((o / k_lora_block * r + j) * k_lora_block + o % k_lora_block)] = v;
    }
  }
  return bt;
}

void cpu_lora_round_low(ggml_type t, float* low, int64_t r) {
  if (t == ggml_type::F16) {
    for (int64_t j = 0; j < r; ++j) low[j] = fp16_to_f32(f32_to_fp16(low[j]));
  } else if (t == ggml_type::BF16) {
    for (int64_t j = 0; j < r; ++j) low[j] = bf16_to_f32(f32_to_bf16(low[j]));
  }
}

namespace {

// R rows x one block of 32 outputs (the block's [r][32] values at blk): sums in registers over j in order, then scaled
// and added (rounded on their own: fp-contract is off for the functions below, so no FMA either); nb outputs stored.
template <int R>
inline void lora_block(const float* low, int64_t r, const float* blk, int64_t n_out, int64_t o, int64_t nb, float scale,
                       float* y) {
  constexpr int B = int(k_lora_block);
  float acc[R][B] = {};
  for (int64_t j = 0; j < r; ++j) {
    const float* col = blk + j * B;
    for (int t = 0; t < R; ++t) {
      const float l = low[t * r + j];
      for (int k = 0; k < B; ++k) acc[t][k] += l * col[k];
    }
  }
  for (int t = 0; t < R; ++t) {
    float* out = y + t * n_out + o;
    for (int64_t k = 0; k < nb; ++k) {
      const float d = acc[t][k] * scale;
      out[k] = out[k] + d;
    }
  }
}

template <int R>
inline void lora_rows_r(const float* low, int64_t r, const float* bt, int64_t n_out, int64_t o0, int64_t o1, float scale,
                        float* y) {
  for (int64_t o = o0; o < o1; o += k_lora_block) {
    lora_block<R>(low, r, bt + o / k_lora_block * r * k_lora_block, n_out, o, std::min(k_lora_block, o1 - o), scale, y);
  }
}

#define SPINDLE_LORA_ROWS_BODY                                                                                  \
  int64_t t = 0;                                                                                             \
  for (; t + 4 <= n_rows; t += 4) lora_rows_r<4>(low + t * r, r, bt, n_out, o0, o1, scale, y + t * n_out);   \
  switch (n_rows - t) {                                                                                      \
    case 3: lora_rows_r<3>(low + t * r, r, bt, n_out, o0, o1, scale, y + t * n_out); break;                   \
    case 2: lora_rows_r<2>(low + t * r, r, bt, n_out, o0, o1, scale, y + t * n_out); break;                   \
    case 1: lora_rows_r<1>(low + t * r, r, bt, n_out, o0, o1, scale, y + t * n_out); break;                   \
    default: break;                                                                                          \
  }

#if defined(__clang__)
#define SPINDLE_NO_CONTRACT  // clang: the pragma at the top of the file
#else
#define SPINDLE_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

SPINDLE_NO_CONTRACT void lora_rows_baseline(const float* low, int64_t n_rows, int64_t r, const float* bt, int64_t n_out,
                                            int64_t o0, int64_t o1, float scale, float* y) {
  SPINDLE_LORA_ROWS_BODY
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SPINDLE_LORA_AVX2 1
__attribute__((target("avx2,fma"))) SPINDLE_NO_CONTRACT void lora_rows_avx2(const float* low, int64_t n_rows, int64_t r,
    const float* bt, int64_t n_out, int64_t o0, int64_t o1, float scale, float* y) {
  SPINDLE_LORA_ROWS_BODY
}
#endif

#undef SPINDLE_LORA_ROWS_BODY

}  // namespace

void cpu_lora_add_rows(const float* low, int64_t n_rows, int64_t r, const float* bt, int64_t n_out, int64_t o0,
                       int64_t o1, float scale, float* y) {
#if SPINDLE_LORA_AVX2
  if (cpu_active_level() >= cpu_level::avx2) return lora_rows_avx2(low, n_rows, r, bt, n_out, o0, o1, scale, y);
#endif
  lora_rows_baseline(low, n_rows, r, bt, n_out, o0, o1, scale, y);
}

}  // namespace spindle
