// Byte-level BPE encoder. Per word: split into UTF-8 characters, then repeatedly merge the adjacent pair of
// lowest merge rank (leftmost on ties), as llama.cpp's llm_tokenizer_bpe_session does with its queue.
// A final symbol that is not a token is emitted byte by byte where single bytes are tokens (others vanish,
// exactly as in llama.cpp).
// Invariant: the queue only ever holds pairs of live, adjacent symbols or stale entries recognised by their
// recorded lengths; merging preserves the symbols' left-to-right order.
#include <queue>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace spindle::tok {

namespace {

constexpr size_t k_max_cached_words = 1u << 16;

struct symbol {
  int prev, next;  // indices into the word's symbol list, -1 at the ends
  size_t start, n; // bytes of the word; n == 0 once merged into its left neighbour
};

struct bigram {
  int32_t rank;
  int left, right;
  size_t left_n, right_n;  // lengths when queued: a mismatch means the entry is stale
};

struct bigram_order {  // priority_queue top = lowest rank, then leftmost
  bool operator()(const bigram& a, const bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void bpe_encoder::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  std::vector<symbol> syms;
  for (size_t off = 0; off < word.size();) {
    size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(word[off])), word.size() - off);
    int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, off + n == word.size() ? -1 : idx + 1, off, n});
    off += n;
  }
  std::priority_queue<bigram, std::vector<bigram>, bigram_order> queue;
  std::string key;
  const auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const symbol& l = syms[left];
    const symbol& r = syms[right];
    key.assign(word, l.start, l.n);
    key.push_back(' ');
    key.append(word, r.start, r.n);
    int32_t rank = v_.find_merge(key);
    if (rank >= 0) queue.push({rank, left, right, l.n, r.n});
  };
  for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    bigram b = queue.top();
    queue.pop();
    symbol& l = syms[b.left];
    symbol& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n != b.left_n || r.n != b.right_n) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (const symbol& s : syms) {
    if (s.n == 0) continue;
    std::string_view text(word.data() + s.start, s.n);
    int32_t id = v_.find(text);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : text) {
      int32_t byte_id = v_.find(std::string_view(&c, 1));
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

void bpe_encoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& word : pre_tokenize(text, v_.pre.rules)) {
    if (v_.pre.ignore_merges) {
      int32_t id = v_.find(word);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> ids;
    encode_word(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= k_max_cached_words) cache_.clear();
    cache_.emplace(word, std::move(ids));
  }
}

}  // namespace spindle::tok
