// Conversions for NativeEngine: JS submit specs to requests (every field type- and range-checked) and engine
// events to plain JS objects.
// Invariant: nothing here trusts a JS value; a bad one becomes a TypeError / RangeError naming the field.
#include "napi/engine_wrap.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "model/model.h"

namespace spindle::napi {

namespace {

// ---- argument checking ----

bool absent(const Napi::Value& v) { return v.IsUndefined() || v.IsNull(); }

double number_field(const Napi::Object& o, const char* key, double fallback) {
  Napi::Value v = o.Get(key);
  if (absent(v)) return fallback;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a number");
  double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d)) throw Napi::RangeError::New(o.Env(), std::string(key) + " must be a finite number");
  return d;
}

// A number within its limits.h entry (the key is the entry's name); `fallback` when absent. The message is the
// engine's own (limit_refusal), so the addon never states a range of its own.
double limited_field(const Napi::Object& o, const param_limit& l, double fallback) {
  Napi::Value v = o.Get(l.name);
  if (absent(v)) return fallback;
  if (!v.IsNumber()) throw Napi::TypeError::New(o.Env(), std::string(l.name) + " must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  const std::string refusal = limit_refusal(l, d);
  if (!refusal.empty()) throw Napi::RangeError::New(o.Env(), refusal);
  return d;
}

bool bool_field(const Napi::Object& o, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  if (absent(v)) return fallback;
  if (!v.IsBoolean()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a boolean");
  return v.As<Napi::Boolean>().Value();
}

// One of `allowed` (a null-terminated list of names); `fallback` when absent.
std::string choice_field(const Napi::Object& o, const char* key, const char* fallback, const char* const* allowed) {
  Napi::Value v = o.Get(key);
  if (absent(v)) return fallback;
  const std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
  std::string names;
  for (const char* const* a = allowed; *a; ++a) {
    if (v.IsString() && s == *a) return s;
    names += std::string(names.empty() ? "" : ", ") + *a;
  }
  const std::string got = v.IsString() ? "'" + s + "'" : "a " + std::string(v.IsNumber() ? "number" : "non-string");
  throw Napi::TypeError::New(o.Env(), std::string(key) + " must be one of " + names + " (got " + got + ")");
}

// An Int32Array or an array of integers in [0, 2^31); at most `max_len` entries.
std::vector<int32_t> ids_field(const Napi::Object& o, const char* key, size_t max_len) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<int32_t> ids;
  if (absent(v)) return ids;
  if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
    Napi::Int32Array a = v.As<Napi::Int32Array>();
    if (a.ElementLength() > max_len) throw Napi::RangeError::New(env, std::string(key) + " is too long");
    ids.assign(a.Data(), a.Data() + a.ElementLength());
    return ids;
  }
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be an Int32Array or an array of integers");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > max_len) throw Napi::RangeError::New(env, std::string(key) + " is too long");
  ids.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    double d = e.IsNumber() ? e.As<Napi::Number>().DoubleValue() : NAN;
    if (!e.IsNumber() || !std::isfinite(d) || d != std::floor(d) || d < -2147483648.0 || d > 2147483647.0) {
      throw Napi::TypeError::New(env, std::string(key) + "[" + std::to_string(i) + "] must be an integer token id");
    }
    ids.push_back(int32_t(d));
  }
  return ids;
}

std::vector<std::string> strings_field(const Napi::Object& o, const char* key) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<std::string> out;
  if (absent(v)) return out;
  if (v.IsString()) return {v.As<Napi::String>().Utf8Value()};
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be a string or an array of strings");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > uint32_t(max_stop_strings)) {
    throw Napi::RangeError::New(env, std::string(key) + " must hold at most " + std::to_string(max_stop_strings) +
                                         " strings (got " + std::to_string(a.Length()) + ")");
  }
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    if (!e.IsString()) throw Napi::TypeError::New(env, std::string(key) + "[" + std::to_string(i) + "] must be a string");
    out.push_back(e.As<Napi::String>().Utf8Value());
  }
  return out;
}

