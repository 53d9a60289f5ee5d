// AVX-512 BF16 panel kernel for CPUs with AVX512_BF16 (panel_avx512_inl.h): slots of element pairs, one vdpbf16ps
// per 16 rows and token, the activation pair an embedded 32-bit broadcast.
// Invariant: lane j of an output is the chain acc = vdpbf16ps(acc, (w[2p], w[2p+1]), (x[2p], x[2p+1])) over the
// pairs p of lane j in order, from +0, zero pairs past n included: the operands and order of the tile kernel
// (vec_dot_avx512_float.cpp, bf16_dp_kernel), whose result for a lane depends on that lane's operands only, so
// each output has its bits.
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS && !defined(SPINDLE_EMULATE_AVX512)
#define SPINDLE_PANEL_TARGET SPINDLE_AVX512BF16
#include "backend/cpu/panel_avx512_inl.h"

namespace spindle {
namespace {

// 16 rows' pairs of a slot (64 bytes); x: the activation pair as one 32-bit unit.
struct bf16_pair_slot {
  using vec = __m512bh;
  static constexpr size_t bytes = 4;
  static constexpr int group = 2;
  SPINDLE_AVX512BF16 static inline __m512bh load16(const uint8_t* p) {
    return (__m512bh)_mm512_loadu_si512((const void*)p);
  }
  SPINDLE_AVX512BF16 static inline __m512 madd(__m512 acc, __m512bh w, const float* x) {
    return _mm512_dpbf16_ps(acc, w, (__m512bh)_mm512_set1_ps(*x));
  }
};

}  // namespace

panel_kernel panel_kernel_avx512_bf16() {
  return make_panel_kernel512<bf16_pair_slot>(pack_panel_avx512_bf16_pairs, panel_round_bf16,
                                              panel_shape{k_rows, k_lanes, true, 2}, 2);
}

}  // namespace spindle

#else

namespace spindle {
panel_kernel panel_kernel_avx512_bf16() { return {}; }
}  // namespace spindle

#endif
