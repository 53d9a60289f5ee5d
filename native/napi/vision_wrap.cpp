// mmprojInfo(path: string): { projector, nEmbd, nHead, nFf, nLayer, patchSize, scaleFactor, posGrid,
//   projHidden, nEmbdOut, useGelu, eps, mean: number[3], std: number[3] }
// Loads and checks an mmproj GGUF (native/vision/mmproj.h) without keeping it; a bad file throws an Error
// naming the key or tensor. Invariant: arguments are checked (TypeError); native failures become JS Errors.
#include <napi.h>

#include "gguf/gguf_file.h"
#include "backend/backend.h"
#include "common/error.h"
#include "vision/siglip_encoder.h"
#include "vision/siglip_encoder_ref.h"
#include "vision/lfm2_plan.h"
#include "vision/vision_model.h"

#include <cmath>
#include "vision/mmproj.h"

namespace spindle::napi {

namespace {

Napi::Value mmproj_info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "mmprojInfo(path): path must be a string");
  try {
    auto file = gguf_file::open(info[0].As<Napi::String>().Utf8Value());
    const mmproj_hparams hp = load_mmproj(*file).hp;
    Napi::Object o = Napi::Object::New(env);
    o.Set("projector", hp.projector);
    o.Set("nEmbd", hp.n_embd);
    o.Set("nHead", hp.n_head);
    o.Set("nFf", hp.n_ff);
    o.Set("nLayer", hp.n_layer);
    o.Set("patchSize", hp.patch_size);
    o.Set("scaleFactor", hp.scale_factor);
    o.Set("posGrid", hp.pos_grid);
    o.Set("imageSize", hp.image_size);
    o.Set("projHidden", hp.proj_hidden);
    o.Set("nEmbdOut", hp.n_embd_out);
    o.Set("useGelu", hp.use_gelu);
    o.Set("eps", hp.eps);
    Napi::Array mean = Napi::Array::New(env, 3), stddev = Napi::Array::New(env, 3);
    for (uint32_t i = 0; i < 3; ++i) { mean.Set(i, hp.mean[i]); stddev.Set(i, hp.stddev[i]); }
    o.Set("mean", mean);
    o.Set("std", stddev);
    return o;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

// (test builds only: SPINDLE_TEST_HOOKS) mmprojEncodeReference(path, pixels: Float32Array planar [3][h][w] normalized, width, height): Float32Array
// [tokens * nEmbdOut]: the plain-loop encoder (native/vision/siglip_encoder_ref.h), for conformance tests.
// (test builds only) mmprojEncode(path, pixels, width, height, threads?): the same through the backend encoder
// (native/vision/siglip_encoder.h) on the CPU backend.
[[maybe_unused]] Napi::Value mmproj_encode_impl(const Napi::CallbackInfo& info, bool reference) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsTypedArray() || !info[2].IsNumber() || !info[3].IsNumber()) {
    throw Napi::TypeError::New(env, "mmprojEncode(path: string, pixels: Float32Array, width: number, height: number)");
  }
  Napi::TypedArray ta = info[1].As<Napi::TypedArray>();
  if (ta.TypedArrayType() != napi_float32_array) throw Napi::TypeError::New(env, "pixels must be a Float32Array");
  Napi::Float32Array px = ta.As<Napi::Float32Array>();
  try {
    auto file = gguf_file::open(info[0].As<Napi::String>().Utf8Value());
    const mmproj_model m = load_mmproj(*file);
    const std::vector<float> pixels(px.Data(), px.Data() + px.ElementLength());
    const int w = info[2].As<Napi::Number>().Int32Value(), h = info[3].As<Napi::Number>().Int32Value();
    std::vector<float> e;
    if (reference) {
      e = siglip_encode_reference(m, pixels, w, h);
    } else {
      const int threads = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Int32Value() : 0;
      auto be = make_cpu_backend(threads);
      siglip_encoder enc(m, *be);
      const int align = int(m.hp.patch_size * m.hp.scale_factor);
      if (w <= 0 || h <= 0 || w % align || h % align) throw error("image entry is not a multiple of the patch grid");
      if (pixels.size() != size_t(3) * size_t(w) * size_t(h)) throw error("pixel count does not match the size");
      e.resize(size_t((w / align) * (h / align)) * m.hp.n_embd_out);
      enc.encode(pixels.data(), w, h, e.data());
    }
    Napi::Float32Array out = Napi::Float32Array::New(env, e.size());
    std::copy(e.begin(), e.end(), out.Data());
    return out;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

// lfm2ImagePlan(width, height, { patchSize, scaleFactor, minTokens, maxTokens, tileSize, minTiles, maxTiles }?):
//   { tiled, cols, rows, refinedWidth, refinedHeight, embeddings, positions, imageSize: { width, height },
//     bestGrid: { cols, rows },
//     crops: [{ source: 'image' | 'tile' | 'thumbnail', width, height, tokens, marker, row, col }] }
// The LFM2-VL image plan (native/vision/lfm2_plan.h), the one the engine uses.
Napi::Value lfm2_image_plan_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    throw Napi::TypeError::New(env, "lfm2ImagePlan(width: number, height: number, params?: object)");
  }
  lfm2_vision_params p;
  if (info.Length() > 2 && info[2].IsObject()) {
    Napi::Object o = info[2].As<Napi::Object>();
    for (auto [key, field] : {std::pair{"patchSize", &p.patch_size}, std::pair{"scaleFactor", &p.scale_factor},
                              std::pair{"minTokens", &p.min_tokens}, std::pair{"maxTokens", &p.max_tokens},
                              std::pair{"tileSize", &p.tile_size}, std::pair{"minTiles", &p.min_tiles},
                              std::pair{"maxTiles", &p.max_tiles}}) {
      Napi::Value v = o.Get(key);
      if (v.IsUndefined()) continue;
      const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
      if (!(d >= 1 && d <= 65536) || d != std::floor(d)) {
        throw Napi::RangeError::New(env, std::string("lfm2ImagePlan: ") + key + " must be an integer in [1, 65536]");
      }
      *field = int(d);
    }
    if (p.min_tiles > p.max_tiles || p.min_tokens > p.max_tokens) throw Napi::RangeError::New(env, "lfm2ImagePlan: a minimum is above its maximum");
  }
  const double w = info[0].As<Napi::Number>().DoubleValue(), h = info[1].As<Napi::Number>().DoubleValue();
  if (!(w >= 1 && w <= 1e6 && h >= 1 && h <= 1e6) || w != std::floor(w) || h != std::floor(h)) {
    throw Napi::RangeError::New(env, "image size must be positive integers up to 1000000 (got " + std::to_string(w) + "x" + std::to_string(h) + ")");
  }
  image_plan plan;
  int size_w = 0, size_h = 0, grid_cols = 0, grid_rows = 0;
  try {
    plan = plan_lfm2_image(int(w), int(h), p);
    lfm2_image_size(int(w), int(h), p, &size_w, &size_h);
    lfm2_tile_grid(int(w), int(h), p, &grid_cols, &grid_rows);
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
  Napi::Object o = Napi::Object::New(env);
  Napi::Object size = Napi::Object::New(env), grid = Napi::Object::New(env);
  size.Set("width", size_w);
  size.Set("height", size_h);
  grid.Set("cols", grid_cols);
  grid.Set("rows", grid_rows);
  o.Set("imageSize", size);   // the single-image / thumbnail size (llama.cpp's calc_size_preserved_ratio)
  o.Set("bestGrid", grid);    // the tile grid the image would get if tiled
  o.Set("tiled", plan.tiled);
  o.Set("cols", plan.cols);
  o.Set("rows", plan.rows);
  o.Set("refinedWidth", plan.refined_width);
  o.Set("refinedHeight", plan.refined_height);
  o.Set("embeddings", plan.embeddings);
  o.Set("positions", plan.positions);
  Napi::Array crops = Napi::Array::New(env, plan.crops.size());
  for (uint32_t i = 0; i < plan.crops.size(); ++i) {
    const image_crop& c = plan.crops[i];
    Napi::Object e = Napi::Object::New(env);
    e.Set("source", c.source == image_crop::kind::tile ? "tile" : c.source == image_crop::kind::thumbnail ? "thumbnail" : "image");
    e.Set("width", c.width);
    e.Set("height", c.height);
    e.Set("tokens", c.tokens);
    e.Set("marker", c.marker.empty() ? env.Null() : Napi::Value(Napi::String::New(env, c.marker)));
    e.Set("row", c.tile_row);
    e.Set("col", c.tile_col);
    crops.Set(i, e);
  }
  o.Set("crops", crops);
  return o;
}

// (test builds only) encodeImage(mmprojPath, rgb: Uint8Array [h][w][3], width, height, threads?): Float32Array
// [embeddings * nEmbdOut]: a whole image as the engine encodes it (the projector's plan with the default limits,
// crops, normalization, backend encoder).
[[maybe_unused]] Napi::Value encode_image_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 4 || !info[0].IsString() || !info[1].IsTypedArray() || !info[2].IsNumber() || !info[3].IsNumber()) {
    throw Napi::TypeError::New(env, "encodeImage(path: string, rgb: Uint8Array, width: number, height: number, threads?: number)");
  }
  Napi::Uint8Array rgb = info[1].As<Napi::Uint8Array>();
  try {
    auto file = gguf_file::open(info[0].As<Napi::String>().Utf8Value());
    const mmproj_model m = load_mmproj(*file);
    rgb_image img;
    img.width = info[2].As<Napi::Number>().Int32Value();
    img.height = info[3].As<Napi::Number>().Int32Value();
    if (img.width <= 0 || img.height <= 0 || rgb.ElementLength() != size_t(img.width) * size_t(img.height) * 3) {
      throw error("rgb must hold width * height * 3 bytes");
    }
    img.data.assign(rgb.Data(), rgb.Data() + rgb.ElementLength());
    lfm2_vision_params p;
    p.patch_size = int(m.hp.patch_size);
    p.scale_factor = int(m.hp.scale_factor);
    const int threads = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Int32Value() : 0;
    auto be = make_cpu_backend(threads);
    siglip_encoder enc(m, *be);
    const std::vector<float> e = siglip_encode_image(enc, m.hp, img, plan_image(m.hp, p, img.width, img.height));
    Napi::Float32Array out = Napi::Float32Array::New(env, e.size());
    std::copy(e.begin(), e.end(), out.Data());
    return out;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

[[maybe_unused]] Napi::Value mmproj_encode_reference(const Napi::CallbackInfo& info) { return mmproj_encode_impl(info, true); }
[[maybe_unused]] Napi::Value mmproj_encode(const Napi::CallbackInfo& info) { return mmproj_encode_impl(info, false); }

}  // namespace

void register_vision(Napi::Env env, Napi::Object exports) {
  exports.Set("mmprojInfo", Napi::Function::New(env, mmproj_info, "mmprojInfo"));
  exports.Set("lfm2ImagePlan", Napi::Function::New(env, lfm2_image_plan_js, "lfm2ImagePlan"));
#if SPINDLE_TEST_HOOKS
  exports.Set("mmprojEncodeReference", Napi::Function::New(env, mmproj_encode_reference, "mmprojEncodeReference"));
  exports.Set("mmprojEncode", Napi::Function::New(env, mmproj_encode, "mmprojEncode"));
  exports.Set("encodeImage", Napi::Function::New(env, encode_image_js, "encodeImage"));
#endif
}

}  // namespace spindle::napi
