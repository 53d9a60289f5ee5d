// Tokenizer built from a GGUF vocabulary: byte-level BPE (tokenizer.ggml.model = "gpt2") with the
// pre-tokenizer chosen by tokenizer.ggml.pre, and SentencePiece ("llama") with scores and byte fallback.
// Invariant: encode/decode match llama.cpp's llama_tokenize / llama_token_to_piece for the same GGUF.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spindle {

class gguf_file;

enum class token_attr : uint8_t { normal, control, user_defined, unknown, byte, unused };

class tokenizer {
 public:
  // Throws spindle::error naming the key when the vocabulary metadata is missing or malformed.
  static std::unique_ptr<tokenizer> from_gguf(const gguf_file& file);
  virtual ~tokenizer() = default;

  // add_special: prepend BOS (and append EOS) where the model's add_bos_token / add_eos_token ask for it.
  // parse_special: text matching a control or user-defined token becomes that token id.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const = 0;
  // Raw bytes of one token (may be a partial UTF-8 sequence). Control tokens yield their text only when
  // `special` is true, as llama_token_to_piece does.
  virtual std::string token_to_piece(int32_t id, bool special) const = 0;
  // Concatenated pieces; skip_special drops control tokens. Invalid ids throw spindle::error.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual int32_t eos_id() const = 0;  // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool is_eog(int32_t id) const = 0;               // end-of-generation (EOS, EOT, <|im_end|>...)
  virtual const std::vector<int32_t>& eog_ids() const = 0;
  virtual token_attr attr(int32_t id) const = 0;
  // llama.cpp's llama_token_attr bit mask for `id` (LLAMA_TOKEN_ATTR_*: unknown 1, unused 2, normal 4, control 8,
  // user_defined 16, byte 32, lstrip 128, rstrip 256). Invalid ids throw spindle::error. The default derives
  // one bit from attr(); the GGUF tokenizer returns the full mask.
  virtual uint32_t attr_flags(int32_t id) const {
    static const uint32_t bits[] = {4, 8, 16, 1, 32, 2};  // indexed by token_attr
    return bits[static_cast<int>(attr(id))];
  }
  virtual const std::string& token_text(int32_t id) const = 0;  // the vocabulary string as stored
};

// Turns a token stream into text chunks that are always complete UTF-8: bytes of an unfinished character are
// held back until the token that completes it arrives (flush() emits leftovers, invalid bytes as U+FFFD).
class incremental_decoder {
 public:
  incremental_decoder(const tokenizer& tok, bool skip_special) : tok_(tok), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string flush();

 private:
  const tokenizer& tok_;
  bool skip_special_;
  std::string pending_;  // bytes of an incomplete trailing UTF-8 sequence
};

}  // namespace spindle
