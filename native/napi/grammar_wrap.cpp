// grammarCheck(gbnf: string): { rules: number }            // throws Error naming line and column of a problem
// grammarMatch(gbnf: string, input: string): { accepted: boolean, complete: boolean }   (test builds only:
//   SPINDLE_TEST_HOOKS)
//   accepted: the UTF-8 bytes of input can be produced under the grammar (a prefix of some sentence);
//   complete: input is a whole sentence of `root`.
// These let TypeScript check the grammars it compiles (JSON Schema, regex, tool calls) against the same
// matcher the sampler uses.
// Invariant: arguments are checked (TypeError naming the argument); native failures become JS Errors.
#include <napi.h>

#include <memory>
#include <string>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"

namespace spindle::napi {

namespace {

std::string string_arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  if (info.Length() <= i || !info[i].IsString()) {
    throw Napi::TypeError::New(info.Env(), std::string(name) + " must be a string");
  }
  return info[i].As<Napi::String>().Utf8Value();
}

std::shared_ptr<const grammar> parse_or_throw(const Napi::Env& env, const std::string& text) {
  try {
    return std::make_shared<const grammar>(grammar_parse(text));
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  }
}

Napi::Value grammar_check(const Napi::CallbackInfo& info) {
  auto g = parse_or_throw(info.Env(), string_arg(info, 0, "gbnf"));
  Napi::Object r = Napi::Object::New(info.Env());
  r.Set("rules", Napi::Number::New(info.Env(), double(g->rule_start.size())));
  return r;
}

[[maybe_unused]] Napi::Value grammar_match(const Napi::CallbackInfo& info) {
  auto g = parse_or_throw(info.Env(), string_arg(info, 0, "gbnf"));
  const std::string input = string_arg(info, 1, "input");
  grammar_matcher m(g);
  const bool accepted = m.accept_string(input);
  Napi::Object r = Napi::Object::New(info.Env());
  r.Set("accepted", Napi::Boolean::New(info.Env(), accepted));
  r.Set("complete", Napi::Boolean::New(info.Env(), accepted && m.is_complete()));
  return r;
}

}  // namespace

void register_grammar(Napi::Env env, Napi::Object exports) {
  exports.Set("grammarCheck", Napi::Function::New(env, grammar_check, "grammarCheck"));
#if SPINDLE_TEST_HOOKS
  exports.Set("grammarMatch", Napi::Function::New(env, grammar_match, "grammarMatch"));
#endif
}

}  // namespace spindle::napi
