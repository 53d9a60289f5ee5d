// mmprojInfo(path: string): { projector, nEmbd, nHead, nFf, nLayer, patchSize, scaleFactor, posGrid,
//   projHidden, nEmbdOut, useGelu, eps, mean: number[3], std: number[3] }
// Loads and checks an mmproj GGUF (native/vision/mmproj.h) without keeping it; a bad file throws an Error
// naming the key or tensor. Invariant: arguments are checked (TypeError); native failures become JS Errors.
#include <napi.h>

#include "gguf/gguf_file.h"
#include "backend/backend.h"
#include "common/error.h"
#include "vision/lfm2_encoder.h"
#include "vision/lfm2_encoder_ref.h"
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
// [tokens * nEmbdOut]: the plain-loop encoder (native/vision/lfm2_encoder_ref.h), for conformance tests.
// (test builds only) mmprojEncode(path, pixels, width, height, threads?): the same through the backend encoder
// (native/vision/lfm2_encoder.h) on the CPU backend.
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
      e = lfm2_encode_reference(m, pixels, w, h);
    } else {
      const int threads = info.Length() > 4 && info[4].IsNumber() ? info[4].As<Napi::Number>().Int32Value() : 0;
      auto be = make_cpu_backend(threads);
      lfm2_encoder enc(m, *be);
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

[[maybe_unused]] Napi::Value mmproj_encode_reference(const Napi::CallbackInfo& info) { return mmproj_encode_impl(info, true); }
[[maybe_unused]] Napi::Value mmproj_encode(const Napi::CallbackInfo& info) { return mmproj_encode_impl(info, false); }

}  // namespace

void register_vision(Napi::Env env, Napi::Object exports) {
  exports.Set("mmprojInfo", Napi::Function::New(env, mmproj_info, "mmprojInfo"));
#if SPINDLE_TEST_HOOKS
  exports.Set("mmprojEncodeReference", Napi::Function::New(env, mmproj_encode_reference, "mmprojEncodeReference"));
  exports.Set("mmprojEncode", Napi::Function::New(env, mmproj_encode, "mmprojEncode"));
#endif
}

}  // namespace spindle::napi
