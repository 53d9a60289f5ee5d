// Whole-vocabulary softmax draw (softmax_draw.h).
#include "engine/softmax_draw.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/argmax.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spindle {

namespace {

constexpr int k_block = 64;          // weights per block sum
constexpr float k_exp_floor = -87.0f;  // below it a weight is 0 (exp(-87) ~ 1.6e-38: no mass)
constexpr float k_log2e = 1.44269504088896341f;
constexpr float k_ln2_hi = 0.693359375f, k_ln2_lo = -2.12194440e-4f;
// Cephes expf: exp(r) ~ 1 + r + r^2 * P(r) on |r| <= ln2 / 2.
constexpr float k_p0 = 1.9875691500e-4f, k_p1 = 1.3981999507e-3f, k_p2 = 8.3334519073e-3f, k_p3 = 4.1665795894e-2f,
                k_p4 = 1.6666665459e-1f, k_p5 = 5.0000001201e-1f;

// exp(x) for x in [k_exp_floor, 0], the operations of the SSE2 lanes below one by one (x86-64 without -mfma
// contracts nothing, so they round alike), n rounded to nearest even as cvtps2dq does.
float exp_scalar(float x) {
  if (!(x >= k_exp_floor)) return 0.0f;  // below the floor, -inf (masked) or NaN
  const float fn = std::nearbyint(x * k_log2e);
  float r = x - fn * k_ln2_hi;
  r = r - fn * k_ln2_lo;
  float p = k_p0;
  p = p * r + k_p1;
  p = p * r + k_p2;
  p = p * r + k_p3;
  p = p * r + k_p4;
  p = p * r + k_p5;
  const float r2 = r * r;
  float y = p * r2;
  y = y + r;
  y = y + 1.0f;
  const int32_t e = ((int32_t)fn + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, 4);
  return y * scale;
}

}  // namespace

void softmax_weights(const float* logits, int32_t n, float max_logit, float inv_temperature, float* w) {
  int32_t i = 0;
#if defined(__SSE2__)
  const __m128 vmax = _mm_set1_ps(max_logit), vinv = _mm_set1_ps(inv_temperature), floor = _mm_set1_ps(k_exp_floor);
  for (; i + 4 <= n; i += 4) {
    const __m128 x = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(logits + i), vmax), vinv);
    const __m128 keep = _mm_cmpge_ps(x, floor);  // false for -inf and NaN too
    const __m128 xs = _mm_and_ps(x, keep);       // zeroed lanes compute exp(0), then are dropped
    const __m128i ni = _mm_cvtps_epi32(_mm_mul_ps(xs, _mm_set1_ps(k_log2e)));
    const __m128 fn = _mm_cvtepi32_ps(ni);
    __m128 r = _mm_sub_ps(xs, _mm_mul_ps(fn, _mm_set1_ps(k_ln2_hi)));
    r = _mm_sub_ps(r, _mm_mul_ps(fn, _mm_set1_ps(k_ln2_lo)));
    __m128 p = _mm_set1_ps(k_p0);
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(k_p1));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(k_p2));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(k_p3));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(k_p4));
    p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(k_p5));
    __m128 y = _mm_mul_ps(p, _mm_mul_ps(r, r));
    y = _mm_add_ps(y, r);
    y = _mm_add_ps(y, _mm_set1_ps(1.0f));
    const __m128 scale = _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(ni, _mm_set1_epi32(127)), 23));
    _mm_storeu_ps(w + i, _mm_and_ps(_mm_mul_ps(y, scale), keep));
  }
#endif
  for (; i < n; ++i) w[i] = exp_scalar((logits[i] - max_logit) * inv_temperature);
}

int32_t softmax_draw(const float* logits, int32_t n, float temperature, sampler_rng& rng, softmax_draw_scratch& s) {
  return softmax_draw(logits, n, temperature, rng.uniform(), s);  // drawn first: one value per call
}

int32_t softmax_draw(const float* logits, int32_t n, float temperature, double u01, softmax_draw_scratch& s) {
  const int32_t best = argmax_first(logits, n);
  const float max_logit = logits[best];
  if (!std::isfinite(max_logit)) return best;
  const int32_t n_blocks = (n + k_block - 1) / k_block;
  s.weights.resize((size_t)n_blocks * k_block);
  std::fill(s.weights.begin() + n, s.weights.end(), 0.0f);  // the padding; the first n are written below
  s.block_sums.resize((size_t)n_blocks);
  softmax_weights(logits, n, max_logit, 1.0f / temperature, s.weights.data());
  // block sums: four float lanes (i % 4) per block, added ((l0 + l1) + (l2 + l3)), then the blocks in double
  double total = 0;
  for (int32_t b = 0; b < n_blocks; ++b) {
    const float* w = s.weights.data() + (size_t)b * k_block;
    float lane[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < k_block; k += 4)
      for (int l = 0; l < 4; ++l) lane[l] += w[k + l];
    const double bs = double((lane[0] + lane[1]) + (lane[2] + lane[3]));
    s.block_sums[(size_t)b] = bs;
    total += bs;
  }
  if (!(total > 0) || !std::isfinite(total)) return best;
  const double u = u01 * total;
  double cum = 0;
  for (int32_t b = 0; b < n_blocks; ++b) {
    const double next = cum + s.block_sums[(size_t)b];
    if (u < next) {  // in this block (a rounding miss falls through to the next block)
      double c = cum;
      const float* w = s.weights.data() + (size_t)b * k_block;
      for (int k = 0; k < k_block; ++k) {
        c += w[k];
        if (w[k] > 0.0f && u < c) return b * k_block + k;
      }
    }
    cum = next;
  }
  return best;  // u at the very end of the mass (rounding)
}

}  // namespace spindle
