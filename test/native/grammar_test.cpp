// Grammar parser and matcher tests: GBNF errors carry line and column, a JSON grammar accepts valid and
// rejects invalid text fed in arbitrary byte chunks, repetition bounds hold, UTF-8 is matched per code point
// even when a character is split across calls, and left recursion is refused.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "harness.h"

using namespace spindle;

static const char* json_gbnf = R"(# JSON, roughly as llama.cpp's json.gbnf
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value   # newlines are fine inside parentheses
             ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
)";

static grammar_matcher make(const char* text) {
  return grammar_matcher(std::make_shared<const grammar>(grammar_parse(text)));
}

// Feeds s in random chunks; returns false at the first rejected chunk, else whether the result is complete.
static bool feed_chunks(grammar_matcher m, const std::string& s, std::mt19937& rng, bool* rejected = nullptr) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = std::min(s.size() - i, size_t(1 + rng() % 5));
    if (!m.accept_bytes(s.data() + i, n)) {
      if (rejected) *rejected = true;
      return false;
    }
    i += n;
  }
  if (rejected) *rejected = false;
  return m.is_complete();
}

TEST_CASE("grammar: parse errors name line and column") {
  CHECK_THROWS_WITH(grammar_parse("root ::= foo\n"), "line 1, column 10: unknown rule 'foo'");
  CHECK_THROWS_WITH(grammar_parse("a ::= \"x\"\n"), "no 'root' rule");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"abc\n"), "line 1, column 10: unterminated string literal");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\\qb\""), "line 1, column 12: bad escape '\\q'");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"\\x4g\""), "line 1, column 11: bad escape: expected 2 hex digits");
  CHECK_THROWS_WITH(grammar_parse("root ::= x\n\nx ::= [a-z"), "line 3, column 7: unterminated character class");
  CHECK_THROWS_WITH(grammar_parse("root ::= [z-a]"), "line 1, column 11: character range is reversed");
  CHECK_THROWS_WITH(grammar_parse("root ::= (\"a\" | \"b\""), "line 1, column 10: unclosed '('");
  CHECK_THROWS_WITH(grammar_parse("root ::= * \"a\""), "line 1, column 10: '*' has nothing before it");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\"{3,2}"), "line 1, column 13: repetition maximum is below");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\"{2"), "expected '}'");
  CHECK_THROWS_WITH(grammar_parse("root \"a\""), "line 1, column 6: expected '::='");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\"{10001}"), "repetition bound above 10000");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"" + std::string(500, 'a') + "\"{10000}"), "grammar too large");
  CHECK_THROWS_WITH(grammar_parse(""), "line 1, column 1: grammar has no 'root' rule");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\"\nroot ::= \"b\""), "line 2, column 1: rule 'root' is defined twice");
  CHECK_THROWS_WITH(grammar_parse("root ::= \"a\" )"), "line 1, column 14: unexpected ')'");
}

TEST_CASE("grammar: left recursion is refused, right recursion is fine") {
  CHECK_THROWS_WITH(grammar_parse("root ::= root \"a\" | \"a\""), "left recursion: rule 'root'");
  CHECK_THROWS_WITH(grammar_parse("root ::= x \"a\"\nx ::= \"b\"? root"), "line 1, column 1: left recursion");
  CHECK_THROWS_WITH(grammar_parse("root ::= (\"a\"?)*"), "left recursion");
  grammar_matcher m = make("root ::= \"a\" root | \"b\"");
  CHECK(m.accept_string("aaaa"));
  CHECK(!m.is_complete());
  CHECK(m.accept_string("b"));
  CHECK(m.is_complete());
  CHECK(!m.accept_string("a"));
}

