// GBNF text -> grammar (see grammar.h).
// Invariant: the parser only ever appends; every error is a spindle::error carrying the line and column
// (1-based, columns in bytes) of the offending text, and nothing is returned until the whole grammar has been
// checked (undefined rules, missing root, left recursion).
#include <algorithm>
#include <map>

#include "common/error.h"
#include "engine/grammar.h"

namespace spindle {

namespace {

constexpr uint32_t max_repetition = 10000;         // bound on m and n in {m,n}: each copy is grammar memory
constexpr size_t max_repeated_elems = size_t(1) << 22;  // bound on all elements made by repetition

struct parser {
  const std::string& src;
  size_t pos = 0;
  std::vector<std::vector<gram_elem>> rules;  // alternatives closed by alt_end, no rule_end yet
  std::vector<std::string> names;
  std::vector<size_t> rule_pos;               // where each rule is defined (or first referenced)
  std::vector<bool> defined;
  std::vector<bool> generated;                // made for a group or a repetition, not named by the user
  std::map<std::string, uint32_t> ids;
  std::vector<gram_char_class> classes;
  uint32_t n_generated = 0;
  size_t n_repeated = 0;  // elements made by repetition so far

  explicit parser(const std::string& text) : src(text) {}

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src.size(); ++i) {
      if (src[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    throw error("grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  bool eof() const { return pos >= src.size(); }
  char peek() const { return eof() ? '\0' : src[pos]; }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space(bool newline_ok) {
    while (!eof()) {
      char c = src[pos];
      if (c == '#') {
        while (!eof() && src[pos] != '\n' && src[pos] != '\r') ++pos;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
        ++pos;
      } else {
        break;
      }
    }
  }

  uint32_t add_rule(const std::string& name, size_t at, bool is_generated) {
    rules.emplace_back();
    names.push_back(name);
    rule_pos.push_back(at);
    defined.push_back(is_generated);
    generated.push_back(is_generated);
    return uint32_t(rules.size() - 1);
  }

  uint32_t rule_id(const std::string& name, size_t at) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    return ids[name] = add_rule(name, at, false);
  }

  // Generated rules are not in `ids`, so a user rule that happens to be called `<rule>_<n>` stays separate.
  uint32_t new_rule(const std::string& base, size_t at) {
    return add_rule(base + "_" + std::to_string(++n_generated), at, true);
  }

  uint32_t add_class(gram_char_class c) {
    std::sort(c.ranges.begin(), c.ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (const auto& r : c.ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    c.ranges = std::move(merged);
    classes.push_back(std::move(c));
    return uint32_t(classes.size() - 1);
  }

  uint32_t parse_hex(size_t digits, size_t esc_at) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      char c = peek();
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) fail(esc_at, "bad escape: expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(d);
      ++pos;
    }
    if (v > 0x10FFFF) fail(esc_at, "bad escape: code point above U+10FFFF");
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  uint32_t parse_char() {
    size_t at = pos;
    unsigned char c = uint8_t(src[pos++]);
    if (c == '\\') {
      if (eof()) fail(at, "bad escape at end of input");
      char e = src[pos++];
      switch (e) {
        case 'x': return parse_hex(2, at);
        case 'u': return parse_hex(4, at);
        case 'U': return parse_hex(8, at);
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': return uint32_t(e);
        default: fail(at, std::string("bad escape '\\") + e + "'");
      }
    }
    if (c < 0x80) return c;
    size_t len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (c >= 0xF5) len = 0;
    if (len == 0 || at + len > src.size()) fail(at, "invalid UTF-8 in grammar text");
    uint32_t cp = c & (0xFF >> (len + 1));
    for (size_t i = 1; i < len; ++i) {
      unsigned char b = uint8_t(src[pos++]);
      if ((b & 0xC0) != 0x80) fail(at, "invalid UTF-8 in grammar text");
      cp = (cp << 6) | (b & 0x3F);
    }
    return cp;
  }

  void parse_literal(std::vector<gram_elem>& out) {
    size_t start = pos++;
    while (peek() != '"') {
      if (eof() || peek() == '\n' || peek() == '\r') fail(start, "unterminated string literal");
      gram_char_class c;
      uint32_t cp = parse_char();
      c.ranges.push_back({cp, cp});
      out.push_back({gram_elem_type::char_class, add_class(std::move(c))});
    }
    ++pos;
  }

  void parse_class(std::vector<gram_elem>& out) {
    size_t start = pos++;
    gram_char_class c;
    if (peek() == '^') { c.negated = true; ++pos; }
    while (peek() != ']') {
      if (eof() || peek() == '\n' || peek() == '\r') fail(start, "unterminated character class");
      size_t item_at = pos;
      uint32_t lo = parse_char(), hi = lo;
      if (peek() == '-' && pos + 1 < src.size() && src[pos + 1] != ']') {
        ++pos;
        if (peek() == '\n' || peek() == '\r') fail(start, "unterminated character class");
        hi = parse_char();
        if (hi < lo) fail(item_at, "character range is reversed");
      }
      c.ranges.push_back({lo, hi});
    }
    ++pos;
    out.push_back({gram_elem_type::char_class, add_class(std::move(c))});
  }

  uint32_t parse_count(size_t brace_at) {
    if (!(peek() >= '0' && peek() <= '9')) fail(pos, "expected a number in '{...}'");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > max_repetition) fail(brace_at, "repetition bound above " + std::to_string(max_repetition));
      ++pos;
    }
    return uint32_t(v);
  }

  // Replaces out[sym_start..] (one symbol) by min copies then up to (max - min) optional ones
  // (max == UINT32_MAX: any number, as a right-recursive rule).
  void repeat(std::vector<gram_elem>& out, size_t sym_start, uint32_t min, uint32_t max,
              const std::string& base, size_t at) {
    std::vector<gram_elem> sym(out.begin() + long(sym_start), out.end());
    out.resize(sym_start);
    n_repeated += sym.size() * (size_t(min) + (max == UINT32_MAX ? 1 : size_t(max - min)));
    if (n_repeated > max_repeated_elems) fail(at, "grammar too large: repetitions expand past 4M elements");
    for (uint32_t i = 0; i < min; ++i) out.insert(out.end(), sym.begin(), sym.end());
    if (max == UINT32_MAX) {
      uint32_t r = new_rule(base, at);  // r ::= sym r | ""
      rules[r] = sym;
      rules[r].push_back({gram_elem_type::rule_ref, r});
      rules[r].push_back({gram_elem_type::alt_end, 0});
      rules[r].push_back({gram_elem_type::alt_end, 0});
      out.push_back({gram_elem_type::rule_ref, r});
      return;
    }
    uint32_t inner = UINT32_MAX;
    for (uint32_t i = min; i < max; ++i) {  // innermost first: r ::= sym inner | ""
      uint32_t r = new_rule(base, at);
      rules[r] = sym;
      if (inner != UINT32_MAX) rules[r].push_back({gram_elem_type::rule_ref, inner});
      rules[r].push_back({gram_elem_type::alt_end, 0});
      rules[r].push_back({gram_elem_type::alt_end, 0});
      inner = r;
    }
    if (inner != UINT32_MAX) out.push_back({gram_elem_type::rule_ref, inner});
  }

  void parse_braces(std::vector<gram_elem>& out, size_t sym_start, const std::string& base) {
    size_t at = pos++;
    skip_space(true);
    uint32_t min = parse_count(at), max = min;
    skip_space(true);
    if (peek() == ',') {
      ++pos;
      skip_space(true);
      max = (peek() >= '0' && peek() <= '9') ? parse_count(at) : UINT32_MAX;
      skip_space(true);
    }
    if (peek() != '}') fail(pos, "expected '}' to close repetition");
    ++pos;
    if (max < min) fail(at, "repetition maximum is below its minimum");
    repeat(out, sym_start, min, max, base, at);
  }

  void parse_sequence(const std::string& base, std::vector<gram_elem>& out, bool nested) {
    size_t sym_start = SIZE_MAX;
    for (;;) {
      char c = peek();
      size_t at = pos;
      if (c == '"') {
        sym_start = out.size();
        parse_literal(out);
      } else if (c == '[') {
        sym_start = out.size();
        parse_class(out);
      } else if (c == '.') {
        sym_start = out.size();
        ++pos;
        out.push_back({gram_elem_type::char_class, add_class(gram_char_class{true, {}})});
      } else if (is_name_char(c)) {
        size_t start = pos;
        while (is_name_char(peek())) ++pos;
        sym_start = out.size();
        out.push_back({gram_elem_type::rule_ref, rule_id(src.substr(start, pos - start), start)});
      } else if (c == '(') {
        ++pos;
        skip_space(true);
        uint32_t r = new_rule(base, at);
        std::vector<gram_elem> body;
        parse_alternatives(base, body, true);
        rules[r] = std::move(body);
        if (peek() != ')') fail(at, "unclosed '('");
        ++pos;
        sym_start = out.size();
        out.push_back({gram_elem_type::rule_ref, r});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (sym_start == SIZE_MAX) fail(at, std::string("'") + c + "' has nothing before it to repeat");
        if (c == '{') {
          parse_braces(out, sym_start, base);
        } else {
          ++pos;
          repeat(out, sym_start, c == '+' ? 1 : 0, c == '?' ? 1 : UINT32_MAX, base, at);
        }
      } else {
        return;
      }
      skip_space(nested);
    }
  }

  void parse_alternatives(const std::string& base, std::vector<gram_elem>& out, bool nested) {
    parse_sequence(base, out, nested);
    out.push_back({gram_elem_type::alt_end, 0});
    while (peek() == '|') {
      ++pos;
      skip_space(true);
      parse_sequence(base, out, nested);
      out.push_back({gram_elem_type::alt_end, 0});
    }
  }

  void parse_rule() {
    size_t start = pos;
    while (is_name_char(peek())) ++pos;
    if (pos == start) fail(pos, "expected a rule name");
    std::string name = src.substr(start, pos - start);
    skip_space(false);
    if (src.compare(pos, 3, "::=") != 0) fail(pos, "expected '::=' after rule name '" + name + "'");
    pos += 3;
    skip_space(true);
    uint32_t id = rule_id(name, start);
    if (defined[id]) fail(start, "rule '" + name + "' is defined twice");
    defined[id] = true;
    rule_pos[id] = start;
    std::vector<gram_elem> body;
    parse_alternatives(name, body, false);
    rules[id] = std::move(body);
    if (!eof() && peek() != '\n' && peek() != '\r') fail(pos, std::string("unexpected '") + peek() + "'");
  }

  grammar finish();
};

grammar parser::finish() {
  for (size_t r = 0; r < rules.size(); ++r)
    if (!defined[r]) fail(rule_pos[r], "unknown rule '" + names[r] + "'");
  auto root = ids.find("root");
  if (root == ids.end()) fail(0, "grammar has no 'root' rule");
  grammar g;
  for (auto& body : rules) {
    g.rule_start.push_back(uint32_t(g.elems.size()));
    g.elems.insert(g.elems.end(), body.begin(), body.end());
    g.elems.push_back({gram_elem_type::rule_end, 0});
  }
  g.rule_names = names;
  g.classes = std::move(classes);
  g.root = root->second;
  uint32_t c = grammar_left_recursive_rule(g);
  if (c != UINT32_MAX)
    fail(rule_pos[c], "left recursion: rule '" + g.rule_names[c] + "' can reach itself without consuming input" +
                          (generated[c] ? " (a group, or a repetition of something that can match empty text)" : ""));
  return g;
}

}  // namespace

grammar grammar_parse(const std::string& text) {
  parser p(text);
  p.skip_space(true);
  while (!p.eof()) {
    p.parse_rule();
    p.skip_space(true);
  }
  return p.finish();
}

}  // namespace spindle
