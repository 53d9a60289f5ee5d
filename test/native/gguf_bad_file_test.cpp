// One handcrafted bad GGUF per failure class (docs/reliability.md items 1-2): each must throw spindle::error whose
// message starts with the file name and names the problem. Images are copied into exact-size heap buffers so
// AddressSanitizer sees any read past the end.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "harness.h"

using namespace spindle;
using gguf_test::writer;
using vt = spindle::gguf_value_type;

namespace {

std::string parse_error(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
  try {
    gguf_file::from_memory(exact.get(), bytes.size(), "bad.gguf");
  } catch (const spindle::error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("non-spindle exception: ") + e.what();
  }
  return "no error";
}

#define CHECK_BAD(bytes, substr)                                                                   \
  do {                                                                                             \
    const std::string _m = parse_error(bytes);                                                     \
    if (_m.rfind("bad.gguf: ", 0) != 0 || _m.find(substr) == std::string::npos)                    \
      harness::fail(__FILE__, __LINE__, "message '" + _m + "' lacks 'bad.gguf: ...' + '" + (substr) + "'"); \
  } while (0)

// A v3 file with one tensor and `data` bytes of data section.
std::vector<uint8_t> one_tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type,
                                uint64_t offset, uint64_t data = 64) {
  writer w;
  w.header(3, 1, 0);
  w.tensor_info(name, ne, type, offset);
  w.pad_to(32);
  w.zeros(data);
  return w.bytes;
}

std::vector<uint8_t> one_kv(const std::function<void(writer&)>& write) {
  writer w;
  w.header(3, 0, 1);
  write(w);
  return w.bytes;
}

std::vector<uint8_t> header_only(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  writer w;
  w.header(version, n_tensors, n_kv);
  w.zeros(64);
  return w.bytes;
}

}  // namespace

TEST_CASE("gguf bad: magic, version, header counts") {
  writer w;
  w.raw("GGUX");
  w.put<uint32_t>(3);
  w.zeros(16);
  CHECK_BAD(w.bytes, "bad magic 'GGUX' (expected 'GGUF')");
  CHECK_BAD(header_only(1, 0, 0), "GGUF version 1 is not supported");
  CHECK_BAD(header_only(4, 0, 0), "unsupported GGUF version 4");
  CHECK_BAD(header_only(0, 0, 0), "unsupported GGUF version 0");
  CHECK_BAD(header_only(0x03000000, 0, 0), "big-endian GGUF files are not supported");
  CHECK_BAD(header_only(3, UINT64_MAX, 0), "tensor count 18446744073709551615 exceeds the limit of 1048576");
  CHECK_BAD(header_only(3, 0, UINT64_MAX), "metadata key count 18446744073709551615 exceeds the limit of 1048576");
  CHECK_BAD(header_only(3, 1000, 0), "tensor count 1000 is impossible: only 64 bytes follow the header");
  CHECK_BAD(header_only(3, 0, 5), "metadata key count 5 is impossible: only 64 bytes follow the header");
  CHECK_BAD(header_only(3, 2, 4),
            "tensor count 2 is impossible: only 8 bytes remain after the header and the smallest possible 4 key/values");
  std::vector<uint8_t> cut(w.bytes.begin(), w.bytes.begin() + 2);
  CHECK_BAD(cut, "unexpected end of file at offset 0 reading the magic");
  writer v;
  v.raw("GGUF");
  v.put<uint32_t>(3);
  CHECK_BAD(v.bytes, "unexpected end of file at offset 8 reading the tensor count");
  CHECK_BAD(std::vector<uint8_t>{}, "empty");
}

TEST_CASE("gguf bad: keys: huge length, empty, duplicate") {
  CHECK_BAD(one_kv([](writer& w) { w.put<uint64_t>(1ull << 63); w.zeros(32); }),
            "a metadata key at offset 24 has length 9223372036854775808, more than the");
  CHECK_BAD(one_kv([](writer& w) { w.put<uint64_t>(UINT64_MAX); w.zeros(32); }), "has length 18446744073709551615");
  CHECK_BAD(one_kv([](writer& w) { w.kv<uint8_t>("", vt::UINT8, 1); w.zeros(8); }), "metadata key #0 is empty");
  writer d;
  d.header(3, 0, 2);
  d.kv<uint32_t>("a.b", vt::UINT32, 1);
  d.kv_str("a.b", "again");
  CHECK_BAD(d.bytes, "duplicate key 'a.b'");
}

