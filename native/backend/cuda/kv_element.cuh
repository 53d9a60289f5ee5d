// The C++ element type of a K / V store (backend.h's kv_type), for host code that instantiates a kernel per type:
// with_kv_element(kv, f) calls f(T{}) with T float, __half or __nv_bfloat16.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "backend/backend.h"
#include "common/error.h"

namespace spindle {

template <class F>
void with_kv_element(kv_type kv, F&& f) {
  if (kv == kv_type::f16) f(__half{});
  else if (kv == kv_type::bf16) f(__nv_bfloat16{});
  else if (kv == kv_type::f32) f(float{});
  else throw error("cuda: no K / V store of type " + std::to_string((int)kv) + " (f32, f16, bf16; supports_kv says so)");
}

}  // namespace spindle
