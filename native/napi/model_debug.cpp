// debugForward(path: string, tokens: Int32Array, options?: { threads?: number }) -> Float32Array
// A test hook: loads the model (cached while path and threads stay the same), runs one forward pass over all
// tokens in a fresh sequence and returns the logits of every position, [n, n_vocab] row-major. Synchronous.
// debugCpuLevel() -> 'scalar' | 'avx2' | 'avx512': the CPU kernel level the forward pass runs with.
// Invariant: every JS value is checked before use; any failure becomes a JS exception (never an abort).
// Compiled only in test builds (SPINDLE_TEST_HOOKS=1, see CMakeLists.txt): the release addon and the node-gyp
// build have no such export.
#if SPINDLE_TEST_HOOKS
#include <napi.h>

#include <cmath>
#include <exception>
#include <memory>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "model/model.h"

namespace spindle::napi {

namespace {

struct debug_cache {
  std::string path;
  int threads = -1;
  std::unique_ptr<model> m;
};

debug_cache& cache() {
  static debug_cache c;  // the addon's main thread only
  return c;
}

int parse_threads(const Napi::Env& env, const Napi::Value& opts) {
  if (opts.IsUndefined() || opts.IsNull()) return 0;
  if (!opts.IsObject()) throw Napi::TypeError::New(env, "debugForward: options must be an object");
  Napi::Value t = opts.As<Napi::Object>().Get("threads");
  if (t.IsUndefined()) return 0;
  if (!t.IsNumber()) throw Napi::TypeError::New(env, "debugForward: options.threads must be a number");
  const double d = t.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < 1 || d > 1024) {
    throw Napi::RangeError::New(env, "debugForward: options.threads must be an integer in [1, 1024]");
  }
  return (int)d;
}

model& load_cached(const std::string& path, int threads) {
  debug_cache& c = cache();
  if (!c.m || c.path != path || c.threads != threads) {
    c.m.reset();
    model_options opts;
    opts.threads = threads;
    c.m = model::load(path, opts);
    c.path = path;
    c.threads = threads;
  }
  return *c.m;
}

Napi::Value debug_forward(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString()) throw Napi::TypeError::New(env, "debugForward: path must be a string");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throw Napi::TypeError::New(env, "debugForward: tokens must be an Int32Array");
  }
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Int32Array tokens = info[1].As<Napi::Int32Array>();
  const int threads = parse_threads(env, info.Length() > 2 ? info[2] : env.Undefined());
  const int64_t n = (int64_t)tokens.ElementLength();
  if (n == 0) throw Napi::RangeError::New(env, "debugForward: tokens must not be empty");
  try {
    model& m = load_cached(path, threads);
    const int64_t n_vocab = m.hparams().n_vocab;
    if (n > (int64_t)(((uint64_t)1 << 31) / sizeof(float)) / n_vocab) {
      throw Napi::RangeError::New(env, "debugForward: n * n_vocab logits would exceed 2 GiB");
    }
    Napi::Float32Array out = Napi::Float32Array::New(env, (size_t)(n * n_vocab));
    std::unique_ptr<sequence_state> seq = m.new_sequence(n);
    m.forward(*seq, tokens.Data(), n, out.Data(), true);
    return out;
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("debugForward: ") + e.what());
  }
}

Napi::Value debug_cpu_level(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), cpu_level_name(cpu_active_level()));
}

}  // namespace

}  // namespace spindle::napi

// Registered from spindle_init (addon.cpp) through a block-scope declaration of this function.
void spindle_register_model_debug(Napi::Env env, Napi::Object exports) {
  exports.Set("debugForward", Napi::Function::New(env, spindle::napi::debug_forward, "debugForward"));
  exports.Set("debugCpuLevel", Napi::Function::New(env, spindle::napi::debug_cpu_level, "debugCpuLevel"));
}

#endif  // SPINDLE_TEST_HOOKS
