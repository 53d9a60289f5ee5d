// Token ids -> text: llama_detokenize's rules (first-token space strip for SPM-style vocabularies, clean-up
// passes for BPE vocabularies that ask for them), and the incremental decoder that only ever emits complete
// UTF-8 (ill-formed subsequences become U+FFFD, one per maximal subpart, as TextDecoder does).
// Invariant: incremental_decoder output is always valid UTF-8; its held-back bytes are a proper prefix of a
// well-formed sequence.
#include "tokenizer/tokenizer_impl.h"

namespace spindle::tok {

namespace {

// llama.cpp's three in-place clean-up passes over the detokenized bytes, index for index.
void clean_up_spaces(std::string& text) {
  size_t total = text.size();
  // " ?", " !", " .", " ," lose their space
  size_t n = total;
  total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  }
  // " ' " -> "'"
  n = total;
  total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  }
  // " 's", " 'm", " 're", " 've" lose their space
  n = total;
  total = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (x1 != 't' && x1 != 'd' && i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  }
  text.resize(total);
}

// Length of the well-formed UTF-8 sequence at s[pos]: > 0 complete, 0 a proper prefix cut off by the end of
// the buffer, < 0 ill-formed (its magnitude = bytes of the maximal subpart to replace by one U+FFFD).
long utf8_sequence(const std::string& s, size_t pos) {
  const uint8_t b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, lo = (b0 == 0xE0) ? 0xA0 : 0x80, hi = (b0 == 0xED) ? 0x9F : 0xBF;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, lo = (b0 == 0xF0) ? 0x90 : 0x80, hi = (b0 == 0xF4) ? 0x8F : 0xBF;
  else return -1;
  for (size_t k = 1; k < len; ++k) {
    if (pos + k >= s.size()) return 0;
    const uint8_t b = static_cast<uint8_t>(s[pos + k]);
    const bool ok = (k == 1) ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return -static_cast<long>(k);
  }
  return static_cast<long>(len);
}

const char k_replacement_utf8[] = "\xEF\xBF\xBD";

// Moves the complete part of `pending` to the result; with `final`, an unfinished tail is replaced too.
std::string take_complete(std::string& pending, bool final) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    long n = utf8_sequence(pending, pos);
    if (n > 0) {
      out.append(pending, pos, static_cast<size_t>(n));
      pos += static_cast<size_t>(n);
    } else if (n < 0) {
      out += k_replacement_utf8;
      pos += static_cast<size_t>(-n);
    } else if (final) {
      out += k_replacement_utf8;
      pos = pending.size();
    } else {
      break;
    }
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace

std::string detokenize(const vocab& v, const std::vector<int32_t>& ids, bool unparse_special) {
  std::string text;
  bool remove_space = v.add_space_prefix;
  for (int32_t id : ids) {
    const bool hidden = !unparse_special && (v.attr[id] & (ATTR_UNKNOWN | ATTR_CONTROL));
    if (!hidden) {
      const std::string& p = v.piece[id];
      text.append(p, (remove_space && !p.empty() && p[0] == ' ') ? 1 : 0, std::string::npos);
    }
    remove_space = false;
  }
  if (v.clean_spaces) clean_up_spaces(text);
  return text;
}

}  // namespace spindle::tok

namespace spindle {

std::string incremental_decoder::push(int32_t id) {
  pending_ += tok_.token_to_piece(id, !skip_special_);
  return tok::take_complete(pending_, false);
}

std::string incremental_decoder::flush() { return tok::take_complete(pending_, true); }

}  // namespace spindle
