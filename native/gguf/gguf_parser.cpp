// GGUF v2/v3 parsing: header, metadata key/values, tensor infos, data-section layout.
// Invariant: every count, length and offset read from the image is compared with the bytes that remain (or
// with the data section) before it is used to size an allocation or form a pointer; nothing is reserved
// from a count that the file could not possibly hold.
#include "gguf/gguf_parser.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "common/error.h"
#include "gguf/gguf_reader.h"

namespace spindle {

namespace {

constexpr uint64_t k_default_alignment = 32;         // bytes
constexpr uint64_t k_max_alignment = 1ull << 20;     // bytes
constexpr uint64_t k_max_count = 1ull << 20;         // keys or tensors in one file
constexpr uint64_t k_max_tensor_name = 63;           // bytes (ggml's GGML_MAX_NAME - 1)
constexpr uint64_t k_min_kv_bytes = 8 + 1 + 4 + 1;   // key length, 1-byte key, type, 1-byte value
constexpr uint64_t k_min_tensor_bytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one dim, type, offset

// Shortens a file-supplied name for an error message.
std::string show(std::string_view s) {
  if (s.size() <= 80) return std::string(s);
  return std::string(s.substr(0, 80)) + "...";
}

struct gguf_header {
  uint32_t version;
  uint64_t n_tensors;
  uint64_t n_kv;
};

// A count from the header: at most k_max_count, and n items of at least min_bytes each must fit in room.
void check_count(uint64_t n, uint64_t room, uint64_t min_bytes, const char* what, const std::string& where) {
  if (n > k_max_count) {
    throw error(std::string(what) + " " + std::to_string(n) + " exceeds the limit of " + std::to_string(k_max_count));
  }
  if (n > room / min_bytes) {
    throw error(std::string(what) + " " + std::to_string(n) + " is impossible: only " + std::to_string(room) +
                " bytes " + where);
  }
}

gguf_header read_header(gguf_reader& r) {
  const uint8_t* m = r.take(4, "the magic");
  if (std::string_view(reinterpret_cast<const char*>(m), 4) != "GGUF") {
    std::string shown;
    for (int i = 0; i < 4; ++i) shown += (m[i] >= 0x20 && m[i] < 0x7f) ? char(m[i]) : '?';
    throw error("bad magic '" + shown + "' (expected 'GGUF'): not a GGUF file");
  }
  gguf_header h;
  h.version = r.read<uint32_t>("the version");
  if (h.version == 1) throw error("GGUF version 1 is not supported (only versions 2 and 3)");
  if (h.version != 0 && (h.version & 0xffff) == 0) {
    throw error("GGUF version " + std::to_string(h.version) +
                " looks byte-swapped: big-endian GGUF files are not supported");
  }
  if (h.version != 2 && h.version != 3) {
    throw error("unsupported GGUF version " + std::to_string(h.version) + " (only versions 2 and 3)");
  }
  h.n_tensors = r.read<uint64_t>("the tensor count");
  h.n_kv = r.read<uint64_t>("the metadata key count");
  const uint64_t room = r.remaining();  // bytes after the header
  check_count(h.n_kv, room, k_min_kv_bytes, "metadata key count", "follow the header");
  const std::string where = h.n_kv == 0 ? std::string("follow the header")
                                        : "remain after the header and the smallest possible " +
                                              std::to_string(h.n_kv) + " key/values";
  check_count(h.n_tensors, room - h.n_kv * k_min_kv_bytes, k_min_tensor_bytes, "tensor count", where);  // no underflow
  return h;
}

// Bytes of one element of a fixed-size value type; 0 for STRING and ARRAY.
uint64_t value_size(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::UINT8: case gguf_value_type::INT8: case gguf_value_type::BOOL: return 1;
    case gguf_value_type::UINT16: case gguf_value_type::INT16: return 2;
    case gguf_value_type::UINT32: case gguf_value_type::INT32: case gguf_value_type::FLOAT32: return 4;
    case gguf_value_type::UINT64: case gguf_value_type::INT64: case gguf_value_type::FLOAT64: return 8;
    default: return 0;
  }
}

gguf_value_type read_value_type(gguf_reader& r, const std::string& key) {
  uint32_t id = r.read<uint32_t>("a value type");
  if (id > static_cast<uint32_t>(gguf_value_type::FLOAT64)) {
    throw error("key '" + show(key) + "' has unknown value type id " + std::to_string(id));
  }
  return static_cast<gguf_value_type>(id);
}

// One little-endian T at p (unaligned-safe).
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

void read_scalar(gguf_reader& r, gguf_value_type t, gguf_kv& kv) {
  if (t == gguf_value_type::STRING) {
    kv.str = std::string(r.read_string("a string value"));
    return;
  }
  const uint8_t* p = r.take(value_size(t), "a scalar value");
  switch (t) {
    case gguf_value_type::UINT8: kv.u = load<uint8_t>(p); break;
    case gguf_value_type::INT8: kv.i = load<int8_t>(p); break;
    case gguf_value_type::UINT16: kv.u = load<uint16_t>(p); break;
    case gguf_value_type::INT16: kv.i = load<int16_t>(p); break;
    case gguf_value_type::UINT32: kv.u = load<uint32_t>(p); break;
    case gguf_value_type::INT32: kv.i = load<int32_t>(p); break;
    case gguf_value_type::FLOAT32: kv.f = load<float>(p); break;
    case gguf_value_type::BOOL: kv.i = p[0] != 0; break;
    case gguf_value_type::UINT64: kv.u = load<uint64_t>(p); break;
    case gguf_value_type::INT64: kv.i = load<int64_t>(p); break;
    case gguf_value_type::FLOAT64: kv.f = load<double>(p); break;
    default: break;  // STRING handled above; ARRAY never reaches here
  }
}

// n elements of type T at p, widened into out (sized by the caller's bound check).
template <typename T, typename D>
void widen(const uint8_t* p, uint64_t n, std::vector<D>& out) {
  out.resize(static_cast<size_t>(n));
  for (uint64_t k = 0; k < n; ++k) out[k] = static_cast<D>(load<T>(p + k * sizeof(T)));
}

void read_array(gguf_reader& r, gguf_kv& kv) {
  kv.array_type = read_value_type(r, kv.key);
  if (kv.array_type == gguf_value_type::ARRAY) {
    throw error("key '" + show(kv.key) + "': nested arrays are not supported");
  }
  const uint64_t n = r.read<uint64_t>("an array length");
  const uint64_t elem = kv.array_type == gguf_value_type::STRING ? 8 : value_size(kv.array_type);  // min bytes
  if (n > r.remaining() / elem) {
    throw error("key '" + show(kv.key) + "': array of " + std::to_string(n) + " " +
                gguf_value_type_name(kv.array_type) + " elements does not fit in the " +
                std::to_string(r.remaining()) + " bytes left in the file");
  }
  if (kv.array_type == gguf_value_type::STRING) {
    kv.strings.reserve(static_cast<size_t>(n));
    for (uint64_t k = 0; k < n; ++k) kv.strings.emplace_back(r.read_string("an array string"));
    return;
  }
  const uint8_t* p = r.take(n * elem, "array data");
  switch (kv.array_type) {
    case gguf_value_type::UINT8: widen<uint8_t>(p, n, kv.uints); break;
    case gguf_value_type::INT8: widen<int8_t>(p, n, kv.ints); break;
    case gguf_value_type::UINT16: widen<uint16_t>(p, n, kv.uints); break;
    case gguf_value_type::INT16: widen<int16_t>(p, n, kv.ints); break;
    case gguf_value_type::UINT32: widen<uint32_t>(p, n, kv.uints); break;
    case gguf_value_type::INT32: widen<int32_t>(p, n, kv.ints); break;
    case gguf_value_type::FLOAT32: widen<float>(p, n, kv.floats); break;
    case gguf_value_type::BOOL:
      kv.ints.resize(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) kv.ints[k] = p[k] != 0;
      break;
    case gguf_value_type::UINT64: widen<uint64_t>(p, n, kv.uints); break;
    case gguf_value_type::INT64: widen<int64_t>(p, n, kv.ints); break;
    case gguf_value_type::FLOAT64: widen<double>(p, n, kv.floats); break;
    default: break;  // STRING and ARRAY handled above
  }
}

gguf_kv read_kv(gguf_reader& r, uint64_t index) {
  gguf_kv kv;
  kv.key = std::string(r.read_string("a metadata key"));
  if (kv.key.empty()) throw error("metadata key #" + std::to_string(index) + " is empty");
  kv.type = read_value_type(r, kv.key);
  if (kv.type == gguf_value_type::ARRAY) {
    read_array(r, kv);
  } else {
    read_scalar(r, kv.type, kv);
  }
  return kv;
}

// general.alignment: a u32 power of two <= 1 MiB (llama.cpp also insists on u32).
uint64_t read_alignment(const gguf_file& f) {
  const gguf_kv* kv = f.find("general.alignment");
  if (!kv) return k_default_alignment;
  if (kv->type != gguf_value_type::UINT32) {
    throw error(std::string("general.alignment has type ") + gguf_value_type_name(kv->type) + ", expected u32");
  }
  const uint64_t a = kv->u;
  if (a == 0 || (a & (a - 1)) != 0) throw error("general.alignment " + std::to_string(a) + " is not a power of two");
  if (a > k_max_alignment) {
    throw error("general.alignment " + std::to_string(a) + " exceeds the maximum " + std::to_string(k_max_alignment));
  }
  return a;
}

std::string shape_str(const gguf_tensor& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// Shape, type and byte size of one tensor; checks everything that does not depend on the data section.
void read_tensor_shape(gguf_reader& r, gguf_tensor& t) {
  const std::string who = "tensor '" + show(t.name) + "': ";
  t.n_dims = r.read<uint32_t>("a tensor's n_dims");
  if (t.n_dims < 1 || t.n_dims > 4) throw error(who + "n_dims = " + std::to_string(t.n_dims) + " (must be 1..4)");
  for (uint32_t d = 0; d < 4; ++d) {
    t.ne[d] = d < t.n_dims ? r.read<int64_t>("a tensor dimension") : 1;
    if (t.ne[d] < 1) {
      throw error(who + "dimension " + std::to_string(d) + " is " + std::to_string(t.ne[d]) + " (must be >= 1)");
    }
  }
  const std::string of_shape = who + "the element count of shape " + shape_str(t);
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < 4; ++d) {
    n_elements = checked_mul(n_elements, static_cast<uint64_t>(t.ne[d]), of_shape.c_str());
  }
  if (n_elements > static_cast<uint64_t>(INT64_MAX)) throw error("size overflow in " + of_shape);
  const uint32_t type_id = r.read<uint32_t>("a tensor type");
  const ggml_type_traits* info = ggml_type_info(type_id);
  if (!info) throw error(who + "unknown ggml type id " + std::to_string(type_id));
  t.type = static_cast<ggml_type>(type_id);
  if (static_cast<uint64_t>(t.ne[0]) % info->block_size != 0) {
    throw error(who + "ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the block size " +
                std::to_string(info->block_size) + " of type " + info->name);
  }
  const std::string bytes_of = who + "the byte size of shape " + shape_str(t);
  uint64_t n_bytes = ggml_row_size(t.type, static_cast<uint64_t>(t.ne[0]));  // bytes per row
  for (uint32_t d = 1; d < 4; ++d) n_bytes = checked_mul(n_bytes, static_cast<uint64_t>(t.ne[d]), bytes_of.c_str());
  t.n_bytes = n_bytes;
}

gguf_tensor read_tensor_info(gguf_reader& r, uint64_t index) {
  gguf_tensor t{};
  t.name = std::string(r.read_string("a tensor name"));
  if (t.name.empty()) throw error("tensor #" + std::to_string(index) + " has an empty name");
  if (t.name.size() > k_max_tensor_name) {
    throw error("tensor name '" + show(t.name) + "' is " + std::to_string(t.name.size()) + " bytes long (max " +
                std::to_string(k_max_tensor_name) + ")");
  }
  read_tensor_shape(r, t);
  t.offset = r.read<uint64_t>("a tensor offset");
  return t;
}

// Checks each tensor against the data section [data_offset, size) and the others; sets t.data.
void place_tensors(std::vector<gguf_tensor>& tensors, const uint8_t* base, uint64_t size, uint64_t data_offset,
                   uint64_t alignment) {
  if (tensors.empty()) return;
  if (data_offset > size) {
    throw error("the data section would start at offset " + std::to_string(data_offset) +
                ", past the end of the file (" + std::to_string(size) + " bytes): the file is truncated");
  }
  const uint64_t data_size = size - data_offset;  // bytes
  for (gguf_tensor& t : tensors) {
    const std::string who = "tensor '" + show(t.name) + "': ";
    if (t.offset % alignment != 0) {
      throw error(who + "offset " + std::to_string(t.offset) + " is not aligned to " + std::to_string(alignment));
    }
    if (t.offset >= data_size) {
      throw error(who + "offset " + std::to_string(t.offset) + " is outside the data section (" +
                  std::to_string(data_size) + " bytes)");
    }
    if (t.n_bytes > data_size - t.offset) {  // the end offset + n_bytes may not even fit in 64 bits
      throw error(who + std::to_string(t.n_bytes) + " bytes at offset " + std::to_string(t.offset) +
                  " run past the end of the data section (" + std::to_string(data_size) +
                  " bytes): the file is truncated");
    }
    t.data = base + data_offset + t.offset;
  }
  std::vector<const gguf_tensor*> order;
  order.reserve(tensors.size());
  for (const gguf_tensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const gguf_tensor* a, const gguf_tensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const gguf_tensor& a = *order[k - 1];
    const gguf_tensor& b = *order[k];
    if (a.offset + a.n_bytes > b.offset) {  // no overflow: both end inside the data section
      throw error("tensor '" + show(b.name) + "' at offset " + std::to_string(b.offset) + " overlaps tensor '" +
                  show(a.name) + "' at [" + std::to_string(a.offset) + ", " +
                  std::to_string(a.offset + a.n_bytes) + ")");
    }
  }
}

}  // namespace

