// Vocabulary loading: GGUF round trip, every malformed-metadata rejection naming its key, llama.cpp's
// default special ids, text-detected EOT/FIM tokens, the EOG set and its workarounds, attribute overrides.
#include <functional>

#include "gguf/gguf_file.h"
#include "harness.h"
#include "tokenizer_test_util.h"

using tok_test::bpe_spec;
using tok_test::ids_str;
using tok_test::vocab_spec;
using T = spindle::gguf_value_type;

namespace {

std::unique_ptr<spindle::tokenizer> load(const std::vector<uint8_t>& bytes) {
  auto file = spindle::gguf_file::from_memory(bytes.data(), bytes.size(), "vocab.gguf");
  return spindle::tokenizer::from_gguf(*file);
}

std::unique_ptr<spindle::tokenizer> load(const vocab_spec& s) { return load(tok_test::to_gguf(s)); }

// A GGUF with model gpt2 and the given extra key/values written by `extra` (n_extra of them).
std::vector<uint8_t> raw_gguf(uint64_t n_extra, const std::function<void(gguf_test::writer&)>& extra) {
  gguf_test::writer w;
  w.bytes.reserve(4096);  // (also keeps GCC 12's -Wstringop-overflow false positive on vector::insert quiet)
  w.header(3, 0, 1 + n_extra);
  w.kv_str("tokenizer.ggml.model", "gpt2");
  extra(w);
  w.pad_to(32);
  return w.bytes;
}

// A vocabulary with the given texts (all NORMAL unless listed in `control`), merges empty.
vocab_spec texts_spec(const std::vector<std::string>& texts, const std::vector<size_t>& control = {}) {
  vocab_spec s;
  s.model = "gpt2";
  s.pre = "qwen2";
  s.tokens = texts;
  s.token_types.assign(texts.size(), 1);
  for (size_t i : control) s.token_types[i] = 3;
  s.merges.emplace();
  return s;
}

}  // namespace

TEST_CASE("tokenizer vocab: a GGUF vocabulary loads and encodes like the spec it came from") {
  auto spec = bpe_spec({"he", "ll"}, {{"h", "e"}, {"l", "l"}});
  auto from_file = load(spec);
  auto direct = tok_test::make(spec);
  CHECK_EQ(ids_str(from_file->encode("hello<|eot_id|>", true, true)), ids_str(direct->encode("hello<|eot_id|>", true, true)));
  CHECK_EQ(from_file->n_vocab(), 262);
  auto spm = tok_test::spm_spec({{"\xE2\x96\x81hi", -1}});
  spm.add_space_prefix = false;
  CHECK_EQ(ids_str(load(spm)->encode("hi", false, false)), ids_str({tok_test::k_spm_byte0 + 'h', tok_test::k_spm_byte0 + 'i'}));
}

TEST_CASE("tokenizer vocab: missing or mistyped keys are rejected by name") {
  gguf_test::writer empty;
  empty.header(3, 0, 0);
  empty.pad_to(32);
  CHECK_THROWS_WITH(load(empty.bytes), "tokenizer.ggml.model");
  CHECK_THROWS_WITH(load(raw_gguf(0, [](gguf_test::writer&) {})), "tokenizer.ggml.tokens: missing");
  CHECK_THROWS_WITH(load(raw_gguf(1, [](gguf_test::writer& w) { w.arr_of<int32_t>("tokenizer.ggml.tokens", T::INT32, {1, 2}); })),
                    "tokenizer.ggml.tokens: expected an array of strings, found array of i32");
  CHECK_THROWS_WITH(load(raw_gguf(2, [](gguf_test::writer& w) {
                      w.arr_str("tokenizer.ggml.tokens", {"a", "b"});
                      w.arr_of<uint8_t>("tokenizer.ggml.scores", T::UINT8, {1, 2});
                    })),
                    "tokenizer.ggml.scores: expected an array of FLOAT32 or INT32");
  CHECK_THROWS_WITH(load(raw_gguf(2, [](gguf_test::writer& w) {
                      w.arr_str("tokenizer.ggml.tokens", {"a", "b"});
                      w.arr_of<uint32_t>("tokenizer.ggml.token_type", T::UINT32, {1, 1});
                    })),
                    "tokenizer.ggml.token_type: expected an array of INT32");
  CHECK_THROWS_WITH(load(raw_gguf(2, [](gguf_test::writer& w) {
                      w.arr_str("tokenizer.ggml.tokens", {"a", "b"});
                      w.kv_str("tokenizer.ggml.merges", "a b");
                    })),
                    "tokenizer.ggml.merges");
  CHECK_THROWS_WITH(load(raw_gguf(3, [](gguf_test::writer& w) {
                      w.arr_str("tokenizer.ggml.tokens", {"a", "b"});
                      w.arr_str("tokenizer.ggml.merges", {});
                      w.kv_str("tokenizer.ggml.bos_token_id", "1");
                    })),
                    "tokenizer.ggml.bos_token_id");
  CHECK_THROWS_WITH(load(raw_gguf(1, [](gguf_test::writer& w) { w.arr_str("tokenizer.ggml.tokens", {"a"}); })),
                    "vocab.gguf");  // messages name the file
}

