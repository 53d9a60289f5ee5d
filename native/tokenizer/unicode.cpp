// Unicode helpers over the generated tables in unicode_data.cpp.
// Invariant: lookups never index past a table; the static tables are built once, thread-safely (C++11 statics).
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace spindle::unicode {

static bool is_whitespace(uint32_t cpt) {
  return std::binary_search(k_whitespace, k_whitespace + k_n_whitespace, cpt);
}

static uint16_t flags_slow(uint32_t cpt) {
  const category_run* end = k_category_runs + k_n_category_runs;
  const category_run* it =
      std::upper_bound(k_category_runs, end, cpt, [](uint32_t c, const category_run& r) { return c < r.start; });
  uint16_t f = (it == k_category_runs) ? uint16_t(UNDEFINED) : uint16_t((it - 1)->flag);  // first run starts at 0
  if (is_whitespace(cpt)) f |= WHITESPACE;
  return f;
}

uint16_t flags(uint32_t cpt) {
  static const std::array<uint16_t, 128> ascii = [] {
    std::array<uint16_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = flags_slow(c);
    return t;
  }();
  if (cpt < 128) return ascii[cpt];
  if (cpt >= k_max_cpt) return UNDEFINED;
  return flags_slow(cpt);
}

uint32_t tolower_ascii(uint32_t cpt) {
  const lower_pair* end = k_lower_ascii + k_n_lower_ascii;
  const lower_pair* it =
      std::lower_bound(k_lower_ascii, end, cpt, [](const lower_pair& p, uint32_t c) { return p.cpt < c; });
  return (it != end && it->cpt == cpt) ? it->lower : cpt;
}

size_t utf8_len(uint8_t lead) {
  static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[lead >> 4];
}

// One code point starting at text[pos]; returns its byte length, or 0 if the sequence is malformed
// (llama.cpp's rules: only the lead's form bits and the continuation bytes' top bits are checked).
static size_t decode_one(std::string_view text, size_t pos, uint32_t& cpt) {
  const auto b = [&](size_t i) { return static_cast<uint8_t>(text[pos + i]); };
  const auto cont = [&](size_t i) { return pos + i < text.size() && (b(i) & 0xC0) == 0x80; };
  const uint8_t b0 = b(0);
  if (!(b0 & 0x80)) { cpt = b0; return 1; }
  if (!(b0 & 0x40)) return 0;
  if (!(b0 & 0x20)) {
    if (!cont(1)) return 0;
    cpt = ((b0 & 0x1Fu) << 6) | (b(1) & 0x3Fu);
    return 2;
  }
  if (!(b0 & 0x10)) {
    if (!cont(1) || !cont(2)) return 0;
    cpt = ((b0 & 0x0Fu) << 12) | ((b(1) & 0x3Fu) << 6) | (b(2) & 0x3Fu);
    return 3;
  }
  if (!(b0 & 0x08)) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    cpt = ((b0 & 0x07u) << 18) | ((b(1) & 0x3Fu) << 12) | ((b(2) & 0x3Fu) << 6) | (b(3) & 0x3Fu);
    if (cpt >= k_max_cpt) cpt = k_replacement;  // llama.cpp would fail to re-encode it
    return 4;
  }
  return 0;
}

std::vector<uint32_t> decode_utf8(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cpt = 0;
    size_t n = decode_one(text, pos, cpt);
    if (n == 0) {
      out.push_back(k_replacement);
      pos += 1;
    } else {
      out.push_back(cpt);
      pos += n;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to 256, 257, ...
struct byte_map {
  std::array<std::string, 256> to_utf8;
  std::array<int16_t, 512> from_cpt;  // code point (< 512) -> byte, or -1
  byte_map() {
    from_cpt.fill(-1);
    const auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      append_utf8(to_utf8[b], cpt);
      from_cpt[cpt] = static_cast<int16_t>(b);
    }
  }
};

const byte_map& bytes() {
  static const byte_map m;
  return m;
}

}  // namespace

const std::string& byte_to_utf8(uint8_t byte) { return bytes().to_utf8[byte]; }

int utf8_to_byte(uint32_t cpt) { return cpt < 512 ? bytes().from_cpt[cpt] : -1; }

}  // namespace spindle::unicode
