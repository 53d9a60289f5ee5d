// How an image becomes LFM2-VL encoder crops and prompt positions, as llama.cpp's mtmd does for the `lfm2`
// projector (docs/design/lfm2-vl.md, sections 4.4-4.9): whether it is tiled, the tile grid, the letterboxed
// "refined" image the tiles are cut from, each crop's size and token count, and the token layout (marker
// tokens and embedding runs). Pure arithmetic on the image size; no pixels.
// Invariant: float math where llama.cpp uses float, double where it uses double, and its two rounding rules
// (should_tile: halves to even; the size rule: halves away from zero); every crop's sides are multiples of
// patch_size * scale_factor, so tokens = (width / (P*s)) * (height / (P*s)).
#pragma once
#include <cstdint>

#include "vision/image_plan.h"

namespace spindle {

struct lfm2_vision_params {
  int patch_size = 16;   // P, clip.vision.patch_size
  int scale_factor = 2;  // s, clip.vision.projector.scale_factor: pixel-unshuffle factor
  int min_tokens = 64;   // image_min_tokens (llama.cpp's default for lfm2; not in the file)
  int max_tokens = 256;  // image_max_tokens
  int tile_size = 512;
  int min_tiles = 2;
  int max_tiles = 10;
  int64_t min_pixels() const { return int64_t(min_tokens) * patch_size * patch_size * scale_factor * scale_factor; }
  int64_t max_pixels() const { return int64_t(max_tokens) * patch_size * patch_size * scale_factor * scale_factor; }
};

// llama.cpp's calc_size_preserved_ratio (float, align P*s): the single-image or thumbnail size.
void lfm2_image_size(int w, int h, const lfm2_vision_params& p, int* out_w, int* out_h);
// llama.cpp's should_tile: the image, rounded to the alignment in double, is over twice the pixel budget.
bool lfm2_should_tile(int w, int h, const lfm2_vision_params& p);
// The tile grid whose aspect ratio is closest to the image's; never 1x1.
void lfm2_tile_grid(int w, int h, const lfm2_vision_params& p, int* cols, int* rows);
// The whole plan for a w x h image. Throws spindle::error on a non-positive size.
image_plan plan_lfm2_image(int w, int h, const lfm2_vision_params& p);

}  // namespace spindle
