// The later half of build_vocab: the end-of-generation set (with llama.cpp's text rules and workarounds),
// the special-token list tokenizer partitioning walks, the per-token pieces, and per-model strip attributes.
// Invariant: runs on a vocab whose ids and attributes are already validated; never indexes out of range.
#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "common/error.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace spindle::tok {

namespace {

bool one_of(const std::string& t, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), std::string_view(t)) != list.end();
}

// Drops the token whose text is `text` from the EOG set, if there, and gives it `new_attr`.
void drop_from_eog(vocab& v, std::set<int32_t>& eog, const char* text, uint32_t new_attr) {
  for (int32_t id : eog) {
    if (v.text[id] == text) {
      eog.erase(id);
      v.attr[id] = new_attr;
      return;
    }
  }
}

bool eog_has(const vocab& v, const std::set<int32_t>& eog, std::initializer_list<std::string_view> texts) {
  for (int32_t id : eog) {
    if (one_of(v.text[id], texts)) return true;
  }
  return false;
}

// llama.cpp's byte-level decode of a token's text: each code point back to its byte; a code point outside
// the byte map becomes "[UNK_BYTE_0x<its utf-8 in hex><the whole token text>]", verbatim.
std::string decode_byte_level(const std::string& text) {
  std::string out;
  for (uint32_t cpt : unicode::decode_utf8(text)) {
    int byte = unicode::utf8_to_byte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    unicode::append_utf8(utf8, cpt);
    static const char* hex = "0123456789abcdef";
    out += "[UNK_BYTE_0x";
    for (char c : utf8) {
      out.push_back(hex[static_cast<uint8_t>(c) >> 4]);
      out.push_back(hex[static_cast<uint8_t>(c) & 15]);
    }
    out += text + "]";
  }
  return out;
}

std::string unescape_spaces(const std::string& text) {  // U+2581 -> ' '
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// llama_token_to_piece(id, special = true) for this vocab.
std::string piece_of(const vocab& v, int32_t id) {
  const uint32_t a = v.attr[id];
  const std::string& t = v.text[id];
  if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) return t;
  if (a & ATTR_NORMAL) return v.kind == vocab_kind::spm ? unescape_spaces(t) : decode_byte_level(t);
  if (a & ATTR_BYTE) return std::string(1, static_cast<char>(byte_token_value(t)));
  return std::string();  // unused / undefined tokens have no text
}

}  // namespace

void build_eog(vocab& v, int32_t fim_pad, int32_t fim_rep, int32_t fim_sep) {
  std::set<int32_t> eog;
  for (int32_t id : {fim_pad, fim_rep, fim_sep}) {
    if (id != -1) eog.insert(id);
  }
  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    if (one_of(v.text[id], {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
                            "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
                            "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
                            "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["})) {
      eog.insert(id);
      v.attr[id] |= ATTR_CONTROL;
    }
  }
  for (int32_t id = 0; id < v.n_tokens(); ++id) {  // gpt-oss: always render these
    if (one_of(v.text[id], {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})) {
      v.attr[id] = ATTR_USER_DEFINED;
    }
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id != -1) eog.insert(id);
  }
  // o200k_harmony / solar-open: "<|end|>" is not an end of generation when <|return|>/<|call|> exist.
  const bool has_call = eog_has(v, eog, {"<|call|>", "<|calls|>"});
  if ((eog_has(v, eog, {"<|return|>"}) && has_call) || (has_call && eog_has(v, eog, {"<|flush|>"}))) {
    drop_from_eog(v, eog, "<|end|>", ATTR_USER_DEFINED);
  }
  // gemma4 / paddleocr: "</s>" is not an end of generation next to "<|tool_response>".
  if (eog_has(v, eog, {"<|tool_response>"})) drop_from_eog(v, eog, "</s>", ATTR_NORMAL);
  v.eog.assign(eog.begin(), eog.end());
}

void build_special_list_and_pieces(vocab& v) {
  v.special_tokens.clear();
  for (int32_t id = 0; id < v.n_tokens(); ++id) {
    if (v.attr[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) v.special_tokens.push_back(id);
  }
  // Same comparator and algorithm as llama.cpp (std::sort), so ties between equal lengths order the same.
  std::sort(v.special_tokens.begin(), v.special_tokens.end(),
            [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
  v.piece.resize(v.text.size());
  for (int32_t id = 0; id < v.n_tokens(); ++id) v.piece[id] = piece_of(v, id);
}

void apply_strip_attrs(vocab& v, const vocab_spec& spec) {
  const auto contains_any = [](const std::string& s, std::initializer_list<std::string_view> subs) {
    for (std::string_view sub : subs) {
      if (s.find(sub) != std::string::npos) return true;
    }
    return false;
  };
  const auto set_attr = [&](const char* text, uint32_t bit, bool on) {
    int32_t id = v.find(text);
    if (id < 0) throw error("tokenizer.ggml.tokens: token '" + std::string(text) + "' is required for model '" +
                            spec.general_name + "'");
    v.attr[id] = on ? (v.attr[id] | bit) : (v.attr[id] & ~bit);
  };
  std::string name = spec.general_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  if (contains_any(spec.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(spec.general_architecture, {"nomic-bert-moe", "jina-bert-v3"})) {
    if (v.find("<mask>") >= 0) set_attr("<mask>", ATTR_LSTRIP, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (int32_t id : v.special_tokens) v.attr[id] |= ATTR_RSTRIP;
    set_attr("</s>", ATTR_RSTRIP, true);
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, ATTR_RSTRIP, false);
  } else if (contains_any(name, {"modern-bert"})) {
    if (v.find("[MASK]") >= 0) set_attr("[MASK]", ATTR_LSTRIP, true);
  }
}

}  // namespace spindle::tok
