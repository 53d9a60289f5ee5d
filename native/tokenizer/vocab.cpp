// build_vocab: validation of a vocab_spec, then the derivations of llama.cpp's llama_vocab::impl::load, in
// its order (types -> attrs, default and explicit special ids, text-detected EOT/EOM/FIM tokens, unused
// control tokens, the EOG set and its workarounds, the special-token list, pieces, per-model strip attrs).
// Where llama.cpp walks its token_to_id hash map and the first match wins, we walk ids in ascending order.
// Invariant: see vocab.h; every rejection names the GGUF key at fault.
#include <algorithm>
#include <cctype>
#include <climits>

#include "common/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace spindle::tok {

namespace {

const char* const k_tokens = "tokenizer.ggml.tokens";

std::string quoted(const std::string& s) { return "'" + s + "'"; }

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

uint32_t attr_of_type(int32_t type, size_t i) {
  switch (type) {
    case TYPE_UNDEFINED: return ATTR_UNDEFINED;
    case TYPE_NORMAL: return ATTR_NORMAL;
    case TYPE_UNKNOWN: return ATTR_UNKNOWN;
    case TYPE_CONTROL: return ATTR_CONTROL;
    case TYPE_USER_DEFINED: return ATTR_USER_DEFINED;
    case TYPE_UNUSED: return ATTR_UNUSED;
    case TYPE_BYTE: return ATTR_BYTE;
    default:
      throw error("tokenizer.ggml.token_type[" + std::to_string(i) + "] = " + std::to_string(type) +
                  " is not a token type (0..6)");
  }
}

// Token texts, scores and attributes; the text -> id index.
void load_tokens(vocab& v, vocab_spec& spec) {
  const size_t n = spec.tokens.size();
  if (n == 0) throw error(std::string(k_tokens) + ": the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX)) throw error(std::string(k_tokens) + ": too many tokens");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    throw error("tokenizer.ggml.scores: " + std::to_string(spec.scores.size()) + " scores for " +
                std::to_string(n) + " tokens");
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    throw error("tokenizer.ggml.token_type: " + std::to_string(spec.token_types.size()) + " types for " +
                std::to_string(n) + " tokens");
  }
  v.text = std::move(spec.tokens);
  v.score = spec.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(spec.scores);
  v.attr.assign(n, ATTR_NORMAL);
  for (size_t i = 0; i < n; ++i) {
    if (v.text[i].empty()) v.text[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp renames them
    if (!spec.token_types.empty()) v.attr[i] = attr_of_type(spec.token_types[i], i);
    const std::string& t = v.text[i];
    if ((v.attr[i] & ATTR_BYTE) &&
        !(t.size() == 6 && t.compare(0, 3, "<0x") == 0 && is_hex(t[3]) && is_hex(t[4]) && t[5] == '>')) {
      throw error(std::string(k_tokens) + "[" + std::to_string(i) + "] " + quoted(t) +
                  " has token type BYTE but is not of the form <0xXX>");
    }
  }
  v.id_of.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = v.id_of.emplace(std::string_view(v.text[i]), static_cast<int32_t>(i));
    if (!inserted) {
      throw error(std::string(k_tokens) + ": token " + quoted(v.text[i]) + " appears twice (ids " +
                  std::to_string(it->second) + " and " + std::to_string(i) + ")");
    }
  }
}

void load_merges(vocab& v, const vocab_spec& spec) {
  if (!spec.merges) throw error("tokenizer.ggml.merges: missing (required by tokenizer model 'gpt2')");
  const std::vector<std::string>& merges = *spec.merges;
  if (merges.size() > static_cast<size_t>(INT32_MAX)) throw error("tokenizer.ggml.merges: too many merges");
  v.merge_rank.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      throw error("tokenizer.ggml.merges[" + std::to_string(i) + "] " + quoted(m) +
                  " is not two symbols separated by a space");
    }
    v.merge_rank.emplace(m, static_cast<int32_t>(i));  // the first occurrence of a pair keeps its rank
  }
}

struct special_slots {
  int32_t bos, eos, eot = -1, eom = -1, unk, sep = -1, pad = -1, mask = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
};

