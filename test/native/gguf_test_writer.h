// A tiny GGUF byte writer for tests: raw little-endian fields for handcrafted (possibly broken) files, and
// build_file() for valid ones with tensors laid out at aligned offsets and filled with a known byte pattern.
// Invariant: the writer never validates anything; what you put is what the bytes say.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"

namespace gguf_test {

using spindle::gguf_value_type;

struct writer {
  std::vector<uint8_t> bytes;

  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    bytes.insert(bytes.end(), b, b + sizeof(T));
  }
  void raw(std::string_view s) { bytes.insert(bytes.end(), s.begin(), s.end()); }
  void str(std::string_view s) { put<uint64_t>(s.size()); raw(s); }
  void type(gguf_value_type t) { put<uint32_t>(static_cast<uint32_t>(t)); }

  void header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw("GGUF");
    put<uint32_t>(version);
    put<uint64_t>(n_tensors);
    put<uint64_t>(n_kv);
  }

  // A scalar key/value: key, type id, then the value as T.
  template <typename T>
  void kv(std::string_view key, gguf_value_type t, T value) { str(key); type(t); put<T>(value); }
  void kv_str(std::string_view key, std::string_view value) { str(key); type(gguf_value_type::STRING); str(value); }
  // Array head; the caller then puts n elements.
  void arr(std::string_view key, gguf_value_type elem, uint64_t n) {
    str(key); type(gguf_value_type::ARRAY); type(elem); put<uint64_t>(n);
  }
  template <typename T>
  void arr_of(std::string_view key, gguf_value_type elem, const std::vector<T>& v) {
    arr(key, elem, v.size());
    for (const T& x : v) put<T>(x);
  }
  void arr_str(std::string_view key, const std::vector<std::string>& v) {
    arr(key, gguf_value_type::STRING, v.size());
    for (const std::string& s : v) str(s);
  }

  void tensor_info(std::string_view name, const std::vector<int64_t>& ne, uint32_t type_id, uint64_t offset) {
    str(name);
    put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) put<int64_t>(d);
    put<uint32_t>(type_id);
    put<uint64_t>(offset);
  }

  void pad_to(uint64_t alignment) { while (bytes.size() % alignment) bytes.push_back(0); }
  void zeros(uint64_t n) { bytes.insert(bytes.end(), n, 0); }
};

struct tensor_spec {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] first
  spindle::ggml_type type;
};

struct built_file {
  std::vector<uint8_t> bytes;
  uint64_t info_end = 0;      // end of header + metadata + tensor infos (bytes)
  uint64_t data_offset = 0;   // start of the data section (bytes)
  std::vector<uint64_t> offsets;  // per tensor, relative to data_offset
  std::vector<uint64_t> sizes;    // per tensor, bytes
};

inline uint64_t tensor_bytes(const tensor_spec& t) {
  uint64_t n = spindle::ggml_row_size(t.type, static_cast<uint64_t>(t.ne[0]));
  for (size_t d = 1; d < t.ne.size(); ++d) n *= static_cast<uint64_t>(t.ne[d]);
  return n;
}

// The byte at position k of tensor i's data.
inline uint8_t pattern_byte(size_t i, uint64_t k) { return static_cast<uint8_t>(i * 31 + k * 7 + 1); }

// A valid file: header, `n_kv` key/values written by write_kvs (which must include general.alignment if
// `alignment` != 32), tensor infos, padding, then each tensor's data at the next aligned offset.
inline built_file build_file(uint32_t version, uint64_t n_kv, const std::function<void(writer&)>& write_kvs,
                             const std::vector<tensor_spec>& tensors, uint64_t alignment = 32) {
  built_file out;
  writer w;
  w.header(version, tensors.size(), n_kv);
  write_kvs(w);
  uint64_t next = 0;
  for (const tensor_spec& t : tensors) {
    out.offsets.push_back(next);
    out.sizes.push_back(tensor_bytes(t));
    w.tensor_info(t.name, t.ne, static_cast<uint32_t>(t.type), next);
    next = (next + out.sizes.back() + alignment - 1) / alignment * alignment;
  }
  out.info_end = w.bytes.size();
  w.pad_to(alignment);
  out.data_offset = w.bytes.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.bytes.resize(out.data_offset + out.offsets[i], 0);
    for (uint64_t k = 0; k < out.sizes[i]; ++k) w.bytes.push_back(pattern_byte(i, k));
  }
  out.bytes = std::move(w.bytes);
  return out;
}

}  // namespace gguf_test
