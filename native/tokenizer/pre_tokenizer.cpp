// Pre-tokenizer passes. The gpt2/llama3/qwen2 passes follow llama.cpp's hand-written matchers (including their
// quirks, e.g. a lone trailing space or whitespace runs before a non-space); the class passes follow what
// std::regex does on llama.cpp's "collapsed" text, where every code point >= 128 stands in for its category.
// Invariant: every pass turns a list of chunk lengths (code points) into a finer list with the same total.
#include "tokenizer/pre_tokenizer.h"

#include "common/error.h"
#include "tokenizer/unicode.h"

namespace spindle::tok {

namespace {

constexpr uint32_t k_out_of_range = 0xFFFFFFFF;

// Scans one chunk [ini, end) of the code points; emit(p) closes the word that ends at p.
struct scanner {
  const std::vector<uint32_t>& cpts;
  size_t ini, end;
  std::vector<size_t>& out;
  size_t prev_end;

  scanner(const std::vector<uint32_t>& c, size_t i, size_t e, std::vector<size_t>& o)
      : cpts(c), ini(i), end(e), out(o), prev_end(i) {}
  uint32_t cpt(size_t pos) const { return (pos >= ini && pos < end) ? cpts[pos] : k_out_of_range; }
  uint16_t flags(size_t pos) const { return (pos >= ini && pos < end) ? unicode::flags(cpts[pos]) : 0; }
  size_t emit(size_t pos) {
    size_t len = pos - prev_end;
    if (len > 0) out.push_back(len);
    prev_end = pos;
    return len;
  }
};

bool is_letter(uint16_t f) { return f & unicode::LETTER; }
bool is_number(uint16_t f) { return f & unicode::NUMBER; }
bool is_space(uint16_t f) { return f & unicode::WHITESPACE; }
bool is_other(uint16_t f) { return !(f & (unicode::WHITESPACE | unicode::LETTER | unicode::NUMBER)) && f != 0; }
bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

// 's 't 're 've 'm 'll 'd at pos; returns the end position or 0. `fold` lowercases (llama3/qwen2 are (?i:)).
size_t contraction_end(const scanner& s, size_t pos, bool fold) {
  if (s.cpt(pos) != '\'' || pos + 1 >= s.end) return 0;
  const auto low = [&](size_t p) { return fold ? unicode::tolower_ascii(s.cpt(p)) : s.cpt(p); };
  uint32_t n1 = low(pos + 1);
  if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return pos + 2;
  if (pos + 2 >= s.end) return 0;
  uint32_t n2 = low(pos + 2);
  if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return pos + 3;
  return 0;
}

// \s+(?!\S) then \s+ (gpt2 form, no [\r\n] rule). Returns the new position.
size_t whitespace_gpt2(scanner& s, size_t pos) {
  size_t n = 0;
  while (is_space(s.flags(pos + n))) ++n;
  if (n > 1 && s.cpt(pos + n) != k_out_of_range) pos += n - 1;
  else if (n > 0) pos += n;
  else ++pos;  // no rule matched: the code point is a word by itself
  s.emit(pos);
  return pos;
}

void split_gpt2(scanner& s) {
  for (size_t pos = s.ini; pos < s.end;) {
    if (size_t e = contraction_end(s, pos, false)) { s.emit(e); pos = e; continue; }
    const uint32_t c = s.cpt(pos);
    uint16_t f2 = (c == ' ') ? s.flags(pos + 1) : s.flags(pos);
    bool (*run)(uint16_t) = is_letter(f2) ? is_letter : is_number(f2) ? is_number : is_other(f2) ? is_other : nullptr;
    if (run) {
      pos += (c == ' ');
      while (run(f2)) f2 = s.flags(++pos);
      s.emit(pos);
      continue;
    }
    pos = whitespace_gpt2(s, pos);
  }
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ (the llama3 / qwen2 / tekken tail). Returns the new position.
size_t whitespace_llama3(scanner& s, size_t pos) {
  size_t n = 0, last_crlf_end = 0;
  while (is_space(s.flags(pos + n))) {
    if (is_crlf(s.cpt(pos + n))) last_crlf_end = pos + n + 1;
    ++n;
  }
  if (last_crlf_end > 0) pos = last_crlf_end;
  else if (n > 1 && s.cpt(pos + n) != k_out_of_range) pos += n - 1;
  else if (n > 0) pos += n;
  else ++pos;  // no rule matched: the code point is a word by itself
  s.emit(pos);
  return pos;
}

// llama3 (digits_max = 3) and qwen2 (digits_max = 1).
void split_llama3(scanner& s, size_t digits_max) {
  for (size_t pos = s.ini; pos < s.end;) {
    if (size_t e = contraction_end(s, pos, true)) { s.emit(e); pos = e; continue; }
    const uint32_t c = s.cpt(pos);
    const uint16_t f = s.flags(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(is_crlf(c) || is_number(f)) && (is_letter(f) || is_letter(s.flags(pos + 1)))) {
      ++pos;
      while (is_letter(s.flags(pos))) ++pos;
      s.emit(pos);
      continue;
    }
    // \p{N}{1,digits_max}
    if (is_number(f)) {
      size_t ini = pos;
      while (is_number(s.flags(pos))) {
        if (++pos - ini >= digits_max) { s.emit(pos); ini = pos; }
      }
      s.emit(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (llama.cpp tests the first code point's flags, not the optional space's)
    uint16_t f2 = (c == ' ') ? s.flags(pos + 1) : f;
    if (!(f2 & (unicode::WHITESPACE | unicode::LETTER | unicode::NUMBER)) && f != 0) {
      pos += (c == ' ');
      while (is_other(f2)) f2 = s.flags(++pos);
      while (is_crlf(s.cpt(pos))) ++pos;
      s.emit(pos);
      continue;
    }
    pos = whitespace_llama3(s, pos);
  }
}

// tekken's classes over llama.cpp's collapsed text (split_rule::tekken): code points < 128 are themselves (\s is
// C's isspace, the same ASCII set as the whitespace table's), others are whitespace or their category.
bool tk_space(const scanner& s, size_t p) { return is_space(s.flags(p)); }
bool tk_letter(const scanner& s, size_t p) { return s.cpt(p) != k_out_of_range && !tk_space(s, p) && is_letter(s.flags(p)); }
bool tk_number(const scanner& s, size_t p) { return s.cpt(p) != k_out_of_range && !tk_space(s, p) && is_number(s.flags(p)); }
bool tk_upper(const scanner& s, size_t p) { return tk_letter(s, p) && !(s.cpt(p) >= 'a' && s.cpt(p) <= 'z'); }
bool tk_lower(const scanner& s, size_t p) { return tk_letter(s, p) && !(s.cpt(p) >= 'A' && s.cpt(p) <= 'Z'); }
// [^\s\p{L}\p{N}]: anything else in the chunk (punctuation, symbols, marks, controls, unassigned)
bool tk_other(const scanner& s, size_t p) {
  return s.cpt(p) != k_out_of_range && !tk_space(s, p) && !tk_letter(s, p) && !tk_number(s, p);
}

// U*L+ from q with std::regex's backtracking: the longest U* after which an L follows, then L+ greedily; 0: no match.
size_t tekken_upper_lower(const scanner& s, size_t q) {
  size_t j = q;
  while (tk_upper(s, j)) ++j;
  for (size_t k = j + 1; k-- > q;) {  // U* of length k - q, longest first
    if (!tk_lower(s, k)) continue;
    size_t m = k;
    while (tk_lower(s, m)) ++m;
    return m;
  }
  return 0;
}

// U+L* from q; 0: no match.
size_t tekken_upper_run(const scanner& s, size_t q) {
  if (!tk_upper(s, q)) return 0;
  size_t m = q;
  while (tk_upper(s, m)) ++m;
  while (tk_lower(s, m)) ++m;
  return m;
}

void split_tekken(scanner& s) {
  for (size_t pos = s.ini; pos < s.end;) {
    const uint32_t c = s.cpt(pos);
    // [^\r\n\p{L}\p{N}]? (taken when it can be) before either letter alternative
    const bool prefix = !is_crlf(c) && !tk_letter(s, pos) && !tk_number(s, pos);
    const size_t q = prefix ? pos + 1 : pos;
    size_t e = tekken_upper_lower(s, q);
    if (!e) e = tekken_upper_run(s, q);
    if (e) { s.emit(e); pos = e; continue; }
    if (tk_number(s, pos)) { s.emit(pos + 1); pos += 1; continue; }  // \p{N}
    // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
    if (tk_other(s, pos) || (c == ' ' && tk_other(s, pos + 1))) {
      pos += (c == ' ');
      while (tk_other(s, pos)) ++pos;
      while (s.cpt(pos) == '\r' || s.cpt(pos) == '\n' || s.cpt(pos) == '/') ++pos;
      s.emit(pos);
      continue;
    }
    pos = whitespace_llama3(s, pos);  // every code point left here is whitespace
  }
}

// Membership in a bracket class over the collapsed text: code points < 128 are themselves; others are their
// category (whitespace first: it collapses to \v, which no class here contains).
bool collapsed_in(uint32_t c, split_rule rule) {
  if (c >= 128) {
    uint16_t f = unicode::flags(c);
    if (f & unicode::WHITESPACE) return false;
    uint16_t cat = f & unicode::CATEGORY_MASK;
    return (rule == split_rule::number_run || rule == split_rule::number_single) ? cat == unicode::NUMBER
                                                                                 : cat == unicode::PUNCTUATION;
  }
  switch (rule) {
    case split_rule::number_run:
    case split_rule::number_single:
      return c >= '0' && c <= '9';
    case split_rule::punct_run_backtick:
      if (c == '`') return true;
      [[fallthrough]];
    default: {
      // \p{P} in llama.cpp's ASCII map: !-# %-* ,-/ :-; ?-@ [-] _ { }, plus the listed $ + < = > ^ ~ |
      static const std::string set = "!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|";
      return set.find(static_cast<char>(c)) != std::string::npos;
    }
  }
}

bool ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

// std::regex_iterator over one chunk: gaps between matches and the matches themselves become words.
void split_class(scanner& s, split_rule rule) {
  size_t pos = s.ini;
  while (pos < s.end) {
    size_t match = pos, len = 0;
    for (; match < s.end; ++match) {
      if (rule == split_rule::digit_triple) {
        if (match + 3 <= s.end && ascii_digit(s.cpts[match]) && ascii_digit(s.cpts[match + 1]) &&
            ascii_digit(s.cpts[match + 2])) { len = 3; break; }
      } else if (collapsed_in(s.cpts[match], rule)) {
        len = 1;
        if (rule != split_rule::number_single) {
          while (match + len < s.end && collapsed_in(s.cpts[match + len], rule)) ++len;
        }
        break;
      }
    }
    if (len == 0) break;
    s.emit(match);
    s.emit(match + len);
    pos = match + len;
  }
  s.emit(s.end);
}

}  // namespace

std::vector<size_t> split_offsets(const std::vector<uint32_t>& cpts, const std::vector<split_rule>& rules) {
  std::vector<size_t> offsets = {cpts.size()};
  for (split_rule rule : rules) {
    std::vector<size_t> next;
    next.reserve(offsets.size());
    size_t start = 0;
    for (size_t len : offsets) {
      scanner s(cpts, start, start + len, next);
      switch (rule) {
        case split_rule::gpt2: split_gpt2(s); break;
        case split_rule::llama3: split_llama3(s, 3); break;
        case split_rule::qwen2: split_llama3(s, 1); break;
        case split_rule::tekken: split_tekken(s); break;
        default: split_class(s, rule); break;
      }
      start += len;
    }
    offsets = std::move(next);
  }
  return offsets;
}

std::vector<std::string> pre_tokenize(std::string_view text, const std::vector<split_rule>& rules) {
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  const std::vector<size_t> offsets = split_offsets(cpts, rules);
  std::vector<std::string> words;
  words.reserve(offsets.size());
  std::string utf8;
  size_t start = 0;
  for (size_t len : offsets) {
    utf8.clear();
    for (size_t i = start; i < start + len; ++i) unicode::append_utf8(utf8, cpts[i]);
    std::string word;
    word.reserve(utf8.size() * 2);
    for (char ch : utf8) word += unicode::byte_to_utf8(static_cast<uint8_t>(ch));
    words.push_back(std::move(word));
    start += len;
  }
  return words;
}

}  // namespace spindle::tok

namespace spindle::tok {

namespace {

struct pre_family {
  std::vector<const char*> names;
  std::vector<split_rule> rules;
  bool clean_spaces;
  bool ignore_merges;
  bool force_add_bos;
  bool no_default_bos;
};

// The subset of llama.cpp's tokenizer.ggml.pre names whose splitting this file implements, with the flags
// llama_vocab::impl::load sets for each.
const std::vector<pre_family>& families() {
  using r = split_rule;
  static const std::vector<pre_family> table = {
      {{"default"}, {r::punct_run, r::gpt2, r::number_run, r::digit_triple}, true, false, false, false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
       {r::llama3}, true, true, true, false},
      {{"dbrx", "smaug-bpe"}, {r::llama3}, true, false, false, false},
      {{"glm4", "chatglm-bpe"}, {r::llama3}, true, false, false, true},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open"}, {r::qwen2}, false, false, false, false},
      {{"megrez", "stablelm2"}, {r::qwen2}, true, false, false, false},
      {{"tekken"}, {r::tekken}, false, true, true, false},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
        "modern-bert", "mpt", "olmo", "jais", "exaone4"},
       {r::gpt2}, true, false, false, false},
      {{"trillion", "granite-docling"}, {r::gpt2}, false, false, false, false},
      {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, {r::number_single, r::gpt2}, true,
       false, false, false},
      {{"command-r", "smollm"}, {r::number_single, r::gpt2}, false, false, false, false},
      {{"falcon"}, {r::punct_run_backtick, r::gpt2, r::digit_triple}, true, false, false, false},
  };
  return table;
}

}  // namespace

pre_tokenizer_config pre_tokenizer_for(const std::string& name) {
  const std::string key = name.empty() ? "default" : name;
  for (const pre_family& fam : families()) {
    for (const char* n : fam.names) {
      if (key != n) continue;
      pre_tokenizer_config cfg;
      cfg.name = name;
      cfg.rules = fam.rules;
      cfg.clean_spaces = fam.clean_spaces;
      cfg.ignore_merges = fam.ignore_merges;
      cfg.force_add_bos = fam.force_add_bos;
      cfg.no_default_bos = fam.no_default_bos;
      return cfg;
    }
  }
  throw error("tokenizer.ggml.pre: unsupported pre-tokenizer '" + name + "'");
}

}  // namespace spindle::tok
