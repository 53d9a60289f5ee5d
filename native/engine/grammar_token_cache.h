// Adaptive token-mask cache for one grammar over one vocabulary (xgrammar's idea on our pushdown matcher):
// for the top few frames of a stack (the positions of its top key_depth nodes), the tokens split into those
// accepted whatever lies below those frames (the walk never pops out of them mid-token), those rejected
// whatever lies below, and the uncertain rest (the walk pops below the frames mid-token, so the deeper stack
// decides). A mask is then the OR of the accepted sets of the state's tops plus a trie walk over the uncertain
// tokens only. Three frames cover a JSON string body (char class, repetition, closing quote), so the tokens
// that stay inside a string, most of a vocabulary, are settled once per grammar.
// Invariant: mask() sets exactly the bits token_mask_into(full trie) would set for the same state; an
// entry is computed on first use and never changes (engine thread only, no locking).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar_mask.h"

namespace spindle {

struct grammar_position_tokens {
  std::vector<uint64_t> accepted;  // token bitset: accepted from this position in any context
  vocab_trie uncertain;            // tokens whose acceptance depends on the stacks below
};

class grammar_token_cache {
 public:
  // tokens[id] = the bytes of token id (what the matcher is fed when id is sampled); trie = vocab_trie_build(tokens).
  grammar_token_cache(std::shared_ptr<const grammar> g, std::shared_ptr<const vocab_trie> trie,
                      std::shared_ptr<const std::vector<std::string>> tokens);

  const grammar& rules() const { return *g_; }
  const std::shared_ptr<const grammar>& rules_ptr() const { return g_; }
  const std::vector<std::string>& token_bytes() const { return *tokens_; }
  size_t n_vocab() const { return trie_->n_vocab; }

  // Entries kept per grammar: bounded repetitions ({m,n}) give every count its own positions, so a long bounded
  // string can reach thousands of keys (each ~25 KB); past the cap a state's mask is a plain trie walk.
  static constexpr size_t max_entries = 1024;

  // allowed = the token bitset the state can accept next (resized and cleared first).
  void mask(const grammar_state& st, std::vector<uint64_t>& allowed);

  size_t positions_cached() const { return by_pos_.size(); }

 private:
  static constexpr int key_depth = 3;
  // positions of the top key_depth frames (fewer when the stack is that short: then its bottom is real), and
  // the number of frames
  using frames_key = std::array<uint32_t, key_depth + 1>;
  struct frames_hash {
    size_t operator()(const frames_key& k) const {
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (uint32_t v : k) h = (h ^ v) * 0x100000001B3ull;
      return size_t(h ^ (h >> 29));
    }
  };
  const grammar_position_tokens& at(const frames_key& key);
  void keys_of(const grammar_state& st);  // seen_ = the distinct keys of the state's tops

  std::shared_ptr<const grammar> g_;
  std::shared_ptr<const vocab_trie> trie_;
  std::shared_ptr<const std::vector<std::string>> tokens_;
  std::unordered_map<frames_key, std::unique_ptr<grammar_position_tokens>, frames_hash> by_pos_;
  std::vector<frames_key> seen_;  // scratch: distinct keys of one state
};

}  // namespace spindle
