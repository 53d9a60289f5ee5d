// Typed metadata getters of gguf_file.
// Invariant: a getter returns a value only when the stored type is one it accepts and the value fits the
// result type exactly; otherwise it throws spindle::error "<path>: key '<key>' ..." naming the problem.
#include <cstdint>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace spindle {

namespace {

bool is_signed_int(gguf_value_type t) {
  return t == gguf_value_type::INT8 || t == gguf_value_type::INT16 || t == gguf_value_type::INT32 ||
         t == gguf_value_type::INT64;
}

bool is_unsigned_int(gguf_value_type t) {
  return t == gguf_value_type::UINT8 || t == gguf_value_type::UINT16 || t == gguf_value_type::UINT32 ||
         t == gguf_value_type::UINT64;
}

std::string type_desc(const gguf_kv& kv) {
  if (kv.type != gguf_value_type::ARRAY) return gguf_value_type_name(kv.type);
  return std::string("arr[") + gguf_value_type_name(kv.array_type) + "]";
}

std::string key_prefix(const gguf_file& f, const gguf_kv& kv) { return f.path() + ": key '" + kv.key + "' "; }

[[noreturn]] void type_error(const gguf_file& f, const gguf_kv& kv, const char* expected) {
  throw error(key_prefix(f, kv) + "has type " + type_desc(kv) + ", expected " + expected);
}

const gguf_kv& require(const gguf_file& f, std::string_view key) {
  const gguf_kv* kv = f.find(key);
  if (!kv) throw error(f.path() + ": key '" + std::string(key) + "' not found");
  return *kv;
}

uint64_t to_u64(const gguf_file& f, const gguf_kv& kv) {
  if (is_unsigned_int(kv.type)) return kv.u;
  if (!is_signed_int(kv.type)) type_error(f, kv, "a non-negative integer");
  if (kv.i < 0) {
    throw error(key_prefix(f, kv) + "value " + std::to_string(kv.i) + " is negative, expected a non-negative integer");
  }
  return static_cast<uint64_t>(kv.i);
}

int64_t u64_to_i64(const gguf_file& f, const gguf_kv& kv, uint64_t v) {
  if (v > static_cast<uint64_t>(INT64_MAX)) {
    throw error(key_prefix(f, kv) + "value " + std::to_string(v) + " does not fit in i64");
  }
  return static_cast<int64_t>(v);
}

int64_t to_i64(const gguf_file& f, const gguf_kv& kv) {
  if (is_signed_int(kv.type)) return kv.i;
  if (!is_unsigned_int(kv.type)) type_error(f, kv, "an integer");
  return u64_to_i64(f, kv, kv.u);
}

double to_f64(const gguf_file& f, const gguf_kv& kv) {
  if (kv.type != gguf_value_type::FLOAT32 && kv.type != gguf_value_type::FLOAT64) type_error(f, kv, "f32 or f64");
  return kv.f;
}

}  // namespace

std::string gguf_file::get_string(std::string_view key) const {
  const gguf_kv& kv = require(*this, key);
  if (kv.type != gguf_value_type::STRING) type_error(*this, kv, "str");
  return kv.str;
}

std::string gguf_file::get_string_or(std::string_view key, const std::string& fallback) const {
  return find(key) ? get_string(key) : fallback;
}

uint64_t gguf_file::get_u64(std::string_view key) const { return to_u64(*this, require(*this, key)); }

uint64_t gguf_file::get_u64_or(std::string_view key, uint64_t fallback) const {
  const gguf_kv* kv = find(key);
  return kv ? to_u64(*this, *kv) : fallback;
}

int64_t gguf_file::get_i64_or(std::string_view key, int64_t fallback) const {
  const gguf_kv* kv = find(key);
  return kv ? to_i64(*this, *kv) : fallback;
}

double gguf_file::get_f64(std::string_view key) const { return to_f64(*this, require(*this, key)); }

double gguf_file::get_f64_or(std::string_view key, double fallback) const {
  const gguf_kv* kv = find(key);
  return kv ? to_f64(*this, *kv) : fallback;
}

bool gguf_file::get_bool_or(std::string_view key, bool fallback) const {
  const gguf_kv* kv = find(key);
  if (!kv) return fallback;
  if (kv->type != gguf_value_type::BOOL) type_error(*this, *kv, "bool");
  return kv->i != 0;
}

std::vector<int64_t> gguf_file::get_i64_array_or_scalar(std::string_view key, uint64_t n) const {
  const gguf_kv& kv = require(*this, key);
  if (kv.type != gguf_value_type::ARRAY) return std::vector<int64_t>(static_cast<size_t>(n), to_i64(*this, kv));
  const bool is_signed = is_signed_int(kv.array_type);
  if (!is_signed && !is_unsigned_int(kv.array_type)) type_error(*this, kv, "an integer or an array of integers");
  if (kv.array_size() != n) {
    throw error(key_prefix(*this, kv) + "has " + std::to_string(kv.array_size()) + " elements, expected " +
                std::to_string(n));
  }
  if (is_signed) return kv.ints;
  std::vector<int64_t> out;
  out.reserve(kv.uints.size());
  for (uint64_t v : kv.uints) out.push_back(u64_to_i64(*this, kv, v));
  return out;
}

}  // namespace spindle
