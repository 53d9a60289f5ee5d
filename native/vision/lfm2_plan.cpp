// LFM2-VL image plan (see lfm2_plan.h). The arithmetic mirrors llama.cpp's mtmd-image.cpp term by term.
#include "vision/lfm2_plan.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "common/error.h"

namespace spindle {

void lfm2_image_size(int w, int h, const lfm2_vision_params& p, int* out_w, int* out_h) {
  const int align = p.patch_size * p.scale_factor;
  const float fa = float(align);
  auto round_by = [&](float x) { return int(std::round(x / fa)) * align; };
  auto ceil_by = [&](float x) { return int(std::ceil(x / fa)) * align; };
  auto floor_by = [&](float x) { return int(std::floor(x / fa)) * align; };
  int width = std::max(align, round_by(float(w)));
  int height = std::max(align, round_by(float(h)));
  if (int64_t(width) * height > p.max_pixels()) {
    const float beta = std::sqrt(float(h) * float(w) / float(p.max_pixels()));
    height = std::max(align, floor_by(float(h) / beta));
    width = std::max(align, floor_by(float(w) / beta));
  } else if (int64_t(width) * height < p.min_pixels()) {
    const float beta = std::sqrt(float(p.min_pixels()) / (float(h) * float(w)));
    height = ceil_by(float(h) * beta);
    width = ceil_by(float(w) * beta);
  }
  *out_w = width;
  *out_h = height;
}

bool lfm2_should_tile(int w, int h, const lfm2_vision_params& p) {
  const int align = p.patch_size * p.scale_factor;
  auto rb = [&](int x) { return int(std::nearbyint(double(x) / align)) * align; };
  const int h_bar = std::max(p.patch_size, rb(h)), w_bar = std::max(p.patch_size, rb(w));
  return double(h_bar) * double(w_bar) > double(p.max_pixels()) * 2.0;
}

void lfm2_tile_grid(int w, int h, const lfm2_vision_params& p, int* cols, int* rows) {
  std::set<std::pair<int, int>> seen;
  std::vector<std::pair<int, int>> candidates;
  for (int n = p.min_tiles; n <= p.max_tiles; ++n)
    for (int gw = 1; gw <= n; ++gw)
      for (int gh = 1; gh <= n; ++gh) {
        const int area = gw * gh;
        if (area < p.min_tiles || area > p.max_tiles || !seen.insert({gw, gh}).second) continue;
        candidates.push_back({gw, gh});
      }
  // llama.cpp uses std::sort (order within an area unspecified); a stable sort keeps generation order, and
  // the equal-area ties it could expose need an exact float tie of the ratio distance, which they do not make.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first * a.second < b.first * b.second; });
  const float ar = float(w) / float(h);
  std::pair<int, int> best = candidates.front();
  float best_diff = INFINITY;
  for (const auto& c : candidates) {
    const float diff = std::abs(ar - float(c.first) / float(c.second));
    if (diff < best_diff) {
      best_diff = diff;
      best = c;
    } else if (diff == best_diff && float(w * h) > 0.5 * p.tile_size * p.tile_size * c.first * c.second) {
      best = c;
    }
  }
  *cols = best.first;
  *rows = best.second;
}

namespace {

image_crop make_crop(int width, int height, const lfm2_vision_params& p, image_crop::kind source, std::string marker) {
  const int align = p.patch_size * p.scale_factor;
  image_crop c;
  c.source = source;
  c.width = width;
  c.height = height;
  c.tokens = (width / align) * (height / align);
  c.marker = std::move(marker);
  return c;
}

}  // namespace

image_plan plan_lfm2_image(int w, int h, const lfm2_vision_params& p) {
  if (w <= 0 || h <= 0) {
    throw error("image size must be positive (got " + std::to_string(w) + "x" + std::to_string(h) + ")");
  }
  image_plan plan;
  int sw = 0, sh = 0;
  lfm2_image_size(w, h, p, &sw, &sh);
  if (!lfm2_should_tile(w, h, p)) {
    plan.crops.push_back(make_crop(sw, sh, p, image_crop::kind::image, ""));
  } else {
    plan.tiled = true;
    lfm2_tile_grid(w, h, p, &plan.cols, &plan.rows);
    plan.refined_width = plan.cols * p.tile_size;
    plan.refined_height = plan.rows * p.tile_size;
    for (int r = 0; r < plan.rows; ++r)
      for (int c = 0; c < plan.cols; ++c) {
        image_crop t = make_crop(p.tile_size, p.tile_size, p, image_crop::kind::tile,
                                "<|img_row_" + std::to_string(r + 1) + "_col_" + std::to_string(c + 1) + "|>");
        t.tile_row = r;
        t.tile_col = c;
        plan.crops.push_back(std::move(t));
      }
    plan.crops.push_back(make_crop(sw, sh, p, image_crop::kind::thumbnail, "<|img_thumbnail|>"));
  }
  plan.positions = 2;  // <|image_start|>, <|image_end|>
  for (const image_crop& c : plan.crops) {
    plan.embeddings += c.tokens;
    plan.positions += c.tokens + (c.marker.empty() ? 0 : 1);
  }
  return plan;
}

}  // namespace spindle
