// output_constraint: the logit mask (grammar tokens, end ids only where complete, forbidden ids), lazy
// triggers (anywhere / at the start only, split across tokens, carrying text after the trigger) and dead ends.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/output_constraint.h"
#include "harness.h"

using namespace spindle;

namespace {

// ids: 0 "" (an end token: EOG), 1 "a", 2 "b", 3 "<t>", 4 "<", 5 "t>", 6 "<t>a", 7 "x", 8 " ", 9 "<t>q"
std::vector<std::string> vocab() { return {"", "a", "b", "<t>", "<", "t>", "<t>a", "x", " ", "<t>q"}; }

std::shared_ptr<grammar_token_cache> cache_of(const char* gbnf) {
  auto tokens = std::make_shared<const std::vector<std::string>>(vocab());
  auto trie = std::make_shared<const vocab_trie>(vocab_trie_build(*tokens));
  return std::make_shared<grammar_token_cache>(std::make_shared<const grammar>(grammar_parse(gbnf)), trie, tokens);
}

std::vector<int32_t> allowed_after_apply(output_constraint& c, const std::vector<int32_t>& forbidden = {}) {
  std::vector<float> logits(vocab().size(), 1.0f);
  c.apply(logits.data(), int32_t(logits.size()), {0}, forbidden);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isinf(logits[i])) ids.push_back(int32_t(i));
  return ids;
}

}  // namespace

TEST_CASE("output_constraint: mask allows grammar tokens, the end id only when complete") {
  output_constraint c(cache_of("root ::= \"a\"+ \"b\""), {});
  REQUIRE(c.active());
  CHECK(allowed_after_apply(c) == std::vector<int32_t>{1});
  REQUIRE(c.advance(1, false));
  CHECK(allowed_after_apply(c) == std::vector<int32_t>({1, 2}));
  REQUIRE(c.advance(2, false));
  CHECK(c.complete());
  CHECK(allowed_after_apply(c) == std::vector<int32_t>{0});  // only the end token
  CHECK(allowed_after_apply(c, {0}).empty());                // min_tokens forbids it: nothing left
  CHECK(c.advance(0, true));
}

TEST_CASE("output_constraint: a token the grammar refuses is an error") {
  output_constraint c(cache_of("root ::= \"a\""), {});
  CHECK(!(c.advance(2, false)));
  CHECK(c.error().find("does not allow token 2") != std::string::npos);
}

