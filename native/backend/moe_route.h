// MoE routing arithmetic (llama.cpp's build_moe_ffn: top-k of the selection scores, the unbiased probabilities as
// weights, renormalized and scaled), shared by the host (model/moe_ffn.cpp) and backend::moe_route, whose GPU
// version replays it bit for bit (native/backend/cuda/moe_ops.cuh).
// Invariant: a token's ids and weights depend only on its own probability row and the bias.
#pragma once
#include <cmath>
#include <cstdint>

namespace spindle {

// The sigmoid gating as llama.cpp's CPU ggml_sigmoid computes it: 1 / (1 + expf(-x)) (backend::sigmoid's default,
// the CPU's; a GPU uses its own expf, so its probabilities may differ from these in the last bits).
inline float sigmoid_gate(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// llama.cpp clamps the weight sum to the smallest f16 normal.
constexpr float k_moe_min_weight_sum = 6.103515625e-5f;

struct moe_route_params {
  int32_t n_expert = 0;        // experts per layer
  int32_t k = 0;               // experts per token (1 .. n_expert)
  bool norm_weights = true;    // divide the k weights by their sum (a double sum in slot order, clamped)
  float weights_scale = 0.0f;  // multiply the weights by this afterwards; 0 or 1: no scaling
};

// For token t and slot j < k: ids[t * k + j] = the j-th best expert by score probs[t, e] (+ bias[e]) (highest
// first, the lower id on ties, NaN lowest), weights[t * k + j] = probs[t, ids] (then normalized and scaled).
// probs: host [n, n_expert] (after the gating), bias: host [n_expert] or nullptr.
void route_experts(const moe_route_params& p, const float* probs, const float* bias, int64_t n, int32_t* ids,
                   float* weights);

// route_experts' layout (token-major: [n, k]) to the grouped ops' (slot-major: [k, n]), and back.
template <typename T>
void token_to_slot_major(const T* in, int64_t n, int64_t k, T* out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) out[j * n + t] = in[t * k + j];
}
template <typename T>
void slot_to_token_major(const T* in, int64_t n, int64_t k, T* out) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) out[t * k + j] = in[j * n + t];
}

}  // namespace spindle
