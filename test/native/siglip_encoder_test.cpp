// The reference SigLIP encoder's parts: position-grid resize (identity at the stored size, PyTorch's bilinear
// align_corners=False values on a hand-checked upscale, antialiased shrink weights), pixel unshuffle order,
// LayerNorm, GELU, Gemma 3's average pooling and RMSNorm; and whole encodes on small generated mmprojs (lfm2 and
// gemma3: token count, finite values, size errors, the backend encoder against the plain loops). Conformance with
// llama.cpp's encoders: test/vision-encoder-conformance.test.ts, test/vision-gemma3.test.ts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "common/error.h"
#include "gguf_test_writer.h"
#include "harness.h"
#include "backend/backend.h"
#include "vision/siglip_encoder.h"
#include "vision/siglip_encoder_ref.h"
#include "vision/lfm2_plan.h"

using namespace spindle;
using namespace gguf_test;

TEST_CASE("lfm2 encoder: position grid resize") {
  // 2x1 grid (G = 2 is read as 2x2 here: use a 2x2 grid whose rows repeat) upscaled to 4x4.
  const std::vector<float> pos = {0.0f, 1.0f, 0.0f, 1.0f};  // [gy][gx], D = 1: value = gx
  CHECK(resize_pos_embd(pos, 2, 2, 2, 1) == pos);
  const std::vector<float> up = resize_pos_embd(pos, 2, 4, 4, 1);
  const float want[4] = {0.0f, 0.25f, 0.75f, 1.0f};  // F.interpolate(bilinear, align_corners=False)
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) CHECK(std::abs(up[size_t(y * 4 + x)] - want[x]) < 1e-6f);
  // Shrinking 4 -> 2 widens the triangle (antialias): output 0 averages inputs 0..2 with weights .25 .75 .75 .25 -> renormalized.
  std::vector<float> ramp(16);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) ramp[size_t(y * 4 + x)] = float(x);
  const std::vector<float> down = resize_pos_embd(ramp, 4, 2, 4, 1);
  CHECK(std::abs(down[0] - (0 * 0.75f + 1 * 0.75f + 2 * 0.25f) / 1.75f) < 1e-6f);
}

TEST_CASE("lfm2 encoder: pixel unshuffle puts top-left, top-right, bottom-left, bottom-right side by side") {
  const int gw = 4, gh = 2, D = 2, s = 2;
  std::vector<float> x(size_t(gw * gh * D));
  for (int t = 0; t < gw * gh; ++t)
    for (int c = 0; c < D; ++c) x[size_t(t * D + c)] = float(t * 10 + c);
  const std::vector<float> y = pixel_unshuffle(x, gw, gh, D, s);
  REQUIRE(y.size() == size_t(2 * 8));
  const float token1[8] = {20, 21, 30, 31, 60, 61, 70, 71};  // merged token (ox 1, oy 0): patches 2, 3, 6, 7
  for (int i = 0; i < 8; ++i) CHECK(y[size_t(8 + i)] == token1[i]);
}

TEST_CASE("siglip encoder: LayerNorm and GELU") {
  std::vector<float> v = {1, 2, 3, 4};
  layer_norm_rows(v, 4, nullptr, nullptr, 0.0f);
  CHECK(std::abs(v[0] + 1.3416408f) < 1e-5f);
  CHECK(std::abs(gelu_tanh(1.0f) - 0.8411920f) < 1e-6f);
  CHECK(std::abs(gelu_quick(1.0f) - 0.8457957f) < 1e-6f);
}

