// A GBNF grammar (llama.cpp's syntax) compiled into rules over Unicode code points.
// Invariant: every rule is a run of alternatives in `elems`, each alternative a sequence of rule_ref /
// char_class elements closed by alt_end, the last alternative followed by rule_end; every rule_ref names a
// defined rule, and no rule reaches itself without consuming a code point (left recursion is refused by
// grammar_parse), so expanding a parse stack always terminates.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spindle {

enum class gram_elem_type : uint8_t { alt_end, rule_end, rule_ref, char_class };

struct gram_elem {
  gram_elem_type type;
  uint32_t value;  // rule id for rule_ref, class id for char_class, 0 otherwise
};

struct gram_char_class {
  bool negated = false;                               // `[^...]`; `.` is a negated class with no ranges
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // sorted, merged, inclusive code point ranges

  bool contains(uint32_t cp) const;
  bool intersects(uint32_t lo, uint32_t hi) const;  // some code point in [lo, hi] is in the class
};

struct grammar {
  std::vector<gram_elem> elems;            // all rules, back to back
  std::vector<uint32_t> rule_start;        // [n_rules] index of each rule's first element in elems
  std::vector<std::string> rule_names;     // [n_rules] user names; generated rules are `<rule>_<n>`
  std::vector<gram_char_class> classes;
  uint32_t root = 0;                       // rule id of `root`
};

// Parses GBNF text. Throws spindle::error naming the line and column of the first problem.
grammar grammar_parse(const std::string& text);

// A rule that can reach itself without consuming a code point, or UINT32_MAX if there is none.
uint32_t grammar_left_recursive_rule(const grammar& g);

}  // namespace spindle
