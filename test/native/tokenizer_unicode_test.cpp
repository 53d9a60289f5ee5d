// Unicode helpers: category flags from the generated tables, the lenient decoder llama.cpp tokenizes with,
// GPT-2's byte mapping, and the ASCII-target lowercase used by the contraction rules.
#include "harness.h"
#include "tokenizer/unicode.h"

namespace u = spindle::unicode;

TEST_CASE("tokenizer unicode: category flags of sample code points") {
  CHECK_EQ(u::flags('A'), u::LETTER);
  CHECK_EQ(u::flags('7'), u::NUMBER);
  CHECK_EQ(u::flags(' '), u::SEPARATOR | u::WHITESPACE);
  CHECK_EQ(u::flags('\n'), u::CONTROL | u::WHITESPACE);
  CHECK_EQ(u::flags('!'), u::PUNCTUATION);
  CHECK_EQ(u::flags('$'), u::SYMBOL);
  CHECK_EQ(u::flags('`'), u::SYMBOL);
  CHECK_EQ(u::flags(0x85), u::CONTROL | u::WHITESPACE);     // NEL
  CHECK_EQ(u::flags(0xA0), u::SEPARATOR | u::WHITESPACE);   // NBSP
  CHECK_EQ(u::flags(0x3000), u::SEPARATOR | u::WHITESPACE); // ideographic space
  CHECK_EQ(u::flags(0x200B), u::CONTROL);                   // zero width space is Cf, not White_Space
  CHECK_EQ(u::flags(0x200D), u::CONTROL);                   // ZWJ (Cf)
  CHECK_EQ(u::flags(0x4F60), u::LETTER);                    // 你
  CHECK_EQ(u::flags(0x0645), u::LETTER);                    // Arabic meem
  CHECK_EQ(u::flags(0x0301), u::MARK);                      // combining acute
  CHECK_EQ(u::flags(0x0663), u::NUMBER);                    // Arabic-Indic three
  CHECK_EQ(u::flags(0x00B2), u::NUMBER);                    // superscript two (No)
  CHECK_EQ(u::flags(0x1F600), u::SYMBOL);                   // 😀
  CHECK_EQ(u::flags(0xE000), u::CONTROL);                   // private use (Co)
  CHECK_EQ(u::flags(0xD800), u::CONTROL);                   // surrogate (Cs)
  CHECK_EQ(u::flags(0x0378), u::UNDEFINED);                 // unassigned
  CHECK_EQ(u::flags(0x10FFFF), u::UNDEFINED);               // noncharacter, unassigned
  CHECK_EQ(u::flags(0x110000), u::UNDEFINED);               // past the last code point
  CHECK_EQ(u::flags(0xFFFFFFFF), u::UNDEFINED);
}

TEST_CASE("tokenizer unicode: tables are sorted and start at 0") {
  REQUIRE(u::k_n_category_runs > 100);
  CHECK_EQ(u::k_category_runs[0].start, 0u);
  bool sorted = true;
  for (size_t i = 1; i < u::k_n_category_runs; ++i) {
    sorted = sorted && u::k_category_runs[i - 1].start < u::k_category_runs[i].start &&
             u::k_category_runs[i - 1].flag != u::k_category_runs[i].flag;
  }
  CHECK(sorted);
  CHECK_EQ(u::k_n_whitespace, 25u);  // the Unicode White_Space property
}

TEST_CASE("tokenizer unicode: tolower_ascii folds only into ASCII") {
  CHECK_EQ(u::tolower_ascii('S'), uint32_t('s'));
  CHECK_EQ(u::tolower_ascii('s'), uint32_t('s'));
  CHECK_EQ(u::tolower_ascii(0x212A), uint32_t('k'));  // KELVIN SIGN
  CHECK_EQ(u::tolower_ascii(0x0130), uint32_t('i'));  // I WITH DOT ABOVE (simple mapping)
  CHECK_EQ(u::tolower_ascii(0x00C9), 0x00C9u);        // É folds outside ASCII: unchanged
  CHECK_EQ(u::tolower_ascii('\''), uint32_t('\''));
}

TEST_CASE("tokenizer unicode: lenient UTF-8 decoding replaces each bad byte") {
  using v = std::vector<uint32_t>;
  CHECK(u::decode_utf8("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80") == (v{'a', 0xE9, 0x4F60, 0x1F600}));
  CHECK(u::decode_utf8("\x80x") == (v{0xFFFD, 'x'}));               // stray continuation
  CHECK(u::decode_utf8("\xE4\xBDx") == (v{0xFFFD, 0xFFFD, 'x'}));   // truncated: lead and continuation each
  CHECK(u::decode_utf8("\xF0\x9F\x98") == (v{0xFFFD, 0xFFFD, 0xFFFD}));
  CHECK(u::decode_utf8("\xFFz") == (v{0xFFFD, 'z'}));
  CHECK(u::decode_utf8("\xED\xA0\x80") == (v{0xD800}));             // surrogates decode (as llama.cpp's)
  CHECK(u::decode_utf8("\xF7\xBF\xBF\xBF") == (v{0xFFFD}));         // past 0x10FFFF
  CHECK(u::decode_utf8(std::string_view("\0a", 2)) == (v{0, 'a'}));
  CHECK(u::decode_utf8("").empty());
}

TEST_CASE("tokenizer unicode: GPT-2 byte mapping round-trips all 256 bytes") {
  CHECK_EQ(u::byte_to_utf8('a'), std::string("a"));
  CHECK_EQ(u::byte_to_utf8(' '), std::string("\xC4\xA0"));   // Ġ U+0120
  CHECK_EQ(u::byte_to_utf8('\n'), std::string("\xC4\x8A"));  // Ċ U+010A
  CHECK_EQ(u::byte_to_utf8(0xAD), std::string("\xC5\x83"));  // Ń U+0143, the last remapped byte
  CHECK_EQ(u::byte_to_utf8(0xFF), std::string("\xC3\xBF"));  // ÿ maps to itself
  int round_trips = 0;
  for (int b = 0; b < 256; ++b) {
    std::vector<uint32_t> cpts = u::decode_utf8(u::byte_to_utf8(static_cast<uint8_t>(b)));
    if (cpts.size() == 1 && u::utf8_to_byte(cpts[0]) == b) ++round_trips;
  }
  CHECK_EQ(round_trips, 256);
  CHECK_EQ(u::utf8_to_byte(0x4F60), -1);
  CHECK_EQ(u::utf8_to_byte(0x144), -1);  // just past the mapped range
}
