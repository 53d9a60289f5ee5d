// RGB image resizing as the LFM2-VL preprocessor needs it, bit-exact with llama.cpp's mtmd (which follows
// Pillow's Resample.c): separable bilinear (triangle filter widened when shrinking, so antialiased), weights in
// 22-bit fixed point, horizontal pass first with an 8-bit intermediate; letterboxing (PAD_CEIL) into a target
// with a pad colour; crops. See docs/design/lfm2-vl.md 4.2.
// Invariant: pure functions on interleaved row-major u8 RGB; a same-size resize is an exact copy; sizes out of
// [1, 65536] throw spindle::error naming them.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace spindle {

struct rgb_image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> data;  // [height][width][3]
};

// Stretches src to width x height.
rgb_image resize_bilinear(const rgb_image& src, int width, int height);
// Scales src by min(width / w, height / h) (float), to ceil(w * scale) x ceil(h * scale) (at most the target),
// and pastes it centred ((target - size) / 2, integer division) on a width x height image of `pad`.
rgb_image resize_letterbox(const rgb_image& src, int width, int height, std::array<uint8_t, 3> pad = {0, 0, 0});
// The w x h block at (x, y); throws if it is not inside src.
rgb_image crop(const rgb_image& src, int x, int y, int w, int h);

}  // namespace spindle