std::string string_field(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (absent(v)) return {};
  if (!v.IsString()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

// [{ text: string, atStart?: boolean }, ...]
std::vector<grammar_trigger> triggers_field(const Napi::Object& o, const char* key) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<grammar_trigger> out;
  if (absent(v)) return out;
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be an array of { text, atStart } objects");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > uint32_t(max_grammar_triggers)) {
    throw Napi::RangeError::New(env, std::string(key) + " must hold at most " + std::to_string(max_grammar_triggers) + " triggers");
  }
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    if (!e.IsObject()) throw Napi::TypeError::New(env, at + " must be an object { text, atStart }");
    Napi::Object t = e.As<Napi::Object>();
    if (!t.Get("text").IsString()) throw Napi::TypeError::New(env, at + ".text must be a string");
    out.push_back({t.Get("text").As<Napi::String>().Utf8Value(), bool_field(t, "atStart", false)});
  }
  return out;
}

// { startTag: string, endTag: string, inBlock?: boolean } (absent: none; the engine checks the tags)
reasoning_block reasoning_field(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  reasoning_block out;
  if (absent(v)) return out;
  if (!v.IsObject() || v.IsArray()) throw Napi::TypeError::New(o.Env(), std::string(key) + " must be an object { startTag, endTag, inBlock }");
  Napi::Object r = v.As<Napi::Object>();
  out.start_tag = string_field(r, "startTag");
  out.end_tag = string_field(r, "endTag");
  out.in_block = bool_field(r, "inBlock", false);
  return out;
}

// [[tokenId, bias], ...]
std::vector<std::pair<int32_t, float>> logit_bias_field(const Napi::Object& o, const char* key) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<std::pair<int32_t, float>> out;
  if (absent(v)) return out;
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be an array of [tokenId, bias] pairs");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > uint32_t(max_logit_bias)) {
    throw Napi::RangeError::New(env, std::string(key) + " must hold at most " + std::to_string(max_logit_bias) + " entries");
  }
  for (uint32_t i = 0; i < a.Length(); ++i) {
    Napi::Value e = a.Get(i);
    const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    if (!e.IsArray() || e.As<Napi::Array>().Length() != 2) throw Napi::TypeError::New(env, at + " must be a [tokenId, bias] pair");
    Napi::Value id = e.As<Napi::Array>().Get(uint32_t(0)), bias = e.As<Napi::Array>().Get(uint32_t(1));
    const double d = id.IsNumber() ? id.As<Napi::Number>().DoubleValue() : NAN;
    if (!std::isfinite(d) || d != std::floor(d) || d < 0 || d > 2147483647.0) {
      throw Napi::TypeError::New(env, at + "[0] must be an integer token id");
    }
    if (!bias.IsNumber()) throw Napi::TypeError::New(env, at + "[1] must be a number");
    const double b = bias.As<Napi::Number>().DoubleValue();
    const std::string refusal = limit_refusal(k_logit_bias, b);
    if (!refusal.empty()) throw Napi::RangeError::New(env, refusal);
    out.push_back({int32_t(d), float(b)});
  }
  return out;
}

// images: [{ data: Uint8Array (RGB, width * height * 3 bytes), width, height, position }] (the prompt index
// where the image's layout starts). The engine checks sizes and the layout against the prompt.
std::vector<request_image> images_field(const Napi::Object& o, const char* key) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<request_image> out;
  if (absent(v)) return out;
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be an array of { data, width, height, position }");
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); ++i) {
    const std::string at = std::string(key) + "[" + std::to_string(i) + "]";
    Napi::Value e = a.Get(i);
    if (!e.IsObject()) throw Napi::TypeError::New(env, at + " must be an object");
    Napi::Object im = e.As<Napi::Object>();
    Napi::Value data = im.Get("data");
    if (!data.IsTypedArray() || data.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
      throw Napi::TypeError::New(env, at + ".data must be a Uint8Array of RGB pixels");
    }
    request_image r;
    for (auto [name, field] : {std::pair{"width", &r.pixels.width}, std::pair{"height", &r.pixels.height},
                               std::pair{"position", &r.position}}) {
      Napi::Value n = im.Get(name);
      const double d = n.IsNumber() ? n.As<Napi::Number>().DoubleValue() : NAN;
      if (!(d >= 0 && d <= 2147483647.0) || d != std::floor(d)) {
        throw Napi::TypeError::New(env, at + "." + name + " must be a non-negative integer");
      }
      *field = int32_t(d);
    }
    Napi::Uint8Array bytes = data.As<Napi::Uint8Array>();
    r.pixels.data.assign(bytes.Data(), bytes.Data() + bytes.ElementLength());
    out.push_back(std::move(r));
  }
  return out;
}

