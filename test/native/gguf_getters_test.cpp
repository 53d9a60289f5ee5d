// Typed metadata getters: values of the accepted types, precise errors naming the file and the key for the
// others, *_or fallbacks, and get_i64_array_or_scalar broadcast / size checks.
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "harness.h"

using namespace spindle;
using vt = spindle::gguf_value_type;

namespace {

gguf_test::built_file getter_file() {
  return gguf_test::build_file(
      3, 14,
      [](gguf_test::writer& w) {
        w.kv_str("s", "text");
        w.kv<uint32_t>("u32", vt::UINT32, 4096);
        w.kv<int32_t>("i32", vt::INT32, 12);
        w.kv<int32_t>("neg", vt::INT32, -3);
        w.kv<uint64_t>("huge", vt::UINT64, UINT64_MAX);
        w.kv<int8_t>("i8", vt::INT8, -128);
        w.kv<float>("f32", vt::FLOAT32, 0.25f);
        w.kv<double>("f64", vt::FLOAT64, 1e-6);
        w.kv<uint8_t>("flag", vt::BOOL, 1);
        w.arr_of<int32_t>("heads", vt::INT32, {4, 8, 0});
        w.arr_of<uint16_t>("uheads", vt::UINT16, {1, 2, 3});
        w.arr_of<uint64_t>("uhuge", vt::UINT64, {1, UINT64_MAX, 3});
        w.arr_of<float>("farr", vt::FLOAT32, {1.0f, 2.0f, 3.0f});
        w.arr_str("sarr", {"x"});
      },
      {});
}

}  // namespace

TEST_CASE("gguf getters: values of accepted types") {
  const auto b = getter_file();
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "g.gguf");
  CHECK_EQ(f->get_string("s"), std::string("text"));
  CHECK_EQ(f->get_u64("u32"), uint64_t(4096));
  CHECK_EQ(f->get_u64("i32"), uint64_t(12));
  CHECK_EQ(f->get_u64("huge"), UINT64_MAX);
  CHECK_EQ(f->get_i64_or("neg", 0), int64_t(-3));
  CHECK_EQ(f->get_i64_or("i8", 0), int64_t(-128));
  CHECK_EQ(f->get_i64_or("u32", 0), int64_t(4096));
  CHECK_EQ(f->get_f64("f32"), 0.25);
  CHECK_EQ(f->get_f64("f64"), 1e-6);
  CHECK_EQ(f->get_bool_or("flag", false), true);
}

TEST_CASE("gguf getters: fallbacks for absent keys") {
  const auto b = getter_file();
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "g.gguf");
  CHECK_EQ(f->get_string_or("absent", "dflt"), std::string("dflt"));
  CHECK_EQ(f->get_string_or("s", "dflt"), std::string("text"));
  CHECK_EQ(f->get_u64_or("absent", 7), uint64_t(7));
  CHECK_EQ(f->get_u64_or("u32", 7), uint64_t(4096));
  CHECK_EQ(f->get_i64_or("absent", -9), int64_t(-9));
  CHECK_EQ(f->get_f64_or("absent", 2.5), 2.5);
  CHECK_EQ(f->get_f64_or("f32", 2.5), 0.25);
  CHECK_EQ(f->get_bool_or("absent", true), true);
  CHECK_EQ(f->get_bool_or("absent", false), false);
}

TEST_CASE("gguf getters: wrong types and values that do not fit name the file and the key") {
  const auto b = getter_file();
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "g.gguf");
  CHECK_THROWS_WITH(f->get_string("absent"), "g.gguf: key 'absent' not found");
  CHECK_THROWS_WITH(f->get_u64("absent"), "g.gguf: key 'absent' not found");
  CHECK_THROWS_WITH(f->get_f64("absent"), "g.gguf: key 'absent' not found");
  CHECK_THROWS_WITH(f->get_string("u32"), "g.gguf: key 'u32' has type u32, expected str");
  CHECK_THROWS_WITH(f->get_string_or("u32", "x"), "key 'u32' has type u32, expected str");
  CHECK_THROWS_WITH(f->get_string("sarr"), "key 'sarr' has type arr[str], expected str");
  CHECK_THROWS_WITH(f->get_u64("neg"), "g.gguf: key 'neg' value -3 is negative");
  CHECK_THROWS_WITH(f->get_u64_or("neg", 1), "key 'neg' value -3 is negative");
  CHECK_THROWS_WITH(f->get_u64("f32"), "key 'f32' has type f32, expected a non-negative integer");
  CHECK_THROWS_WITH(f->get_u64("flag"), "key 'flag' has type bool, expected a non-negative integer");
  CHECK_THROWS_WITH(f->get_u64("s"), "key 's' has type str");
  CHECK_THROWS_WITH(f->get_i64_or("huge", 0), "key 'huge' value 18446744073709551615 does not fit in i64");
  CHECK_THROWS_WITH(f->get_i64_or("f64", 0), "key 'f64' has type f64, expected an integer");
  CHECK_THROWS_WITH(f->get_i64_or("heads", 0), "key 'heads' has type arr[i32], expected an integer");
  CHECK_THROWS_WITH(f->get_f64("u32"), "key 'u32' has type u32, expected f32 or f64");
  CHECK_THROWS_WITH(f->get_f64_or("s", 1.0), "key 's' has type str, expected f32 or f64");
  CHECK_THROWS_WITH(f->get_bool_or("u32", false), "key 'u32' has type u32, expected bool");
}

TEST_CASE("gguf getters: get_i64_array_or_scalar broadcasts scalars and checks array sizes") {
  const auto b = getter_file();
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "g.gguf");
  CHECK(f->get_i64_array_or_scalar("u32", 3) == std::vector<int64_t>({4096, 4096, 4096}));
  CHECK(f->get_i64_array_or_scalar("neg", 2) == std::vector<int64_t>({-3, -3}));
  CHECK(f->get_i64_array_or_scalar("u32", 0).empty());
  CHECK(f->get_i64_array_or_scalar("heads", 3) == std::vector<int64_t>({4, 8, 0}));
  CHECK(f->get_i64_array_or_scalar("uheads", 3) == std::vector<int64_t>({1, 2, 3}));
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("heads", 4), "g.gguf: key 'heads' has 3 elements, expected 4");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("heads", 2), "has 3 elements, expected 2");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("uhuge", 3), "key 'uhuge' value 18446744073709551615 does not fit in i64");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("farr", 3), "key 'farr' has type arr[f32], expected an integer or an array of integers");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("sarr", 1), "has type arr[str]");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("huge", 2), "does not fit in i64");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("f32", 2), "key 'f32' has type f32, expected an integer");
  CHECK_THROWS_WITH(f->get_i64_array_or_scalar("absent", 2), "key 'absent' not found");
}