TEST_CASE("tokenizer vocab: inconsistent contents are rejected by key") {
  auto s = bpe_spec({}, {});
  s.model = "bert";
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.model: unsupported tokenizer model 'bert'");
  s = bpe_spec({}, {});
  s.pre = "deepseek-llm";
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.pre: unsupported pre-tokenizer 'deepseek-llm'");
  s = bpe_spec({}, {});
  s.merges.reset();
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.merges: missing");
  s = bpe_spec({}, {});
  s.merges->push_back("nospace");
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.merges[0] 'nospace'");
  s = bpe_spec({}, {});
  s.merges->push_back("a ");
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.merges[0]");
  s = tok_test::spm_spec({});
  s.scores.pop_back();
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.scores: 258 scores for 259 tokens");
  s = tok_test::spm_spec({});
  s.token_types.push_back(1);
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.token_type: 260 types for 259 tokens");
  s = tok_test::spm_spec({});
  s.token_types[5] = 9;
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.token_type[5] = 9");
  s = tok_test::spm_spec({{"x", 0}});
  s.token_types.back() = 6;
  CHECK_THROWS_WITH(load(s), "has token type BYTE but is not of the form <0xXX>");
  s = tok_test::spm_spec({{"dup", 0}, {"dup", 0}});
  CHECK_THROWS_WITH(load(s), "token 'dup' appears twice (ids 259 and 260)");
  s = tok_test::spm_spec({});
  s.special_ids["tokenizer.ggml.eos_token_id"] = 259;
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.eos_token_id = 259 is outside the vocabulary (259 tokens)");
  s = tok_test::spm_spec({});
  s.tokens.clear();
  s.scores.clear();
  s.token_types.clear();
  CHECK_THROWS_WITH(load(s), "tokenizer.ggml.tokens: the vocabulary is empty");
}

TEST_CASE("tokenizer vocab: default special ids as llama.cpp sets them") {
  auto s = texts_spec({"a", "b", "c"});  // BPE default BOS/EOS 11 is out of range -> none
  auto t = tok_test::make(s);
  CHECK_EQ(t->bos_id(), -1);
  CHECK_EQ(t->eos_id(), -1);
  CHECK(t->eog_ids().empty());
  std::vector<std::string> many;
  for (int i = 0; i < 20; ++i) many.push_back("t" + std::to_string(i));
  auto t2 = tok_test::make(texts_spec(many));  // in range: BOS = EOS = 11
  CHECK_EQ(t2->bos_id(), 11);
  CHECK_EQ(ids_str(t2->eog_ids()), ids_str({11}));
  auto glm = texts_spec(many);
  glm.pre = "chatglm-bpe";  // llama.cpp clears the default BOS for GLM
  CHECK_EQ(tok_test::make(glm)->bos_id(), -1);
  auto empty_text = texts_spec({"a", ""});
  CHECK_EQ(tok_test::make(empty_text)->token_text(1), std::string("[EMPTY_1]"));
}

TEST_CASE("tokenizer vocab: EOG set from EOS, EOT, FIM and text rules") {
  // Qwen-like: <|im_end|> is EOS; <|endoftext|>, the FIM pad/repo/sep tokens and a NORMAL </s> join the set
  auto s = texts_spec({"a", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|fim_pad|>", "<|repo_name|>",
                       "<|file_sep|>", "</s>", "<|fim_prefix|>", "<unused0>"},
                      {1, 2, 3, 4, 5, 6, 8, 9});
  s.special_ids["tokenizer.ggml.eos_token_id"] = 3;
  auto t = tok_test::make(s);
  CHECK_EQ(ids_str(t->eog_ids()), ids_str({1, 3, 4, 5, 6, 7}));
  CHECK(t->attr(7) == spindle::token_attr::control);    // </s> was NORMAL: overridden to control
  CHECK(t->attr(8) == spindle::token_attr::control);    // FIM prefix: control, not EOG
  CHECK(!t->is_eog(8));
  CHECK(t->attr(9) == spindle::token_attr::unused);     // a control token named "unused"
  CHECK_EQ(t->token_to_piece(7, false), std::string());  // now hidden like any control token
  // a NORMAL <|eot_id|> becomes the EOT and a control token
  auto e = tok_test::make(texts_spec({"x", "<|eot_id|>"}));
  CHECK_EQ(ids_str(e->eog_ids()), ids_str({1}));
  CHECK(e->attr(1) == spindle::token_attr::control);
}

TEST_CASE("tokenizer vocab: llama.cpp's EOG workarounds (harmony <|end|>, gemma </s>, gpt-oss tokens)") {
  auto harmony = tok_test::make(texts_spec({"<|return|>", "<|call|>", "<|end|>", "<|channel|>", "x"}, {0, 1, 2, 3}));
  CHECK_EQ(ids_str(harmony->eog_ids()), ids_str({0, 1}));
  CHECK(harmony->attr(2) == spindle::token_attr::user_defined);
  CHECK(harmony->attr(3) == spindle::token_attr::user_defined);  // always rendered
  CHECK_EQ(harmony->token_to_piece(3, false), std::string("<|channel|>"));
  auto plain_end = tok_test::make(texts_spec({"<|end|>", "x"}, {0}));
  CHECK_EQ(ids_str(plain_end->eog_ids()), ids_str({0}));
  auto gemma = tok_test::make(texts_spec({"<|tool_response>", "</s>", "x"}, {0, 1}));
  CHECK_EQ(ids_str(gemma->eog_ids()), ids_str({0}));
  CHECK(gemma->attr(1) == spindle::token_attr::normal);
  // an explicit EOT key outside the text rules still ends generation
  auto s = texts_spec({"a", "b", "<stop>"}, {2});
  s.special_ids["tokenizer.ggml.eot_token_id"] = 2;
  CHECK_EQ(ids_str(tok_test::make(s)->eog_ids()), ids_str({2}));
}