// loras: [{ path, scale? }] (scale: a finite number, 1 by default; other keys, such as the TS layer's name, ignored)
std::vector<lora_spec> loras_field(const Napi::Object& o, const char* key) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(key);
  std::vector<lora_spec> out;
  if (absent(v)) return out;
  if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(key) + " must be an array of { path, scale }");
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() >= k_max_loras - 1) throw Napi::RangeError::New(env, std::string(key) + ": at most " + std::to_string(k_max_loras - 2) + " adapters");
  for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(parse_lora_spec(a.Get(i), std::string(key) + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace

lora_spec parse_lora_spec(const Napi::Value& e, const std::string& at) {
  Napi::Env env = e.Env();
  if (!e.IsObject()) throw Napi::TypeError::New(env, at + " must be an object { path, scale }");
  Napi::Object lo = e.As<Napi::Object>();
  lora_spec l;
  l.path = string_field(lo, "path");
  if (l.path.empty()) throw Napi::TypeError::New(env, at + ".path must be the adapter's GGUF file");
  const double scale = number_field(lo, "scale", 1.0);
  if (!std::isfinite(scale) || std::fabs(scale) > 1e6) throw Napi::RangeError::New(env, at + ".scale must be a finite number in [-1e6, 1e6]");
  l.scale = float(scale);
  return l;
}

native_engine_options parse_engine_options(const Napi::Value& v) {
  native_engine_options out;
  if (absent(v)) return out;
  if (!v.IsObject()) throw Napi::TypeError::New(v.Env(), "NativeEngine: options must be an object");
  Napi::Object o = v.As<Napi::Object>();
  const engine_options defaults;  // absent options: the engine's defaults (0: decided at load)
  out.engine.max_model_len = int32_t(limited_field(o, k_max_model_len, defaults.max_model_len));
  out.engine.max_num_seqs = int32_t(limited_field(o, k_max_num_seqs, defaults.max_num_seqs));
  out.engine.max_num_batched_tokens = int32_t(limited_field(o, k_max_num_batched_tokens, defaults.max_num_batched_tokens));
  out.engine.chunked_prefill_size = int32_t(limited_field(o, k_chunked_prefill_size, defaults.chunked_prefill_size));
  out.engine.kv_cache_memory = number_field(o, "kvCacheMemory", 0);
  if (!(out.engine.kv_cache_memory >= 0) || out.engine.kv_cache_memory > 9.0e15) {
    throw Napi::RangeError::New(v.Env(), "kvCacheMemory must be a fraction in (0, 1] or a number of bytes");
  }
  out.engine.mmproj_path = string_field(o, "mmproj");
  out.engine.loras = loras_field(o, "loras");
  out.engine.enable_prefix_caching = bool_field(o, "enablePrefixCaching", defaults.enable_prefix_caching);
  for (auto [key, field] : {std::pair{"imageMinTokens", &out.engine.image_min_tokens},
                            std::pair{"imageMaxTokens", &out.engine.image_max_tokens}}) {
    const double d = number_field(o, key, 0);
    if (!(d >= 0 && d <= 65536) || d != std::floor(d)) {
      throw Napi::RangeError::New(v.Env(), std::string(key) + " must be an integer in [0, 65536] (0: the projector's default)");
    }
    *field = int32_t(d);
  }
  // Speculative decoding: speculativeMethod 'ngram' drafts for every request; numSpeculativeTokens also bounds the
  // drafts of a request's prediction.
  static const char* const methods[] = {"none", "ngram", nullptr};
  speculative_config& sp = out.engine.speculative;
  sp.ngram = choice_field(o, "speculativeMethod", "none", methods) == "ngram";
  sp.num_speculative_tokens = int32_t(limited_field(o, k_num_speculative_tokens, sp.num_speculative_tokens));
  for (auto [key, field] : {std::pair{"promptLookupMin", &sp.prompt_lookup_min}, std::pair{"promptLookupMax", &sp.prompt_lookup_max}}) {
    const double d = number_field(o, key, *field);
    const std::string refusal = limit_refusal(k_prompt_lookup, d);  // names both keys
    if (!refusal.empty()) throw Napi::RangeError::New(v.Env(), refusal);
    *field = int32_t(d);
  }
  if (sp.prompt_lookup_min > sp.prompt_lookup_max) {
    throw Napi::RangeError::New(v.Env(), "promptLookupMin (" + std::to_string(sp.prompt_lookup_min) +
                                             ") must not exceed promptLookupMax (" + std::to_string(sp.prompt_lookup_max) + ")");
  }
  out.draft_model = string_field(o, "speculativeModel");
  out.threads = int(limited_field(o, k_threads, 0));  // 0: every core
  static const char* const devices[] = {"auto", "cpu", "cuda", nullptr};
  out.device = choice_field(o, "device", "auto", devices);
  // the KV cache's
  static const char* const dtypes[] = {"auto",     "float16",  "bfloat16", "float32", "q8_0",
                                       "q4_0",     "fp8_e4m3", "fp8_e5m2", nullptr};
  out.dtype = choice_field(o, "dtype", "auto", dtypes);
  out.enforce_eager = bool_field(o, "enforceEager", false);
  return out;
}

request parse_request(const Napi::Value& spec_value) {
  if (!spec_value.IsObject()) throw Napi::TypeError::New(spec_value.Env(), "submit: spec must be an object");
  Napi::Object s = spec_value.As<Napi::Object>();
  request r;
  r.prompt = ids_field(s, "promptTokenIds", size_t(1) << 24);
  sampling_params& p = r.params;
  p.temperature = float(limited_field(s, k_temperature, p.temperature));
  p.top_p = float(limited_field(s, k_top_p, p.top_p));
  p.top_k = int32_t(limited_field(s, k_top_k, p.top_k));
  p.min_p = float(limited_field(s, k_min_p, p.min_p));
  p.repetition_penalty = float(limited_field(s, k_repetition_penalty, p.repetition_penalty));
  p.repeat_last_n = int32_t(limited_field(s, k_repeat_last_n, p.repeat_last_n));
  p.presence_penalty = float(limited_field(s, k_presence_penalty, p.presence_penalty));
  p.frequency_penalty = float(limited_field(s, k_frequency_penalty, p.frequency_penalty));
  p.max_tokens = int32_t(limited_field(s, k_max_tokens, p.max_tokens));
  p.min_tokens = int32_t(limited_field(s, k_min_tokens, p.min_tokens));
  p.stop = strings_field(s, "stop");
  p.stop_token_ids = ids_field(s, "stopTokenIds", size_t(max_stop_token_ids));
  p.ignore_eos = bool_field(s, "ignoreEos", false);
  p.has_seed = !absent(s.Get("seed"));
  p.seed = uint32_t(limited_field(s, k_seed, 0));
  p.logprobs = int32_t(limited_field(s, k_logprobs, p.logprobs));
  p.prompt_logprobs = int32_t(limited_field(s, k_prompt_logprobs, p.prompt_logprobs));
  p.skip_special = bool_field(s, "skipSpecialTokens", true);
  p.grammar = string_field(s, "grammar");
  p.grammar_triggers = triggers_field(s, "grammarTriggers");
  p.grammar_reasoning = reasoning_field(s, "grammarReasoning");
  p.logit_bias = logit_bias_field(s, "logitBias");
  r.images = images_field(s, "images");
  r.prediction = ids_field(s, "predictionTokenIds", size_t(max_prediction_tokens));
  r.speculative = bool_field(s, "speculative", true);
  const double lora = number_field(s, "lora", -1);  // the engine checks the range
  if (lora != std::floor(lora) || !(lora >= -1 && lora <= 2147483647.0)) {
    throw Napi::TypeError::New(s.Env(), "lora must be an adapter index (an integer >= -1)");
  }
  r.lora = int32_t(lora);
  r.cache_salt = string_field(s, "cacheSalt");
  // embeddings: 'mean' | 'cls' | 'last' (absent: a generation request)
  static const char* const poolings[] = {"none", "mean", "cls", "last", nullptr};
  const std::string pooling = choice_field(s, "pooling", "none", poolings);
  r.pooling = pooling == "mean" ? pooling_type::mean
              : pooling == "cls" ? pooling_type::cls
              : pooling == "last" ? pooling_type::last
                                  : pooling_type::none;
  return r;
}

// ---- the limits table to JS ----

Napi::Object limits_object(Napi::Env env) {
  Napi::Object params = Napi::Object::New(env);
  for (const param_limit* const* l = k_all_limits; *l; ++l) {
    Napi::Object e = Napi::Object::New(env);
    e.Set("min", (*l)->lo);
    e.Set("max", (*l)->hi);
    e.Set("minExclusive", (*l)->lo_open);
    e.Set("maxExclusive", (*l)->hi_open);
    e.Set("integer", (*l)->integer);
    e.Set("special", (*l)->has_special ? Napi::Value(Napi::Number::New(env, (*l)->special)) : env.Null());
    e.Set("range", range_text(**l));
    params.Set((*l)->name, e);
  }
  const engine_options d;
  Napi::Object defaults = Napi::Object::New(env);
  defaults.Set("maxNumSeqs", d.max_num_seqs);
  defaults.Set("chunkedPrefillSize", d.chunked_prefill_size);
  defaults.Set("blockSize", d.block_size);
  Napi::Object o = Napi::Object::New(env);
  o.Set("params", params);
  o.Set("maxStopStrings", max_stop_strings);
  o.Set("maxStopStringBytes", max_stop_string_bytes);
  o.Set("maxStopTokenIds", max_stop_token_ids);
  o.Set("maxLogprobs", max_logprobs);
  o.Set("maxPredictionTokens", max_prediction_tokens);
  o.Set("engineDefaults", defaults);
  return o;
}

Napi::Value limit_allows(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsNumber()) {
    throw Napi::TypeError::New(env, "limitAllows(name: string, value: number)");
  }
  const std::string name = info[0].As<Napi::String>().Utf8Value();
  for (const param_limit* const* l = k_all_limits; *l; ++l) {
    if (name == (*l)->name) return Napi::Boolean::New(env, in_range(**l, info[1].As<Napi::Number>().DoubleValue()));
  }
  throw Napi::RangeError::New(env, "limitAllows: no limit named '" + name + "'");
}

// ---- events to JS ----

static Napi::Array int_array(Napi::Env env, const std::vector<int32_t>& v) {
  Napi::Array a = Napi::Array::New(env, v.size());
  for (uint32_t i = 0; i < v.size(); ++i) a.Set(i, Napi::Number::New(env, v[i]));
  return a;
}

Napi::Object info_object(Napi::Env env, const model_info& m) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("arch", m.arch);
  o.Set("name", m.name);
  o.Set("nVocab", m.n_vocab);
  o.Set("nCtxTrain", m.n_ctx_train);
  o.Set("nEmbd", m.n_embd);
  o.Set("maxModelLen", m.max_model_len);
  o.Set("maxNumBatchedTokens", m.max_num_batched_tokens);
  o.Set("bosId", m.bos_id);
  o.Set("eosId", m.eos_id);
  o.Set("addBos", m.add_bos);
  o.Set("eogIds", int_array(env, m.eog_ids));
  o.Set("bosToken", m.bos_id >= 0 ? Napi::Value(Napi::String::New(env, m.bos_text)) : env.Null());
  o.Set("eosToken", m.eos_id >= 0 ? Napi::Value(Napi::String::New(env, m.eos_text)) : env.Null());
  Napi::Array eog = Napi::Array::New(env, m.eog_texts.size());
  for (uint32_t i = 0; i < m.eog_texts.size(); ++i) eog.Set(i, m.eog_texts[i]);
  o.Set("eogTokens", eog);
  o.Set("chatTemplate", m.has_chat_template ? Napi::Value(Napi::String::New(env, m.chat_template)) : env.Null());
  o.Set("device", m.device.empty() ? env.Null() : Napi::Value(Napi::String::New(env, m.device)));  // null: not loaded
  o.Set("kvCacheDtype", m.kv_dtype.empty() ? env.Null() : Napi::Value(Napi::String::New(env, m.kv_dtype)));
  o.Set("mmproj", m.mmproj.empty() ? env.Null() : Napi::Value(Napi::String::New(env, m.mmproj)));  // null: text only
  o.Set("pooling", m.pooling.empty() ? env.Null() : Napi::Value(Napi::String::New(env, m.pooling)));  // null: unsaid
  // a reranker's classifier head (null: none): { weights [nOut x nEmbd], bias (null: none), labels }
  if (m.n_cls_out > 0) {
    Napi::Object head = Napi::Object::New(env);
    Napi::Float32Array w = Napi::Float32Array::New(env, m.cls_out.size());
    std::copy(m.cls_out.begin(), m.cls_out.end(), w.Data());
    head.Set("weights", w);
    head.Set("nOut", m.n_cls_out);
    if (m.cls_out_bias.empty()) head.Set("bias", env.Null());
    else {
      Napi::Float32Array b = Napi::Float32Array::New(env, m.cls_out_bias.size());
      std::copy(m.cls_out_bias.begin(), m.cls_out_bias.end(), b.Data());
      head.Set("bias", b);
    }
    Napi::Array labels = Napi::Array::New(env, m.cls_labels.size());
    for (uint32_t i = 0; i < m.cls_labels.size(); ++i) labels.Set(i, m.cls_labels[i]);
    head.Set("labels", labels);
    o.Set("classifier", head);
  } else {
    o.Set("classifier", env.Null());
  }
  o.Set("rerankTemplate", m.rerank_template.empty() ? env.Null() : Napi::Value(Napi::String::New(env, m.rerank_template)));
  return o;
}