TEST_CASE("grammar: JSON accepts valid text in any chunking") {
  grammar_matcher m = make(json_gbnf);
  std::mt19937 rng(7);
  const char* valid[] = {
      "{}", "[]", "0", "-12.5e+3", "true", " null ", "\"\"", "\"a\\\"b\\\\c\\u00e9\\n\"",
      "{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\"}", "[ \"h\xc3\xa9llo \xe4\xb8\xad \xf0\x9f\x98\x80\" ]",
      "{\n  \"k\": [true, false],\n  \"n\": -0.5E-2\n}"};
  for (const char* s : valid)
    for (int rep = 0; rep < 8; ++rep) CHECK(feed_chunks(m, s, rng));
}

TEST_CASE("grammar: JSON rejects invalid text") {
  grammar_matcher m = make(json_gbnf);
  std::mt19937 rng(11);
  const char* rejected[] = {"{\"a\":}", "[1,]", "01", "{\"a\" 1}", "\"a\nb\"", "\"\\x\"", "nul1", "[1 2]",
                            "\"\\u12g4\"", "{,}", "\"\xff\"", "\"\x80\""};
  for (const char* s : rejected) {
    bool was_rejected = false;
    CHECK(!feed_chunks(m, s, rng, &was_rejected));
    CHECK(was_rejected);
  }
  const char* incomplete[] = {"{", "[1,", "\"abc", "tru", "-", "1.", "\"\\u00e"};
  for (const char* s : incomplete) {
    bool was_rejected = true;
    CHECK(!feed_chunks(m, s, rng, &was_rejected));
    CHECK(!was_rejected);
  }
}

TEST_CASE("grammar: a rejected chunk leaves the state unchanged") {
  grammar_matcher m = make(json_gbnf);
  CHECK(m.accept_string("{\"a\": "));
  CHECK(!m.accept_string("1}x"));  // the first two bytes would fit; the chunk as a whole does not
  CHECK(!m.accept_string("}"));
  CHECK(m.accept_string("[1]"));
  CHECK(!m.is_complete());
  grammar_matcher copy = m;  // test a token on a copy without committing
  CHECK(copy.accept_string("}"));
  CHECK(copy.is_complete());
  CHECK(!m.is_complete());
  CHECK(m.accept_string(" }"));
  CHECK(m.is_complete());
}

TEST_CASE("grammar: repetition bounds") {
  struct tc { const char* gbnf; const char* text; bool complete; bool accepted; };
  const tc cases[] = {
      {"root ::= \"a\"{2,4}", "a", false, true},     {"root ::= \"a\"{2,4}", "aa", true, true},
      {"root ::= \"a\"{2,4}", "aaaa", true, true},   {"root ::= \"a\"{2,4}", "aaaaa", false, false},
      {"root ::= \"ab\"{3}", "ababab", true, true},  {"root ::= \"ab\"{3}", "abab", false, true},
      {"root ::= \"ab\"{3}", "abababa", false, false}, {"root ::= [0-9]{2,}", "1", false, true},
      {"root ::= [0-9]{2,}", "1234567", true, true}, {"root ::= [0-9]{0,2} \"x\"", "x", true, true},
      {"root ::= [0-9]{0,2} \"x\"", "12x", true, true}, {"root ::= [0-9]{0,2} \"x\"", "123x", false, false},
      {"root ::= (\"a\" | \"b\")+ \"c\"?", "abba", true, true}, {"root ::= (\"a\" | \"b\")+", "", false, true},
      {"root ::= \"a\"{ 0 , 0 } \"b\"", "b", true, true}, {"root ::= \"a\"{ 0 , 0 } \"b\"", "ab", false, false},
  };
  for (const tc& c : cases) {
    grammar_matcher m = make(c.gbnf);
    bool ok = m.accept_string(c.text);
    CHECK_EQ(ok, c.accepted);
    if (ok) CHECK_EQ(m.is_complete(), c.complete);
  }
}

