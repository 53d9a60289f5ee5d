// mmprojInfo(path: string): { projector, nEmbd, nHead, nFf, nLayer, patchSize, scaleFactor, posGrid,
//   projHidden, nEmbdOut, useGelu, eps, mean: number[3], std: number[3] }
// Loads and checks an mmproj GGUF (native/vision/mmproj.h) without keeping it; a bad file throws an Error
// naming the key or tensor. Invariant: arguments are checked (TypeError); native failures become JS Errors.
#include <napi.h>

#include "gguf/gguf_file.h"
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

}  // namespace

void register_vision(Napi::Env env, Napi::Object exports) {
  exports.Set("mmprojInfo", Napi::Function::New(env, mmproj_info, "mmprojInfo"));
}

}  // namespace spindle::napi
