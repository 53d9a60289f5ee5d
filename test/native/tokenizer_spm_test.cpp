// SentencePiece on a tiny vocabulary: score-ordered merges, leftmost ties, byte fallback, the "▁" space
// prefix (after BOS, at the start and after every special token), pieces and llama_detokenize's leading-space
// rule.
#include "harness.h"
#include "tokenizer_test_util.h"

using tok_test::ids_str;
using tok_test::k_spm_byte0;
using tok_test::k_spm_extra0;
using tok_test::spm_spec;
using ids = std::vector<int32_t>;

namespace {

const std::string S = "\xE2\x96\x81";  // ▁

// ids: 259 ▁hello, 260 ▁he, 261 ▁h, 262 ll, 263 o, 264 he, 265 llo, 266 ▁, 267 ab, 268 bc
tok_test::vocab_spec hello_spec() {
  return spm_spec({{S + "hello", -0.5f}, {S + "he", -1}, {S + "h", -2}, {"ll", -3}, {"o", -4}, {"he", -5},
                   {"llo", -6}, {S, -10}, {"ab", -1}, {"bc", -1}});
}

int32_t byte_id(uint8_t v) { return k_spm_byte0 + v; }

}  // namespace

TEST_CASE("tokenizer spm: merges follow scores and the space prefix") {
  auto t = tok_test::make(hello_spec());
  // ▁ h e l l o: ▁h (-2) -> ▁he (-1) -> ll (-3) -> llo (-6) -> ▁hello (-0.5)
  CHECK_EQ(ids_str(t->encode("hello", false, false)), ids_str({k_spm_extra0}));
  CHECK_EQ(ids_str(t->encode("he", false, false)), ids_str({k_spm_extra0 + 1}));
  CHECK_EQ(ids_str(t->encode("hello", true, false)), ids_str({1, k_spm_extra0}));
  CHECK_EQ(ids_str(t->encode("", true, false)), ids_str({1}));
  CHECK_EQ(ids_str(t->encode("", false, false)), ids_str({}));
  // spaces become ▁: "he he" -> ▁he ▁he
  CHECK_EQ(ids_str(t->encode("he he", false, false)), ids_str({k_spm_extra0 + 1, k_spm_extra0 + 1}));
}

TEST_CASE("tokenizer spm: equal scores merge leftmost first; the rest falls back to bytes") {
  auto spec = hello_spec();
  spec.add_space_prefix = false;
  auto t = tok_test::make(spec);
  // a b c: ab and bc both score -1; ab (left) wins, c is not a token -> <0x63>
  CHECK_EQ(ids_str(t->encode("abc", false, false)), ids_str({k_spm_extra0 + 8, byte_id('c')}));
  CHECK_EQ(ids_str(t->encode("he", false, false)), ids_str({k_spm_extra0 + 5}));  // no prefix: "he"
  // é is not a piece: its UTF-8 bytes
  CHECK_EQ(ids_str(t->encode("\xC3\xA9", false, false)), ids_str({byte_id(0xC3), byte_id(0xA9)}));
}

TEST_CASE("tokenizer spm: special tokens restart the space prefix") {
  auto t = tok_test::make(hello_spec());
  const int32_t he = k_spm_extra0 + 1;
  CHECK_EQ(ids_str(t->encode("<s>he", false, true)), ids_str({1, he}));
  CHECK_EQ(ids_str(t->encode("he</s>he", false, true)), ids_str({he, 2, he}));
  CHECK_EQ(ids_str(t->encode("<s>", true, true)), ids_str({1, 1}));
  // without parse_special, "<s>" is text: ▁ < s > -> byte tokens after the ▁ piece
  CHECK_EQ(ids_str(t->encode("<s>", false, false)),
           ids_str({k_spm_extra0 + 7, byte_id('<'), byte_id('s'), byte_id('>')}));
  CHECK_EQ(ids_str(t->encode("<unk>", false, true)), ids_str({0}));
}

TEST_CASE("tokenizer spm: pieces and the first-token space strip on decode") {
  auto t = tok_test::make(hello_spec());
  const int32_t hello = k_spm_extra0, sp = k_spm_extra0 + 7;
  CHECK_EQ(t->token_to_piece(hello, false), std::string(" hello"));
  CHECK_EQ(t->token_to_piece(byte_id('A'), false), std::string("A"));
  CHECK_EQ(t->token_to_piece(byte_id(0xE4), false), std::string("\xE4"));
  CHECK_EQ(t->token_to_piece(1, false), std::string());
  CHECK_EQ(t->token_to_piece(1, true), std::string("<s>"));
  CHECK_EQ(t->token_to_piece(0, true), std::string("<unk>"));
  CHECK_EQ(t->decode({hello}, false), std::string("hello"));           // leading space removed
  CHECK_EQ(t->decode({hello, hello}, false), std::string("hello hello"));
  CHECK_EQ(t->decode({sp, hello}, false), std::string(" hello"));      // only one space is stripped
  CHECK_EQ(t->decode({1, hello}, false), std::string("<s> hello"));    // BOS was the first token
  CHECK_EQ(t->decode({1, hello}, true), std::string(" hello"));
  CHECK_EQ(t->decode({byte_id(0xE4), byte_id(0xBD), byte_id(0xA0)}, false), std::string("\xE4\xBD\xA0"));
  CHECK_EQ(t->decode({}, false), std::string());
}

TEST_CASE("tokenizer spm: defaults and EOG") {
  auto spec = hello_spec();
  auto t = tok_test::make(spec);
  CHECK_EQ(t->bos_id(), 1);
  CHECK_EQ(t->eos_id(), 2);
  CHECK(t->add_bos());
  CHECK_EQ(ids_str(t->eog_ids()), ids_str({2}));  // </s> (EOS)
  CHECK(t->attr(0) == spindle::token_attr::unknown);
  CHECK(t->attr(byte_id(7)) == spindle::token_attr::byte);
  spec.add_bos = false;
  spec.add_eos = true;
  auto t2 = tok_test::make(spec);
  CHECK_EQ(ids_str(t2->encode("he", true, false)), ids_str({k_spm_extra0 + 1, 2}));
}

TEST_CASE("tokenizer spm: a byte with no token is an error, not a crash") {
  auto spec = spm_spec({});
  spec.tokens.resize(3 + 0x41);  // bytes 0x00..0x40 only
  spec.token_types.resize(spec.tokens.size());
  spec.scores.resize(spec.tokens.size());
  spec.add_space_prefix = false;
  auto t = tok_test::make(spec);
  CHECK_EQ(ids_str(t->encode("@", false, false)), ids_str({byte_id('@')}));
  CHECK_THROWS_WITH(t->encode("Z", false, false), "<0x5A>");
  CHECK_THROWS_WITH(t->encode(" ", false, false), "<0xE2>");  // ▁ (E2 96 81) has no piece and no byte tokens
}
