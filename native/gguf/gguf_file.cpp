// gguf_file: mapping the file read-only, lookups and typed metadata getters.
// Invariant: a gguf_file that owns its mapping unmaps it exactly once, in the destructor; getters never
// convert a value that does not fit the result type, they throw naming the file and the key.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "common/error.h"
#include "gguf/gguf_parser.h"

namespace spindle {

const char* gguf_value_type_name(gguf_value_type t) {
  switch (t) {
    case gguf_value_type::UINT8: return "u8";
    case gguf_value_type::INT8: return "i8";
    case gguf_value_type::UINT16: return "u16";
    case gguf_value_type::INT16: return "i16";
    case gguf_value_type::UINT32: return "u32";
    case gguf_value_type::INT32: return "i32";
    case gguf_value_type::FLOAT32: return "f32";
    case gguf_value_type::BOOL: return "bool";
    case gguf_value_type::STRING: return "str";
    case gguf_value_type::ARRAY: return "arr";
    case gguf_value_type::UINT64: return "u64";
    case gguf_value_type::INT64: return "i64";
    case gguf_value_type::FLOAT64: return "f64";
  }
  return "unknown";
}

uint64_t gguf_kv::array_size() const {
  if (type != gguf_value_type::ARRAY) return 0;
  switch (array_type) {
    case gguf_value_type::STRING: return strings.size();
    case gguf_value_type::UINT8: case gguf_value_type::UINT16: case gguf_value_type::UINT32:
    case gguf_value_type::UINT64: return uints.size();
    case gguf_value_type::FLOAT32: case gguf_value_type::FLOAT64: return floats.size();
    default: return ints.size();  // signed integers and bools
  }
}

namespace {

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

}  // namespace

std::unique_ptr<gguf_file> gguf_file::open(const std::string& path) {
  std::unique_ptr<gguf_file> f = open_one(path);
  f->join_shards();
  return f;
}

std::unique_ptr<gguf_file> gguf_file::open_one(const std::string& path) {
  // O_NONBLOCK: a FIFO named as a model must not block the opening thread (it is refused just below)
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw error(path + ": cannot open: " + errno_text(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw error(path + ": cannot stat: " + errno_text(e));
  }
  std::string problem;
  if (S_ISDIR(st.st_mode)) problem = "is a directory, not a GGUF file";
  else if (!S_ISREG(st.st_mode)) problem = "is not a regular file";
  else if (st.st_size == 0) problem = "the file is empty (0 bytes)";
  if (!problem.empty()) {
    ::close(fd);
    throw error(path + ": " + problem);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);  // bytes
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (p == MAP_FAILED) {
    throw error(path + ": mmap of " + std::to_string(size) + " bytes failed: " + errno_text(map_errno));
  }

  std::unique_ptr<gguf_file> f(new gguf_file());
  f->path_ = path;
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->owns_mapping_ = true;
  gguf_parser::parse(*f);  // on throw, ~gguf_file unmaps
  return f;
}

std::unique_ptr<gguf_file> gguf_file::from_memory(const uint8_t* data, uint64_t size, const std::string& name) {
  std::unique_ptr<gguf_file> f(new gguf_file());
  f->path_ = name;
  f->base_ = data;
  f->size_ = size;
  if (size == 0) throw error(name + ": the file is empty (0 bytes)");
  gguf_parser::parse(*f);
  return f;
}

gguf_file::~gguf_file() {
  if (owns_mapping_ && base_) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

const gguf_kv* gguf_file::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace spindle
