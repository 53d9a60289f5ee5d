// A sequence under a grammar: sampling follows the mask, EOG comes only where the grammar is complete, a
// complete grammar with nothing else allowed ends the request (stop), a grammar no token can continue ends it
// with an error naming the dead end; nothing loops.
#include <cmath>
#include <memory>
#include <vector>

#include "engine/grammar_vocab.h"
#include "engine/sequence.h"
#include "engine_fakes.h"
#include "harness.h"

using namespace spindle;
using engine_test::fake_tokenizer;

namespace {

struct grammar_run {
  std::string text;
  std::vector<int32_t> tokens;
  finish_reason finish = finish_reason::none;
  std::string error;
};

// Samples greedily from logits that favour `favourite` (then the lowest id) until the sequence finishes.
grammar_run run(const fake_tokenizer& tok, const char* gbnf, int32_t favourite, sampling_params p = {}) {
  grammar_vocab vocab(tok, tok.n_vocab());
  p.temperature = 0;
  p.grammar = gbnf;
  request r;
  r.id = 1;
  r.prompt = {0};
  r.params = p;
  auto g = std::make_shared<const grammar>(grammar_parse(gbnf));
  auto c = std::make_unique<output_constraint>(vocab.cache_for(gbnf, g, false), p.grammar_triggers);
  sequence seq(std::move(r), tok, tok.n_vocab(), 64, std::move(c));
  grammar_run res;
  for (int step = 0; step < 60 && !seq.finished(); ++step) {
    std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
    logits[size_t(favourite)] = 5.0f;
    request_output out;
    seq.sample_and_append(logits.data(), out);
    res.text += out.text;
    res.tokens.insert(res.tokens.end(), out.tokens.begin(), out.tokens.end());
    res.error += out.error;
  }
  res.finish = seq.finish;
  return res;
}

}  // namespace

TEST_CASE("sequence grammar: the mask overrides the logits; EOG only once complete") {
  fake_tokenizer tok({"a", "b", "c"});
  // The model wants EOG (id 1) all the time; the grammar needs "ab" first.
  grammar_run r = run(tok, "root ::= \"a\" \"b\"", 1);
  CHECK_EQ(r.text, std::string("ab"));
  CHECK(r.finish == finish_reason::stop);
  CHECK(r.tokens.size() == 3);  // a, b, EOG
  CHECK(r.error.empty());
}

TEST_CASE("sequence grammar: complete with nothing allowed (EOG held back by minTokens) ends as stop") {
  fake_tokenizer tok({"a", "b", "c"});
  sampling_params p;
  p.min_tokens = 10;
  grammar_run r = run(tok, "root ::= \"a\"", tok.id_of("c"), p);
  CHECK_EQ(r.text, std::string("a"));
  CHECK(r.finish == finish_reason::stop);
  CHECK(r.error.empty());
}

TEST_CASE("sequence grammar: a dead end ends the request with an error naming it") {
  fake_tokenizer tok({"a", "b", "c"});
  grammar_run r = run(tok, "root ::= \"a\" \"x\"", tok.id_of("c"));  // no token spells "x"
  CHECK_EQ(r.text, std::string("a"));
  CHECK(r.finish == finish_reason::abort);
  CHECK(r.error.find("dead end") != std::string::npos);
}

TEST_CASE("sequence grammar: a lazy grammar leaves text free until its trigger") {
  fake_tokenizer tok({"a", "b", "c"});
  sampling_params p;
  p.grammar_triggers = {{"b", false}};
  p.max_tokens = 6;
  // Free: the model's favourite "c" repeats; the grammar never triggers.
  grammar_run free_run = run(tok, "root ::= \"b\" \"a\"", tok.id_of("c"), p);
  CHECK_EQ(free_run.text, std::string("cccccc"));
  CHECK(free_run.finish == finish_reason::length);
  // Favouring "b": the trigger fires, then the grammar forces "a" and the end.
  grammar_run triggered = run(tok, "root ::= \"b\" \"a\"", tok.id_of("b"), p);
  CHECK_EQ(triggered.text, std::string("ba"));
  CHECK(triggered.finish == finish_reason::stop);
}
