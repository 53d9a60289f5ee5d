// SentencePiece encoder as llama.cpp's llm_tokenizer_spm_session: split into UTF-8 characters, repeatedly
// merge the adjacent pair whose concatenation is the highest-scoring token (leftmost on ties), then emit each
// symbol as its token, or re-split it along the merges that built it, or as byte tokens (<0xXX>).
// Invariant: the queue holds pairs whose concatenation is a token; stale entries are recognised by their
// recorded total length, as in llama.cpp.
#include <queue>

#include "common/error.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace spindle::tok {

namespace {

struct symbol {
  int prev, next;
  size_t start, n;  // bytes of the text; n == 0 once merged away
};

struct bigram {
  float score;
  int left, right;
  size_t size;  // bytes of the pair when queued
};

struct bigram_order {  // priority_queue top = highest score, then leftmost
  bool operator()(const bigram& a, const bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

int32_t byte_token(const vocab& v, uint8_t byte) {
  static const char* hex = "0123456789ABCDEF";
  const char name[6] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>'};
  int32_t id = v.find(std::string_view(name, 6));
  if (id >= 0) return id;
  const char raw = static_cast<char>(byte);
  id = v.find(std::string_view(&raw, 1));
  if (id >= 0) return id;
  throw error("tokenizer: the vocabulary has no token for byte " + std::string(name, 6));
}

struct spm_session {
  const vocab& v;
  std::string_view text;
  std::vector<symbol> syms;
  std::priority_queue<bigram, std::vector<bigram>, bigram_order> queue;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;  // pair text -> the symbols it joined

  void try_add(int left, int right) {
    if (left < 0 || right < 0) return;
    std::string pair(text.substr(syms[left].start, syms[left].n + syms[right].n));
    int32_t id = v.find(pair);
    if (id < 0) return;
    queue.push({v.score[id], left, right, pair.size()});
    rev_merge[pair] = {left, right};
  }

  void resegment(const symbol& s, std::vector<int32_t>& out) const {
    std::string t(text.substr(s.start, s.n));
    int32_t id = v.find(t);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge.find(t);
    if (it == rev_merge.end()) {
      for (char c : t) out.push_back(byte_token(v, static_cast<uint8_t>(c)));
      return;
    }
    resegment(syms[it->second.first], out);
    resegment(syms[it->second.second], out);
  }

  void run(std::vector<int32_t>& out) {
    for (size_t off = 0; off < text.size();) {
      size_t n = std::min(unicode::utf8_len(static_cast<uint8_t>(text[off])), text.size() - off);
      int idx = static_cast<int>(syms.size());
      syms.push_back({idx - 1, off + n == text.size() ? -1 : idx + 1, off, n});
      off += n;
    }
    for (int i = 1; i < static_cast<int>(syms.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      bigram b = queue.top();
      queue.pop();
      symbol& l = syms[b.left];
      symbol& r = syms[b.right];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
      l.n += r.n;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) syms[r.next].prev = b.left;
      try_add(l.prev, b.left);
      try_add(b.left, l.next);
    }
    for (int i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) resegment(syms[i], out);
  }
};

}  // namespace

void spm_encode(const vocab& v, std::string_view text, std::vector<int32_t>& out) {
  spm_session s{v, text, {}, {}, {}};
  s.run(out);
}

}  // namespace spindle::tok