namespace {

// A small mmproj (D 8, 2 heads, 2 layers, P 4, G 4, s 2, H 12, E 10) with N(0, 1/sqrt(fan_in)) weights.
// D 8, 2 heads, 2 layers, patch 4, a 4x4 position grid, s 2, E 10; lfm2: H 12; gemma3: 16x16 pixels, 2x2 tokens.
std::vector<uint8_t> small_mmproj(const std::string& projector = "lfm2") {
  const int64_t D = 8, F = 16, P = 4, S = 2, H = 12, E = 10;
  const bool gemma3 = projector == "gemma3";
  std::vector<tensor_spec> t;
  t.push_back({"v.patch_embd.weight", {P, P, 3, D}, ggml_type::F32});
  t.push_back({"v.position_embd.weight", {D, 16}, ggml_type::F32});
  for (int i = 0; i < 2; ++i) {
    const std::string b = "v.blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) t.push_back({b + n + ".weight", {D, D}, ggml_type::F32});
    t.push_back({b + "ln1.weight", {D}, ggml_type::F32});
    t.push_back({b + "ln2.weight", {D}, ggml_type::F32});
    t.push_back({b + "ffn_up.weight", {D, F}, ggml_type::F32});
    t.push_back({b + "ffn_down.weight", {F, D}, ggml_type::F32});
  }
  if (gemma3) {
    t.push_back({"mm.soft_emb_norm.weight", {D}, ggml_type::F32});
    t.push_back({"mm.input_projection.weight", {E, D}, ggml_type::F32});
  } else {
    t.push_back({"mm.1.weight", {D * S * S, H}, ggml_type::F32});
    t.push_back({"mm.1.bias", {H}, ggml_type::F32});
    t.push_back({"mm.2.weight", {H, E}, ggml_type::F32});
    t.push_back({"mm.2.bias", {E}, ggml_type::F32});
  }
  built_file b = build_file(3, 12, [&](writer& w) {
    w.kv<uint8_t>("clip.has_vision_encoder", gguf_value_type::BOOL, 1);
    w.kv_str("clip.projector_type", projector);
    w.kv<uint32_t>("clip.vision.embedding_length", gguf_value_type::UINT32, uint32_t(D));
    w.kv<uint32_t>("clip.vision.attention.head_count", gguf_value_type::UINT32, 2);
    w.kv<uint32_t>("clip.vision.feed_forward_length", gguf_value_type::UINT32, uint32_t(F));
    w.kv<uint32_t>("clip.vision.block_count", gguf_value_type::UINT32, 2);
    w.kv<uint32_t>("clip.vision.patch_size", gguf_value_type::UINT32, uint32_t(P));
    w.kv<uint32_t>("clip.vision.image_size", gguf_value_type::UINT32, 16);
    w.kv<float>("clip.vision.attention.layer_norm_epsilon", gguf_value_type::FLOAT32, 1e-6f);
    w.arr_of<float>("clip.vision.image_mean", gguf_value_type::FLOAT32, {0.5f, 0.5f, 0.5f});
    w.arr_of<float>("clip.vision.image_std", gguf_value_type::FLOAT32, {0.5f, 0.5f, 0.5f});
    w.kv<uint32_t>("clip.vision.projector.scale_factor", gguf_value_type::UINT32, uint32_t(S));
  }, t);
  std::mt19937 rng(7);
  for (size_t i = 0; i < t.size(); ++i) {
    const size_t n = size_t(b.sizes[i] / 4);
    const bool gain = t[i].name.find("ln") != std::string::npos || t[i].name.find("norm") != std::string::npos;
    const float std_ = gain ? 0.0f : 1.0f / std::sqrt(float(t[i].ne[0]));
    std::normal_distribution<float> dist(gain ? 1.0f : 0.0f, std_ > 0 ? std_ : 1e-9f);
    for (size_t k = 0; k < n; ++k) {
      const float v = dist(rng);
      std::memcpy(b.bytes.data() + b.data_offset + b.offsets[i] + k * 4, &v, 4);
    }
  }
  return b.bytes;
}

}  // namespace

TEST_CASE("lfm2 encoder: a whole encode gives one finite embedding per merged token") {
  const std::vector<uint8_t> bytes = small_mmproj();
  auto f = gguf_file::from_memory(bytes.data(), bytes.size(), "small-mmproj.gguf");
  const mmproj_model m = load_mmproj(*f, 10);
  for (auto [w, h] : {std::pair<int, int>{16, 16}, {32, 16}, {8, 24}}) {
    std::vector<float> px(size_t(3 * w * h));
    for (size_t i = 0; i < px.size(); ++i) px[i] = float(int(i * 37 % 255)) / 127.5f - 1.0f;
    const std::vector<float> e = siglip_encode_reference(m, px, w, h);
    REQUIRE(e.size() == size_t((w / 8) * (h / 8) * 10));
    bool finite = true;
    for (float v : e) finite = finite && std::isfinite(v);
    CHECK(finite);
    CHECK(siglip_encode_reference(m, px, w, h) == e);  // deterministic
  }
  bool threw = false;
  try { siglip_encode_reference(m, std::vector<float>(3 * 12 * 16), 12, 16); } catch (const spindle::error& e) {
    threw = std::string(e.what()).find("not a multiple of 8") != std::string::npos;
  }
  CHECK(threw);
}

TEST_CASE("lfm2 encoder: the backend encoder matches the plain loops") {
  const std::vector<uint8_t> bytes = small_mmproj();
  auto f = gguf_file::from_memory(bytes.data(), bytes.size(), "small-mmproj.gguf");
  const mmproj_model m = load_mmproj(*f, 10);
  auto be = make_cpu_backend(2);
  siglip_encoder enc(m, *be);
  for (auto [w, h] : {std::pair<int, int>{16, 16}, {32, 16}, {8, 24}, {16, 16}}) {  // 16x16 twice: cached pos table
    std::vector<float> px(size_t(3 * w * h));
    for (size_t i = 0; i < px.size(); ++i) px[i] = float(int(i * 53 % 255)) / 127.5f - 1.0f;
    const std::vector<float> want = siglip_encode_reference(m, px, w, h);
    std::vector<float> got(want.size(), NAN);
    enc.encode(px.data(), w, h, got.data());
    float scale = 0, diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::abs(want[i]));
      diff = std::max(diff, std::abs(got[i] - want[i]));
    }
    CHECK(diff <= 1e-4f * scale);  // f32 SIMD sums vs the reference's double sums
  }
  bool threw = false;
  try { enc.encode(std::vector<float>(3 * 12 * 16).data(), 12, 16, nullptr); } catch (const spindle::error& e) {
    threw = std::string(e.what()).find("not a multiple of 8") != std::string::npos;
  }
  CHECK(threw);
}