void gguf_parser::parse(gguf_file& f) {
  try {
    gguf_reader r(f.base_, f.size_);
    const gguf_header h = read_header(r);
    f.version_ = h.version;

    std::vector<gguf_kv> kvs;
    kvs.reserve(static_cast<size_t>(std::min<uint64_t>(h.n_kv, 1024)));
    for (uint64_t k = 0; k < h.n_kv; ++k) kvs.push_back(read_kv(r, k));
    f.kvs_ = std::move(kvs);  // elements keep their addresses from here on
    f.kv_index_.reserve(f.kvs_.size());
    for (size_t k = 0; k < f.kvs_.size(); ++k) {
      if (!f.kv_index_.emplace(f.kvs_[k].key, k).second) throw error("duplicate key '" + show(f.kvs_[k].key) + "'");
    }
    f.alignment_ = read_alignment(f);

    std::vector<gguf_tensor> tensors;
    tensors.reserve(static_cast<size_t>(std::min<uint64_t>(h.n_tensors, 1024)));
    for (uint64_t k = 0; k < h.n_tensors; ++k) tensors.push_back(read_tensor_info(r, k));
    f.tensors_ = std::move(tensors);
    f.tensor_index_.reserve(f.tensors_.size());
    for (size_t k = 0; k < f.tensors_.size(); ++k) {
      const std::string& name = f.tensors_[k].name;
      if (!f.tensor_index_.emplace(name, k).second) throw error("duplicate tensor name '" + show(name) + "'");
    }
    const uint64_t data_offset = checked_align(r.pos(), f.alignment_, "the data section offset");  // bytes
    place_tensors(f.tensors_, f.base_, f.size_, data_offset, f.alignment_);
  } catch (const error& e) {
    throw error(f.path_ + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw error(f.path_ + ": out of memory while reading the GGUF metadata");
  }
}

}  // namespace spindle
