// How an image becomes encoder crops and prompt positions: the plan both projectors fill in (LFM2-VL's tiles and
// thumbnail: lfm2_plan.h; Gemma 3's one fixed-size letterboxed square: plan_fixed_image) and the engine reads
// (embedding counts, positions) without knowing which projector made it.
// Invariant: embeddings == the sum of the crops' tokens; positions == embeddings + the marker tokens the vision
// model's layout puts around them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace spindle {

struct image_crop {
  // image: the original stretched to width x height; letterbox: the original scaled to fit width x height with its
  // aspect kept, centred on black (llama.cpp's PAD_CEIL); tile: a block of the refined image; thumbnail: as image.
  enum class kind : uint8_t { image, tile, thumbnail, letterbox };
  kind source = kind::image;
  int width = 0, height = 0;  // pixels fed to the encoder
  int tokens = 0;             // embeddings the projector makes of them
  int tile_row = -1, tile_col = -1;  // tiles: the crop at (col * tile_size, row * tile_size) of the refined image
  std::string marker;         // the marker token text before its embeddings ("" for a plain image)
};

struct image_plan {
  bool tiled = false;
  int cols = 0, rows = 0;     // tile grid (tiled only)
  int refined_width = 0, refined_height = 0;  // tiled: the original letterboxed into cols*tile x rows*tile
  std::vector<image_crop> crops;  // encoder order = prompt order (tiles row-major, then the thumbnail)
  int embeddings = 0;            // sum of crops' tokens
  int positions = 0;             // markers (one token each, incl. the ones around the image) + embeddings
};

// A fixed-size projector's plan (Gemma 3, llama.cpp's mtmd_image_preprocessor_fixed_size): whatever the image's
// size, one letterboxed side x side crop of `tokens` embeddings, between `markers` marker tokens. Throws
// spindle::error on a non-positive image size.
image_plan plan_fixed_image(int width, int height, int side, int tokens, int markers);

}  // namespace spindle
