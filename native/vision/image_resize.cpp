// Pillow-style separable resampling and letterboxing (see image_resize.h).
// Invariant: the kernel of output pixel i covers input pixels [lo, lo + n) with integer weights summing to
// about 2^22; accumulators start at 2^21 (round half up) and are clamped to [0, 255] after the shift.
#include "vision/image_resize.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace spindle {

namespace {

constexpr int precision_bits = 22;  // 32 bits - 8 for the pixel - 2 of headroom

struct kernel_table {
  int ksize = 0;
  std::vector<int> lo, count;    // [out] first input index and number of inputs
  std::vector<int32_t> weights;  // [out][ksize] fixed point
};

// Bilinear (triangle) kernels from in_size to out_size, widened by the scale when shrinking.
kernel_table bilinear_kernels(int in_size, int out_size) {
  kernel_table t;
  const double scale = double(in_size) / out_size;
  const double filter_scale = std::max(1.0, scale);
  const double support = 1.0 * filter_scale;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.lo.resize(size_t(out_size));
  t.count.resize(size_t(out_size));
  t.weights.assign(size_t(out_size) * size_t(t.ksize), 0);
  std::vector<double> w(size_t(t.ksize));
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    const int lo = std::max(0, int(center - support + 0.5));
    const int hi = std::min(in_size, int(center + support + 0.5));
    const int n = hi - lo;
    double sum = 0;
    for (int k = 0; k < n; ++k) {
      const double x = std::abs((k + lo - center + 0.5) / filter_scale);
      w[size_t(k)] = x < 1.0 ? 1.0 - x : 0.0;
      sum += w[size_t(k)];
    }
    for (int k = 0; k < n; ++k) {
      const double v = sum != 0.0 ? w[size_t(k)] / sum : w[size_t(k)];
      t.weights[size_t(o) * size_t(t.ksize) + size_t(k)] = int32_t(v * double(1 << precision_bits) + (v < 0 ? -0.5 : 0.5));
    }
    t.lo[size_t(o)] = lo;
    t.count[size_t(o)] = n;
  }
  return t;
}

uint8_t clamp8(int32_t v) { return uint8_t(std::clamp(v >> precision_bits, 0, 255)); }

rgb_image resample_rows(const rgb_image& src, int out_w) {  // horizontal pass
  const kernel_table t = bilinear_kernels(src.width, out_w);
  rgb_image dst{out_w, src.height, std::vector<uint8_t>(size_t(out_w) * size_t(src.height) * 3)};
  for (int y = 0; y < src.height; ++y) {
    const uint8_t* row = src.data.data() + size_t(y) * size_t(src.width) * 3;
    uint8_t* out = dst.data.data() + size_t(y) * size_t(out_w) * 3;
    for (int o = 0; o < out_w; ++o) {
      const int32_t* k = &t.weights[size_t(o) * size_t(t.ksize)];
      const uint8_t* p = row + size_t(t.lo[size_t(o)]) * 3;
      int32_t acc[3] = {1 << (precision_bits - 1), 1 << (precision_bits - 1), 1 << (precision_bits - 1)};
      for (int i = 0; i < t.count[size_t(o)]; ++i, p += 3)
        for (int c = 0; c < 3; ++c) acc[c] += int32_t(p[c]) * k[i];
      for (int c = 0; c < 3; ++c) out[size_t(o) * 3 + size_t(c)] = clamp8(acc[c]);
    }
  }
  return dst;
}

rgb_image resample_columns(const rgb_image& src, int out_h) {  // vertical pass
  const kernel_table t = bilinear_kernels(src.height, out_h);
  const size_t row_len = size_t(src.width) * 3;
  rgb_image dst{src.width, out_h, std::vector<uint8_t>(row_len * size_t(out_h))};
  std::vector<int32_t> acc(row_len);
  for (int o = 0; o < out_h; ++o) {
    std::fill(acc.begin(), acc.end(), 1 << (precision_bits - 1));
    const int32_t* k = &t.weights[size_t(o) * size_t(t.ksize)];
    for (int i = 0; i < t.count[size_t(o)]; ++i) {
      const uint8_t* row = src.data.data() + size_t(t.lo[size_t(o)] + i) * row_len;
      for (size_t j = 0; j < row_len; ++j) acc[j] += int32_t(row[j]) * k[i];
    }
    uint8_t* out = dst.data.data() + size_t(o) * row_len;
    for (size_t j = 0; j < row_len; ++j) out[j] = clamp8(acc[j]);
  }
  return dst;
}

void check_size(int w, int h, const char* what) {
  if (w <= 0 || h <= 0 || w > 65536 || h > 65536) {
    throw error(std::string(what) + " size " + std::to_string(w) + "x" + std::to_string(h) +
                " is out of range (1 to 65536 per side)");
  }
}

}  // namespace

rgb_image resize_bilinear(const rgb_image& src, int width, int height) {
  check_size(src.width, src.height, "source image");
  check_size(width, height, "resize target");
  if (width == src.width && height == src.height) return src;
  if (width == src.width) return resample_columns(src, height);
  rgb_image rows = resample_rows(src, width);
  return height == src.height ? rows : resample_columns(rows, height);
}

rgb_image resize_letterbox(const rgb_image& src, int width, int height, std::array<uint8_t, 3> pad) {
  check_size(src.width, src.height, "source image");
  check_size(width, height, "letterbox target");
  if (width == src.width && height == src.height) return src;
  const float scale = std::min(float(width) / float(src.width), float(height) / float(src.height));
  const int w = std::min(int(std::ceil(float(src.width) * scale)), width);
  const int h = std::min(int(std::ceil(float(src.height) * scale)), height);
  const rgb_image scaled = resize_bilinear(src, w, h);
  rgb_image dst{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  for (size_t i = 0; i < dst.data.size(); i += 3) std::copy(pad.begin(), pad.end(), dst.data.begin() + long(i));
  const int ox = (width - w) / 2, oy = (height - h) / 2;
  for (int y = 0; y < h; ++y) {
    std::copy_n(scaled.data.begin() + long(size_t(y) * size_t(w) * 3), size_t(w) * 3,
                dst.data.begin() + long((size_t(y + oy) * size_t(width) + size_t(ox)) * 3));
  }
  return dst;
}

rgb_image crop(const rgb_image& src, int x, int y, int w, int h) {
  if (x < 0 || y < 0 || w <= 0 || h <= 0 || x + w > src.width || y + h > src.height) {
    throw error("crop " + std::to_string(w) + "x" + std::to_string(h) + " at (" + std::to_string(x) + ", " +
                std::to_string(y) + ") is outside the " + std::to_string(src.width) + "x" +
                std::to_string(src.height) + " image");
  }
  rgb_image dst{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int r = 0; r < h; ++r) {
    std::copy_n(src.data.begin() + long((size_t(y + r) * size_t(src.width) + size_t(x)) * 3), size_t(w) * 3,
                dst.data.begin() + long(size_t(r) * size_t(w) * 3));
  }
  return dst;
}

}  // namespace spindle
