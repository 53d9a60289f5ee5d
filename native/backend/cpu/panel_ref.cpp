// The panel layout in plain C++ (panel.h): the reference packer, the activation tiles, and the per-level table.
// Invariant: packing only moves elements (weights keep their bits, activations get exactly the values of the
// activation format), and every slot the kernels read is written: zero where it stands for no element.
#include "backend/cpu/panel.h"

#include <cstring>

#include "backend/cpu/fp16.h"

namespace spindle {

panel_kernel cpu_panel_kernel(cpu_level level, ggml_type wtype) {
  if (!cpu_level_supported(level)) return {};
  switch (level) {
    case cpu_level::scalar: return {};  // the scalar level keeps the plain reference sums
    case cpu_level::avx2: return panel_kernel_avx2(wtype);
    case cpu_level::avx512: return panel_kernel_avx512(wtype);
  }
  return {};
}

int64_t cpu_panel_min_tokens(cpu_level level, ggml_type wtype) {
  if (level == cpu_level::avx2) return wtype == ggml_type::F32 ? 12 : 32;
  return wtype == ggml_type::BF16 ? 16 : 12;
}

bool cpu_panel_pays(cpu_level level, ggml_type wtype, int64_t n_tokens) {
  if (wtype != ggml_type::F32 && wtype != ggml_type::F16 && wtype != ggml_type::BF16) return false;
  return n_tokens >= cpu_panel_min_tokens(level, wtype) && cpu_panel_kernel(level, wtype).fn != nullptr;
}

void panel_round_f32(const float* x, float* out, int64_t n) { std::memcpy(out, x, (size_t)n * sizeof(float)); }

void panel_round_f16(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_f32(f32_to_fp16(x[i]));
}

void panel_round_bf16(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

void pack_panel_ref(const panel_shape& s, size_t element_bytes, int64_t n, const uint8_t* rows, size_t row_bytes,
                    int nr, uint8_t* panel) {
  std::memset(panel, 0, (size_t)s.n_elements(n) * element_bytes);
  for (int r = 0; r < nr; ++r) {
    const uint8_t* row = rows + (size_t)r * row_bytes;
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(panel + (size_t)s.offset(n, k, r) * element_bytes, row + (size_t)k * element_bytes, element_bytes);
  }
}

void pack_panel_activations(const panel_kernel& k, const float* x, int64_t x_stride, int64_t n, int nt, float* xt,
                            float* tmp) {
  const panel_shape& s = k.shape;
  const int64_t steps = s.steps(n), tt = k.max_tokens, g = s.group;
  for (int t = 0; t < nt; ++t) {
    k.round(x + t * x_stride, tmp, n);
    float* out = xt + t;
    for (int j = 0; j < s.lanes; ++j) {  // lane j: units j, j + L, ... in slots j * steps ..
      for (int64_t i = 0; i < steps; ++i) {
        const int64_t e = (i * s.lanes + j) * g;
        if (g == 1) {
          *out = e < n ? tmp[e] : 0.0f;
        } else {  // two bf16-exact values: their top halves side by side
          const uint32_t lo = e < n ? f32_bits(tmp[e]) >> 16 : 0, hi = e + 1 < n ? f32_bits(tmp[e + 1]) >> 16 : 0;
          *out = f32_from_bits(lo | hi << 16);
        }
        out += tt;
      }
    }
    if (!s.padded)
      for (int64_t e = steps * s.lanes; e < n; ++e, out += tt) *out = tmp[e];  // tail slots: slot e
  }
}

}  // namespace spindle
