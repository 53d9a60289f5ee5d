// Byte-level BPE on tiny hand-made vocabularies: merge order by rank, ties, ignore_merges, byte fallback,
// special/user-defined token partitioning (with strip attributes), BOS/EOS, pieces and the clean-up passes.
#include "harness.h"
#include "tokenizer_test_util.h"

using tok_test::bpe_spec;
using tok_test::ids_str;
using tok_test::k_bpe_byte0;
using tok_test::k_bpe_extra0;
using ids = std::vector<int32_t>;

namespace {
int32_t b(char c) { return k_bpe_byte0 + static_cast<uint8_t>(c); }  // id of a single-byte token
}  // namespace

TEST_CASE("tokenizer bpe: the lowest-rank pair merges first") {
  // "hel": with e+l ranked first the word ends as h|el; with h+e first as he|l.
  auto t1 = tok_test::make(bpe_spec({"el", "he"}, {{"e", "l"}, {"h", "e"}}));
  CHECK_EQ(ids_str(t1->encode("hel", false, false)), ids_str({b('h'), k_bpe_extra0}));
  auto t2 = tok_test::make(bpe_spec({"el", "he"}, {{"h", "e"}, {"e", "l"}}));
  CHECK_EQ(ids_str(t2->encode("hel", false, false)), ids_str({k_bpe_extra0 + 1, b('l')}));
  // chains: h e l l o -> he ll o -> hell o -> hello
  auto t3 = tok_test::make(bpe_spec({"he", "ll", "hell", "hello"}, {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}));
  CHECK_EQ(ids_str(t3->encode("hello hell", false, false)),
           ids_str({k_bpe_extra0 + 3, b(' '), k_bpe_extra0 + 2}));  // " hell" has no Ġh merge: Ġ stays a byte
}

TEST_CASE("tokenizer bpe: equal ranks merge leftmost first") {
  auto t = tok_test::make(bpe_spec({"ll"}, {{"l", "l"}}));
  CHECK_EQ(ids_str(t->encode("lll", false, false)), ids_str({k_bpe_extra0, b('l')}));
  CHECK_EQ(ids_str(t->encode("llll", false, false)), ids_str({k_bpe_extra0, k_bpe_extra0}));
}

TEST_CASE("tokenizer bpe: ignore_merges takes a whole word that is a token") {
  auto llama3 = tok_test::make(bpe_spec({"xyz"}, {}, "llama-bpe"));
  CHECK_EQ(ids_str(llama3->encode("xyz", false, false)), ids_str({k_bpe_extra0}));
  auto gpt2 = tok_test::make(bpe_spec({"xyz"}, {}, "gpt-2"));
  CHECK_EQ(ids_str(gpt2->encode("xyz", false, false)), ids_str({b('x'), b('y'), b('z')}));
}

TEST_CASE("tokenizer bpe: a merged symbol that is not a token falls back to single-byte tokens") {
  auto t = tok_test::make(bpe_spec({}, {{"q", "q"}}));
  CHECK_EQ(ids_str(t->encode("qq", false, false)), ids_str({b('q'), b('q')}));
  // "é" is "Ã©" byte-level; merged but absent, its raw bytes are looked up one by one and none is a token,
  // so llama.cpp emits nothing for it. Unmerged, the two byte-level characters are tokens.
  auto merged = tok_test::make(bpe_spec({}, {{"\xC3", "\xA9"}}));
  CHECK_EQ(ids_str(merged->encode("\xC3\xA9", false, false)), ids_str({}));
  auto plain = tok_test::make(bpe_spec({}, {}));
  CHECK_EQ(ids_str(plain->encode("\xC3\xA9", false, false)), ids_str({b('\xC3'), b('\xA9')}));
  // ill-formed UTF-8 input becomes U+FFFD first (EF BF BD)
  CHECK_EQ(ids_str(plain->encode("\xFF", false, false)), ids_str({b('\xEF'), b('\xBF'), b('\xBD')}));
}

TEST_CASE("tokenizer bpe: special tokens need parse_special; user-defined ones never do") {
  auto t = tok_test::make(bpe_spec({}, {}));
  CHECK_EQ(ids_str(t->encode("a<|eot_id|>b", false, true)), ids_str({b('a'), 2, b('b')}));
  const ids plain = t->encode("<|eot_id|>", false, false);
  CHECK_EQ(plain.size(), size_t(10));  // ten single-byte tokens
  CHECK_EQ(plain[0], b('<'));
  CHECK_EQ(ids_str(t->encode("x<think>y", false, false)), ids_str({b('x'), 3, b('y')}));
  CHECK_EQ(ids_str(t->encode("<|begin_of_text|><|begin_of_text|>", false, true)), ids_str({0, 0}));
  CHECK_EQ(ids_str(t->encode("", false, true)), ids_str({}));
}

TEST_CASE("tokenizer bpe: longer special tokens are matched first") {
  auto spec = bpe_spec({}, {});
  spec.tokens.push_back("<|eot");
  spec.token_types.push_back(4);  // user-defined, shorter than <|eot_id|>
  auto t = tok_test::make(spec);
  const int32_t short_id = static_cast<int32_t>(spec.tokens.size()) - 1;
  CHECK_EQ(ids_str(t->encode("<|eot_id|><|eot", false, true)), ids_str({2, short_id}));
  const ids unparsed = t->encode("<|eot_id|>", false, false);  // the control token is off; "<|eot" is not
  REQUIRE(!unparsed.empty());
  CHECK_EQ(unparsed[0], short_id);
}

