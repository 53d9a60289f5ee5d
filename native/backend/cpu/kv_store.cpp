// The CPU's K / V stores: float32, or 16-bit (IEEE half, bfloat16) at half the memory and half the bytes each
// attention step reads. Invariant: a stored 16-bit element is its f32 value rounded to nearest even (fp16.h, the
// same bits as F16C's vcvtps2ph and ggml's conversions), and the attention kernels widen it back exactly, so a
// 16-bit cache computes exactly what an f32 cache holding the rounded values computes.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fp16.h"

namespace spindle {

namespace {

// Row rows[i] (row i when rows is null) of a 16-bit store = row i of src, width elements a row.
template <uint16_t (*Round)(float)>
void store_rows_16(float* store, const int64_t* rows, const float* src, int64_t n, int64_t width) {
  uint16_t* dst = reinterpret_cast<uint16_t*>(store);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t* d = dst + (rows ? rows[i] : i) * width;
    const float* s = src + i * width;
    for (int64_t e = 0; e < width; ++e) d[e] = Round(s[e]);
  }
}

}  // namespace

void cpu_backend::store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new,
                           const float* v_new, int64_t n, int64_t k_dim, int64_t v_dim, kv_type kv) {
  switch (kv) {
    case kv_type::f32:
      copy_rows(k_store, rows, k_new, nullptr, n, k_dim);
      copy_rows(v_store, rows, v_new, nullptr, n, v_dim);
      return;
    case kv_type::f16:
      store_rows_16<f32_to_fp16>(k_store, rows, k_new, n, k_dim);
      store_rows_16<f32_to_fp16>(v_store, rows, v_new, n, v_dim);
      return;
    case kv_type::bf16:
      store_rows_16<f32_to_bf16>(k_store, rows, k_new, n, k_dim);
      store_rows_16<f32_to_bf16>(v_store, rows, v_new, n, v_dim);
      return;
  }
}

}  // namespace spindle
