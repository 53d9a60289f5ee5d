// NativeEngine (see engine_wrap.h): a thin, argument-checking shell over spindle::engine.
// Invariant: every C++ exception becomes a JS exception before it can leave a Node-API callback; the engine
// thread touches nothing but its copy of the ThreadSafeFunction handle.
#include "napi/engine_wrap.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "napi/tokenizer_wrap.h"
#include "tokenizer/tokenizer.h"

namespace spindle::napi {

namespace {

// Runs `fn`, turning C++ exceptions into JS exceptions (Napi::Error passes through as it is).
template <typename Fn>
auto guarded(Napi::Env env, Fn fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

Napi::Object event_object(Napi::Env env, const char* type) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("type", type);
  return o;
}

}  // namespace

void engine_wrap_call_js(Napi::Env env, Napi::Function callback, engine_wrap* self, engine_event* ev) {
  std::unique_ptr<engine_event> owned(ev);
  if (env == nullptr || self == nullptr || !owned) return;  // the TSFN is being torn down
  self->deliver(env, callback, *owned);
}

Napi::Function engine_wrap::define(Napi::Env env) {
  return DefineClass(env, "NativeEngine",
                     {
                         InstanceMethod<&engine_wrap::submit>("submit"),
                         InstanceMethod<&engine_wrap::abort>("abort"),
                         InstanceMethod<&engine_wrap::load_lora>("loadLora"),
                         InstanceMethod<&engine_wrap::unload_lora>("unloadLora"),
                         InstanceMethod<&engine_wrap::flush_cache>("flushCache"),
                         InstanceMethod<&engine_wrap::stats>("stats"),
                         InstanceMethod<&engine_wrap::close>("close"),
                         InstanceMethod<&engine_wrap::image_layout>("imageLayout"),
                         StaticMethod<&engine_wrap::inspect>("inspect"),
                     });
}

Napi::Value engine_wrap::inspect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "inspect(path: string)");
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  std::shared_ptr<const tokenizer> tok;
  model_info mi = guarded(env, [&] {
    std::unique_ptr<gguf_file> file = gguf_file::open(path);
    tok = std::shared_ptr<const tokenizer>(tokenizer::from_gguf(*file));
    return describe_file(*file, *tok);
  });
  Napi::Object o = Napi::Object::New(env);
  o.Set("info", info_object(env, mi));
  o.Set("tokenizer", wrap_tokenizer(env, tok));
  return o;
}

engine_wrap::engine_wrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<engine_wrap>(info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[2].IsFunction()) {
    throw Napi::TypeError::New(env, "NativeEngine(path: string, options: object, onEvent: function)");
  }
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  const native_engine_options opts = parse_engine_options(info[1]);

  tsfn_ = engine_tsfn::New(env, info[2].As<Napi::Function>(), "spindle-engine", 0, 1, this);
  // Registered after the TSFN, so it runs before Node's own TSFN cleanup at environment teardown.
  napi_add_env_cleanup_hook(env, &engine_wrap::env_cleanup, this);
  cleanup_hook_ = true;
  Ref();  // the JS object lives until the engine thread has exited (on_closed)

  engine_tsfn tsfn = tsfn_;
  auto sink = [tsfn](engine_event&& ev) mutable {
    auto* boxed = new engine_event(std::move(ev));
    if (tsfn.NonBlockingCall(boxed) != napi_ok) delete boxed;  // only while the environment shuts down
  };
  // the model's and the draft's load options; dtype: the K / V store type (kv_type_name's), or auto: the device's
  // default (model::want_kv_dtype_auto: float16 on the CPU and on a GPU)
  model_options mo;
  mo.threads = opts.threads;
  mo.device = opts.device;
  mo.kv_auto = !kv_type_of_name(opts.dtype, &mo.kv);
  mo.step_graphs = !opts.enforce_eager;
  auto loader_of = [mo](std::string file) {
    return [file, mo]() -> std::shared_ptr<model> { return std::shared_ptr<model>(model::load(file, mo)); };
  };
  engine_options eo = opts.engine;
  if (!opts.draft_model.empty()) eo.draft_loader = loader_of(opts.draft_model);
  try {
    engine_ = std::make_unique<engine>(loader_of(path), eo, sink);
  } catch (const std::exception& e) {  // thread creation failed: undo the above and report
    napi_remove_env_cleanup_hook(env, &engine_wrap::env_cleanup, this);
    cleanup_hook_ = false;
    closed_ = true;
    tsfn_.Release();
    Unref();
    throw Napi::Error::New(env, std::string("NativeEngine: could not start the engine thread: ") + e.what());
  }
}

