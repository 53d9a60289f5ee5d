// Pre-tokenizer word boundaries on tricky strings, for llama3 (llama-bpe), qwen2, gpt-2 and the default rule
// list. Expected splits follow llama.cpp's unicode_regex_split (they agree with the HF regexes on these).
#include <string>
#include <vector>

#include "harness.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using words = std::vector<std::string>;

words split(const std::string& pre, const std::string& text) {
  std::vector<uint32_t> cpts = spindle::unicode::decode_utf8(text);
  std::vector<size_t> offs = spindle::tok::split_offsets(cpts, spindle::tok::pre_tokenizer_for(pre).rules);
  words out;
  size_t start = 0;
  for (size_t len : offs) {
    std::string w;
    for (size_t i = start; i < start + len; ++i) spindle::unicode::append_utf8(w, cpts[i]);
    out.push_back(w);
    start += len;
  }
  return out;
}

std::string show(const words& w) {
  std::string s = "[";
  for (size_t i = 0; i < w.size(); ++i) s += (i ? "|" : "") + w[i];
  return s + "]";
}

#define CHECK_SPLIT(pre, text, ...) CHECK_EQ(show(split(pre, text)), show(words{__VA_ARGS__}))

}  // namespace

TEST_CASE("tokenizer pretok: llama3 words, numbers, contractions") {
  CHECK_SPLIT("llama-bpe", "Hello world", "Hello", " world");
  CHECK_SPLIT("llama-bpe", "I'm DON'T", "I", "'m", " DON", "'T");
  CHECK_SPLIT("llama-bpe", "you're we've they'll", "you", "'re", " we", "'ve", " they", "'ll");
  CHECK_SPLIT("llama-bpe", "1234567", "123", "456", "7");
  CHECK_SPLIT("llama-bpe", "3.14159", "3", ".", "141", "59");
  CHECK_SPLIT("llama-bpe", "x1y22z", "x", "1", "y", "22", "z");
  CHECK_SPLIT("llama-bpe", "\xC4\xB0's", "\xC4\xB0", "'s");     // İ is a letter; 's stays a contraction
  CHECK_SPLIT("llama-bpe", "'\xE2\x84\xAA", "'\xE2\x84\xAA");    // KELVIN SIGN folds to k: not a contraction
}

TEST_CASE("tokenizer pretok: llama3 whitespace runs") {
  CHECK_SPLIT("llama-bpe", "   Hello  world  ", "  ", " Hello", " ", " world", "  ");
  CHECK_SPLIT("llama-bpe", "a\t\tb", "a", "\t", "\tb");
  CHECK_SPLIT("llama-bpe", "a  \r\n  b", "a", "  \r\n", " ", " b");
  CHECK_SPLIT("llama-bpe", "\n\n\n", "\n\n\n");
  CHECK_SPLIT("llama-bpe", "x ", "x", " ");
  CHECK_SPLIT("llama-bpe", "end.\n", "end", ".\n");
  CHECK_SPLIT("llama-bpe", "a\xC2\xA0" "b", "a", "\xC2\xA0" "b");      // NBSP is \s but also [^\r\n\p{L}\p{N}]
  CHECK_SPLIT("llama-bpe", "  !!  ??", " ", " !!", " ", " ??");
}

TEST_CASE("tokenizer pretok: llama3 scripts, emoji, marks") {
  CHECK_SPLIT("llama-bpe", "\xE4\xBD\xA0\xE5\xA5\xBD \xE4\xB8\x96\xE7\x95\x8C", "\xE4\xBD\xA0\xE5\xA5\xBD",
              " \xE4\xB8\x96\xE7\x95\x8C");                                 // 你好 世界
  // 👩‍👩‍👧: symbols joined by ZWJ (a format control) form one "other" run
  CHECK_SPLIT("llama-bpe", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 x",
              "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7", " x");
  CHECK_SPLIT("llama-bpe", "e\xCC\x81te", "e", "\xCC\x81te");               // a mark breaks the letter run
  CHECK_SPLIT("llama-bpe", "\xD9\x85\xD8\xB1 \xD8\xAD", "\xD9\x85\xD8\xB1", " \xD8\xAD");  // Arabic
  CHECK_SPLIT("llama-bpe", "foo_bar(x)", "foo", "_bar", "(x", ")");
  CHECK_SPLIT("llama-bpe", "<|im_start|>user", "<|", "im", "_start", "|>", "user");
}

