// AVX2 activation quantizers, bit-identical to quantize_row_q8_0 / quantize_row_q8_K of quants.h for inputs
// without NaNs (quants_avx2.cpp). Call only where cpu_level_supported(cpu_level::avx2); on other targets they
// are the scalar functions.
#pragma once
#include <cstdint>

#include "backend/cpu/quants.h"

namespace spindle {

void quantize_row_q8_0_avx2(const float* x, block_q8_0* y, int64_t n);  // n % 32 == 0
void quantize_row_q8_K_avx2(const float* x, block_q8_K* y, int64_t n);  // n % 256 == 0

}  // namespace spindle
