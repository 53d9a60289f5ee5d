// The C++ element type of a K / V store (backend.h's kv_type), for host code that instantiates a kernel per type:
// with_kv_element(kv, f) calls f(T{}) with T float, __half or __nv_bfloat16.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/backend.h"

namespace spindle {

template <class F>
void with_kv_element(kv_type kv, F&& f) {
  if (kv == kv_type::f16) f(__half{});
  else if (kv == kv_type::bf16) f(__nv_bfloat16{});
  else f(float{});
}

}  // namespace spindle
