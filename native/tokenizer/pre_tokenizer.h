// Byte-level BPE pre-tokenization: splits text into words the way llama.cpp's unicode_regex_split does for
// the pre-tokenizer named by tokenizer.ggml.pre, then maps each word's bytes through GPT-2's byte encoding.
// Invariant: the word boundaries equal llama.cpp's for every supported pre-tokenizer and every input (with
// our Unicode tables; see scripts/gen-unicode-tables.mjs for the version), and the words' concatenation
// is the byte-encoded text (ill-formed UTF-8 first replaced by U+FFFD, as llama.cpp does).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spindle::tok {

// One split pass. llama.cpp runs a list of regexes; each pass re-splits every chunk the previous left.
enum class split_rule : uint8_t {
  gpt2,        // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)  (llama.cpp's custom code)
  llama3,      // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,       // as llama3 with \p{N} instead of \p{N}{1,3}
  // tekken (Mistral Nemo / Small 3), as llama.cpp runs it through std::regex on its collapsed text, where
  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] became ((?=\p{L})[^a-z]) and the lowercase class ((?=\p{L})[^A-Z]):
  // [^\r\n\p{L}\p{N}]?U*L+|[^\r\n\p{L}\p{N}]?U+L*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // (U: a letter but a-z, L: a letter but A-Z; a letter >= 128 is both, and marks are no letters)
  tekken,
  punct_run,   // [\p{P}\$\+<=>\^~\|]+   (std::regex over llama.cpp's collapsed text)
  punct_run_backtick,  // [\p{P}\$\+<=>\^~\|`]+
  number_run,     // \p{N}+
  number_single,  // \p{N}
  digit_triple,   // [0-9][0-9][0-9]
};

// What a tokenizer.ggml.pre name selects in llama.cpp's llama_vocab::impl::load.
struct pre_tokenizer_config {
  std::string name;                 // as given ("" means absent -> llama.cpp's "default")
  std::vector<split_rule> rules;
  bool clean_spaces = true;         // detokenize's clean-up passes (" ?" -> "?" ...)
  bool ignore_merges = false;       // a word that is itself a token skips the merges
  bool force_add_bos = false;       // llama.cpp sets add_bos for this name (GGUF add_bos_token still overrides)
  bool no_default_bos = false;      // llama.cpp clears the default BOS id for this name
};

// Throws spindle::error naming tokenizer.ggml.pre when the name is not one this tokenizer implements.
pre_tokenizer_config pre_tokenizer_for(const std::string& name);

// Splits `text` (any bytes) into byte-level-encoded words.
std::vector<std::string> pre_tokenize(std::string_view text, const std::vector<split_rule>& rules);

// The word boundaries only, as code point counts over unicode::decode_utf8(text) (for tests).
std::vector<size_t> split_offsets(const std::vector<uint32_t>& cpts, const std::vector<split_rule>& rules);

}  // namespace spindle::tok
