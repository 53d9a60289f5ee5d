// The Node-API addon entry: registers every exported class and function.
#include <napi.h>

#include "napi/engine_wrap.h"
#include "napi/tokenizer_wrap.h"

namespace spindle::napi {

static Napi::Value version(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), "0.1.0");
}

void register_grammar(Napi::Env env, Napi::Object exports);  // grammar_wrap.cpp
void register_vision(Napi::Env env, Napi::Object exports);   // vision_wrap.cpp

}  // namespace spindle::napi

static Napi::Object spindle_init(Napi::Env env, Napi::Object exports) {
  exports.Set("version", Napi::Function::New(env, spindle::napi::version, "version"));
#if SPINDLE_TEST_HOOKS  // test builds only (CMake SPINDLE_TEST_HOOKS): the debug exports of model_debug.cpp, moe_debug.cpp
  { void spindle_register_model_debug(Napi::Env, Napi::Object); spindle_register_model_debug(env, exports); }
  { void spindle_register_moe_debug(Napi::Env, Napi::Object); spindle_register_moe_debug(env, exports); }
#endif
  spindle::napi::init_tokenizer(env, exports);
  spindle::napi::register_engine(env, exports);
  spindle::napi::register_grammar(env, exports);
  spindle::napi::register_vision(env, exports);
  return exports;
}

NODE_API_MODULE(spindle, spindle_init)
