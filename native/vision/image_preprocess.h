// The pixels of each crop of an image plan, as llama.cpp's mtmd makes them (docs/design/lfm2-vl.md 4.2-4.7 for
// LFM2-VL): a plain image or thumbnail is the original stretched (Pillow bilinear) to its size; tiles are
// 512x512 blocks of the original letterboxed (aspect kept, black bars centred) into the tile grid; a letterbox
// crop (Gemma 3) is the whole original letterboxed into the crop's size.
// Invariant: every crop comes out at exactly the plan's size; normalization is v = (u8 / 255 - mean) / std in
// float, planar [3][height][width].
#pragma once
#include <array>
#include <vector>

#include "vision/image_resize.h"
#include "vision/image_plan.h"

namespace spindle {

// Makes the crops of `plan` from `image` in plan order (the refined image is built once for all tiles).
class image_cropper {
 public:
  image_cropper(const rgb_image& image, const image_plan& plan);
  rgb_image crop(size_t i);  // i < plan.crops.size()

 private:
  const rgb_image& image_;
  const image_plan& plan_;
  rgb_image refined_;  // tiled plans only, made by the first tile
};

// Planar normalized floats [3][height][width] of an interleaved RGB image.
std::vector<float> normalize_planar(const rgb_image& image, const std::array<float, 3>& mean,
                                    const std::array<float, 3>& stddev);

}  // namespace spindle
