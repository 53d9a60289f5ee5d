// Token mask tests: the trie walk and the adaptive per-position cache (grammar_token_cache) mark exactly the
// tokens a brute-force check (each token fed to a copy of the matcher) accepts, for many matcher states; a
// rough timing over ~30k synthetic tokens is printed.
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar.h"
#include "engine/grammar_mask.h"
#include "engine/grammar_matcher.h"
#include "engine/grammar_token_cache.h"
#include "harness.h"

using namespace spindle;

static const char* json_gbnf = R"(root ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* )? ws "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]*
)";

static std::vector<std::string> random_tokens(size_t n, size_t max_len, uint32_t seed) {
  static const std::vector<std::string> pieces = {
      "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "\\", "u", "0", "1", "9", "-", ".", "e", "a", "b", "n",
      "t", "r", "l", "s", "f", "x", "\xc3", "\xa9", "\xc3\xa9", "\xe4\xb8\xad", "\xe4", "\xb8", "\xf0\x9f\x98\x80",
      "\xff", "true", "null", "\": ", "\"}"};
  std::mt19937 rng(seed);
  std::vector<std::string> out(n);
  for (std::string& t : out) {
    size_t len = 1 + rng() % max_len;
    while (t.size() < len) t += pieces[rng() % pieces.size()];
  }
  out[0] = "";  // an empty (special) token is never allowed
  return out;
}

static std::vector<uint8_t> brute_mask(const grammar_matcher& m, const std::vector<std::string>& tokens) {
  std::vector<uint8_t> allowed(tokens.size(), 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].empty()) continue;
    grammar_matcher copy = m;
    allowed[i] = copy.accept_string(tokens[i]) ? 1 : 0;
  }
  return allowed;
}

static std::string printable(const std::string& s) {
  std::string out;
  char buf[8];
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) { out += char(c); continue; }
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  }
  return out;
}

static const char* prefixes[] = {"", "{", "{\"a", "{\"a\": [1", "{\"a\": \"\\u00", "[\"\xc3", "[\"\xf0\x9f",
                                 "[tr", "{\"k\": -0.", "[1, 2, {\"x\": null}", "\"\\"};

TEST_CASE("grammar mask: trie walk equals brute force") {
  auto g = std::make_shared<const grammar>(grammar_parse(json_gbnf));
  std::vector<std::string> tokens = random_tokens(400, 4, 3);
  tokens.push_back(tokens[5]);  // a duplicate token
  vocab_trie trie = vocab_trie_build(tokens);
  for (const char* prefix : prefixes) {
    grammar_matcher m(g);
    REQUIRE(m.accept_string(prefix));
    std::vector<uint8_t> mask;
    token_mask(m, trie, mask);
    std::vector<uint8_t> expect = brute_mask(m, tokens);
    REQUIRE(mask.size() == expect.size());
    size_t n_allowed = 0, n_diff = 0;
    for (size_t i = 0; i < mask.size(); ++i) {
      n_allowed += mask[i];
      n_diff += mask[i] != expect[i];
    }
    CHECK_EQ(n_diff, size_t(0));
    CHECK(n_allowed > 0);
    CHECK_EQ(int(mask[0]), 0);
  }
}

// Random walks: at each step the mask must equal brute force; then a random allowed token is taken.
static void check_random_walks(const char* gbnf, const std::vector<std::string>& tokens, uint32_t seed) {
  auto g = std::make_shared<const grammar>(grammar_parse(gbnf));
  vocab_trie trie = vocab_trie_build(tokens);
  grammar_token_cache cache(g, std::make_shared<const vocab_trie>(trie),
                            std::make_shared<const std::vector<std::string>>(tokens));
  std::mt19937 rng(seed);
  size_t n_steps = 0, n_diff = 0, n_cache_diff = 0;
  std::vector<uint64_t> cached;
  for (int walk = 0; walk < 6; ++walk) {
    grammar_matcher m(g);
    for (int step = 0; step < 40; ++step, ++n_steps) {
      std::vector<uint8_t> mask;
      token_mask(m, trie, mask);
      cache.mask(m.state(), cached);
      std::vector<uint8_t> expect = brute_mask(m, tokens);
      std::vector<size_t> allowed;
      for (size_t i = 0; i < mask.size(); ++i) {
        n_diff += mask[i] != expect[i];
        n_cache_diff += token_bitset_test(cached, int32_t(i)) != bool(expect[i]);
        if (mask[i]) allowed.push_back(i);
      }
      if (allowed.empty()) break;
      REQUIRE(m.accept_string(tokens[allowed[rng() % allowed.size()]]));
    }
  }
  CHECK_EQ(n_diff, size_t(0));
  CHECK_EQ(n_cache_diff, size_t(0));
  CHECK(cache.positions_cached() > 0);
  CHECK(n_steps > 40);
}

TEST_CASE("grammar mask: random walks match brute force (JSON)") {
  check_random_walks(json_gbnf, random_tokens(300, 4, 9), 1);
}

TEST_CASE("grammar mask: random walks match brute force (ambiguous, nullable)") {
  const char* gbnf = "root ::= item+ ( \".\" | \"\" )\n"
                     "item ::= ( [a-c\\u00e9]{1,3} | \"ab\"? \"c\" | [^a-z.] ) ws\n"
                     "ws   ::= \" \"?\n";
  std::vector<std::string> tokens = {"", "a", "b", "c", "ab", "abc", "cc", " ", " a", ".", "a.", "\xc3", "\xa9",
                                     "\xc3\xa9", "\xc3\xa9" "a", "x", "\xe4\xb8\xad", "\xe4", "\xb8\xad", "0", "ca b"};
  std::vector<std::string> more = random_tokens(200, 3, 4);
  tokens.insert(tokens.end(), more.begin() + 1, more.end());
  check_random_walks(gbnf, tokens, 2);
}

TEST_CASE("grammar mask: timing over 30k synthetic tokens (printed, not asserted)") {
  auto g = std::make_shared<const grammar>(grammar_parse(json_gbnf));
  std::vector<std::string> tokens = random_tokens(30000, 8, 5);
  auto t0 = std::chrono::steady_clock::now();
  vocab_trie trie = vocab_trie_build(tokens);
  double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  trie: %zu tokens, %zu nodes, built in %.2f ms\n", tokens.size(), trie.nodes.size(), build_ms);
  auto trie_ptr = std::make_shared<const vocab_trie>(trie);
  auto tokens_ptr = std::make_shared<const std::vector<std::string>>(tokens);
  for (const char* prefix : prefixes) {
    grammar_matcher m(g);
    REQUIRE(m.accept_string(prefix));
    std::vector<uint8_t> mask;
    const int reps = 20;
    auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) token_mask(m, trie, mask);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count() / reps;
    size_t n_allowed = 0;
    for (uint8_t a : mask) n_allowed += a;
    grammar_token_cache cache(g, trie_ptr, tokens_ptr);
    std::vector<uint64_t> bits;
    auto t2 = std::chrono::steady_clock::now();
    cache.mask(m.state(), bits);  // first use: classifies the state's positions
    double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t2).count();
    auto t3 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) cache.mask(m.state(), bits);
    double cached_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t3).count() / reps;
    std::printf("  mask after %-22s walk %8.3f ms, cache first %8.3f ms, cached %8.3f ms  (%zu allowed)\n",
                ("'" + printable(prefix) + "'").c_str(), ms, first_ms, cached_ms, n_allowed);
  }
}