// Default ids per model type, dropped when out of range; then explicit keys (which must be in range).
void load_special_ids(special_slots& s, const vocab& v, const vocab_spec& spec) {
  const std::pair<const char*, int32_t*> slots[] = {
      {"tokenizer.ggml.bos_token_id", &s.bos},         {"tokenizer.ggml.eos_token_id", &s.eos},
      {"tokenizer.ggml.eot_token_id", &s.eot},         {"tokenizer.ggml.eom_token_id", &s.eom},
      {"tokenizer.ggml.unknown_token_id", &s.unk},     {"tokenizer.ggml.seperator_token_id", &s.sep},
      {"tokenizer.ggml.padding_token_id", &s.pad},     {"tokenizer.ggml.mask_token_id", &s.mask},
      {"tokenizer.ggml.fim_pre_token_id", &s.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &s.fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &s.fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &s.fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &s.fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &s.fim_sep},
      {"tokenizer.ggml.prefix_token_id", &s.fim_pre},  {"tokenizer.ggml.suffix_token_id", &s.fim_suf},
      {"tokenizer.ggml.middle_token_id", &s.fim_mid},
  };
  for (const auto& [key, slot] : slots) {
    if (*slot >= v.n_tokens()) *slot = -1;
    auto it = spec.special_ids.find(key);
    if (it == spec.special_ids.end()) continue;
    if (it->second < 0 || it->second >= v.n_tokens()) {
      throw error(std::string(key) + " = " + std::to_string(it->second) + " is outside the vocabulary (" +
                  std::to_string(v.n_tokens()) + " tokens)");
    }
    *slot = static_cast<int32_t>(it->second);
  }
}

bool text_in(const std::string& t, std::initializer_list<const char*> list) {
  for (const char* s : list) {
    if (t == s) return true;
  }
  return false;
}

// A role llama.cpp fills by token text when no key set it; the chosen token becomes a control token.
void detect_by_text(vocab& v, int32_t& slot, std::initializer_list<const char*> texts) {
  if (slot != -1) return;
  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    if (text_in(v.text[id], texts)) {
      slot = id;
      v.attr[id] |= ATTR_CONTROL;
      return;
    }
  }
}

void detect_special_roles(vocab& v, special_slots& s) {
  detect_by_text(v, s.eot, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                            "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>",
                            "<end_of_utterance>"});
  detect_by_text(v, s.eom, {"<|eom_id|>"});
  detect_by_text(v, s.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
                                "▁<PRE>", "<|code_prefix|>", "<|prefix|>"});
  detect_by_text(v, s.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
                                "▁<SUF>", "<|code_suffix|>", "<|suffix|>"});
  detect_by_text(v, s.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
                                "▁<MID>", "<|code_middle|>", "<|middle|>"});
  detect_by_text(v, s.fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect_by_text(v, s.fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect_by_text(v, s.fim_sep, {"<|file_sep|>"});
  for (int32_t id = 0; id < v.n_tokens(); ++id) {  // control tokens named "unused" are unused
    if ((v.attr[id] & ATTR_CONTROL) && v.text[id].find("unused") != std::string::npos) v.attr[id] |= ATTR_UNUSED;
  }
}

}  // namespace

uint8_t byte_token_value(const std::string& text) {
  const auto nibble = [](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    return static_cast<uint8_t>((std::tolower(static_cast<unsigned char>(c)) - 'a') + 10);
  };
  return static_cast<uint8_t>(nibble(text[3]) << 4 | nibble(text[4]));
}

// Defined in vocab_special.cpp.
void build_eog(vocab& v, int32_t fim_pad, int32_t fim_rep, int32_t fim_sep);
void build_special_list_and_pieces(vocab& v);
void apply_strip_attrs(vocab& v, const vocab_spec& spec);

vocab build_vocab(vocab_spec spec) {
  vocab v;
  if (spec.model == "llama") {
    v.kind = vocab_kind::spm;
  } else if (spec.model == "gpt2") {
    v.kind = vocab_kind::bpe;
  } else {
    throw error("tokenizer.ggml.model: unsupported tokenizer model " + quoted(spec.model) +
                " (supported: 'llama' (SentencePiece), 'gpt2' (byte-level BPE))");
  }
  special_slots s{};
  if (v.kind == vocab_kind::spm) {
    s.bos = 1; s.eos = 2; s.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else {
    v.pre = pre_tokenizer_for(spec.pre);
    load_merges(v, spec);
    s.bos = v.pre.no_default_bos ? -1 : 11; s.eos = 11; s.unk = -1;
    v.add_bos = v.pre.force_add_bos;
    v.clean_spaces = v.pre.clean_spaces;
  }
  if (spec.add_space_prefix) v.add_space_prefix = *spec.add_space_prefix;
  load_tokens(v, spec);
  load_special_ids(s, v, spec);
  if (spec.add_bos) v.add_bos = *spec.add_bos;
  if (spec.add_eos) v.add_eos = *spec.add_eos;
  detect_special_roles(v, s);
  v.bos = s.bos; v.eos = s.eos; v.eot = s.eot; v.eom = s.eom; v.unk = s.unk; v.pad = s.pad;
  build_eog(v, s.fim_pad, s.fim_rep, s.fim_sep);
  build_special_list_and_pieces(v);
  apply_strip_attrs(v, spec);
  return v;
}

}  // namespace spindle::tok
