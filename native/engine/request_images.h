// The images of one request (vision models): where each sits in the prompt, checked against the vision model's
// layout, and the request's encoder cache: an image is encoded once, by the first prompt chunk that reaches it,
// and its embeddings stay until the request ends, so chunked prefill and preemption (recompute) never re-encode.
// Invariant: every k_embedding_token of the prompt belongs to exactly one image: image k owns the placeholders
// from its position up to the next image's, exactly as many as its plan has embeddings (the marker tokens around
// them are the caller's: imageLayout gives the canonical ones); embedding rows are numbered in prompt order.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/request.h"
#include "vision/image_plan.h"

namespace spindle {

class vision_model;

// Throws spindle::error naming the image and the problem: images without a vision model, a bad size, a
// position outside the prompt or out of order, a placeholder count that is not the image's embedding count, or a
// placeholder before the first image; for a bidirectional vision model, an image whose placeholders are not one run.
void validate_request_images(const request& r, const vision_model* vision);

class request_images {
 public:
  // Takes the pixels of r.images (validated); vision must outlive the object.
  request_images(std::vector<request_image> images, const std::vector<int32_t>& prompt, vision_model& vision);

  // The embd pointer of batch_sequence for tokens [first_pos, first_pos + n) of the sequence: the row of the
  // first placeholder in that range (null when there is none). Encodes the images the range reaches first.
  const float* chunk_embd(int32_t first_pos, int32_t n);
  int64_t encoded_images() const { return n_encoded_; }
  // The bidirectional spans (batch_sequence::bidir_spans, scheduler whole spans) when the vision model's image
  // embeddings attend both ways: [begin, end) of each image's placeholders in prompt order, flattened pairs
  // (validate_request_images: then each is one run); empty for a causal vision model.
  const std::vector<int32_t>& spans() const { return spans_; }

 private:
  struct slot {
    request_image image;  // pixels dropped once encoded
    image_plan plan;
    int32_t begin = 0, end = 0;  // its placeholders lie in [begin, end)
    int32_t first_row = 0;  // its first embedding row
    bool encoded = false;
  };
  vision_model& vision_;
  std::vector<slot> slots_;
  std::vector<int32_t> row_at_;  // [prompt length]: embedding row of each placeholder, -1 elsewhere
  std::vector<float> embd_;      // [total embeddings, n_embd]
  std::vector<int32_t> spans_;   // [2 * images] each slot's begin, end (bidirectional models), else empty
  int64_t n_encoded_ = 0;
};

}  // namespace spindle