TEST_CASE("output_constraint: lazy trigger anywhere, split across tokens") {
  output_constraint c(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", false}});
  CHECK(!(c.active()));
  REQUIRE(c.advance(7, false));  // "x": free text
  REQUIRE(c.advance(4, false));  // "<"
  CHECK(!(c.active()));
  REQUIRE(c.advance(5, false));  // "t>": completes the trigger
  REQUIRE(c.active());
  CHECK(!(c.complete()));
  CHECK(allowed_after_apply(c) == std::vector<int32_t>{1});
}

TEST_CASE("output_constraint: text after the trigger in the same token is fed to the grammar") {
  output_constraint ok(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", false}});
  REQUIRE(ok.advance(6, false));  // "<t>a"
  REQUIRE(ok.active());
  CHECK(ok.complete());
  output_constraint bad(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", false}});
  CHECK(!(bad.advance(9, false)));  // "<t>q": q cannot follow
  CHECK(bad.error().find("from its trigger on") != std::string::npos);
}

TEST_CASE("output_constraint: at-start triggers only after whitespace") {
  output_constraint late(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", true}});
  REQUIRE(late.advance(7, false));  // "x" first: the trigger no longer counts
  REQUIRE(late.advance(3, false));
  CHECK(!(late.active()));
  output_constraint early(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", true}});
  REQUIRE(early.advance(8, false));  // " "
  REQUIRE(early.advance(3, false));
  CHECK(early.active());
}

TEST_CASE("output_constraint: long free output keeps only a trigger-sized tail") {
  output_constraint c(cache_of("root ::= \"<t>\" \"a\"+"), {{"<t>", false}});
  for (int i = 0; i < 1000; ++i) REQUIRE(c.advance(i % 2 ? 7 : 1, false));
  CHECK(!(c.active()));
  REQUIRE(c.advance(3, false));
  CHECK(c.active());
}

namespace {

// ids: 0 "" (EOG), 1 "a", 2 "<t>" (the trigger), 3 "<r>" (thinking starts), 4 "</r>" (ends), 5 "x", 6 " ", 7 "</",
// 8 "r>", 9 "<", 10 "t>"
std::shared_ptr<grammar_token_cache> thinking_cache() {
  auto tokens = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"", "a", "<t>", "<r>", "</r>", "x", " ", "</", "r>", "<", "t>"});
  auto trie = std::make_shared<const vocab_trie>(vocab_trie_build(*tokens));
  return std::make_shared<grammar_token_cache>(std::make_shared<const grammar>(grammar_parse("root ::= \"<t>\" \"a\"+")), trie, tokens);
}

output_constraint thinking(bool in_block, bool at_start = false) {
  return output_constraint(thinking_cache(), {{"<t>", at_start}}, reasoning_block{"<r>", "</r>", in_block});
}

bool feed(output_constraint& c, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (!c.advance(id, false)) return false;
  return true;
}

}  // namespace

TEST_CASE("output_constraint: a lazy grammar looks for triggers only after the reasoning block") {
  output_constraint opened = thinking(true);  // the prompt opened the block
  REQUIRE(feed(opened, {5, 2, 5}));           // "x<t>x": a trigger while thinking starts nothing
  CHECK(!(opened.active()));
  REQUIRE(feed(opened, {7, 8, 6}));           // "</" "r>": the end tag across two tokens, then " "
  CHECK(!(opened.active()));
  REQUIRE(feed(opened, {2}));                 // "<t>" in the answer
  CHECK(opened.active());

  output_constraint own = thinking(false);   // the output's own block
  REQUIRE(feed(own, {6, 3, 2, 1, 4}));        // " <r><t>a</r>"
  CHECK(!(own.active()));
  REQUIRE(feed(own, {5, 2, 1}));
  CHECK(own.active());
  CHECK(own.complete());

  output_constraint none = thinking(false);  // no block: the answer from the first byte
  REQUIRE(feed(none, {5, 2}));
  CHECK(none.active());
  output_constraint cut = thinking(false);   // "<" could start "<r>": undecided until "t>" says otherwise
  REQUIRE(feed(cut, {9}));
  CHECK(!(cut.active()));
  REQUIRE(feed(cut, {10}));
  CHECK(cut.active());
  output_constraint same_token = thinking(true);  // the end tag and the trigger in one step's bytes
  REQUIRE(feed(same_token, {5}));
  REQUIRE(same_token.advance(4, false));
  REQUIRE(same_token.advance(2, false));
  CHECK(same_token.active());
}

TEST_CASE("output_constraint: an at-start trigger after reasoning is at the start of the answer") {
  output_constraint first = thinking(true, true);
  REQUIRE(feed(first, {5, 4, 6, 2}));  // "x</r> <t>": only whitespace before it in the answer
  CHECK(first.active());
  output_constraint later = thinking(true, true);
  REQUIRE(feed(later, {4, 5, 2}));     // "</r>x<t>": text before it
  CHECK(!(later.active()));
  output_constraint no_block = thinking(false, true);
  REQUIRE(feed(no_block, {6, 2}));     // " <t>"
  CHECK(no_block.active());
}

TEST_CASE("output_constraint: the reasoning gate skips whitespace as JavaScript's trimStart, and keeps none of it") {
  auto tokens = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"", "a", "<t>", "<r>", "</r>", "\xC2\xA0", "\xC2", "\xA0", "\xEF\xBB\xBF", " ", "x"});
  auto trie = std::make_shared<const vocab_trie>(vocab_trie_build(*tokens));
  auto cache = std::make_shared<grammar_token_cache>(std::make_shared<const grammar>(grammar_parse("root ::= \"<t>\" \"a\"+")), trie, tokens);
  auto gated = [&] { return output_constraint(cache, {{"<t>", false}}, reasoning_block{"<r>", "</r>", false}); };
  output_constraint nbsp = gated();  // U+00A0, then the block: its trigger counts for nothing
  for (int32_t id : {5, 3, 2}) REQUIRE(nbsp.advance(id, false));
  CHECK(!(nbsp.active()));
  REQUIRE(nbsp.advance(4, false));
  REQUIRE(nbsp.advance(2, false));
  CHECK(nbsp.active());
  output_constraint split = gated();  // U+00A0 across two tokens, then a BOM, then the block
  for (int32_t id : {6, 7, 8, 3, 2}) REQUIRE(split.advance(id, false));
  CHECK(!(split.active()));
  output_constraint spaces = gated();  // whitespace only, for long: nothing decided, then an answer with a trigger
  for (int i = 0; i < 1000; ++i) REQUIRE(spaces.advance(9, false));
  CHECK(!(spaces.active()));
  REQUIRE(spaces.advance(10, false));
  REQUIRE(spaces.advance(2, false));
  CHECK(spaces.active());
}
