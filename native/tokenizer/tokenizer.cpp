// spindle::tokenizer over a built vocab: special-token partitioning, then per fragment the BPE or
// SentencePiece encoder, with BOS/EOS and the SPM space prefix placed as llama_vocab::impl::tokenize does.
// Invariant: the vocab is immutable after construction, so every const method is safe to call concurrently.
#include <algorithm>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer_impl.h"

namespace spindle::tok {

namespace {

bool is_space_byte(char c) {  // C isspace in the "C" locale
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Splits raw fragment `f` of `text` at every occurrence of special token `id`, appending to `out`.
void split_fragment(const vocab& v, int32_t id, std::string_view text, const fragment& f,
                    std::vector<fragment>& out) {
  const std::string& special = v.text[id];
  const uint32_t a = v.attr[id];
  size_t pos = f.offset;
  const size_t end = f.offset + f.length;
  while (pos < end) {
    size_t match = text.substr(0, end).find(special, pos);
    if (match == std::string_view::npos) break;
    size_t left_len = match - pos;
    if (a & ATTR_LSTRIP) {
      while (left_len > 0 && is_space_byte(text[pos + left_len - 1])) --left_len;
    }
    if (left_len > 0) out.push_back({-1, pos, left_len});
    out.push_back({id, 0, 0});
    pos = match + special.size();
    if (a & ATTR_RSTRIP) {
      while (pos < end && is_space_byte(text[pos])) ++pos;
    }
  }
  if (pos < end) out.push_back({-1, pos, end - pos});
}

class tokenizer_impl final : public tokenizer {
 public:
  explicit tokenizer_impl(vocab v) : v_(std::move(v)), bpe_(v_) {}

  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override {
    std::vector<fragment> frags = partition_special(v_, text, parse_special);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_special && v_.add_bos) {
      if (v_.bos < 0) throw error("tokenizer: the model asks for a BOS token (add_bos_token) but has none");
      out.push_back(v_.bos);
    }
    bool prev_special = true;  // SPM: a fragment at the start or after a special token gets the space prefix
    std::string buf;
    for (const fragment& f : frags) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      std::string_view raw = text.substr(f.offset, f.length);
      if (v_.kind == vocab_kind::bpe) {
        bpe_.encode(raw, out);
        continue;
      }
      buf.clear();
      if (v_.add_space_prefix && prev_special) buf.push_back(' ');
      buf.append(raw);
      spm_encode(v_, escape_spaces(buf), out);
      prev_special = false;
    }
    if (add_special && v_.add_eos) {
      if (v_.eos < 0) throw error("tokenizer: the model asks for an EOS token (add_eos_token) but has none");
      out.push_back(v_.eos);
    }
    return out;
  }

  std::string token_to_piece(int32_t id, bool special) const override {
    check_id(id);
    if (!special && (v_.attr[id] & (ATTR_UNKNOWN | ATTR_CONTROL))) return std::string();
    return v_.piece[id];
  }

  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    for (int32_t id : ids) check_id(id);
    return detokenize(v_, ids, !skip_special);
  }

  int32_t n_vocab() const override { return v_.n_tokens(); }
  int32_t bos_id() const override { return v_.bos; }
  int32_t eos_id() const override { return v_.eos; }
  bool add_bos() const override { return v_.add_bos; }
  bool is_eog(int32_t id) const override { return std::binary_search(v_.eog.begin(), v_.eog.end(), id); }
  const std::vector<int32_t>& eog_ids() const override { return v_.eog; }
  token_attr attr(int32_t id) const override {
    const uint32_t a = attr_flags(id);
    if (a & ATTR_UNUSED) return token_attr::unused;
    if (a & ATTR_CONTROL) return token_attr::control;
    if (a & ATTR_USER_DEFINED) return token_attr::user_defined;
    if (a & ATTR_UNKNOWN) return token_attr::unknown;
    if (a & ATTR_BYTE) return token_attr::byte;
    return token_attr::normal;
  }
  uint32_t attr_flags(int32_t id) const override {
    check_id(id);
    return v_.attr[id];
  }
  const std::string& token_text(int32_t id) const override {
    check_id(id);
    return v_.text[id];
  }

 private:
  void check_id(int32_t id) const {
    if (id < 0 || id >= v_.n_tokens()) {
      throw error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                  std::to_string(v_.n_tokens()) + " tokens)");
    }
  }

  static std::string escape_spaces(const std::string& s) {  // ' ' -> U+2581
    std::string out;
    out.reserve(s.size() + 8);
    for (char c : s) {
      if (c == ' ') out += "\xE2\x96\x81";
      else out.push_back(c);
    }
    return out;
  }

  vocab v_;
  bpe_encoder bpe_;
};

}  // namespace

std::vector<fragment> partition_special(const vocab& v, std::string_view text, bool parse_special) {
  std::vector<fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<fragment> next;
  for (int32_t id : v.special_tokens) {
    if (!parse_special && (v.attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
    next.clear();
    for (const fragment& f : frags) {
      if (f.token >= 0) next.push_back(f);
      else split_fragment(v, id, text, f, next);
    }
    frags.swap(next);
  }
  return frags;
}

std::unique_ptr<tokenizer> make_tokenizer(vocab v) { return std::make_unique<tokenizer_impl>(std::move(v)); }

}  // namespace spindle::tok

namespace spindle {

std::unique_ptr<tokenizer> tokenizer::from_gguf(const gguf_file& file) {
  try {
    return tok::make_tokenizer(tok::build_vocab(tok::read_vocab_spec(file)));
  } catch (const error& e) {
    const std::string msg = e.what();
    if (msg.compare(0, file.path().size(), file.path()) == 0) throw;  // the GGUF getters name the file already
    throw error(file.path() + ": " + msg);
  }
}

}  // namespace spindle
