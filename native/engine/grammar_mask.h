// Per-vocabulary token mask for a grammar matcher: the vocabulary as a byte trie, walked with the matcher's
// state so a shared prefix is matched once for all tokens that start with it.
// Invariant: trie nodes are stored in preorder (a node's subtree is the index range (node, subtree_end)), and
// token_mask marks exactly the tokens t for which a copy of the matcher would return true from
// accept_bytes(bytes of t). Empty tokens (special / control tokens) are never marked: allowing them, and
// end-of-generation where the matcher is_complete(), is the caller's business.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/grammar_matcher.h"

namespace spindle {

struct vocab_trie_node {
  uint32_t subtree_end;  // index one past the last descendant
  uint32_t tok_begin;    // tokens ending here: vocab_trie::token_ids[tok_begin, tok_end)
  uint32_t tok_end;
  uint8_t byte;          // the edge from the parent (unused for the root)
};

struct vocab_trie {
  std::vector<vocab_trie_node> nodes;  // nodes[0] is the root (the empty prefix)
  std::vector<int32_t> token_ids;
  size_t n_vocab = 0;
};

// tokens[id] = the bytes of token id.
vocab_trie vocab_trie_build(const std::vector<std::string>& tokens);

// allowed is resized to n_vocab; allowed[id] = 1 where the matcher can accept token id's bytes next.
void token_mask(const grammar_matcher& m, const vocab_trie& trie, std::vector<uint8_t>& allowed);

}  // namespace spindle