TEST_CASE("gguf bad: value types, nested arrays, array and string lengths") {
  CHECK_BAD(one_kv([](writer& w) { w.str("k"); w.put<uint32_t>(13); w.zeros(8); }), "key 'k' has unknown value type id 13");
  CHECK_BAD(one_kv([](writer& w) { w.str("k"); w.put<uint32_t>(0xffffffffu); w.zeros(8); }),
            "key 'k' has unknown value type id 4294967295");
  CHECK_BAD(one_kv([](writer& w) { w.str("k"); w.type(vt::ARRAY); w.put<uint32_t>(99); w.put<uint64_t>(0); }),
            "key 'k' has unknown value type id 99");
  CHECK_BAD(one_kv([](writer& w) { w.arr("k", vt::ARRAY, 1); w.type(vt::UINT8); w.put<uint64_t>(1); w.put<uint8_t>(0); }),
            "key 'k': nested arrays are not supported");
  CHECK_BAD(one_kv([](writer& w) { w.arr("k", vt::UINT32, 1ull << 62); w.zeros(16); }),
            "key 'k': array of 4611686018427387904 u32 elements does not fit in the 16 bytes left");
  CHECK_BAD(one_kv([](writer& w) { w.arr("k", vt::STRING, UINT64_MAX); w.zeros(16); }),
            "array of 18446744073709551615 str elements does not fit");
  CHECK_BAD(one_kv([](writer& w) { w.arr("k", vt::UINT8, 5); w.zeros(4); }), "array of 5 u8 elements does not fit");
  CHECK_BAD(one_kv([](writer& w) { w.arr("k", vt::STRING, 2); w.str("ok"); w.put<uint64_t>(1000); w.zeros(4); }),
            "an array string at offset");
  CHECK_BAD(one_kv([](writer& w) { w.str("k"); w.type(vt::STRING); w.put<uint64_t>(UINT64_MAX - 3); w.zeros(8); }),
            "a string value at offset");
  CHECK_BAD(one_kv([](writer& w) { w.str("k"); w.type(vt::UINT64); w.zeros(3); }), "reading a scalar value");
}

TEST_CASE("gguf bad: general.alignment") {
  auto align = [](uint32_t a) { return one_kv([a](writer& w) { w.kv<uint32_t>("general.alignment", vt::UINT32, a); }); };
  CHECK_BAD(align(48), "general.alignment 48 is not a power of two");
  CHECK_BAD(align(0), "general.alignment 0 is not a power of two");
  CHECK_BAD(align(2u << 20), "general.alignment 2097152 exceeds the maximum 1048576");
  CHECK_BAD(one_kv([](writer& w) { w.kv<uint64_t>("general.alignment", vt::UINT64, 32); }),
            "general.alignment has type u64, expected u32");
  // A valid alignment is applied to the tensor offsets.
  writer w;
  w.header(3, 1, 1);
  w.kv<uint32_t>("general.alignment", vt::UINT32, 64);
  w.tensor_info("t", {8}, 0, 32);
  w.pad_to(64);
  w.zeros(128);
  CHECK_BAD(w.bytes, "tensor 't': offset 32 is not aligned to 64");
}