TEST_CASE("grammar: negated classes and UTF-8 split across calls") {
  const std::string text = "<\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80x>";  // <é中😀x>
  grammar_matcher m = make("root ::= \"<\" [^>]* \">\"");
  for (char c : text) REQUIRE(m.accept_bytes(&c, 1));
  CHECK(m.is_complete());

  grammar_matcher one = make("root ::= [^\\u00e9]");
  CHECK(one.accept_string("\xc3"));     // could still become ê
  CHECK(!one.is_complete());            // inside a character
  CHECK(!one.accept_string("\xa9"));    // é
  CHECK(one.accept_string("\xaa"));     // ê
  CHECK(one.is_complete());

  grammar_matcher ascii = make("root ::= [a-z\\u00e9]+");
  CHECK(!ascii.accept_string("\xe4"));  // no 3-byte character is in the class
  CHECK(ascii.accept_string("\xc3"));
  CHECK(!ascii.accept_string("\xaa"));
  CHECK(ascii.accept_string("\xa9" "abc"));
  CHECK(ascii.is_complete());

  grammar_matcher any = make("root ::= . .");
  CHECK(!any.accept_string("\xff"));
  CHECK(!any.accept_string("\x80"));
  CHECK(!any.accept_string("\xc0\x80"));    // overlong
  CHECK(!any.accept_string("\xed\xa0\x80"));  // surrogate
  CHECK(any.accept_string("\xf0\x9f"));
  CHECK(any.accept_string("\x98\x80" "\xe4"));
  CHECK(!any.is_complete());
  CHECK(any.accept_string("\xb8\xad"));
  CHECK(any.is_complete());
}

TEST_CASE("grammar: a user rule named like a generated one stays separate") {
  grammar_matcher m = make("root ::= (\"a\" | \"b\") root_1\nroot_1 ::= \"z\"");
  CHECK(!m.accept_string("aa"));
  CHECK(m.accept_string("bz"));
  CHECK(m.is_complete());
}

TEST_CASE("grammar: long ambiguous input keeps the stack set small") {
  grammar_matcher m = make("root ::= ( ws item ws )*\nitem ::= \"a\" | \"a\" \"b\"? | [a-b]\nws ::= \" \"* \" \"?");
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i % 3 == 0) ? "a  " : (i % 3 == 1) ? "ab " : "b";
  for (size_t i = 0; i < text.size(); i += 7) REQUIRE(m.accept_string(text.substr(i, 7)));
  CHECK(m.is_complete());
  CHECK(m.state().tops.size() < 16);
  CHECK(m.state().arena.nodes.size() < 64);

  std::string chain = "root ::= \"<\"";  // 40 nullable rules with two nullable alternatives each: 2^40 paths
  for (int i = 0; i < 40; ++i) chain += " a";
  grammar_matcher c = make((chain + " \">\"\na ::= \"x\"? | \"y\"?").c_str());
  REQUIRE(c.accept_string("<xyx"));
  REQUIRE(c.accept_string(">"));
  CHECK(c.is_complete());

  grammar_matcher j = make(json_gbnf);
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += "{\"k\": [";
  REQUIRE(j.accept_string(deep + "1"));
  for (int i = 0; i < 500; ++i) REQUIRE(j.accept_string("]}"));
  CHECK(j.is_complete());
  CHECK(j.state().tops.size() < 16);
}

TEST_CASE("grammar: errors are spindle::error") {
  bool caught = false;
  try {
    grammar_parse("root ::= [");
  } catch (const spindle::error&) {
    caught = true;
  }
  CHECK(caught);
}

TEST_CASE("grammar: literal escapes and comments") {
  grammar_matcher m = make("root ::= \"\\x41\\u00e9\\t\\\"\\\\\" # trailing comment\n# a comment line\n");
  CHECK(m.accept_string("A\xc3\xa9\t\"\\"));
  CHECK(m.is_complete());
  grammar_matcher u = make("root ::= [\\U0001F600-\\U0001F64F]");
  CHECK(u.accept_string("\xf0\x9f\x98\x80"));
  CHECK(u.is_complete());
}
