// Token renderings and the grammar cache LRU (see grammar_vocab.h).
// Invariant: a rendering is built once per engine and never changes; keys hold the rendering flag, so the
// same grammar text under both renderings gets two caches.
#include "engine/grammar_vocab.h"

namespace spindle {

const grammar_vocab::rendering& grammar_vocab::render(bool special) {
  rendering& r = renderings_[special ? 1 : 0];
  if (!r.tokens) {
    auto tokens = std::make_shared<std::vector<std::string>>(size_t(n_vocab_));
    for (int32_t id = 0; id < n_vocab_; ++id) (*tokens)[size_t(id)] = tok_.token_to_piece(id, special);
    r.trie = std::make_shared<const vocab_trie>(vocab_trie_build(*tokens));
    r.tokens = std::move(tokens);
  }
  return r;
}

std::shared_ptr<grammar_token_cache> grammar_vocab::cache_for(const std::string& text, std::shared_ptr<const grammar> g,
                                                              bool special) {
  const std::string key = std::string(special ? "1" : "0") + text;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (it->key == key) {
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().cache;
    }
  }
  const rendering& r = render(special);
  lru_.push_front({key, std::make_shared<grammar_token_cache>(std::move(g), r.trie, r.tokens)});
  if (lru_.size() > max_cached) lru_.pop_back();
  return lru_.front().cache;
}

}  // namespace spindle
