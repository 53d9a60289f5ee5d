// The CPU's K / V stores: float32, 16-bit (IEEE half, bfloat16) at half the memory and half the bytes each
// attention step reads, 8-bit floats (fp8 e4m3 / e5m2) at a quarter, q8_0 (34 bytes per 32 values) or q4_0 (18).
// Invariant: a stored 16-bit element is its f32 value rounded to nearest even (fp16.h, the same bits as F16C's
// vcvtps2ph and ggml's conversions); an fp8 one is rounded to nearest even and saturated (fp8.h, CUDA's SATFINITE); a
// q8_0 block is quantize_row_q8_0 of its 32 values (quants.h: llama.cpp's x86 quantizer, d = amax / 127 stored as
// f16, q = round-half-even(x * (127 / amax))), a q4_0 block quantize_row_q4_0 of them (llama.cpp's reference
// quantizer, which its CPU cache uses); the attention kernels read them all back exactly, so such a cache computes
// exactly what an f32 cache holding the stored values computes.
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_avx2.h"
#include "common/error.h"

namespace spindle {

namespace {

// Row rows[i] (row i when rows is null) of a q8_0 or q4_0 store (blocks B) = row i of src quantized by quantize,
// width values (whole blocks) a row.
template <class B>
void store_rows_blocks(float* store, const int64_t* rows, const float* src, int64_t n, int64_t width, kv_type t,
                       void (*quantize)(const float*, B*, int64_t)) {
  if (!kv_whole_blocks(t, width)) {
    throw error(std::string("store_kv: a ") + kv_type_name(t) + " K / V row needs a multiple of 32 values, got " +
                std::to_string(width));
  }
  B* dst = reinterpret_cast<B*>(store);
  for (int64_t i = 0; i < n; ++i) quantize(src + i * width, dst + (rows ? rows[i] : i) * (width / 32), width);
}

// Row rows[i] (row i when rows is null) of a 16- or 8-bit store = row i of src rounded, width elements a row.
template <class T, T (*Round)(float)>
void store_rows_rounded(float* store, const int64_t* rows, const float* src, int64_t n, int64_t width) {
  T* dst = reinterpret_cast<T*>(store);
  for (int64_t i = 0; i < n; ++i) {
    T* d = dst + (rows ? rows[i] : i) * width;
    const float* s = src + i * width;
    for (int64_t e = 0; e < width; ++e) d[e] = Round(s[e]);
  }
}

}  // namespace

void cpu_backend::store_kv(float* k_store, float* v_store, const int64_t* rows, const float* k_new,
                           const float* v_new, int64_t n, int64_t k_dim, int64_t v_dim, kv_type kv) {
  // one store writer, applied to K and to V
  const auto both = [&](auto store_rows) {
    store_rows(k_store, k_new, k_dim);
    store_rows(v_store, v_new, v_dim);
  };
  switch (kv) {
    case kv_type::f32:
      return both([&](float* st, const float* src, int64_t w) { copy_rows(st, rows, src, nullptr, n, w); });
    case kv_type::f16:
      return both([&](float* st, const float* src, int64_t w) { store_rows_rounded<uint16_t, f32_to_fp16>(st, rows, src, n, w); });
    case kv_type::bf16:
      return both([&](float* st, const float* src, int64_t w) { store_rows_rounded<uint16_t, f32_to_bf16>(st, rows, src, n, w); });
    case kv_type::fp8_e4m3:
      return both([&](float* st, const float* src, int64_t w) { store_rows_rounded<uint8_t, f32_to_fp8_e4m3>(st, rows, src, n, w); });
    case kv_type::fp8_e5m2:
      return both([&](float* st, const float* src, int64_t w) { store_rows_rounded<uint8_t, f32_to_fp8_e5m2>(st, rows, src, n, w); });
    case kv_type::q8_0: {
      // the AVX2 quantizer gives the scalar one's bits (quants_avx2.h)
      void (*q8)(const float*, block_q8_0*, int64_t) = avx2_ ? quantize_row_q8_0_avx2 : quantize_row_q8_0;
      return both([&](float* st, const float* src, int64_t w) { store_rows_blocks(st, rows, src, n, w, kv, q8); });
    }
    case kv_type::q4_0:
      return both([&](float* st, const float* src, int64_t w) {
        store_rows_blocks<block_q4_0>(st, rows, src, n, w, kv, quantize_row_q4_0);
      });
  }
}

}  // namespace spindle
