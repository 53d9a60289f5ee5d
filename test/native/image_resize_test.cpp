// Image resizing against llama.cpp: each case's output bytes hash (FNV-1a 64) to what llama.cpp's mtmd
// img_tool::resize (bundled llama.cpp de3ff815) produced for the same synthetic image, stretch (PAD_NONE) or
// letterbox (PAD_CEIL); plus a plain reference for one downscale, crops, and the size errors.
#include <cmath>
#include <string>

#include "common/error.h"
#include "harness.h"
#include "vision/image_resize.h"

using namespace spindle;

namespace {

rgb_image synth(int w, int h) {
  rgb_image img{w, h, std::vector<uint8_t>(size_t(w) * size_t(h) * 3)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img.data[(size_t(y) * size_t(w) + size_t(x)) * 3 + size_t(c)] = uint8_t((x * 7 + y * 13 + c * 31 + (x * y) % 17) & 255);
  return img;
}

uint64_t fnv1a(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t x : b) { h ^= x; h *= 1099511628211ull; }
  return h;
}

struct golden { int sw, sh, tw, th; bool letterbox; uint64_t hash; unsigned first, middle; };

// Printed by a harness compiled against llama.cpp's tools/mtmd/mtmd-image.cpp (img_tool::resize, BILINEAR).
const golden goldens[] = {
    {300, 200, 128, 96, false, 0x9250e1194c1f09cfull, 17, 41},
    {37, 23, 100, 61, false, 0x402ee95c6d0cdd5aull, 0, 24},
    {1200, 900, 576, 416, false, 0x2fe7e6fbdbe5fdc8ull, 16, 211},
    {1200, 900, 1536, 1024, true, 0x2d5a86000caf71deull, 0, 0},
    {50, 80, 50, 33, false, 0x89477ed75a862f66ull, 12, 187},
    {64, 64, 64, 64, false, 0x6ddec82168c4a63bull, 0, 160},
    {1024, 977, 1024, 1024, true, 0x2b7da70f91d80505ull, 0, 213},
    {256, 256, 512, 512, false, 0xed6c5210b749de16ull, 0, 125},
};

}  // namespace

TEST_CASE("image resize: bit-exact with llama.cpp's mtmd resize (stretch and letterbox)") {
  for (const golden& g : goldens) {
    const rgb_image src = synth(g.sw, g.sh);
    const rgb_image out = g.letterbox ? resize_letterbox(src, g.tw, g.th) : resize_bilinear(src, g.tw, g.th);
    REQUIRE(out.width == g.tw);
    REQUIRE(out.height == g.th);
    CHECK_EQ(unsigned(out.data[0]), g.first);
    CHECK_EQ(unsigned(out.data[out.data.size() / 2]), g.middle);
    CHECK(fnv1a(out.data) == g.hash);
  }
}

TEST_CASE("image resize: a 2x box downscale of a smooth image matches a plain float reference within 1") {
  const rgb_image src = synth(64, 48);
  const rgb_image out = resize_bilinear(src, 32, 24);
  // Shrinking by 2 widens the triangle to support 2: weights 1/8, 3/8, 3/8, 1/8 over four inputs (clamped at edges).
  int worst = 0;
  for (int y = 1; y < 23; ++y)
    for (int x = 1; x < 31; ++x)
      for (int c = 0; c < 3; ++c) {
        double acc = 0;
        const double w[4] = {0.125, 0.375, 0.375, 0.125};
        for (int j = 0; j < 4; ++j)
          for (int i = 0; i < 4; ++i) {
            // separable with an 8-bit intermediate is within rounding of the 2-D float sum
            acc += w[j] * w[i] * src.data[(size_t(2 * y - 1 + j) * 64 + size_t(2 * x - 1 + i)) * 3 + size_t(c)];
          }
        worst = std::max(worst, int(std::abs(std::lround(acc) - int(out.data[(size_t(y) * 32 + size_t(x)) * 3 + size_t(c)]))));
      }
  CHECK(worst <= 1);
}

TEST_CASE("image resize: crops and bad sizes") {
  const rgb_image src = synth(10, 8);
  const rgb_image c = crop(src, 2, 3, 4, 5);
  CHECK(c.width == 4);
  CHECK(c.data[0] == src.data[(3 * 10 + 2) * 3]);
  bool threw = false;
  try { crop(src, 8, 0, 4, 4); } catch (const spindle::error& e) { threw = std::string(e.what()).find("outside the 10x8 image") != std::string::npos; }
  CHECK(threw);
  threw = false;
  try { resize_bilinear(src, 0, 5); } catch (const spindle::error& e) { threw = std::string(e.what()).find("resize target size 0x5") != std::string::npos; }
  CHECK(threw);
}
