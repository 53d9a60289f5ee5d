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
// The trie of the tokens `ids` only (token_ids keep their vocabulary ids; n_vocab stays tokens.size()).
vocab_trie vocab_trie_build(const std::vector<std::string>& tokens, std::vector<int32_t> ids);

// A token set as bits: [(n_vocab + 63) / 64] words, bit id % 64 of word id / 64.
inline size_t token_bitset_words(size_t n_vocab) { return (n_vocab + 63) / 64; }
inline void token_bitset_set(std::vector<uint64_t>& bits, int32_t id) { bits[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
inline bool token_bitset_test(const std::vector<uint64_t>& bits, int32_t id) {
  return (bits[size_t(id) >> 6] >> (id & 63)) & 1;
}

// One byte of a trie walk from the stacks tops[begin, end) with the partial character `p`: the byte's UTF-8 step,
// the partial character after it and, on a completed code point, the stacks it leads to, appended to tops
// (begin, end then name them); alive = some stack can still continue. Shared by the mask walk and the
// cache's classifying walk; the caller truncates the arena and tops when it leaves the trie node.
struct trie_byte_step {
  utf8_step step;
  utf8_partial partial;
  size_t begin, end;
  bool alive;
};
trie_byte_step trie_advance_byte(const grammar& g, grammar_stack_arena& arena, std::vector<uint32_t>& tops,
                                 size_t begin, size_t end, const utf8_partial& p, uint8_t byte);

// Sets (never clears) the bit of every token of `trie` that the grammar state can accept next; `allowed` must
// already hold token_bitset_words(trie.n_vocab) words.
void token_mask_into(const grammar& g, const grammar_state& st, const vocab_trie& trie, std::vector<uint64_t>& allowed);

// allowed is resized to n_vocab; allowed[id] = 1 where the matcher can accept token id's bytes next.
void token_mask(const grammar_matcher& m, const vocab_trie& trie, std::vector<uint8_t>& allowed);

}  // namespace spindle
