// Image plans shared by the projectors (see image_plan.h).
#include "vision/image_plan.h"

#include "common/error.h"

namespace spindle {

image_plan plan_fixed_image(int width, int height, int side, int tokens, int markers) {
  if (width <= 0 || height <= 0) {
    throw error("image size must be positive (got " + std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  image_plan plan;
  image_crop c;
  c.source = image_crop::kind::letterbox;
  c.width = c.height = side;
  c.tokens = tokens;
  plan.crops.push_back(c);
  plan.embeddings = tokens;
  plan.positions = tokens + markers;
  return plan;
}

}  // namespace spindle
