// Vocabulary trie and the mask walk (see grammar_mask.h).
// Invariant: the walk is depth-first and only appends to its stack arena and top list while below a trie
// node, truncating both when it leaves the node, so each node sees exactly the state after its prefix.
#include "engine/grammar_mask.h"

#include <algorithm>
#include <numeric>

namespace spindle {

vocab_trie vocab_trie_build(const std::vector<std::string>& tokens) {
  std::vector<int32_t> ids(tokens.size());
  std::iota(ids.begin(), ids.end(), 0);
  return vocab_trie_build(tokens, std::move(ids));
}

vocab_trie vocab_trie_build(const std::vector<std::string>& tokens, std::vector<int32_t> ids) {
  vocab_trie t;
  t.n_vocab = tokens.size();
  std::vector<int32_t> order;
  for (int32_t i : ids)
    if (!tokens[size_t(i)].empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[size_t(a)] < tokens[size_t(b)]; });
  t.nodes.push_back({0, 0, 0, 0});
  std::vector<uint32_t> path{0};  // path[d] = node of the current prefix of length d
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = tokens[size_t(id)];
    size_t common = 0;
    if (prev) {
      size_t n = std::min(prev->size(), s.size());
      while (common < n && (*prev)[common] == s[common]) ++common;
    }
    while (path.size() > common + 1) {  // sorted order: these subtrees are finished
      t.nodes[path.back()].subtree_end = uint32_t(t.nodes.size());
      path.pop_back();
    }
    while (path.size() < s.size() + 1) {
      t.nodes.push_back({0, 0, 0, uint8_t(s[path.size() - 1])});
      path.push_back(uint32_t(t.nodes.size() - 1));
    }
    vocab_trie_node& node = t.nodes[path.back()];
    if (node.tok_begin == node.tok_end) node.tok_begin = uint32_t(t.token_ids.size());
    t.token_ids.push_back(id);
    node.tok_end = uint32_t(t.token_ids.size());
    prev = &s;
  }
  while (!path.empty()) {
    t.nodes[path.back()].subtree_end = uint32_t(t.nodes.size());
    path.pop_back();
  }
  return t;
}

trie_byte_step trie_advance_byte(const grammar& g, grammar_stack_arena& arena, std::vector<uint32_t>& tops,
                                 size_t begin, size_t end, const utf8_partial& p, uint8_t byte) {
  trie_byte_step r{utf8_step::bad, p, begin, end, false};
  uint32_t cp = 0;
  r.step = utf8_feed(r.partial, byte, cp);
  if (r.step == utf8_step::more) {
    r.alive = grammar_partial_viable(g, arena.nodes, tops, begin, end, r.partial);
  } else if (r.step == utf8_step::done) {
    r.begin = tops.size();
    grammar_accept_cp(g, arena, tops, begin, end, cp);
    r.end = tops.size();
    r.alive = r.end > r.begin;
  }
  return r;
}

namespace {

struct mask_walk {
  const grammar& g;
  const vocab_trie& trie;
  std::vector<uint64_t>& allowed;
  grammar_stack_arena arena;
  std::vector<uint32_t> tops;

  // Visits the children of trie node `at`, whose prefix left the stacks tops[begin, end) and partial `p`.
  void visit_children(uint32_t at, size_t begin, size_t end, const utf8_partial& p) {
    const uint32_t stop = trie.nodes[at].subtree_end;
    for (uint32_t child = at + 1; child < stop; child = trie.nodes[child].subtree_end) {
      const vocab_trie_node& c = trie.nodes[child];
      const size_t node_mark = arena.nodes.size(), top_mark = tops.size();
      const trie_byte_step s = trie_advance_byte(g, arena, tops, begin, end, p, c.byte);
      if (s.alive) {
        for (uint32_t i = c.tok_begin; i < c.tok_end; ++i) token_bitset_set(allowed, trie.token_ids[i]);
        if (c.subtree_end > child + 1) visit_children(child, s.begin, s.end, s.partial);
      }
      arena.truncate(node_mark);
      tops.resize(top_mark);
    }
  }
};

}  // namespace

void token_mask_into(const grammar& g, const grammar_state& st, const vocab_trie& trie, std::vector<uint64_t>& allowed) {
  if (trie.nodes.empty()) return;
  mask_walk w{g, trie, allowed, st.arena, st.tops};
  w.visit_children(0, 0, w.tops.size(), st.partial);
}

void token_mask(const grammar_matcher& m, const vocab_trie& trie, std::vector<uint8_t>& allowed) {
  std::vector<uint64_t> bits(token_bitset_words(trie.n_vocab), 0);
  token_mask_into(m.rules(), m.state(), trie, bits);
  allowed.assign(trie.n_vocab, 0);
  for (size_t id = 0; id < trie.n_vocab; ++id) allowed[id] = token_bitset_test(bits, int32_t(id));
}

}  // namespace spindle
