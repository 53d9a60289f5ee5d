// One draw from softmax(logits / temperature) over a whole vocabulary, for sampling without top-k / top-p /
// min-p truncation (the OpenAI API's default): O(n) with a vectorized exp instead of a sorted candidate list.
// Invariant: consumes exactly one rng value; never returns an id whose logit is -inf (masked) while any logit
// is finite; the same logits, temperature and rng state give the same id on every x86-64 CPU (the arithmetic is
// SSE2, the x86-64 baseline, or the same float operations in scalar code elsewhere).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sampler.h"  // sampler_rng, softmax_draw_scratch

namespace spindle {

// Weights w[i] = exp((logits[i] - max_logit) * inv_temperature) (0 below exp(-87)), for i < n; the exp is a
// degree-6 polynomial on the reduced argument (about 1 ulp). Exposed for its test.
void softmax_weights(const float* logits, int32_t n, float max_logit, float inv_temperature, float* w);

// The drawn id: the first i with u < w[0] + ... + w[i] (u uniform in [0, sum of w)); the argmax of logits when
// the weights are not a distribution (every logit -inf or NaN).
// The uniform value u01 in [0, 1) is the request generator's; the rng form draws it first.
int32_t softmax_draw(const float* logits, int32_t n, float temperature, double u01, softmax_draw_scratch& s);
int32_t softmax_draw(const float* logits, int32_t n, float temperature, sampler_rng& rng, softmax_draw_scratch& s);

}  // namespace spindle
