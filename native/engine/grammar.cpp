// Code point classes and whole-grammar checks (see grammar.h).
// Invariant: these read a finished grammar and never change it; left recursion is judged with nullable rules
// taken into account, since a nullable prefix lets a rule reach itself without consuming input.
#include <utility>

#include "engine/grammar.h"

namespace spindle {

bool gram_char_class::contains(uint32_t cp) const {
  bool in = false;
  for (const auto& r : ranges) {
    if (cp < r.first) break;
    if (cp <= r.second) { in = true; break; }
  }
  return in != negated;
}

bool gram_char_class::intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& r : ranges)
      if (r.first <= hi && lo <= r.second) return true;
    return false;
  }
  for (const auto& r : ranges)  // merged ranges: [lo, hi] is excluded only if one range covers it
    if (r.first <= lo && hi <= r.second) return false;
  return true;
}

uint32_t grammar_left_recursive_rule(const grammar& g) {
  size_t n = g.rule_start.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      bool all = true;  // all elements of the current alternative nullable so far
      for (uint32_t i = g.rule_start[r]; g.elems[i].type != gram_elem_type::rule_end; ++i) {
        const gram_elem& e = g.elems[i];
        if (e.type == gram_elem_type::alt_end) {
          if (all) { nullable[r] = true; changed = true; break; }
          all = true;
        } else if (e.type == gram_elem_type::char_class || !nullable[e.value]) {
          all = false;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> left(n);  // rules that can start rule r
  for (size_t r = 0; r < n; ++r) {
    bool reach = true;
    for (uint32_t i = g.rule_start[r]; g.elems[i].type != gram_elem_type::rule_end; ++i) {
      const gram_elem& e = g.elems[i];
      if (e.type == gram_elem_type::alt_end) { reach = true; continue; }
      if (!reach) continue;
      if (e.type == gram_elem_type::rule_ref) left[r].push_back(e.value);
      reach = e.type == gram_elem_type::rule_ref && nullable[e.value];
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    path.push_back({s, 0});
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left[r].size()) { color[r] = 2; path.pop_back(); continue; }
      uint32_t c = left[r][next++];
      if (color[c] == 1) return c;
      if (color[c] == 0) { color[c] = 1; path.push_back({c, 0}); }
    }
  }
  return UINT32_MAX;
}

}  // namespace spindle
