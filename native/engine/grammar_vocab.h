// The vocabulary as the grammar sees it, and the engine's compiled-grammar caches.
// A token's bytes are its piece as the request's detokenizer renders it: control tokens are empty when
// special tokens are skipped (so a grammar can never need one) and their text when they are shown.
// Invariant: engine thread only; a cache is shared by every request with the same grammar text and rendering,
// and at most max_cached grammars are kept (least recently used dropped; requests holding one keep it alive).
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar_token_cache.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

class grammar_vocab {
 public:
  static constexpr size_t max_cached = 16;  // a cache of a large schema over a 150k vocabulary holds a few MB

  // n_vocab: the ids that may be sampled (a prefix of the tokenizer's ids).
  grammar_vocab(const tokenizer& tok, int32_t n_vocab) : tok_(tok), n_vocab_(n_vocab) {}

  // The cache for `g` (compiled from `text`) with control tokens rendered (`special`) or empty.
  std::shared_ptr<grammar_token_cache> cache_for(const std::string& text, std::shared_ptr<const grammar> g, bool special);

 private:
  struct rendering {
    std::shared_ptr<const std::vector<std::string>> tokens;  // [n_vocab] bytes of each id
    std::shared_ptr<const vocab_trie> trie;
  };
  const rendering& render(bool special);

  const tokenizer& tok_;
  int32_t n_vocab_;
  rendering renderings_[2];  // [special]; built on first use
  struct entry {
    std::string key;
    std::shared_ptr<grammar_token_cache> cache;
  };
  std::list<entry> lru_;  // most recently used first
};

}  // namespace spindle
