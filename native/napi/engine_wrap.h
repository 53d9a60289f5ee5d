// NativeEngine: the JS handle of one engine (native/engine/engine.h).
//
//   new NativeEngine(path, { maxModelLen?, threads?, device?, ... }, onEvent)   starts the engine thread, which loads
//   submit(spec) -> id          validates every field (TypeError / RangeError / Error naming it), queues
//   abort(id)                   unknown / finished ids are ignored
//   stats() -> { ready, closed, running, waiting, promptTokens, generatedTokens, requestsFinished, steps }
//   close({ drain? }) -> Promise<void>   resolves after the engine thread has exited
//   imageLayout(width, height) -> Int32Array   an image's prompt positions (marker ids, -1 per embedding)
//   loadLora(slot, { path, scale? }) / unloadLora(slot)   queue a runtime LoRA adapter change of that slot;
//                               the result comes as { type: 'lora', slot, error } (error null on success)
//   NativeEngine.inspect(path) -> { info, tokenizer }   synchronous: GGUF metadata + tokenizer, no weights
//
// onEvent receives, on the JS thread and in order: { type: 'ready', info, tokenizer } or
// { type: 'loadError', message }, then { type: 'step', outputs: [...] } once per engine step that changed
// something (and { type: 'lora', slot, error } per adapter load / unload), and { type: 'closed' } last.
// Invariants: the engine thread only ever makes non-blocking ThreadSafeFunction calls; the wrapper keeps the
// Node process alive (TSFN ref'd) exactly while the model loads, requests are pending or close() runs; the JS
// object stays alive until the thread has exited; at environment teardown the thread is stopped and joined.
#pragma once
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace spindle::napi {

class engine_wrap;
void engine_wrap_call_js(Napi::Env env, Napi::Function callback, engine_wrap* self, engine_event* ev);
using engine_tsfn = Napi::TypedThreadSafeFunction<engine_wrap, engine_event, engine_wrap_call_js>;

class engine_wrap : public Napi::ObjectWrap<engine_wrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit engine_wrap(const Napi::CallbackInfo& info);
  ~engine_wrap() override;

  // Runs on the JS thread for every event the engine thread posted.
  void deliver(Napi::Env env, Napi::Function callback, engine_event& ev);

 private:
  Napi::Value submit(const Napi::CallbackInfo& info);
  Napi::Value abort(const Napi::CallbackInfo& info);
  Napi::Value load_lora(const Napi::CallbackInfo& info);
  Napi::Value unload_lora(const Napi::CallbackInfo& info);
  Napi::Value flush_cache(const Napi::CallbackInfo& info);  // flushCache(): a 'cache_flush' event follows
  Napi::Value stats(const Napi::CallbackInfo& info);
  Napi::Value close(const Napi::CallbackInfo& info);
  Napi::Value image_layout(const Napi::CallbackInfo& info);
  static Napi::Value inspect(const Napi::CallbackInfo& info);

  void set_busy(Napi::Env env);  // ref the TSFN while loading / pending / closing, unref when idle
  void on_closed(Napi::Env env);
  static void env_cleanup(void* arg);

  std::unique_ptr<engine> engine_;
  engine_tsfn tsfn_;
  bool tsfn_refd_ = true;
  bool loading_ = true;
  bool closing_ = false;
  bool closed_ = false;
  bool cleanup_hook_ = false;
  int64_t pending_ = 0;  // submitted, not yet finished (as seen on the JS thread)
  std::vector<Napi::Promise::Deferred> close_waiters_;
};

void register_engine(Napi::Env env, Napi::Object exports);

// engine_wrap_convert.cpp
struct native_engine_options {
  engine_options engine;
  int threads = 0;              // 0 = every core
  std::string device = "auto";  // "auto", "cpu" or "cuda" (model_options::device)
  std::string dtype = "auto";   // "auto", "float16", "bfloat16" or "float32": the KV cache (model_options::kv)
  std::string draft_model;      // speculative draft model file ("" = none), loaded like the model
  bool enforce_eager = false;   // no step graphs (model_options::step_graphs = false)
};
native_engine_options parse_engine_options(const Napi::Value& options);
request parse_request(const Napi::Value& spec);  // throws Napi::TypeError / RangeError naming the field
lora_spec parse_lora_spec(const Napi::Value& v, const std::string& at);  // { path, scale? }
Napi::Object info_object(Napi::Env env, const model_info& info);
// The addon's `limits` export: engine/limits.h's table (bounds and range texts), counts, engine defaults.
Napi::Object limits_object(Napi::Env env);
// limitAllows(name, value): whether the limits entry `name` allows the number `value` (engine/limits.h in_range).
Napi::Value limit_allows(const Napi::CallbackInfo& info);
Napi::Object output_object(Napi::Env env, const request_output& out);

}  // namespace spindle::napi
