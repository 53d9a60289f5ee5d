// Grammar stacks advanced by code points, fed as UTF-8 bytes (see grammar_matcher.h).
// Invariant: expansion only pushes nodes whose parent already exists, so parents precede children in the
// arena; stacks are expanded until their top is a char_class or they are empty, each node at most once per
// step (nodes are hash-consed, so a repeat would add nothing), and expansion terminates because grammar_parse
// refuses left recursion.
#include "engine/grammar_matcher.h"

#include <algorithm>

namespace spindle {

utf8_step utf8_feed(utf8_partial& p, uint8_t b, uint32_t& cp) {
  if (p.left == 0) {
    if (b < 0x80) { cp = b; return utf8_step::done; }
    p.next_lo = 0x80;
    p.next_hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) { p.len = 2; p.value = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { p.len = 3; p.value = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { p.len = 4; p.value = b & 0x07; }
    else return utf8_step::bad;
    if (b == 0xE0) p.next_lo = 0xA0;  // no overlong forms
    if (b == 0xED) p.next_hi = 0x9F;  // no surrogates
    if (b == 0xF0) p.next_lo = 0x90;  // no overlong forms
    if (b == 0xF4) p.next_hi = 0x8F;  // nothing above U+10FFFF
    p.left = uint8_t(p.len - 1);
    return utf8_step::more;
  }
  if (b < p.next_lo || b > p.next_hi) return utf8_step::bad;
  p.value = (p.value << 6) | (b & 0x3F);
  p.next_lo = 0x80;
  p.next_hi = 0xBF;
  if (--p.left > 0) return utf8_step::more;
  cp = p.value;
  p = utf8_partial{};
  return utf8_step::done;
}

static uint32_t bucket_of(const grammar_stack_arena& a, uint32_t pos, uint32_t parent) {
  uint32_t h = pos * 0x9E3779B1u ^ (parent + 1) * 0x85EBCA77u;
  return (h ^ (h >> 15)) & uint32_t(a.buckets.size() - 1);
}

uint32_t grammar_stack_arena::intern(uint32_t pos, uint32_t parent) {
  uint32_t& head = buckets[bucket_of(*this, pos, parent)];
  for (uint32_t i = head; i != grammar_stack_empty; i = nodes[i].next_same)
    if (nodes[i].pos == pos && nodes[i].parent == parent) return i;
  nodes.push_back({pos, parent, head});
  expanded_in.push_back(0);
  head = uint32_t(nodes.size() - 1);
  return head;
}

void grammar_stack_arena::truncate(size_t n) {
  while (nodes.size() > n) {  // newest first: each is the head of its bucket
    const grammar_stack_node& last = nodes.back();
    buckets[bucket_of(*this, last.pos, last.parent)] = last.next_same;
    nodes.pop_back();
  }
  expanded_in.resize(n);
}

uint32_t grammar_stack_arena::next_step() {
  if (++step == 0) {  // wrapped: forget old steps
    std::fill(expanded_in.begin(), expanded_in.end(), 0);
    step = 1;
  }
  return step;
}

void grammar_stack_arena::rehash() {
  expanded_in.assign(nodes.size(), 0);
  std::fill(buckets.begin(), buckets.end(), grammar_stack_empty);
  for (size_t i = 0; i < nodes.size(); ++i) {
    uint32_t& head = buckets[bucket_of(*this, nodes[i].pos, nodes[i].parent)];
    nodes[i].next_same = head;
    head = uint32_t(i);
  }
}

namespace {

void push_unique(std::vector<uint32_t>& tops, size_t out_begin, uint32_t top) {
  for (size_t i = out_begin; i < tops.size(); ++i)
    if (tops[i] == top) return;
  tops.push_back(top);
}

// The node that follows element `pos` once it is matched: pos + 1, or the parent when the alternative ends.
uint32_t after(const grammar& g, grammar_stack_arena& arena, uint32_t pos, uint32_t parent) {
  if (g.elems[pos + 1].type == gram_elem_type::alt_end) return parent;
  return arena.intern(pos + 1, parent);
}

// Expands `top` until every resulting stack has a char_class on top (or is empty); appends them to tops.
void expand(const grammar& g, grammar_stack_arena& arena, uint32_t top, std::vector<uint32_t>& tops,
            size_t out_begin) {
  if (top == grammar_stack_empty) { push_unique(tops, out_begin, top); return; }
  const uint32_t pos = arena.nodes[top].pos, parent = arena.nodes[top].parent;
  const gram_elem& e = g.elems[pos];
  if (e.type == gram_elem_type::char_class) { push_unique(tops, out_begin, top); return; }
  if (arena.expanded_in[top] == arena.step) return;  // same node, same result: already in tops
  arena.expanded_in[top] = arena.step;
  const uint32_t rest = after(g, arena, pos, parent);
  for (uint32_t a = g.rule_start[e.value]; g.elems[a].type != gram_elem_type::rule_end;) {
    if (g.elems[a].type == gram_elem_type::alt_end)
      expand(g, arena, rest, tops, out_begin);
    else
      expand(g, arena, arena.intern(a, rest), tops, out_begin);
    while (g.elems[a].type != gram_elem_type::alt_end) ++a;
    ++a;
  }
}

// Drops arena nodes no stack uses; keeps order, so parents still precede children.
void compact(grammar_state& st) {
  std::vector<grammar_stack_node>& nodes = st.arena.nodes;
  std::vector<uint32_t> remap(nodes.size(), grammar_stack_empty);
  std::vector<uint8_t> live(nodes.size(), 0);
  for (uint32_t t : st.tops)
    for (uint32_t n = t; n != grammar_stack_empty && !live[n]; n = nodes[n].parent) live[n] = 1;
  std::vector<grammar_stack_node> kept;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    uint32_t parent = nodes[i].parent;
    kept.push_back({nodes[i].pos, parent == grammar_stack_empty ? parent : remap[parent], grammar_stack_empty});
    remap[i] = uint32_t(kept.size() - 1);
  }
  for (uint32_t& t : st.tops)
    if (t != grammar_stack_empty) t = remap[t];
  nodes = std::move(kept);
  st.arena.rehash();
}

}  // namespace

void grammar_accept_cp(const grammar& g, grammar_stack_arena& arena, std::vector<uint32_t>& tops,
                       size_t begin, size_t end, uint32_t cp) {
  const size_t out_begin = tops.size();
  arena.next_step();
  for (size_t i = begin; i < end; ++i) {
    const uint32_t top = tops[i];
    if (top == grammar_stack_empty) continue;
    const uint32_t pos = arena.nodes[top].pos, parent = arena.nodes[top].parent;
    if (!g.classes[g.elems[pos].value].contains(cp)) continue;
    expand(g, arena, after(g, arena, pos, parent), tops, out_begin);
  }
}

bool grammar_partial_viable(const grammar& g, const std::vector<grammar_stack_node>& nodes,
                            const std::vector<uint32_t>& tops, size_t begin, size_t end, const utf8_partial& p) {
  // The next byte lies in [next_lo, next_hi]; any bytes after it are free continuation bytes.
  const uint32_t rest_bits = 6u * uint32_t(p.left - 1);
  const uint32_t lo = ((p.value << 6) | (p.next_lo & 0x3Fu)) << rest_bits;
  const uint32_t hi = (((p.value << 6) | (p.next_hi & 0x3Fu)) << rest_bits) | ((1u << rest_bits) - 1);
  for (size_t i = begin; i < end; ++i) {
    if (tops[i] == grammar_stack_empty) continue;
    if (g.classes[g.elems[nodes[tops[i]].pos].value].intersects(lo, hi)) return true;
  }
  return false;
}

grammar_matcher::grammar_matcher(std::shared_ptr<const grammar> g) : g_(std::move(g)) {
  const grammar& gr = *g_;
  st_.arena.next_step();
  for (uint32_t a = gr.rule_start[gr.root]; gr.elems[a].type != gram_elem_type::rule_end;) {
    uint32_t top = grammar_stack_empty;
    if (gr.elems[a].type != gram_elem_type::alt_end) top = st_.arena.intern(a, grammar_stack_empty);
    expand(gr, st_.arena, top, st_.tops, 0);
    while (gr.elems[a].type != gram_elem_type::alt_end) ++a;
    ++a;
  }
  compact(st_);
}

bool grammar_matcher::accept_bytes(const char* data, size_t n) {
  if (n == 0) return true;
  grammar_state next = st_;
  size_t since_compact = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t cp = 0;
    utf8_step step = utf8_feed(next.partial, uint8_t(data[i]), cp);
    if (step == utf8_step::bad) return false;
    if (step == utf8_step::more) {
      if (!grammar_partial_viable(*g_, next.arena.nodes, next.tops, 0, next.tops.size(), next.partial)) return false;
      continue;
    }
    const size_t end = next.tops.size();
    grammar_accept_cp(*g_, next.arena, next.tops, 0, end, cp);
    if (next.tops.size() == end) return false;
    next.tops.erase(next.tops.begin(), next.tops.begin() + long(end));
    if (++since_compact == 256) { compact(next); since_compact = 0; }
  }
  compact(next);
  st_ = std::move(next);
  return true;
}

bool grammar_matcher::can_accept(const std::string& s) const {
  grammar_matcher copy = *this;
  return copy.accept_string(s);
}

bool grammar_matcher::is_complete() const {
  if (st_.partial.left != 0) return false;
  return std::find(st_.tops.begin(), st_.tops.end(), grammar_stack_empty) != st_.tops.end();
}

}  // namespace spindle
