// A GGUF file (v2 or v3) mapped read-only: metadata key/values and the tensor table. A split model (llama.cpp's
// gguf-split: `split.count` files named <prefix>-00001-of-0000N.gguf ...) opens from its first file: the others are
// found beside it by name and mapped too, their tensors joined to the table (gguf_split.cpp); the metadata is the
// first file's.
// Invariant: once open() returns, every tensor's [data, data + n_bytes) lies inside a mapping the object owns, and
// every count, size and offset that came from the files was checked (common/checked_math.h) before use.
// The mappings live as long as the gguf_file; tensor data pointers are valid until it is destroyed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/ggml_type.h"

namespace spindle {

enum class gguf_value_type : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

const char* gguf_value_type_name(gguf_value_type t);

// One metadata value. Scalars are widened into one of the three numeric fields; arrays keep their element
// type and store elements in the matching vector (strings in `strings`, integers in `ints`/`uints`,
// floats in `floats`, bools in `ints`). Nested arrays are rejected at load.
struct gguf_kv {
  std::string key;
  gguf_value_type type;
  gguf_value_type array_type = gguf_value_type::UINT8;  // element type when type == ARRAY
  int64_t i = 0;                                        // signed integers and bools
  uint64_t u = 0;                                       // unsigned integers
  double f = 0;                                         // floats
  std::string str;                                      // STRING
  std::vector<int64_t> ints;                            // arrays of signed ints / bools
  std::vector<uint64_t> uints;                          // arrays of unsigned ints
  std::vector<double> floats;                           // arrays of floats
  std::vector<std::string> strings;                     // arrays of strings
  uint64_t array_size() const;                          // number of elements when type == ARRAY
};

struct gguf_tensor {
  std::string name;
  ggml_type type;
  uint32_t n_dims;    // 1..4
  int64_t ne[4];      // elements per dimension, ne[0] is the contiguous one; unused dims are 1
  uint64_t offset;    // bytes, relative to the start of the data section
  uint64_t n_bytes;   // bytes of tensor data
  const uint8_t* data;  // inside the mapping
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class gguf_file {
 public:
  // Maps and validates `path` (and, for a split model's first file, the other files). Throws spindle::error with a
  // message naming the path and the problem.
  static std::unique_ptr<gguf_file> open(const std::string& path);
  // Parses an in-memory image (not copied; must outlive the object). Used by tests.
  static std::unique_ptr<gguf_file> from_memory(const uint8_t* data, uint64_t size, const std::string& name);
  ~gguf_file();
  gguf_file(const gguf_file&) = delete;
  gguf_file& operator=(const gguf_file&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

  const std::vector<gguf_kv>& kvs() const { return kvs_; }
  const gguf_kv* find(std::string_view key) const;  // nullptr if absent

  // Typed getters. The *_or forms return `fallback` when the key is absent; both throw spindle::error naming
  // the key when the value has the wrong type or does not fit the result type.
  std::string get_string(std::string_view key) const;
  std::string get_string_or(std::string_view key, const std::string& fallback) const;
  uint64_t get_u64(std::string_view key) const;  // any non-negative integer type
  uint64_t get_u64_or(std::string_view key, uint64_t fallback) const;
  int64_t get_i64_or(std::string_view key, int64_t fallback) const;  // any integer type that fits
  double get_f64(std::string_view key) const;  // FLOAT32/FLOAT64
  double get_f64_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  // An array (of any integer type) or a single integer broadcast to `n`; throws if the array size != n.
  std::vector<int64_t> get_i64_array_or_scalar(std::string_view key, uint64_t n) const;

  const std::vector<gguf_tensor>& tensors() const { return tensors_; }
  const gguf_tensor* find_tensor(std::string_view name) const;  // nullptr if absent
  // Files of the model: 1, or a split model's split.count.
  size_t n_files() const { return 1 + shards_.size(); }

 private:
  gguf_file() = default;
  std::string path_;
  const uint8_t* base_ = nullptr;  // start of the file image
  uint64_t size_ = 0;              // bytes
  bool owns_mapping_ = false;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<gguf_kv> kvs_;
  std::vector<gguf_tensor> tensors_;
  // Lookup indexes; the views point into kvs_[i].key / tensors_[i].name, which never move after parsing.
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
  std::vector<std::unique_ptr<gguf_file>> shards_;  // a split model's files 2..N (their mappings; tensors moved here)
  static std::unique_ptr<gguf_file> open_one(const std::string& path);
  void join_shards();  // gguf_split.cpp
  friend struct gguf_parser;
};

}  // namespace spindle
