// incremental_decoder: emits only complete UTF-8, holds split emoji/CJK bytes until they complete, replaces
// ill-formed bytes with U+FFFD (one per maximal subpart) and flushes an unfinished tail as U+FFFD.
#include "harness.h"
#include "tokenizer_test_util.h"

using tok_test::k_bpe_byte0;
using tok_test::k_spm_byte0;
using tok_test::k_spm_extra0;

namespace {

const std::string FFFD = "\xEF\xBF\xBD";

int32_t byte_id(uint8_t v) { return k_spm_byte0 + v; }

// Pushes each id and returns the chunks joined with '|' (empty chunks included).
std::string run(spindle::incremental_decoder& d, const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "|" : "") + d.push(ids[i]);
  return out;
}

std::unique_ptr<spindle::tokenizer> spm() {
  return tok_test::make(tok_test::spm_spec({{"\xE2\x96\x81hi", -1}}));  // 259 = ▁hi
}

}  // namespace

TEST_CASE("tokenizer decoder: a split emoji is held until its last byte") {
  auto t = spm();
  spindle::incremental_decoder d(*t, false);
  // 😀 = F0 9F 98 80
  CHECK_EQ(run(d, {byte_id(0xF0), byte_id(0x9F), byte_id(0x98), byte_id(0x80)}), std::string("|||\xF0\x9F\x98\x80"));
  CHECK_EQ(d.flush(), std::string());
  // 你 = E4 BD A0, then ASCII in the same push as the completion
  CHECK_EQ(run(d, {byte_id(0xE4), byte_id(0xBD), byte_id(0xA0), k_spm_extra0}), std::string("||\xE4\xBD\xA0| hi"));
  // ZWJ family: complete pieces pass through as they come
  const std::string fam = "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7";
  std::vector<int32_t> ids;
  for (char c : fam) ids.push_back(byte_id(static_cast<uint8_t>(c)));
  std::string joined;
  for (int32_t id : ids) joined += d.push(id);
  CHECK_EQ(joined, fam);
}

TEST_CASE("tokenizer decoder: ill-formed bytes become U+FFFD at once; a cut-off tail on flush") {
  auto t = spm();
  spindle::incremental_decoder d(*t, false);
  CHECK_EQ(d.push(byte_id(0xFF)), FFFD);
  CHECK_EQ(d.push(byte_id(0x80)), FFFD);                                 // stray continuation byte
  CHECK_EQ(run(d, {byte_id(0xE4), k_spm_extra0}), std::string("|") + FFFD + " hi");  // E4 then ASCII
  CHECK_EQ(run(d, {byte_id(0xF0), byte_id('A')}), std::string("|") + FFFD + "A");    // F0 needs 90..BF next
  CHECK_EQ(run(d, {byte_id(0xED), byte_id(0xA0), byte_id(0x80)}),                  // a surrogate: 3 subparts
           std::string("|") + FFFD + FFFD + "|" + FFFD);
  CHECK_EQ(run(d, {byte_id(0xE4), byte_id(0xBD)}), std::string("|"));
  CHECK_EQ(d.flush(), FFFD);   // E4 BD is one maximal subpart
  CHECK_EQ(d.flush(), std::string());
  CHECK_EQ(run(d, {byte_id(0xC0), byte_id(0xAF)}), FFFD + "|" + FFFD);       // overlong lead C0
}

TEST_CASE("tokenizer decoder: special tokens follow skip_special") {
  auto t = spm();
  spindle::incremental_decoder shown(*t, false);
  CHECK_EQ(run(shown, {1, k_spm_extra0, 2}), std::string("<s>| hi|</s>"));
  spindle::incremental_decoder hidden(*t, true);
  CHECK_EQ(run(hidden, {1, k_spm_extra0, 2}), std::string("| hi|"));
  CHECK_THROWS_WITH(hidden.push(100000), "outside the vocabulary");
}

TEST_CASE("tokenizer decoder: byte-level BPE pieces split inside a character") {
  auto t = tok_test::make(tok_test::bpe_spec({}, {}));
  spindle::incremental_decoder d(*t, true);
  // é = C3 A9 as two byte-level tokens
  CHECK_EQ(run(d, {k_bpe_byte0 + 0xC3, k_bpe_byte0 + 0xA9, k_bpe_byte0 + '!'}), std::string("|\xC3\xA9|!"));
  CHECK_EQ(run(d, {0, k_bpe_byte0 + 'x'}), std::string("|x"));  // <|begin_of_text|> skipped
}