// Logprob records as JS objects: { tokenId, logprob, rank, topTokenIds, topLogprobs }.
static Napi::Array logprob_array(Napi::Env env, const std::vector<token_logprob>& lps) {
  Napi::Array out = Napi::Array::New(env, lps.size());
  for (uint32_t i = 0; i < lps.size(); ++i) {
    const token_logprob& lp = lps[i];
    Napi::Object e = Napi::Object::New(env);
    e.Set("tokenId", lp.id);
    e.Set("logprob", lp.logprob);
    e.Set("rank", lp.rank);
    e.Set("topTokenIds", int_array(env, lp.top_ids));
    Napi::Array tl = Napi::Array::New(env, lp.top_logprobs.size());
    for (uint32_t k = 0; k < lp.top_logprobs.size(); ++k) tl.Set(k, Napi::Number::New(env, lp.top_logprobs[k]));
    e.Set("topLogprobs", tl);
    out.Set(i, e);
  }
  return out;
}

Napi::Object output_object(Napi::Env env, const request_output& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("id", Napi::Number::New(env, double(r.id)));
  o.Set("tokenIds", int_array(env, r.tokens));
  o.Set("text", r.text);
  o.Set("finishReason", r.finish == finish_reason::none ? env.Null()
                                                        : Napi::Value(Napi::String::New(env, finish_reason_name(r.finish))));
  Napi::Value stop_reason = env.Null();
  if (!r.stop_string.empty()) stop_reason = Napi::String::New(env, r.stop_string);
  else if (r.stop_token >= 0) stop_reason = Napi::Number::New(env, r.stop_token);
  o.Set("stopReason", stop_reason);
  o.Set("error", r.error.empty() ? env.Null() : Napi::Value(Napi::String::New(env, r.error)));
  o.Set("cachedTokens", r.cached_tokens);
  o.Set("draftTokens", r.draft_tokens);
  o.Set("acceptedDraftTokens", r.accepted_draft_tokens);
  if (r.queue_seconds >= 0) o.Set("queueSeconds", r.queue_seconds);
  if (r.prefill_seconds >= 0) o.Set("prefillSeconds", r.prefill_seconds);
  if (r.decode_seconds >= 0) o.Set("decodeSeconds", r.decode_seconds);
  if (r.inference_seconds >= 0) o.Set("inferenceSeconds", r.inference_seconds);
  if (!r.embedding.empty()) {
    Napi::Float32Array e = Napi::Float32Array::New(env, r.embedding.size());
    std::copy(r.embedding.begin(), r.embedding.end(), e.Data());
    o.Set("embedding", e);
  }
  if (!r.logprobs.empty()) o.Set("logprobs", logprob_array(env, r.logprobs));
  if (!r.prompt_logprobs.empty()) o.Set("promptLogprobs", logprob_array(env, r.prompt_logprobs));
  return o;
}

}  // namespace spindle::napi
