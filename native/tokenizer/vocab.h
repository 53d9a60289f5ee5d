// The vocabulary behind a tokenizer: GGUF tokenizer.* metadata read into a vocab_spec (types checked), then
// validated and completed into a vocab the way llama.cpp's llama_vocab::impl::load does it (default special
// ids, text-detected EOT/EOM/FIM tokens, the EOG set, attribute overrides, the special-token list, pieces).
// Invariant: a built vocab is self-consistent — every stored id is in [0, n_tokens), token texts are unique
// and non-empty, every BYTE token names a byte, and pieces[i] is token i's llama_token_to_piece(special=true).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

namespace spindle {
class gguf_file;
}

namespace spindle::tok {

// llama_token_attr bits.
enum attr_bit : uint32_t {
  ATTR_UNDEFINED = 0,
  ATTR_UNKNOWN = 1u << 0,
  ATTR_UNUSED = 1u << 1,
  ATTR_NORMAL = 1u << 2,
  ATTR_CONTROL = 1u << 3,
  ATTR_USER_DEFINED = 1u << 4,
  ATTR_BYTE = 1u << 5,
  ATTR_NORMALIZED = 1u << 6,
  ATTR_LSTRIP = 1u << 7,
  ATTR_RSTRIP = 1u << 8,
  ATTR_SINGLE_WORD = 1u << 9,
};

// tokenizer.ggml.token_type values (llama_token_type).
enum token_type : int32_t { TYPE_UNDEFINED = 0, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED,
                            TYPE_UNUSED, TYPE_BYTE };

// The raw metadata, as stored. Tests build these directly.
struct vocab_spec {
  std::string model;                       // tokenizer.ggml.model
  std::string pre;                         // tokenizer.ggml.pre ("" if absent)
  std::vector<std::string> tokens;         // tokenizer.ggml.tokens
  std::vector<float> scores;               // tokenizer.ggml.scores (empty if absent)
  std::vector<int32_t> token_types;        // tokenizer.ggml.token_type (empty if absent)
  std::optional<std::vector<std::string>> merges;  // tokenizer.ggml.merges
  std::map<std::string, int64_t> special_ids;      // full key (tokenizer.ggml.bos_token_id ...) -> value
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string general_name, general_architecture;  // for llama.cpp's per-model attribute rules
};

vocab_spec read_vocab_spec(const gguf_file& file);

enum class vocab_kind { spm, bpe };

struct vocab {
  vocab_kind kind = vocab_kind::spm;
  pre_tokenizer_config pre;  // BPE only
  std::vector<std::string> text;      // [n_tokens] token strings
  std::vector<float> score;           // [n_tokens]
  std::vector<uint32_t> attr;         // [n_tokens] attr_bit mask
  std::vector<std::string> piece;     // [n_tokens] bytes of llama_token_to_piece(id, special = true)
  std::unordered_map<std::string_view, int32_t> id_of;  // views into `text`
  std::unordered_map<std::string, int32_t> merge_rank;  // "left right" -> rank (first occurrence wins)
  std::vector<int32_t> special_tokens;  // control/user-defined/unknown ids, longest text first (llama.cpp order)
  std::vector<int32_t> eog;             // sorted
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool clean_spaces = false;  // detokenize's clean-up passes (BPE, per pre-tokenizer)

  vocab() = default;
  vocab(const vocab&) = delete;  // id_of views into text
  vocab& operator=(const vocab&) = delete;
  vocab(vocab&&) = default;      // moving the vector keeps its strings' buffers in place

  int32_t n_tokens() const { return static_cast<int32_t>(text.size()); }
  int32_t find(std::string_view s) const {
    auto it = id_of.find(s);
    return it == id_of.end() ? -1 : it->second;
  }
  int32_t find_merge(const std::string& key) const {  // key = left + ' ' + right
    auto it = merge_rank.find(key);
    return it == merge_rank.end() ? -1 : it->second;
  }
};

// Validates `spec` (errors name the offending key) and derives everything llama.cpp derives at load.
vocab build_vocab(vocab_spec spec);

// The byte a BYTE token stands for ("<0x0A>" -> 0x0A).
uint8_t byte_token_value(const std::string& text);

}  // namespace spindle::tok
