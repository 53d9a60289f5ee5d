// Helpers for the tokenizer tests: tiny hand-made vocabularies (BPE and SentencePiece) as vocab_specs, their
// GGUF images, and printing of id lists.
// Invariant: helpers build inputs only; they never compute an expected result the tests then check.
#pragma once
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf_test_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace tok_test {

using spindle::tok::vocab_spec;

// GPT-2 byte-level form of raw text ("a b" -> "aĠb").
inline std::string bl(const std::string& raw) {
  std::string out;
  for (char c : raw) out += spindle::unicode::byte_to_utf8(static_cast<uint8_t>(c));
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << "]";
  return os.str();
}

// A byte-level BPE vocabulary: ids 0..3 are <|begin_of_text|> <|end_of_text|> (control) <|eot_id|> (control)
// <think> (user-defined); ids 4..259 are the 256 single bytes in byte order (id = 4 + byte); then `extra`
// (raw text, byte-level encoded here) in order. Merges are raw "left right" pairs, encoded likewise.
inline vocab_spec bpe_spec(const std::vector<std::string>& extra, const std::vector<std::pair<std::string, std::string>>& merges,
                           const std::string& pre = "llama-bpe") {
  vocab_spec s;
  s.model = "gpt2";
  s.pre = pre;
  s.tokens = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<think>"};
  s.token_types = {3, 3, 3, 4};
  for (int b = 0; b < 256; ++b) {
    s.tokens.push_back(spindle::unicode::byte_to_utf8(static_cast<uint8_t>(b)));
    s.token_types.push_back(1);
  }
  for (const std::string& t : extra) {
    s.tokens.push_back(bl(t));
    s.token_types.push_back(1);
  }
  s.merges.emplace();
  for (const auto& [l, r] : merges) s.merges->push_back(bl(l) + " " + bl(r));
  s.special_ids["tokenizer.ggml.bos_token_id"] = 0;
  s.special_ids["tokenizer.ggml.eos_token_id"] = 1;
  return s;
}

constexpr int32_t k_bpe_byte0 = 4;     // id of byte 0x00 in bpe_spec
constexpr int32_t k_bpe_extra0 = 260;  // id of the first `extra` token in bpe_spec

// A SentencePiece vocabulary: 0 <unk> (unknown), 1 <s>, 2 </s> (control), 3..258 <0x00>..<0xFF> (byte), then
// `pieces` (text with spaces written as U+2581) with their scores.
inline vocab_spec spm_spec(const std::vector<std::pair<std::string, float>>& pieces) {
  vocab_spec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    s.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    s.token_types.push_back(6);
    s.scores.push_back(0);
  }
  for (const auto& [text, score] : pieces) {
    s.tokens.push_back(text);
    s.token_types.push_back(1);
    s.scores.push_back(score);
  }
  return s;
}

constexpr int32_t k_spm_byte0 = 3;     // id of <0x00> in spm_spec
constexpr int32_t k_spm_extra0 = 259;  // id of the first piece in spm_spec

inline std::unique_ptr<spindle::tokenizer> make(const vocab_spec& s) {
  return spindle::tok::make_tokenizer(spindle::tok::build_vocab(s));
}

// The GGUF image of `s` (tokenizer.* keys plus general.name / general.architecture when set).
inline std::vector<uint8_t> to_gguf(const vocab_spec& s) {
  using T = spindle::gguf_value_type;
  gguf_test::writer w;
  uint64_t n_kv = 2 + (s.pre.empty() ? 0 : 1) + (s.scores.empty() ? 0 : 1) + (s.token_types.empty() ? 0 : 1) +
                  (s.merges ? 1 : 0) + s.special_ids.size() + (s.add_bos ? 1 : 0) + (s.add_eos ? 1 : 0) +
                  (s.add_space_prefix ? 1 : 0) + (s.general_name.empty() ? 0 : 1);
  w.header(3, 0, n_kv);
  w.kv_str("tokenizer.ggml.model", s.model);
  if (!s.pre.empty()) w.kv_str("tokenizer.ggml.pre", s.pre);
  w.arr_str("tokenizer.ggml.tokens", s.tokens);
  if (!s.scores.empty()) w.arr_of<float>("tokenizer.ggml.scores", T::FLOAT32, s.scores);
  if (!s.token_types.empty()) w.arr_of<int32_t>("tokenizer.ggml.token_type", T::INT32, s.token_types);
  if (s.merges) w.arr_str("tokenizer.ggml.merges", *s.merges);
  for (const auto& [key, id] : s.special_ids) w.kv<uint32_t>(key, T::UINT32, static_cast<uint32_t>(id));
  if (s.add_bos) w.kv<uint8_t>("tokenizer.ggml.add_bos_token", T::BOOL, *s.add_bos);
  if (s.add_eos) w.kv<uint8_t>("tokenizer.ggml.add_eos_token", T::BOOL, *s.add_eos);
  if (s.add_space_prefix) w.kv<uint8_t>("tokenizer.ggml.add_space_prefix", T::BOOL, *s.add_space_prefix);
  if (!s.general_name.empty()) w.kv_str("general.name", s.general_name);
  w.pad_to(32);
  return w.bytes;
}

}  // namespace tok_test
