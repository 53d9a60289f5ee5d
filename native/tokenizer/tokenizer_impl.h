// Internals of spindle::tokenizer shared by its .cpp files and the native tests: special-token partitioning,
// the BPE and SentencePiece encoders, and detokenization, each over a built vocab.
// Invariant: nothing here keeps references into the text it is given beyond the call.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace spindle::tok {

// A piece of the input after special-token partitioning: a token id, or raw text [offset, offset + length).
struct fragment {
  int32_t token;   // -1 for raw text
  size_t offset;   // bytes
  size_t length;   // bytes, > 0 for raw text
};

// llama.cpp's tokenizer_st_partition: for each special token (longest first), split every raw fragment at its
// occurrences, honouring LSTRIP/RSTRIP. Control and unknown tokens are only matched when parse_special.
std::vector<fragment> partition_special(const vocab& v, std::string_view text, bool parse_special);

// Byte-level BPE over one raw fragment (pre-tokenize, merge by rank per word). Thread-safe; caches words.
class bpe_encoder {
 public:
  explicit bpe_encoder(const vocab& v) : v_(v) {}
  void encode(std::string_view text, std::vector<int32_t>& out) const;
  // One pre-tokenized (byte-encoded) word, uncached.
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

 private:
  const vocab& v_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // word -> ids
};

// llama.cpp's SentencePiece session over one fragment whose spaces are already escaped as U+2581.
// Throws spindle::error if a byte has neither a <0xXX> token nor a single-byte token.
void spm_encode(const vocab& v, std::string_view text, std::vector<int32_t>& out);

// llama_detokenize(remove_special = false, unparse_special): pieces, the SPM leading-space strip of the
// first token, and the clean-up passes of BPE vocabularies that ask for them. Ids must be valid.
std::string detokenize(const vocab& v, const std::vector<int32_t>& ids, bool unparse_special);

std::unique_ptr<tokenizer> make_tokenizer(vocab v);

}  // namespace spindle::tok