TEST_CASE("tokenizer bpe: BOS/EOS follow add_bos_token / add_eos_token") {
  auto spec = bpe_spec({}, {});
  auto t = tok_test::make(spec);  // llama-bpe: add_bos defaults to true, add_eos to false
  CHECK(t->add_bos());
  CHECK_EQ(ids_str(t->encode("a", true, false)), ids_str({0, b('a')}));
  CHECK_EQ(ids_str(t->encode("", true, false)), ids_str({0}));
  spec.add_bos = false;
  spec.add_eos = true;
  auto t2 = tok_test::make(spec);
  CHECK_EQ(ids_str(t2->encode("a", true, false)), ids_str({b('a'), 1}));
  CHECK_EQ(ids_str(t2->encode("a", false, false)), ids_str({b('a')}));
  auto q = bpe_spec({}, {}, "qwen2");  // qwen2 does not add BOS unless asked
  CHECK(!tok_test::make(q)->add_bos());
}

TEST_CASE("tokenizer bpe: ids, EOG set and attributes") {
  auto t = tok_test::make(bpe_spec({}, {}));
  CHECK_EQ(t->n_vocab(), 260);
  CHECK_EQ(t->bos_id(), 0);
  CHECK_EQ(t->eos_id(), 1);
  CHECK_EQ(ids_str(t->eog_ids()), ids_str({1, 2}));  // EOS and the text-detected <|eot_id|>
  CHECK(t->is_eog(2));
  CHECK(!t->is_eog(0));
  CHECK(!t->is_eog(-5));
  CHECK(t->attr(0) == spindle::token_attr::control);
  CHECK(t->attr(3) == spindle::token_attr::user_defined);
  CHECK(t->attr(b('a')) == spindle::token_attr::normal);
  CHECK_EQ(t->attr_flags(3), 16u);
  CHECK_EQ(t->token_text(b(' ')), std::string("\xC4\xA0"));
  CHECK_THROWS_WITH(t->attr(260), "outside the vocabulary");
}

TEST_CASE("tokenizer bpe: pieces decode the byte-level text") {
  auto spec = bpe_spec({"hello", " world"}, {});
  spec.tokens.push_back("\xE4\xBD\xA0");  // 你 as a NORMAL token: not in the byte map
  spec.token_types.push_back(1);
  auto t = tok_test::make(spec);
  CHECK_EQ(t->token_to_piece(b(' '), false), std::string(" "));
  CHECK_EQ(t->token_to_piece(k_bpe_extra0 + 1, false), std::string(" world"));
  CHECK_EQ(t->token_to_piece(b('\xE4'), false), std::string("\xE4"));  // one byte of a UTF-8 sequence
  CHECK_EQ(t->token_to_piece(2, false), std::string());
  CHECK_EQ(t->token_to_piece(2, true), std::string("<|eot_id|>"));
  CHECK_EQ(t->token_to_piece(3, false), std::string("<think>"));  // user-defined: always rendered
  CHECK_EQ(t->token_to_piece(262, true), std::string("[UNK_BYTE_0xe4bda0\xE4\xBD\xA0]"));  // llama.cpp's text
  CHECK_THROWS_WITH(t->token_to_piece(-1, true), "outside the vocabulary");
}

TEST_CASE("tokenizer bpe: decode applies llama.cpp's clean-up passes where the pre-tokenizer asks") {
  const auto bytes = [](const std::string& s) {
    ids out;
    for (char c : s) out.push_back(b(c));
    return out;
  };
  auto llama3 = tok_test::make(bpe_spec({}, {}, "llama-bpe"));  // clean_spaces on
  CHECK_EQ(llama3->decode(bytes("Hi , you ! ok ? yes ."), false), std::string("Hi, you! ok? yes."));
  CHECK_EQ(llama3->decode(bytes("x ' y"), false), std::string("x'y"));
  CHECK_EQ(llama3->decode(bytes("it 's I 'm we 're they 've"), false), std::string("it's I'm we're they've"));
  CHECK_EQ(llama3->decode(bytes("don 't I 'd we 'll"), false), std::string("don 't I 'd we 'll"));
  auto qwen = tok_test::make(bpe_spec({}, {}, "qwen2"));  // clean_spaces off
  CHECK_EQ(qwen->decode(bytes("Hi , it 's"), false), std::string("Hi , it 's"));
  ids with_special = {0, b('a'), 2};
  CHECK_EQ(llama3->decode(with_special, false), std::string("<|begin_of_text|>a<|eot_id|>"));
  CHECK_EQ(llama3->decode(with_special, true), std::string("a"));
  CHECK_THROWS_WITH(llama3->decode({b('a'), 999}, false), "999");
}

TEST_CASE("tokenizer bpe: rstrip (phi-3) and lstrip (jina) special tokens eat adjacent spaces") {
  auto phi = bpe_spec({}, {}, "gpt-2");
  for (const char* t : {"<unk>", "<s>", "</s>", "<|endoftext|>", "<|end|>"}) {
    phi.tokens.push_back(t);
    phi.token_types.push_back(3);
  }
  phi.general_name = "Phi-3 Mini";
  auto t = tok_test::make(phi);
  const int32_t end_id = 264, s_id = 261;
  CHECK_EQ(ids_str(t->encode("<|end|>  \n x", false, true)), ids_str({end_id, b('x')}));
  CHECK_EQ(ids_str(t->encode("<s> x", false, true)), ids_str({s_id, b(' '), b('x')}));  // rstrip cleared
  auto missing = bpe_spec({}, {}, "gpt-2");
  missing.general_name = "phi3-test";
  CHECK_THROWS_WITH(tok_test::make(missing), "</s>");

  auto jina = bpe_spec({}, {}, "jina-v2-es");
  jina.tokens.push_back("<mask>");
  jina.token_types.push_back(3);
  auto j = tok_test::make(jina);
  CHECK_EQ(ids_str(j->encode("a \t<mask> b", false, true)), ids_str({b('a'), 260, b(' '), b('b')}));
}
