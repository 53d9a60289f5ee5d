// Which SIMD kernel level this CPU runs, detected once at first use.
// Invariant: cpu_active_level() never returns a level the CPU (and OS) cannot execute; the environment
// variable SPINDLE_CPU_FEATURES=scalar|avx2|avx512 can only lower it (asking for more than the CPU has
// falls back to what it has).
#pragma once

namespace spindle {

enum class cpu_level : int {
  scalar = 0,  // portable C++ reference kernels
  avx2 = 1,    // AVX2 + FMA + F16C
  avx512 = 2,  // AVX-512 F/BW/VL/DQ + VNNI (bf16 dot uses AVX512_BF16 when present)
};

struct cpu_features {
  bool avx2 = false;         // with FMA and F16C
  bool avx512 = false;       // F, BW, VL, DQ and VNNI
  bool avx512_bf16 = false;  // AVX512_BF16 (vdpbf16ps)
};

// What the CPU supports (cached after the first call).
const cpu_features& cpu_detected_features();

// The best level the CPU supports, lowered by SPINDLE_CPU_FEATURES if set (cached after the first call).
cpu_level cpu_active_level();

// True if kernels of `level` can run on this CPU.
bool cpu_level_supported(cpu_level level);

const char* cpu_level_name(cpu_level level);

}  // namespace spindle
