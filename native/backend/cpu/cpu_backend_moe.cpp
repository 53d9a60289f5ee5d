// The CPU backend's mixture-of-experts ops (see backend.h): one expert's slice of a stacked weight times the
// activations (cpu_matmul_expert, llama.cpp's ggml_mul_mat_id arithmetic) and per-row scaling.
// Invariant: arguments are checked before any work starts; results are row-wise (row r depends on row r only).
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_expert.h"
#include "backend/cpu/vec_dot.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

void cpu_backend::matmul_expert(const backend_weight& w, int64_t expert, int64_t n_out, const float* x,
                                int64_t n_rows, float* y) {
  if (n_out <= 0 || w.n_out % n_out != 0 || expert < 0 || expert >= w.n_out / n_out) {
    throw error("matmul_expert: expert " + std::to_string(expert) + " of " + std::to_string(n_out) +
                " rows does not fit a stacked weight of " + std::to_string(w.n_out) + " rows");
  }
  if (w.data == nullptr) throw error("matmul_expert: weight has no data");
  const uint64_t row_bytes = cpu_row_bytes(w.type, w.n_in);
  const uint64_t offset = checked_mul(checked_mul((uint64_t)expert, (uint64_t)n_out, "expert offset"), row_bytes,
                                      "expert offset");
  const void* we = static_cast<const uint8_t*>(w.data) + offset;
  cpu_matmul_expert(pool_, w.type, we, n_out, w.n_in, x, n_rows, y);
}

void cpu_backend::scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float f = s[r];
    float* row = x + r * n;
    for (int64_t i = 0; i < n; ++i) row[i] = row[i] * f;
  }
}

}  // namespace spindle
