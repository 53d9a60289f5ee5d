// Per-position token classes and the cached mask (see grammar_token_cache.h).
// Invariant: the classifying walk starts from the key's frames over an empty stack; reaching the empty stack
// means "popped below the frames", which at a token's end accepts it in every context (some continuation
// always exists) and before its end makes the rest of the token the deeper stack's business: uncertain, never
// guessed. When the frames are the whole stack, the empty stack is the real end: nothing may follow it.
#include "engine/grammar_token_cache.h"

#include <algorithm>

namespace spindle {

namespace {

struct classify_walk {
  const grammar& g;
  const vocab_trie& trie;
  std::vector<uint64_t>& accepted;
  std::vector<int32_t>& uncertain;
  bool real_bottom;  // the frames are the whole stack
  grammar_stack_arena arena;
  std::vector<uint32_t> tops;

  void tokens_of(uint32_t node, bool ok) {
    const vocab_trie_node& n = trie.nodes[node];
    for (uint32_t i = n.tok_begin; i < n.tok_end; ++i) {
      if (ok) token_bitset_set(accepted, trie.token_ids[i]);
      else uncertain.push_back(trie.token_ids[i]);
    }
  }

  // tops[begin, end): the stacks (none empty) after the prefix of `at`; left: some earlier character boundary
  // of the prefix left the alternative.
  void visit_children(uint32_t at, size_t begin, size_t end, const utf8_partial& p, bool left) {
    const uint32_t stop = trie.nodes[at].subtree_end;
    for (uint32_t child = at + 1; child < stop; child = trie.nodes[child].subtree_end) {
      const vocab_trie_node& c = trie.nodes[child];
      const size_t node_mark = arena.nodes.size(), top_mark = tops.size();
      trie_byte_step s = trie_advance_byte(g, arena, tops, begin, end, p, c.byte);
      bool leaves_here = false;
      if (s.step == utf8_step::done) {  // the empty stack means "popped below the frames": not a live stack here
        auto it = std::find(tops.begin() + long(top_mark), tops.end(), grammar_stack_empty);
        if (it != tops.end()) { leaves_here = true; tops.erase(it); }
        s.end = tops.size();
        s.alive = s.end > s.begin;
      }
      if (s.step != utf8_step::bad) {
        if (s.alive || leaves_here) tokens_of(child, true);
        else if (left) tokens_of(child, false);
        const bool left_below = left || (leaves_here && !real_bottom);
        if (c.subtree_end > child + 1) {
          if (s.alive) visit_children(child, s.begin, s.end, s.partial, left_below);
          else if (left_below)
            for (uint32_t n = child + 1; n < c.subtree_end; ++n) tokens_of(n, false);
        }
      }
      arena.truncate(node_mark);
      tops.resize(top_mark);
    }
  }
};

}  // namespace

grammar_token_cache::grammar_token_cache(std::shared_ptr<const grammar> g, std::shared_ptr<const vocab_trie> trie,
                                         std::shared_ptr<const std::vector<std::string>> tokens)
    : g_(std::move(g)), trie_(std::move(trie)), tokens_(std::move(tokens)) {}

const grammar_position_tokens& grammar_token_cache::at(const frames_key& key) {
  auto it = by_pos_.find(key);
  if (it != by_pos_.end()) return *it->second;
  auto entry = std::make_unique<grammar_position_tokens>();
  entry->accepted.assign(token_bitset_words(trie_->n_vocab), 0);
  std::vector<int32_t> uncertain;
  const uint32_t depth = key[key_depth];
  if (!trie_->nodes.empty()) {
    classify_walk w{*g_, *trie_, entry->accepted, uncertain, depth < uint32_t(key_depth), {}, {}};
    w.arena.next_step();
    uint32_t top = grammar_stack_empty;
    for (uint32_t d = depth; d-- > 0;) top = w.arena.intern(key[d], top);
    w.tops.push_back(top);
    w.visit_children(0, 0, 1, utf8_partial{}, false);
  }
  entry->uncertain = vocab_trie_build(*tokens_, std::move(uncertain));
  return *by_pos_.emplace(key, std::move(entry)).first->second;
}

void grammar_token_cache::keys_of(const grammar_state& st) {
  seen_.clear();
  for (uint32_t top : st.tops) {
    if (top == grammar_stack_empty) continue;
    frames_key key{};
    uint32_t depth = 0;
    for (uint32_t n = top; n != grammar_stack_empty && depth < uint32_t(key_depth); n = st.arena.nodes[n].parent)
      key[depth++] = st.arena.nodes[n].pos;
    key[key_depth] = depth;
    if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) seen_.push_back(key);
  }
}

void grammar_token_cache::mask(const grammar_state& st, std::vector<uint64_t>& allowed) {
  allowed.assign(token_bitset_words(trie_->n_vocab), 0);
  bool walk_all = st.partial.left != 0;  // inside a UTF-8 character the frames do not describe the state
  if (!walk_all) {
    keys_of(st);
    size_t missing = 0;
    for (const frames_key& k : seen_) missing += by_pos_.count(k) == 0;
    walk_all = by_pos_.size() + missing > max_entries;
  }
  if (walk_all) {
    token_mask_into(*g_, st, *trie_, allowed);
    return;
  }
  for (const frames_key& k : seen_) {
    const grammar_position_tokens& t = at(k);
    for (size_t w = 0; w < allowed.size(); ++w) allowed[w] |= t.accepted[w];
    token_mask_into(*g_, st, t.uncertain, allowed);
  }
}

}  // namespace spindle
