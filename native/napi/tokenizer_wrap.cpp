// class Tokenizer {
//   static fromFile(path: string): Tokenizer        // maps the GGUF, reads its tokenizer.* metadata only
//   encode(text: string, addSpecial = false, parseSpecial = false): Int32Array
//   decode(ids: Int32Array | number[], skipSpecial = false): string
//   tokenToPiece(id: number, special = false): Buffer   // raw bytes, may be a partial UTF-8 sequence
//   isEog(id: number): boolean
//   readonly nVocab: number; bosId: number; eosId: number (-1 if none); addBos: boolean; eogIds: Int32Array
// }
// Invariant: every JS argument is checked before use (TypeError for a wrong type, RangeError for a bad
// value, both naming the argument); every native failure becomes a JS Error; nothing here can abort.
#include "napi/tokenizer_wrap.h"

#include <cmath>
#include <mutex>
#include <string>
#include <unordered_map>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace spindle::napi {

namespace {

using tokenizer_ptr = std::shared_ptr<const spindle::tokenizer>;

// Tags the External that carries a tokenizer into the constructor, so no other External is accepted.
const napi_type_tag k_tokenizer_tag = {0x5b1d3e7c9a2f4b61ULL, 0x8e0c47d2a9f3b515ULL};

// The Tokenizer constructor of each environment (worker threads have their own).
struct ctor_registry {
  std::mutex mutex;
  std::unordered_map<napi_env, Napi::FunctionReference*> refs;
};

ctor_registry& registry() {
  static ctor_registry r;
  return r;
}

template <typename F>
auto guarded(const Napi::Env& env, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

bool optional_bool(const Napi::CallbackInfo& info, size_t i, const char* what, bool fallback) {
  if (info.Length() <= i || info[i].IsUndefined()) return fallback;
  if (!info[i].IsBoolean()) throw Napi::TypeError::New(info.Env(), std::string(what) + " must be a boolean");
  return info[i].As<Napi::Boolean>().Value();
}

// A token id from a JS number: TypeError unless a number, RangeError unless an integer in [0, n_vocab).
int32_t token_id(const Napi::Env& env, const Napi::Value& v, const std::string& what, int32_t n_vocab) {
  if (!v.IsNumber()) throw Napi::TypeError::New(env, what + " must be a number (a token id)");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!std::isfinite(d) || d != std::floor(d) || d < 0 || d >= n_vocab) {
    throw Napi::RangeError::New(env, what + " = " + v.ToString().Utf8Value() + " is not a token id in [0, " +
                                         std::to_string(n_vocab) + ")");
  }
  return static_cast<int32_t>(d);
}

class tokenizer_object : public Napi::ObjectWrap<tokenizer_object> {
 public:
  static Napi::Function define(Napi::Env env) {
    return DefineClass(env, "Tokenizer",
                       {StaticMethod<&tokenizer_object::from_file>("fromFile"),
                        InstanceMethod<&tokenizer_object::encode>("encode"),
                        InstanceMethod<&tokenizer_object::decode>("decode"),
                        InstanceMethod<&tokenizer_object::token_to_piece>("tokenToPiece"),
                        InstanceMethod<&tokenizer_object::is_eog>("isEog"),
                        InstanceAccessor<&tokenizer_object::n_vocab>("nVocab"),
                        InstanceAccessor<&tokenizer_object::bos_id>("bosId"),
                        InstanceAccessor<&tokenizer_object::eos_id>("eosId"),
                        InstanceAccessor<&tokenizer_object::add_bos>("addBos"),
                        InstanceAccessor<&tokenizer_object::eog_ids>("eogIds")});
  }

  explicit tokenizer_object(const Napi::CallbackInfo& info) : Napi::ObjectWrap<tokenizer_object>(info) {
    Napi::Env env = info.Env();
    if (info.Length() != 1 || !info[0].IsExternal() ||
        !info[0].As<Napi::External<tokenizer_ptr>>().CheckTypeTag(&k_tokenizer_tag)) {
      throw Napi::TypeError::New(env, "Tokenizer cannot be constructed directly; use Tokenizer.fromFile(path)");
    }
    tok_ = *info[0].As<Napi::External<tokenizer_ptr>>().Data();
  }

  static Napi::Value from_file(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) {
      throw Napi::TypeError::New(env, "Tokenizer.fromFile: path must be a string");
    }
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    tokenizer_ptr tok = guarded(env, [&]() -> tokenizer_ptr {
      std::unique_ptr<gguf_file> file = gguf_file::open(path);
      return tokenizer_ptr(spindle::tokenizer::from_gguf(*file));
    });
    return wrap_tokenizer(env, std::move(tok));
  }