engine_wrap::~engine_wrap() {
  if (cleanup_hook_) napi_remove_env_cleanup_hook(Env(), &engine_wrap::env_cleanup, this);
  engine_.reset();  // close + join (already done unless the environment is going away)
}

void engine_wrap::env_cleanup(void* arg) {
  auto* self = static_cast<engine_wrap*>(arg);
  self->cleanup_hook_ = false;
  if (self->engine_) {
    self->engine_->close(false);
    self->engine_->join();
  }
}

void engine_wrap::set_busy(Napi::Env env) {
  if (closed_) return;
  const bool busy = loading_ || closing_ || pending_ > 0;
  if (busy && !tsfn_refd_) tsfn_.Ref(env);
  if (!busy && tsfn_refd_) tsfn_.Unref(env);
  tsfn_refd_ = busy;
}

void engine_wrap::deliver(Napi::Env env, Napi::Function callback, engine_event& ev) {
  Napi::HandleScope scope(env);
  Napi::Object js;
  switch (ev.type) {
    case engine_event::kind::ready:
      loading_ = false;
      js = event_object(env, "ready");
      js.Set("info", info_object(env, ev.info));
      if (std::shared_ptr<model> m = engine_->loaded_model()) {
        // Aliasing pointer: the JS Tokenizer keeps the whole model (which owns the vocabulary) alive.
        js.Set("tokenizer", wrap_tokenizer(env, std::shared_ptr<const tokenizer>(m, &m->vocab())));
      }
      break;
    case engine_event::kind::load_error:
      loading_ = false;
      js = event_object(env, "loadError");
      js.Set("message", ev.message);
      break;
    case engine_event::kind::step: {
      js = event_object(env, "step");
      Napi::Array outs = Napi::Array::New(env, ev.outputs.size());
      for (uint32_t i = 0; i < ev.outputs.size(); ++i) {
        outs.Set(i, output_object(env, ev.outputs[i]));
        if (ev.outputs[i].finish != finish_reason::none) pending_--;
      }
      js.Set("outputs", outs);
      break;
    }
    case engine_event::kind::lora:
      pending_--;
      js = event_object(env, "lora");
      js.Set("slot", Napi::Number::New(env, ev.lora_slot));
      js.Set("error", ev.message.empty() ? env.Null() : Napi::Value(Napi::String::New(env, ev.message)));
      break;
    case engine_event::kind::cache_flush:
      pending_--;
      js = event_object(env, "cache_flush");
      js.Set("blocks", Napi::Number::New(env, ev.blocks_dropped));
      js.Set("error", ev.message.empty() ? env.Null() : Napi::Value(Napi::String::New(env, ev.message)));
      break;
    case engine_event::kind::closed:
      js = event_object(env, "closed");
      on_closed(env);
      break;
  }
  set_busy(env);
  try {
    callback.Call({js});
  } catch (const Napi::Error& e) {
    // A throwing handler is the caller's bug: report it as an uncaught exception, as Node does for callbacks.
    napi_fatal_exception(env, e.Value());
  }
}

void engine_wrap::on_closed(Napi::Env env) {
  engine_->join();
  if (cleanup_hook_) {
    napi_remove_env_cleanup_hook(env, &engine_wrap::env_cleanup, this);
    cleanup_hook_ = false;
  }
  closed_ = true;
  pending_ = 0;
  tsfn_.Release();
  for (auto& d : close_waiters_) d.Resolve(env.Undefined());
  close_waiters_.clear();
  Unref();
}

Napi::Value engine_wrap::submit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  request r = parse_request(info[0]);
  const uint64_t id = guarded(env, [&] { return engine_->submit(std::move(r)); });
  pending_++;
  set_busy(env);
  return Napi::Number::New(env, double(id));
}

Napi::Value engine_wrap::image_layout(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    throw Napi::TypeError::New(env, "imageLayout(width: number, height: number)");
  }
  const double w = info[0].As<Napi::Number>().DoubleValue(), h = info[1].As<Napi::Number>().DoubleValue();
  if (!(w >= 1 && w <= 1e6 && h >= 1 && h <= 1e6) || w != std::floor(w) || h != std::floor(h)) {
    throw Napi::RangeError::New(env, "imageLayout: width and height must be integers in [1, 1000000]");
  }
  const std::vector<int32_t> ids = guarded(env, [&] { return engine_->image_layout(int(w), int(h)); });
  Napi::Int32Array out = Napi::Int32Array::New(env, ids.size());
  std::copy(ids.begin(), ids.end(), out.Data());
  return out;
}

Napi::Value engine_wrap::abort(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsNumber()) throw Napi::TypeError::New(env, "abort(id): id must be a number");
  const double d = info[0].As<Napi::Number>().DoubleValue();
  if (d >= 1 && d <= 9007199254740991.0 && d == double(uint64_t(d))) engine_->abort(uint64_t(d));
  return env.Undefined();
}