TEST_CASE("gguf bad: tensor names, n_dims, dims, overflow") {
  CHECK_BAD(one_tensor("", {8}, 0, 0), "tensor #0 has an empty name");
  CHECK_BAD(one_tensor(std::string(64, 'x'), {8}, 0, 0), "is 64 bytes long (max 63)");
  CHECK_BAD(one_tensor("t", {}, 0, 0), "tensor 't': n_dims = 0 (must be 1..4)");
  CHECK_BAD(one_tensor("t", {1, 1, 1, 1, 1}, 0, 0), "tensor 't': n_dims = 5 (must be 1..4)");
  CHECK_BAD(one_tensor("t", {4, 0}, 0, 0), "tensor 't': dimension 1 is 0 (must be >= 1)");
  CHECK_BAD(one_tensor("t", {-4}, 0, 0), "tensor 't': dimension 0 is -4 (must be >= 1)");
  CHECK_BAD(one_tensor("big", {1ll << 32, 1ll << 32}, 0, 0),
            "size overflow in tensor 'big': the element count of shape [4294967296, 4294967296]");
  CHECK_BAD(one_tensor("big", {1ll << 62, 2}, 0, 0), "tensor 'big': the element count");  // 2^63 > INT64_MAX
  CHECK_BAD(one_tensor("big", {1ll << 61, 2}, 0, 0), "tensor 'big': the byte size of shape");  // 2^64 bytes of f32
  CHECK_BAD(one_tensor("big", {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}, 0, 0), "the element count");
}

TEST_CASE("gguf bad: tensor types and block sizes") {
  CHECK_BAD(one_tensor("t", {32}, 4, 0), "tensor 't': unknown ggml type id 4");
  CHECK_BAD(one_tensor("t", {32}, 31, 0), "unknown ggml type id 31");
  CHECK_BAD(one_tensor("t", {32}, 0xffffffffu, 0), "unknown ggml type id 4294967295");
  CHECK_BAD(one_tensor("t", {33}, 2, 0), "tensor 't': ne[0] = 33 is not a multiple of the block size 32 of type q4_0");
  CHECK_BAD(one_tensor("t", {32, 8}, 12, 0), "ne[0] = 32 is not a multiple of the block size 256 of type q4_K");
}

TEST_CASE("gguf bad: offsets: out of file, misaligned, truncated data") {
  CHECK_BAD(one_tensor("t", {8}, 0, 4096, 32), "tensor 't': offset 4096 is outside the data section (32 bytes)");
  CHECK_BAD(one_tensor("t", {8}, 0, UINT64_MAX & ~31ull, 32), "is outside the data section");
  const std::string m = parse_error(one_tensor("blk.0.attn_q.weight", {8}, 0, 123));
  CHECK_EQ(m, std::string("bad.gguf: tensor 'blk.0.attn_q.weight': offset 123 is not aligned to 32"));
  CHECK_BAD(one_tensor("t", {16}, 0, 0, 32),
            "tensor 't': 64 bytes at offset 0 run past the end of the data section (32 bytes): the file is truncated");
  CHECK_BAD(one_tensor("t", {1ll << 60}, 0, 32, 64), "4611686018427387904 bytes at offset 32 run past the end");
  writer w;  // tensor infos end the file: no data section at all
  w.header(3, 1, 0);
  w.tensor_info("t", {8}, 0, 0);
  CHECK_BAD(w.bytes, "the data section would start at offset 64, past the end of the file (57 bytes)");
}

TEST_CASE("gguf bad: overlapping tensors and duplicate tensor names") {
  writer w;
  w.header(3, 2, 0);
  w.tensor_info("b", {16}, 0, 32);  // [32, 96)
  w.tensor_info("a", {16}, 0, 0);   // [0, 64)
  w.pad_to(32);
  w.zeros(128);
  CHECK_BAD(w.bytes, "tensor 'b' at offset 32 overlaps tensor 'a' at [0, 64)");
  writer d;
  d.header(3, 2, 0);
  d.tensor_info("a", {8}, 0, 0);
  d.tensor_info("a", {8}, 0, 32);
  d.pad_to(32);
  d.zeros(64);
  CHECK_BAD(d.bytes, "duplicate tensor name 'a'");
  writer ok;  // adjacent, not overlapping
  ok.header(3, 2, 0);
  ok.tensor_info("a", {8}, 0, 0);
  ok.tensor_info("b", {8}, 0, 32);
  ok.pad_to(32);
  ok.zeros(64);
  CHECK_EQ(parse_error(ok.bytes), std::string("no error"));
}