TEST_CASE("lfm2 plan: the worked examples of the design doc (llama.cpp's mtmd values)") {
  const lfm2_vision_params p;
  image_plan a = plan_lfm2_image(256, 256, p);
  CHECK(!a.tiled);
  REQUIRE(a.crops.size() == 1);
  CHECK(a.crops[0].width == 256 && a.crops[0].tokens == 64 && a.positions == 66);
  image_plan b = plan_lfm2_image(1200, 900, p);
  CHECK(b.tiled && b.cols == 3 && b.rows == 2 && b.refined_width == 1536 && b.refined_height == 1024);
  REQUIRE(b.crops.size() == 7);
  CHECK(b.crops[5].marker == "<|img_row_2_col_3|>" && b.crops[5].tile_row == 1 && b.crops[5].tile_col == 2);
  CHECK(b.crops[6].marker == "<|img_thumbnail|>" && b.crops[6].width == 576 && b.crops[6].height == 416);
  CHECK(b.crops[6].tokens == 234 && b.embeddings == 6 * 256 + 234 && b.positions == 1779);
  int w = 0, h = 0;
  lfm2_image_size(400, 400, p, &w, &h);
  CHECK(w == 416 && h == 416);
  const bool tiles[5] = {false, false, true, true, false};  // tests/test-mtmd-impl.cpp
  const int sizes[5][2] = {{704, 704}, {720, 720}, {736, 736}, {1024, 977}, {1056, 384}};
  for (int i = 0; i < 5; ++i) CHECK(lfm2_should_tile(sizes[i][0], sizes[i][1], p) == tiles[i]);
  int cols = 0, rows = 0;
  lfm2_tile_grid(5000, 400, p, &cols, &rows);
  CHECK(cols == 10 && rows == 1);
  lfm2_tile_grid(1024, 977, p, &cols, &rows);
  CHECK(cols == 2 && rows == 2);
  CHECK(plan_lfm2_image(10, 10, p).crops[0].tokens >= 64);
  bool threw = false;
  try { plan_lfm2_image(0, 10, p); } catch (const spindle::error&) { threw = true; }
  CHECK(threw);
}

TEST_CASE("gemma3 encoder: average pooling sums each block in float, rows then columns, and divides by s*s") {
  // a 4x2 patch grid (gw 4, gh 2) of dim 2, pooled by 2: two tokens, each the mean of its 2x2 block
  std::vector<float> x(4 * 2 * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
  const std::vector<float> y = avg_pool(x, 4, 2, 2, 2);
  REQUIRE(y.size() == 4);
  // token 0: patches (0,0) (0,1) (1,0) (1,1) = rows 0, 1, 4, 5; token 1: rows 2, 3, 6, 7
  CHECK(y[0] == (0.0f + 2 + 8 + 10) / 4 && y[1] == (1.0f + 3 + 9 + 11) / 4);
  CHECK(y[2] == (4.0f + 6 + 12 + 14) / 4 && y[3] == (5.0f + 7 + 13 + 15) / 4);
  std::vector<float> r = {3.0f, 4.0f};
  const float w[2] = {1.0f, 2.0f};
  rms_norm_rows(r, 2, w, 0.0f);  // rms 3.5355: 0.8485, 1.1314 * 2
  CHECK(std::abs(r[0] - 0.84852814f) < 1e-6f && std::abs(r[1] - 2.2627417f) < 1e-6f);
}

TEST_CASE("gemma3 encoder: the backend encoder matches the plain loops; other sizes are refused") {
  const std::vector<uint8_t> bytes = small_mmproj("gemma3");
  auto f = gguf_file::from_memory(bytes.data(), bytes.size(), "gemma3-mmproj.gguf");
  const mmproj_model m = load_mmproj(*f, 10);
  REQUIRE(m.hp.gemma3());
  CHECK(m.hp.fixed_tokens() == 4);
  std::vector<float> px(size_t(3 * 16 * 16));
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(int(i * 53 % 255)) / 127.5f - 1.0f;
  const std::vector<float> want = siglip_encode_reference(m, px, 16, 16);
  REQUIRE(want.size() == size_t(4 * 10));
  for (int threads : {1, 2}) {
    auto be = make_cpu_backend(threads);
    siglip_encoder enc(m, *be);
    std::vector<float> got(want.size(), NAN);
    enc.encode(px.data(), 16, 16, got.data());
    float scale = 0, diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::abs(want[i]));
      diff = std::max(diff, std::abs(got[i] - want[i]));
    }
    CHECK(scale > 0.1f);
    CHECK(diff <= 1e-4f * scale);  // f32 SIMD sums vs the reference's double sums
    bool threw = false;
    try { enc.encode(std::vector<float>(3 * 32 * 32).data(), 32, 32, nullptr); } catch (const spindle::error& e) {
      threw = std::string(e.what()).find("is not the gemma3 encoder's 16x16") != std::string::npos;
    }
    CHECK(threw);
  }
}
