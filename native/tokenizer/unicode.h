// Unicode helpers for the tokenizer: code point classes (llama.cpp's unicode flags), the lenient UTF-8
// decoder llama.cpp tokenizes with, and GPT-2's byte <-> printable code point mapping.
// Invariant: every function is total — any byte string and any uint32_t are accepted; nothing throws.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spindle::unicode {

// Category flags (one per code point) plus helper bits, the same values as llama.cpp's unicode_cpt_flags.
enum cpt_flag : uint16_t {
  UNDEFINED = 0x0001,    // unassigned (Cn) or outside 0..0x10FFFF
  NUMBER = 0x0002,       // \p{N}
  LETTER = 0x0004,       // \p{L}
  SEPARATOR = 0x0008,    // \p{Z}
  MARK = 0x0010,         // \p{M}
  PUNCTUATION = 0x0020,  // \p{P}
  SYMBOL = 0x0040,       // \p{S}
  CONTROL = 0x0080,      // \p{C} except Cn
  CATEGORY_MASK = 0x00FF,
  WHITESPACE = 0x0100,   // White_Space property (regex \s)
};

constexpr uint32_t k_max_cpt = 0x110000;
constexpr uint32_t k_replacement = 0xFFFD;

// Category flag | WHITESPACE. Never 0 (code points past 0x10FFFF are UNDEFINED).
uint16_t flags(uint32_t cpt);
// The simple lowercase mapping where it lands in ASCII ('A' -> 'a', U+212A KELVIN SIGN -> 'k'), else cpt.
uint32_t tolower_ascii(uint32_t cpt);

// Byte length of the UTF-8 sequence a lead byte announces, by its high nibble (1 for continuation bytes).
size_t utf8_len(uint8_t lead);
// Decodes like llama.cpp's unicode_cpts_from_utf8: each malformed lead or truncated sequence becomes one
// U+FFFD and decoding resumes at the next byte. Sequences that decode past 0x10FFFF also become U+FFFD.
std::vector<uint32_t> decode_utf8(std::string_view text);
void append_utf8(std::string& out, uint32_t cpt);  // cpt must be <= 0x10FFFF

// GPT-2 byte-level mapping: each byte -> one printable code point (as UTF-8), and back.
const std::string& byte_to_utf8(uint8_t byte);
int utf8_to_byte(uint32_t cpt);  // the byte a mapped code point stands for, or -1

// Generated tables (unicode_data.cpp).
struct category_run {
  uint32_t start;  // first code point of the run
  uint8_t flag;    // category flag (UNDEFINED..CONTROL)
};
struct lower_pair {
  uint32_t cpt;
  uint32_t lower;
};
extern const category_run k_category_runs[];
extern const size_t k_n_category_runs;
extern const uint32_t k_whitespace[];
extern const size_t k_n_whitespace;
extern const lower_pair k_lower_ascii[];
extern const size_t k_n_lower_ascii;

}  // namespace spindle::unicode
