// The Node-API addon entry: registers every exported class and function.
#include <napi.h>

namespace spindle::napi {

static Napi::Value version(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), "0.1.0");
}

}  // namespace spindle::napi

static Napi::Object spindle_init(Napi::Env env, Napi::Object exports) {
  exports.Set("version", Napi::Function::New(env, spindle::napi::version, "version"));
  return exports;
}

NODE_API_MODULE(spindle, spindle_init)
