// The CPU backend's mixture-of-experts ops (see backend.h): one expert's slice of a stacked weight times the
// activations (cpu_matmul_expert, llama.cpp's ggml_mul_mat_id arithmetic, reading the expert's part of the
// backend's packed copy of the stacked tensor where there is one) and per-row scaling.
// Invariant: arguments are checked before any work starts; results are row-wise (row r depends on row r only).
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_expert.h"
#include "backend/cpu/repack.h"
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
  // The backend's packed copy of the whole stacked tensor (made once, at first use): an expert of n_out % 8 == 0
  // rows is whole x8 groups of it; a row copy holds its rows at the same offset.
  const void* packed_x8 = nullptr;
  if (const packed_weight* pw = packed_for(w)) {
    if (pw->layout() == pack_layout::x8 && n_out % k_pack_rows == 0 &&
        (expert + 1) * n_out <= pw->n_groups() * k_pack_rows) {
      packed_x8 = pw->data() + (uint64_t)expert * (uint64_t)(n_out / k_pack_rows) * pw->group_bytes();
    } else if (pw->layout() == pack_layout::rows) {
      we = pw->data() + offset;
    }
  }
  cpu_matmul_expert(pool_, w.type, we, n_out, w.n_in, x, n_rows, y, packed_x8);
}

void cpu_backend::scale_rows(float* x, const float* s, int64_t n_rows, int64_t n) {
  const auto rows = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float f = s[r];
      float* row = x + r * n;
      for (int64_t i = 0; i < n; ++i) row[i] = row[i] * f;
    }
  };
  if (pool_.size() == 1 || n_rows < 2 || n_rows * n < ((int64_t)1 << 16)) {
    rows(0, n_rows);
    return;
  }
  pool_.run([&](int ith, int nth) {  // rows split between the threads (each row's products are the same)
    int64_t r0, r1;
    thread_pool::split(n_rows, ith, nth, &r0, &r1);
    rows(r0, r1);
  });
}

}  // namespace spindle
