// LFM2's gated short convolution on the CPU (backend::short_conv): argument checks, a plain reference with
// llama.cpp's exact operation order, and the portable / AVX2 kernels over a range of channels.
// Invariant: every output element is a fixed sequence of IEEE operations of its own channel's inputs (B, C, X,
// the taps and the carried state), so results never depend on the number of threads, on how channels are
// split, or on what other sequences are batched alongside.
#pragma once
#include <cstdint>

namespace spindle {

// Throws spindle::error on null pointers, n_tokens < 0, n_ch <= 0 or l_cache < 2.
void short_conv_check(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                      const float* state, const float* y);

// The reference (scalar, one output at a time) in the order of ggml_compute_forward_ssm_conv_f32 as llama.cpp's
// AVX2 build compiles it: with taps k = 0..l_cache-1 (oldest input first), whole groups of 8 and then one group
// of 4 taps add their rounded products to the sum one by one; the remaining (< 4) taps are fused multiply-adds.
// Same arguments and state update as backend::short_conv.
void short_conv_ref(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                    float* state, float* y);

// Kernels over channels [c0, c1) of all n_tokens rows (outputs, then that range of the state).
// Portable: plain multiply-adds (no fused operations; equals the reference up to the tail taps' FMA rounding).
void short_conv_range(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                      float* state, float* y, int64_t c0, int64_t c1);
// AVX2 + FMA (8 channels per lane group): bit-identical to short_conv_ref. Call only on CPUs with AVX2 and FMA.
void short_conv_range_avx2(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                           float* state, float* y, int64_t c0, int64_t c1);

}  // namespace spindle