 private:
  Napi::Value encode(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw Napi::TypeError::New(env, "encode: text must be a string");
    const std::string text = info[0].As<Napi::String>().Utf8Value();
    const bool add_special = optional_bool(info, 1, "encode: addSpecial", false);
    const bool parse_special = optional_bool(info, 2, "encode: parseSpecial", false);
    std::vector<int32_t> ids = guarded(env, [&] { return tok_->encode(text, add_special, parse_special); });
    Napi::Int32Array out = Napi::Int32Array::New(env, ids.size());
    for (size_t i = 0; i < ids.size(); ++i) out[i] = ids[i];
    return out;
  }

  Napi::Value decode(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const int32_t n_vocab = tok_->n_vocab();
    std::vector<int32_t> ids;
    Napi::Value arg = info.Length() > 0 ? info[0] : env.Undefined();
    if (arg.IsTypedArray() && arg.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
      Napi::Int32Array a = arg.As<Napi::Int32Array>();
      ids.resize(a.ElementLength());
      for (size_t i = 0; i < ids.size(); ++i) {
        if (a[i] < 0 || a[i] >= n_vocab) {
          throw Napi::RangeError::New(env, "decode: ids[" + std::to_string(i) + "] = " + std::to_string(a[i]) +
                                               " is not a token id in [0, " + std::to_string(n_vocab) + ")");
        }
        ids[i] = a[i];
      }
    } else if (arg.IsArray()) {
      Napi::Array a = arg.As<Napi::Array>();
      ids.resize(a.Length());
      for (uint32_t i = 0; i < a.Length(); ++i) {
        ids[i] = token_id(env, a.Get(i), "decode: ids[" + std::to_string(i) + "]", n_vocab);
      }
    } else {
      throw Napi::TypeError::New(env, "decode: ids must be an Int32Array or an array of token ids");
    }
    const bool skip_special = optional_bool(info, 1, "decode: skipSpecial", false);
    std::string text = guarded(env, [&] { return tok_->decode(ids, skip_special); });
    return Napi::String::New(env, text);
  }

  Napi::Value token_to_piece(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const int32_t id = token_id(env, info.Length() > 0 ? info[0] : env.Undefined(), "tokenToPiece: id",
                                tok_->n_vocab());
    const bool special = optional_bool(info, 1, "tokenToPiece: special", false);
    std::string piece = guarded(env, [&] { return tok_->token_to_piece(id, special); });
    return Napi::Buffer<char>::Copy(env, piece.data(), piece.size());
  }

  Napi::Value is_eog(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const int32_t id = token_id(env, info.Length() > 0 ? info[0] : env.Undefined(), "isEog: id", tok_->n_vocab());
    return Napi::Boolean::New(env, tok_->is_eog(id));
  }

  Napi::Value n_vocab(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), tok_->n_vocab()); }
  Napi::Value bos_id(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), tok_->bos_id()); }
  Napi::Value eos_id(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), tok_->eos_id()); }
  Napi::Value add_bos(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), tok_->add_bos()); }

  Napi::Value eog_ids(const Napi::CallbackInfo& info) {
    const std::vector<int32_t>& eog = tok_->eog_ids();
    Napi::Int32Array out = Napi::Int32Array::New(info.Env(), eog.size());
    for (size_t i = 0; i < eog.size(); ++i) out[i] = eog[i];
    return out;
  }

  tokenizer_ptr tok_;
};

}  // namespace

void init_tokenizer(Napi::Env env, Napi::Object exports) {
  Napi::Function ctor = tokenizer_object::define(env);
  auto* ref = new Napi::FunctionReference(Napi::Persistent(ctor));
  napi_env raw = env;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().refs[raw] = ref;
  }
  env.AddCleanupHook([raw]() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().refs.find(raw);
    if (it == registry().refs.end()) return;
    delete it->second;
    registry().refs.erase(it);
  });
  exports.Set("Tokenizer", ctor);
}

Napi::Object wrap_tokenizer(Napi::Env env, std::shared_ptr<const spindle::tokenizer> tok) {
  if (!tok) throw Napi::Error::New(env, "wrap_tokenizer: null tokenizer");
  Napi::FunctionReference* ref = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().refs.find(env);
    if (it != registry().refs.end()) ref = it->second;
  }
  if (!ref) throw Napi::Error::New(env, "wrap_tokenizer: the Tokenizer class is not registered in this environment");
  // The External owns a copy of the shared pointer until it is garbage collected.
  auto* holder = new tokenizer_ptr(std::move(tok));
  Napi::External<tokenizer_ptr> ext =
      Napi::External<tokenizer_ptr>::New(env, holder, [](Napi::Env, tokenizer_ptr* p) { delete p; });
  ext.TypeTag(&k_tokenizer_tag);
  return ref->New({ext});
}

}  // namespace spindle::napi