namespace {
int32_t slot_arg(const Napi::CallbackInfo& info, const char* what) {
  const double d = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(d >= 0 && d < double(k_max_loras) - 1) || d != std::floor(d)) {
    throw Napi::RangeError::New(info.Env(), std::string(what) + ": slot must be an integer in [0, " + std::to_string(k_max_loras - 2) + "]");
  }
  return int32_t(d);
}
}  // namespace

Napi::Value engine_wrap::load_lora(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int32_t slot = slot_arg(info, "loadLora");
  lora_spec spec = parse_lora_spec(info.Length() > 1 ? info[1] : env.Undefined(), "loadLora(slot, spec): spec");
  guarded(env, [&] { engine_->load_lora(slot, std::move(spec)); return 0; });
  pending_++;  // until its event
  set_busy(env);
  return env.Undefined();
}

Napi::Value engine_wrap::flush_cache(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  guarded(env, [&] { engine_->flush_prefix_cache(); return 0; });
  pending_++;  // until its event
  set_busy(env);
  return env.Undefined();
}

Napi::Value engine_wrap::unload_lora(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const int32_t slot = slot_arg(info, "unloadLora");
  guarded(env, [&] { engine_->unload_lora(slot); return 0; });
  pending_++;
  set_busy(env);
  return env.Undefined();
}

Napi::Value engine_wrap::stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const engine_stats s = engine_->stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("ready", s.ready);
  o.Set("closed", s.closed);
  o.Set("running", s.running);
  o.Set("waiting", s.waiting);
  o.Set("promptTokens", Napi::Number::New(env, double(s.prompt_tokens)));
  o.Set("generatedTokens", Napi::Number::New(env, double(s.generated_tokens)));
  o.Set("requestsFinished", Napi::Number::New(env, double(s.requests_finished)));
  o.Set("steps", Napi::Number::New(env, double(s.steps)));
  o.Set("kvBlocksTotal", s.kv_blocks_total);
  o.Set("kvBlocksUsed", s.kv_blocks_used);
  o.Set("kvBlocksFree", s.kv_blocks_free);
  o.Set("kvBlockSize", s.kv_block_size);
  o.Set("preemptions", Napi::Number::New(env, double(s.preemptions)));
  o.Set("computedTokens", Napi::Number::New(env, double(s.computed_tokens)));
  o.Set("failedSteps", Napi::Number::New(env, double(s.failed_steps)));
  o.Set("stepSeconds", Napi::Number::New(env, s.step_seconds));
  o.Set("forwardSeconds", Napi::Number::New(env, s.forward_seconds));
  o.Set("imagesEncoded", Napi::Number::New(env, double(s.images_encoded)));
  o.Set("imageEncodeSeconds", Napi::Number::New(env, s.image_encode_seconds));
  o.Set("prefixCaching", s.prefix_caching);
  o.Set("prefixCacheQueries", Napi::Number::New(env, double(s.prefix_cache_queries)));
  o.Set("prefixCacheHits", Napi::Number::New(env, double(s.prefix_cache_hits)));
  o.Set("kvBlocksCached", s.kv_blocks_cached);
  o.Set("specDrafts", Napi::Number::New(env, double(s.spec_drafts)));
  o.Set("specDraftTokens", Napi::Number::New(env, double(s.spec_draft_tokens)));
  o.Set("specAcceptedTokens", Napi::Number::New(env, double(s.spec_accepted_tokens)));
  return o;
}

Napi::Value engine_wrap::close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool drain = false;
  if (info.Length() > 0 && !info[0].IsUndefined() && !info[0].IsNull()) {
    if (!info[0].IsObject()) throw Napi::TypeError::New(env, "close(options?: { drain?: boolean })");
    Napi::Value d = info[0].As<Napi::Object>().Get("drain");
    if (!d.IsUndefined() && !d.IsBoolean()) throw Napi::TypeError::New(env, "close: drain must be a boolean");
    drain = d.IsBoolean() && d.As<Napi::Boolean>().Value();
  }
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  if (closed_) {
    deferred.Resolve(env.Undefined());
    return deferred.Promise();
  }
  closing_ = true;
  set_busy(env);
  engine_->close(drain);
  close_waiters_.push_back(deferred);
  return deferred.Promise();
}

void register_engine(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeEngine", engine_wrap::define(env));
  exports.Set("limits", limits_object(env));
  exports.Set("limitAllows", Napi::Function::New(env, limit_allows, "limitAllows"));
}

}  // namespace spindle::napi
