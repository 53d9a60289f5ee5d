// Reads the tokenizer.* keys of a GGUF file into a vocab_spec. Only types are checked here (errors name the
// key and what was found); sizes, ranges and contents are checked by build_vocab.
// Invariant: the spec owns copies of everything it needs; it does not point into the file.
#include <cmath>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/vocab.h"

namespace spindle::tok {

namespace {

const char* const k_special_id_keys[] = {
    "tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",     "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",     "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",    "tokenizer.ggml.fim_pre_token_id",
    "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
    "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id", "tokenizer.ggml.prefix_token_id",
    "tokenizer.ggml.suffix_token_id",  "tokenizer.ggml.middle_token_id",
};

std::string describe(const gguf_kv& kv) {
  if (kv.type != gguf_value_type::ARRAY) return gguf_value_type_name(kv.type);
  return std::string("array of ") + gguf_value_type_name(kv.array_type);
}

[[noreturn]] void wrong_type(const gguf_kv& kv, const char* expected) {
  throw error(kv.key + ": expected " + expected + ", found " + describe(kv));
}

const gguf_kv* find_array(const gguf_file& file, const char* key, gguf_value_type elem, const char* expected) {
  const gguf_kv* kv = file.find(key);
  if (kv && (kv->type != gguf_value_type::ARRAY || kv->array_type != elem)) wrong_type(*kv, expected);
  return kv;
}

std::vector<float> read_scores(const gguf_kv& kv) {
  std::vector<float> out;
  if (kv.type == gguf_value_type::ARRAY && kv.array_type == gguf_value_type::FLOAT32) {
    out.reserve(kv.floats.size());
    for (double f : kv.floats) out.push_back(static_cast<float>(f));
  } else if (kv.type == gguf_value_type::ARRAY && kv.array_type == gguf_value_type::INT32) {
    out.reserve(kv.ints.size());
    for (int64_t i : kv.ints) out.push_back(static_cast<float>(i));
  } else {
    wrong_type(kv, "an array of FLOAT32 or INT32");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) throw error(kv.key + "[" + std::to_string(i) + "] is NaN");
  }
  return out;
}

std::vector<int32_t> read_token_types(const gguf_kv& kv) {
  std::vector<int32_t> out;
  out.reserve(kv.ints.size());
  for (int64_t v : kv.ints) out.push_back(static_cast<int32_t>(v));  // INT32 elements fit
  return out;
}

}  // namespace

vocab_spec read_vocab_spec(const gguf_file& file) {
  vocab_spec spec;
  if (!file.find("tokenizer.ggml.model")) throw error("tokenizer.ggml.model: missing (the file has no vocabulary)");
  spec.model = file.get_string("tokenizer.ggml.model");
  spec.pre = file.get_string_or("tokenizer.ggml.pre", "");

  const gguf_kv* tokens = find_array(file, "tokenizer.ggml.tokens", gguf_value_type::STRING, "an array of strings");
  if (!tokens) throw error("tokenizer.ggml.tokens: missing");
  spec.tokens = tokens->strings;

  if (const gguf_kv* scores = file.find("tokenizer.ggml.scores")) spec.scores = read_scores(*scores);
  if (const gguf_kv* types = find_array(file, "tokenizer.ggml.token_type", gguf_value_type::INT32,
                                        "an array of INT32")) {
    spec.token_types = read_token_types(*types);
  }
  if (const gguf_kv* merges = find_array(file, "tokenizer.ggml.merges", gguf_value_type::STRING,
                                         "an array of strings")) {
    spec.merges = merges->strings;
  }

  for (const char* key : k_special_id_keys) {
    if (file.find(key)) spec.special_ids[key] = file.get_i64_or(key, -1);
  }
  if (file.find("tokenizer.ggml.add_bos_token")) spec.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", false);
  if (file.find("tokenizer.ggml.add_eos_token")) spec.add_eos = file.get_bool_or("tokenizer.ggml.add_eos_token", false);
  if (file.find("tokenizer.ggml.add_space_prefix")) {
    spec.add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", false);
  }
  spec.general_name = file.get_string_or("general.name", "");
  spec.general_architecture = file.get_string_or("general.architecture", "");
  return spec;
}

}  // namespace spindle::tok
