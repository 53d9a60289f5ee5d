// Stop-string matcher tests: matches across piece boundaries, partial matches held back, never leaked.
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "harness.h"

using namespace spindle;

TEST_CASE("stop: a stop string split over pieces is matched and never emitted") {
  stop_checker s({"STOP"});
  std::string out;
  out += s.push("hel");
  out += s.push("lo S");
  CHECK_EQ(out, std::string("hello "));  // "S" held
  out += s.push("TO");
  CHECK_EQ(out, std::string("hello "));  // "STO" held
  CHECK(!s.stopped());
  out += s.push("P wor");
  CHECK(s.stopped());
  CHECK_EQ(out, std::string("hello "));
  CHECK_EQ(s.matched_string(), std::string("STOP"));
  CHECK_EQ(s.push("more"), std::string(""));
  CHECK_EQ(s.flush(), std::string(""));
}

TEST_CASE("stop: a partial match is held, then released when it cannot match") {
  stop_checker s({"abc"});
  CHECK_EQ(s.push("xa"), std::string("x"));
  CHECK_EQ(s.held_bytes(), size_t(1));
  CHECK_EQ(s.push("b"), std::string(""));
  CHECK_EQ(s.push("d"), std::string("abd"));
  CHECK_EQ(s.push("ab"), std::string(""));
  CHECK_EQ(s.flush(), std::string("ab"));  // end of stream: the held text was never a stop string
  CHECK(!s.stopped());
}

TEST_CASE("stop: the earliest match wins among several stop strings") {
  stop_checker s({"world", "lo w", "o"});
  CHECK_EQ(s.push("hello world"), std::string("hel"));
  CHECK_EQ(s.matched_string(), std::string("lo w"));
  stop_checker t({"cd", "bcd"});
  CHECK_EQ(t.push("abcde"), std::string("a"));
  CHECK_EQ(t.matched_string(), std::string("bcd"));
}

TEST_CASE("stop: multibyte stop strings are held whole") {
  stop_checker s({"\xE2\x80\x94" "END"});  // "—END"
  CHECK_EQ(s.push("a\xE2\x80\x94"), std::string("a"));
  CHECK_EQ(s.push("EN"), std::string(""));
  CHECK_EQ(s.push("D!"), std::string(""));
  CHECK(s.stopped());
}

// Reference: the text before the first occurrence of any stop string (all of it when none occurs).
static std::string reference_cut(const std::string& text, const std::vector<std::string>& stops, bool* matched) {
  size_t best = std::string::npos;
  for (const auto& s : stops) best = std::min(best, text.find(s));
  *matched = best != std::string::npos;
  return *matched ? text.substr(0, best) : text;
}

TEST_CASE("stop: random texts and random splits agree with the reference and never leak") {
  sampler_rng rng(42);
  const std::vector<std::string> stops = {"aba", "bb", "cab"};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text;
    const int len = 1 + int(rng.next() % 30);
    for (int i = 0; i < len; ++i) text += char('a' + rng.next() % 3);
    bool matched = false;
    const std::string expect = reference_cut(text, stops, &matched);
    stop_checker s(stops);
    std::string out;
    size_t pos = 0;
    while (pos < text.size() && !s.stopped()) {
      size_t n = 1 + rng.next() % 4;
      out += s.push(text.substr(pos, n));
      pos += n;
      // Whatever is emitted so far is a prefix of the final answer: nothing is ever taken back.
      REQUIRE(expect.compare(0, out.size(), out) == 0);
    }
    out += s.flush();
    CHECK_EQ(out, expect);
    CHECK_EQ(s.stopped(), matched);
  }
}
