// Crop pixels of an image plan (see image_preprocess.h).
#include "vision/image_preprocess.h"

#include "common/error.h"

namespace spindle {

image_cropper::image_cropper(const rgb_image& image, const image_plan& plan) : image_(image), plan_(plan) {}

rgb_image image_cropper::crop(size_t i) {
  if (i >= plan_.crops.size()) throw error("image crop index out of range");
  const image_crop& c = plan_.crops[i];
  if (c.source == image_crop::kind::letterbox) return resize_letterbox(image_, c.width, c.height);
  if (c.source != image_crop::kind::tile) return resize_bilinear(image_, c.width, c.height);
  if (refined_.data.empty()) refined_ = resize_letterbox(image_, plan_.refined_width, plan_.refined_height);
  return spindle::crop(refined_, c.tile_col * c.width, c.tile_row * c.height, c.width, c.height);
}

std::vector<float> normalize_planar(const rgb_image& image, const std::array<float, 3>& mean,
                                    const std::array<float, 3>& stddev) {
  const size_t plane = size_t(image.width) * size_t(image.height);
  if (image.data.size() != plane * 3) throw error("image pixel buffer does not match its size");
  std::vector<float> out(plane * 3);
  for (size_t p = 0; p < plane; ++p)
    for (size_t c = 0; c < 3; ++c) out[c * plane + p] = (float(image.data[p * 3 + c]) / 255.0f - mean[c]) / stddev[c];
  return out;
}

}  // namespace spindle