TEST_CASE("tokenizer pretok: qwen2 splits every digit") {
  CHECK_SPLIT("qwen2", "1234 x", "1", "2", "3", "4", " x");
  CHECK_SPLIT("qwen2", "3.14", "3", ".", "1", "4");
  CHECK_SPLIT("qwen2", "I'M here", "I", "'M", " here");
  CHECK_SPLIT("qwen2", "a  \n\n b", "a", "  \n\n", " b");
}

TEST_CASE("tokenizer pretok: gpt2 rules are case-sensitive and keep space prefixes") {
  CHECK_SPLIT("gpt-2", "I'm DON'T", "I", "'m", " DON", "'", "T");
  CHECK_SPLIT("gpt-2", "abc 12345 x", "abc", " 12345", " x");
  CHECK_SPLIT("gpt-2", "a   b", "a", "  ", " b");
  CHECK_SPLIT("gpt-2", "a\t\tb", "a", "\t", "\t", "b");   // llama.cpp's trailing \s+ rule, one tab at a time
  CHECK_SPLIT("gpt-2", "hi!!  ", "hi", "!!", "  ");
  CHECK_SPLIT("gpt-2", " ", " ");
}

TEST_CASE("tokenizer pretok: default rule list (punctuation runs, gpt2, numbers, triples)") {
  CHECK_SPLIT("", "Hi, you!! 123456 x", "Hi", ",", " you", "!!", " ", "123", "456", " x");
  CHECK_SPLIT("default", "a$+b", "a", "$+", "b");
  CHECK_SPLIT("default", "a`b", "a", "`", "b");                  // ` is not in the first class; gpt2 splits it
  CHECK_SPLIT("default", "12345", "123", "45");
  CHECK_SPLIT("default", "x\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6", "x", "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6");  // ٣٤٥٦
}

TEST_CASE("tokenizer pretok: unsupported pre-tokenizer names are rejected") {
  CHECK_THROWS_WITH(spindle::tok::pre_tokenizer_for("deepseek-llm"), "tokenizer.ggml.pre");
  CHECK_THROWS_WITH(spindle::tok::pre_tokenizer_for("nonsense"), "nonsense");
  CHECK(spindle::tok::pre_tokenizer_for("qwen2").clean_spaces == false);
  CHECK(spindle::tok::pre_tokenizer_for("llama-bpe").ignore_merges);
  CHECK(spindle::tok::pre_tokenizer_for("llama-bpe").force_add_bos);
}

// tekken as llama.cpp's std::regex runs it on collapsed text (the tokenizer conformance test checks these against
// llama.cpp itself): an upper run then a lower one, a letter >= 128 counting as both cases (so "ÉCOLE" splits after
// its first letter: U* backs off to the longest prefix followed by a "lowercase" letter), single digits, no
// contractions, [\r\n/]* after a symbol run, a mark (no letter) as the prefix of the word after it.
TEST_CASE("tokenizer pretok: tekken case-split words") {
  CHECK_SPLIT("tekken", "Hello World", "Hello", " World");
  CHECK_SPLIT("tekken", "HELLO world", "HELLO", " world");
  CHECK_SPLIT("tekken", "HelloWorld", "Hello", "World");
  CHECK_SPLIT("tekken", "camelCaseABCdef", "camel", "Case", "ABCdef");
  CHECK_SPLIT("tekken", "ÉCOLE école", "É", "COLE", " école");
  CHECK_SPLIT("tekken", "I'm DON'T", "I", "'m", " DON", "'T");
  CHECK_SPLIT("tekken", "x1234y", "x", "1", "2", "3", "4", "y");
  CHECK_SPLIT("tekken", "a+/\n/b", "a", "+/\n/", "b");
  CHECK_SPLIT("tekken", "e\xcc\x81t", "e", "\xcc\x81t");  // e + combining acute: no letter, so the next word's prefix
  CHECK_SPLIT("tekken", "a  \n\n b", "a", "  \n\n", " b");
  CHECK_SPLIT("tekken", "end   ", "end", "   ");
  CHECK(spindle::tok::pre_tokenizer_for("tekken").ignore_merges);
  CHECK(spindle::tok::pre_tokenizer_for("tekken").force_add_bos);
  CHECK(!spindle::tok::pre_tokenizer_for("tekken").clean_spaces);
}
