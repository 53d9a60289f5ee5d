// backend::store_kv's default (backend.h): row copies into f32 stores; other store types need a backend that has
// them (supports_kv; model::want_kv_dtype never asks a backend for a type it lacks).
#include <string>

#include "backend/backend.h"
#include "common/error.h"

namespace spindle {

void backend::store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new, const float* v_new,
                       int64_t n, int64_t k_dim, int64_t v_dim, kv_type kv) {
  if (kv != kv_type::f32) {
    throw error(std::string("the ") + name() + " backend keeps the KV cache in float32 (it has no 16-bit, fp8 or block K / V stores)");
  }
  copy_rows(k_store, rows, k_new, nullptr, n, k_dim);
  copy_rows(v_store, rows, v_new, nullptr, n, v_dim);
}

}  // namespace spindle
