// A bounds-checked little-endian cursor over a file image (internal to the GGUF reader).
// Invariant: pos_ <= size_ always; every read first checks that the bytes it needs remain, and otherwise
// throws spindle::error naming what was being read and where. Messages carry no file name: the parser adds it.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/error.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

namespace spindle {

class gguf_reader {
 public:
  gguf_reader(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }        // bytes from the start of the file
  uint64_t remaining() const { return size_ - pos_; }  // bytes

  // Throws unless n more bytes remain.
  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      throw error("unexpected end of file at offset " + std::to_string(pos_) + " reading " + what + " (need " +
                  std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)");
    }
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // unaligned-safe
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 length then that many bytes. The view points into the image.
  std::string_view read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    if (n > remaining()) {
      throw error(std::string(what) + " at offset " + std::to_string(pos_ - 8) + " has length " +
                  std::to_string(n) + ", more than the " + std::to_string(remaining()) + " bytes left in the file");
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

  // Returns the next n bytes (inside the image) and skips them.
  const uint8_t* take(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;   // bytes
  uint64_t pos_ = 0;
};

}  // namespace spindle
