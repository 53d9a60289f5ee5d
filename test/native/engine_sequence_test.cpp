// Per-token postprocessing: stop ids, minTokens, stop strings across tokens, length, ignoreEos.
#include "engine/sequence.h"
#include "engine_fakes.h"
#include "harness.h"

using namespace spindle;
using engine_test::fake_tokenizer;

namespace {

struct run_result {
  std::vector<int32_t> tokens;
  std::string text;
  finish_reason finish = finish_reason::none;
  std::string stop_string;
  int32_t stop_token = -1;
};

// Feeds `tokens` until the sequence finishes.
run_result feed(const fake_tokenizer& tok, sampling_params p, const std::vector<int32_t>& tokens,
                int32_t max_model_len = 100) {
  request r;
  r.id = 1;
  r.prompt = {0};
  r.params = std::move(p);
  sequence seq(std::move(r), tok, tok.n_vocab(), max_model_len);
  run_result res;
  for (int32_t t : tokens) {
    request_output out;
    seq.append(t, out);
    res.tokens.insert(res.tokens.end(), out.tokens.begin(), out.tokens.end());
    res.text += out.text;
    if (seq.finished()) {
      res.finish = seq.finish;
      res.stop_string = out.stop_string;
      res.stop_token = out.stop_token;
      break;
    }
  }
  return res;
}

}  // namespace

TEST_CASE("sequence: EOG stops, its text is not emitted, its id is reported") {
  fake_tokenizer tok({"a", "b", "c"});
  const int32_t a = tok.id_of("a"), b = tok.id_of("b");
  auto r = feed(tok, {}, {a, b, 2, a});
  CHECK(r.finish == finish_reason::stop);
  CHECK_EQ(r.text, std::string("ab"));
  CHECK_EQ(r.stop_token, 2);
  CHECK_EQ(r.tokens.size(), size_t(3));
}

TEST_CASE("sequence: ignoreEos generates through EOG; stopTokenIds still stop") {
  fake_tokenizer tok({"a", "b"});
  const int32_t a = tok.id_of("a"), b = tok.id_of("b");
  sampling_params p;
  p.ignore_eos = true;
  p.max_tokens = 4;
  auto r = feed(tok, p, {a, 1, a, a, a});
  CHECK(r.finish == finish_reason::length);
  CHECK_EQ(r.tokens.size(), size_t(4));
  CHECK_EQ(r.text, std::string("aaa"));
  p.stop_token_ids = {b};
  auto s = feed(tok, p, {a, b, a});
  CHECK(s.finish == finish_reason::stop);
  CHECK_EQ(s.stop_token, b);
  CHECK_EQ(s.text, std::string("a"));
}

TEST_CASE("sequence: a stop string spread over tokens ends the text before it") {
  fake_tokenizer tok({"he", "llo", " ST", "O", "P", "!"});
  sampling_params p;
  p.stop = {"STOP"};
  auto r = feed(tok, p, {tok.id_of("he"), tok.id_of("llo"), tok.id_of(" ST"), tok.id_of("O"), tok.id_of("P"),
                         tok.id_of("!")});
  CHECK(r.finish == finish_reason::stop);
  CHECK_EQ(r.text, std::string("hello "));
  CHECK_EQ(r.stop_string, std::string("STOP"));
  CHECK_EQ(r.tokens.size(), size_t(5));
}

TEST_CASE("sequence: held text is released when the sequence ends for another reason") {
  fake_tokenizer tok({"x", "S", "T"});
  sampling_params p;
  p.stop = {"STOP"};
  p.max_tokens = 3;
  auto r = feed(tok, p, {tok.id_of("x"), tok.id_of("S"), tok.id_of("T")});
  CHECK(r.finish == finish_reason::length);
  CHECK_EQ(r.text, std::string("xST"));
  auto e = feed(tok, p, {tok.id_of("S"), 1});
  CHECK(e.finish == finish_reason::stop);
  CHECK_EQ(e.text, std::string("S"));
}

TEST_CASE("sequence: minTokens ignores EOG and stop strings before N tokens") {
  fake_tokenizer tok({"a", "Z"});
  const int32_t a = tok.id_of("a"), z = tok.id_of("Z");
  sampling_params p;
  p.min_tokens = 3;
  p.stop = {"Z"};
  auto r = feed(tok, p, {z, a, z, a});
  CHECK(r.finish == finish_reason::stop);
  CHECK_EQ(r.text, std::string("Za"));  // the third token reaches minTokens and matches
  CHECK_EQ(r.stop_string, std::string("Z"));
}

TEST_CASE("sequence: minTokens masks EOG and stop ids in sampling") {
  fake_tokenizer tok({"a", "b"});
  sampling_params p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {tok.id_of("b")};
  request r;
  r.prompt = {0};
  r.params = p;
  sequence seq(std::move(r), tok, tok.n_vocab(), 100);
  std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
  logits[1] = 9.0f;                  // EOS
  logits[size_t(tok.id_of("b"))] = 8.0f;  // stop id
  logits[size_t(tok.id_of("a"))] = 1.0f;
  request_output out;
  for (int i = 0; i < 2; ++i) {
    std::vector<float> l = logits;
    seq.sample_and_append(l.data(), out);
  }
  CHECK(!seq.finished());
  CHECK(out.tokens == std::vector<int32_t>({tok.id_of("a"), tok.id_of("a")}));
  std::vector<float> l = logits;
  seq.sample_and_append(l.data(), out);
  CHECK(seq.finished());
  CHECK_EQ(out.stop_token, 1);
}

TEST_CASE("sequence: output is capped by maxTokens and by the context room") {
  fake_tokenizer tok({"a"});
  const int32_t a = tok.id_of("a");
  sampling_params p;
  p.max_tokens = 50;
  auto r = feed(tok, p, std::vector<int32_t>(60, a), /*max_model_len=*/5);
  CHECK(r.finish == finish_reason::length);
  CHECK_EQ(r.tokens.size(), size_t(4));  // prompt 1 + 4 = 5
  request q;
  q.prompt = {0, a};
  q.params.max_tokens = 3;
  sequence seq(std::move(q), tok, tok.n_vocab(), 100);
  CHECK_EQ(seq.kv_capacity(), int64_t(4));
}

TEST_CASE("sequence: logprobs come from the raw logits, one record per token") {
  fake_tokenizer tok({"a", "b"});
  sampling_params p;
  p.temperature = 0;
  p.logprobs = 2;
  p.repetition_penalty = 2.0f;
  request r;
  r.prompt = {tok.id_of("a")};
  r.params = p;
  sequence seq(std::move(r), tok, tok.n_vocab(), 100);
  std::vector<float> logits(size_t(tok.n_vocab()), 0.0f);
  logits[size_t(tok.id_of("a"))] = 3.0f;
  logits[size_t(tok.id_of("b"))] = 2.0f;
  request_output out;
  seq.sample_and_append(logits.data(), out);
  CHECK(out.tokens == std::vector<int32_t>({tok.id_of("b")}));  // a penalized to 1.5
  REQUIRE(out.logprobs.size() == 1);
  CHECK_EQ(out.logprobs[0].rank, 2);                      // rank among the raw logits
  CHECK_EQ(out.logprobs[0].top_ids[0], tok.id_of("a"));
}
