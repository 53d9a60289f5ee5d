// debugMoeScores(path: string, tokens: Int32Array, options?: { threads?: number })
//   -> { scores: Float32Array, nLayer: number, nExpert: number, nExpertUsed: number }
// A test hook for MoE conformance: one forward pass over all tokens in a fresh sequence (as debugForward) that
// returns every MoE layer's expert selection scores (router probabilities plus exp_probs_b, what top-k ranks),
// [nLayer, n_tokens, nExpert] row-major; nLayer counts the MoE layers. Synchronous.
// Invariant: every JS value is checked before use; any failure becomes a JS exception (never an abort).
// Compiled only in test builds (SPINDLE_TEST_HOOKS=1, see CMakeLists.txt): the release addon and the node-gyp
// build have no such export.
#if SPINDLE_TEST_HOOKS
#include <napi.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "model/dense_model.h"
#include "model/model.h"

namespace spindle::napi {

namespace {

int parse_threads(const Napi::Env& env, const Napi::Value& opts) {
  if (opts.IsUndefined() || opts.IsNull()) return 0;
  if (!opts.IsObject()) throw Napi::TypeError::New(env, "debugMoeScores: options must be an object");
  Napi::Value t = opts.As<Napi::Object>().Get("threads");
  if (t.IsUndefined()) return 0;
  const double d = t.IsNumber() ? t.As<Napi::Number>().DoubleValue() : -1.0;
  if (!std::isfinite(d) || d != std::floor(d) || d < 1 || d > 1024) {
    throw Napi::RangeError::New(env, "debugMoeScores: options.threads must be an integer in [1, 1024]");
  }
  return (int)d;
}

Napi::Value debug_moe_scores(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString()) throw Napi::TypeError::New(env, "debugMoeScores: path must be a string");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
    throw Napi::TypeError::New(env, "debugMoeScores: tokens must be an Int32Array");
  }
  const std::string path = info[0].As<Napi::String>().Utf8Value();
  Napi::Int32Array tokens = info[1].As<Napi::Int32Array>();
  const int threads = parse_threads(env, info.Length() > 2 ? info[2] : env.Undefined());
  const int64_t n = (int64_t)tokens.ElementLength();
  if (n == 0) throw Napi::RangeError::New(env, "debugMoeScores: tokens must not be empty");
  try {
    model_options opts;
    opts.threads = threads;
    std::unique_ptr<model> m = model::load(path, opts);
    auto* dm = dynamic_cast<dense_model*>(m.get());
    if (!dm || dm->weights().moe.n_expert == 0) throw Napi::Error::New(env, "debugMoeScores: the model has no MoE layers");
    const moe_config cfg = dm->weights().moe;
    std::vector<float> scores;
    std::vector<float> logits((size_t)(n * m->hparams().n_vocab));
    std::unique_ptr<sequence_state> seq = m->new_sequence(n);
    dm->set_moe_trace(&scores);
    m->forward(*seq, tokens.Data(), n, logits.data(), true);
    dm->set_moe_trace(nullptr);
    Napi::Float32Array out = Napi::Float32Array::New(env, scores.size());
    std::memcpy(out.Data(), scores.data(), scores.size() * sizeof(float));
    Napi::Object r = Napi::Object::New(env);
    r.Set("scores", out);
    r.Set("nLayer", Napi::Number::New(env, (double)(scores.size() / ((size_t)n * cfg.n_expert))));
    r.Set("nExpert", Napi::Number::New(env, cfg.n_expert));
    r.Set("nExpertUsed", Napi::Number::New(env, cfg.n_expert_used));
    return r;
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, std::string("debugMoeScores: ") + e.what());
  }
}

}  // namespace

}  // namespace spindle::napi

// Registered from spindle_init (addon.cpp) through a block-scope declaration of this function.
void spindle_register_moe_debug(Napi::Env env, Napi::Object exports) {
  exports.Set("debugMoeScores", Napi::Function::New(env, spindle::napi::debug_moe_scores, "debugMoeScores"));
}

#endif  // SPINDLE_TEST_HOOKS
