// The JS `Tokenizer` class: a spindle::tokenizer behind Node-API.
// Invariant: a Tokenizer object always holds a non-null tokenizer; JS cannot construct one except through
// Tokenizer.fromFile or native code calling wrap_tokenizer.
#pragma once
#include <napi.h>

#include <memory>

namespace spindle {
class tokenizer;
}

namespace spindle::napi {

// Registers `Tokenizer` on the addon's exports (call once per environment, from spindle_init).
void init_tokenizer(Napi::Env env, Napi::Object exports);

// A JS Tokenizer sharing `tok` (e.g. the tokenizer of a loaded model). init_tokenizer must have run in `env`.
Napi::Object wrap_tokenizer(Napi::Env env, std::shared_ptr<const spindle::tokenizer> tok);

}  // namespace spindle::napi
