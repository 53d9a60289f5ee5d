// The SigLIP vision encoder and its projectors as plain loops (docs/design/lfm2-vl.md section 3 for LFM2-VL's; Gemma
// 3's: average pooling, RMSNorm, one projection): the reference the backend encoder is tested against. One image
// entry (a tile, a thumbnail, a whole small image, or Gemma 3's fixed square) in, one embedding per image token out.
// Invariant: float32 throughout, no approximations beyond the model's own (GELU in tanh form; gelu_quick
// when the file does not set clip.use_gelu); shapes are row-major [tokens][features].
#pragma once
#include <cstdint>
#include <vector>

#include "vision/mmproj.h"

namespace spindle {

// pixels: planar normalized RGB [3][height][width]; width and height multiples of patch_size * scale_factor.
// Returns [(width / (P*s)) * (height / (P*s))][n_embd_out], token t = row-major over the merged (lfm2) or pooled
// (gemma3) grid.
std::vector<float> siglip_encode_reference(const mmproj_model& m, const std::vector<float>& pixels, int width, int height);

// --- the steps, each usable on its own (tests call them) ---

// pos: [G*G][D] (row gy*G + gx) -> [gh*gw][D] (row y*gw + x): bilinear, antialiased when shrinking, half-pixel
// centres, weights renormalized at the borders (ggml's upscale with GGML_SCALE_FLAG_ANTIALIAS). G x G -> G x G
// is the identity.
std::vector<float> resize_pos_embd(const std::vector<float>& pos, int grid, int gw, int gh, int dim);
// x: [gh*gw][D] -> [(gh/s)*(gw/s)][D*s*s]; merged feature c + D*dx + D*s*dy of token oy*(gw/s) + ox comes from
// patch (oy*s + dy, ox*s + dx).
std::vector<float> pixel_unshuffle(const std::vector<float>& x, int gw, int gh, int dim, int s);
// x: [gh*gw][D] -> [(gh/s)*(gw/s)][D]: token oy*(gw/s) + ox is the mean of patches (oy*s + dy, ox*s + dx), summed
// in float over dy then dx and divided by s*s (ggml's pool_2d, GGML_OP_POOL_AVG).
std::vector<float> avg_pool(const std::vector<float>& x, int gw, int gh, int dim, int s);
// In place over rows of `dim`: x / sqrt(mean(x^2) + eps) * w.
void rms_norm_rows(std::vector<float>& x, int dim, const float* w, float eps);
// In place over rows of `dim`: (x - mean) / sqrt(var + eps) * w + b (population variance; w, b may be null).
void layer_norm_rows(std::vector<float>& x, int dim, const float* w, const float* b, float eps);
float gelu_tanh(float x);   // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
float gelu_quick(float x);  // x * sigmoid(1.702 x)

// A tensor's values as float (any type the CPU backend can dequantize), row-major as stored.
std::vector<float> tensor_floats(const gguf_tensor& t);

}  // namespace spindle
