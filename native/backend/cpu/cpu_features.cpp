// CPU feature detection through cpuid and xgetbv (the OS must save the wide registers too).
// Invariant: detection runs once (function-local statics); unknown SPINDLE_CPU_FEATURES values are ignored.
#include "backend/cpu/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define SPINDLE_X86_DETECT 1
#endif

namespace spindle {

#if defined(SPINDLE_X86_DETECT)
static uint64_t read_xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((uint64_t)hi << 32) | lo;
}

static cpu_features detect() {
  cpu_features f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;        // XMM + YMM state
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;   // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = b & (1u << 5);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
             avx512vl = b & (1u << 31), avx512vnni = c & (1u << 11);
  f.avx2 = os_avx && avx2 && fma && f16c;
  f.avx512 = f.avx2 && os_avx512 && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
  if (f.avx512 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512_bf16 = a & (1u << 5);
  return f;
}
#else
static cpu_features detect() { return cpu_features{}; }
#endif

const cpu_features& cpu_detected_features() {
  static const cpu_features features = [] {
    cpu_features f = detect();
#if defined(SPINDLE_EMULATE_AVX512)
    // Test-only build where the AVX-512 kernels are compiled against SIMDe's portable intrinsics.
    f.avx512 = f.avx2;
    f.avx512_bf16 = f.avx2;
#endif
    return f;
  }();
  return features;
}

bool cpu_level_supported(cpu_level level) {
  const cpu_features& f = cpu_detected_features();
  switch (level) {
    case cpu_level::scalar: return true;
    case cpu_level::avx2: return f.avx2;
    case cpu_level::avx512: return f.avx512;
  }
  return false;
}

static cpu_level best_level() {
  if (cpu_level_supported(cpu_level::avx512)) return cpu_level::avx512;
  if (cpu_level_supported(cpu_level::avx2)) return cpu_level::avx2;
  return cpu_level::scalar;
}

cpu_level cpu_active_level() {
  static const cpu_level level = [] {
    cpu_level best = best_level();
    const char* env = std::getenv("SPINDLE_CPU_FEATURES");
    if (env == nullptr) return best;
    cpu_level asked = best;
    if (std::strcmp(env, "scalar") == 0) asked = cpu_level::scalar;
    else if (std::strcmp(env, "avx2") == 0) asked = cpu_level::avx2;
    else if (std::strcmp(env, "avx512") == 0) asked = cpu_level::avx512;
    return (int)asked < (int)best ? asked : best;
  }();
  return level;
}

const char* cpu_level_name(cpu_level level) {
  switch (level) {
    case cpu_level::scalar: return "scalar";
    case cpu_level::avx2: return "avx2";
    case cpu_level::avx512: return "avx512";
  }
  return "unknown";
}

}  // namespace spindle
