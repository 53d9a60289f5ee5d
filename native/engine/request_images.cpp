// A request's images and encoder cache (see request_images.h).
#include "engine/request_images.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "model/model.h"
#include "vision/vision_model.h"

namespace spindle {

void validate_request_images(const request& r, const vision_model* vision) {
  if (r.images.empty()) {
    for (size_t i = 0; i < r.prompt.size(); ++i) {
      if (r.prompt[i] == k_embedding_token) {
        throw error("prompt position " + std::to_string(i) + " is an image placeholder (-1) but the request has no images");
      }
    }
    return;
  }
  if (!vision) {
    throw error("this model does not take images (no vision projector is loaded: start it with an mmproj file)");
  }
  for (size_t i = 0; i < size_t(r.images[0].position) && i < r.prompt.size(); ++i) {
    if (r.prompt[i] == k_embedding_token) {
      throw error("prompt position " + std::to_string(i) + " is an image placeholder (-1) before the first image's position");
    }
  }
  for (size_t k = 0; k < r.images.size(); ++k) {
    const request_image& im = r.images[k];
    const std::string at = "image " + std::to_string(k) + ": ";
    const rgb_image& px = im.pixels;
    if (px.width <= 0 || px.height <= 0 || px.data.size() != size_t(px.width) * size_t(px.height) * 3) {
      throw error(at + "pixels must be width * height * 3 bytes of RGB (got " + std::to_string(px.data.size()) +
                  " bytes for " + std::to_string(px.width) + "x" + std::to_string(px.height) + ")");
    }
    const int64_t end = k + 1 < r.images.size() ? r.images[k + 1].position : int64_t(r.prompt.size());
    if (im.position < 0 || im.position >= end || end > int64_t(r.prompt.size())) {
      throw error(at + "position " + std::to_string(im.position) +
                  " is outside the prompt or not before the next image's (images must be in prompt order)");
    }
    int64_t placeholders = 0, first = -1, last = -1;
    for (int64_t p = im.position; p < end; ++p) {
      if (r.prompt[size_t(p)] != k_embedding_token) continue;
      placeholders++;
      if (first < 0) first = p;
      last = p;
    }
    const image_plan plan = vision->plan(px.width, px.height);
    if (placeholders != plan.embeddings) {
      throw error(at + "a " + std::to_string(px.width) + "x" + std::to_string(px.height) + " image has " +
                  std::to_string(plan.embeddings) + " embeddings, but the prompt holds " + std::to_string(placeholders) +
                  " placeholders (-1) for it (the engine's imageLayout gives the positions an image takes)");
    }
    if (vision->bidirectional() && last - first + 1 != placeholders) {
      throw error(at + "its placeholders (-1) must be one run: this model's image embeddings attend to each other, "
                  "positions " + std::to_string(first) + " to " + std::to_string(last) + " hold other tokens too");
    }
  }
}

request_images::request_images(std::vector<request_image> images, const std::vector<int32_t>& prompt,
                               vision_model& vision)
    : vision_(vision), row_at_(prompt.size(), -1) {
  int32_t rows = 0;
  for (size_t k = 0; k < images.size(); ++k) {
    request_image& im = images[k];
    const int32_t range_end = k + 1 < images.size() ? images[k + 1].position : int32_t(prompt.size());
    slot s;
    s.plan = vision.plan(im.pixels.width, im.pixels.height);
    s.first_row = rows;
    s.begin = -1;
    for (int32_t p = im.position; p < range_end; ++p) {
      if (prompt[size_t(p)] != k_embedding_token) continue;
      if (s.begin < 0) s.begin = p;
      s.end = p + 1;
      row_at_[size_t(p)] = rows++;
    }
    if (vision.bidirectional()) spans_.insert(spans_.end(), {s.begin, s.end});
    s.image = std::move(im);
    slots_.push_back(std::move(s));
  }
  embd_.resize(size_t(rows) * size_t(vision.n_embd()));
}

const float* request_images::chunk_embd(int32_t first_pos, int32_t n) {
  const int32_t end = std::min<int32_t>(first_pos + n, int32_t(row_at_.size()));
  const size_t E = size_t(vision_.n_embd());
  for (slot& s : slots_) {
    if (s.encoded || s.end <= first_pos || s.begin >= end) continue;
    const std::vector<float> e = vision_.encode(s.image.pixels, s.plan);
    std::copy(e.begin(), e.end(), embd_.begin() + ptrdiff_t(size_t(s.first_row) * E));
    s.encoded = true;
    s.image.pixels = rgb_image();  // the embeddings replace the pixels
    n_encoded_++;
  }
  for (int32_t p = first_pos; p < end; ++p) {
    if (row_at_[size_t(p)] >= 0) return embd_.data() + size_t(row_at_[size_t(p)]) * E;
  }
  return nullptr;
}

}  // namespace spindle
