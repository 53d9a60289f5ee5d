// Valid GGUF files read back exactly: every value type, arrays, tensors of several types (v3 and v2), and the
// ggml type table against the numbers in llama.cpp's ggml.c / ggml-common.h.
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "harness.h"

using namespace spindle;
using gguf_test::tensor_spec;
using vt = spindle::gguf_value_type;

namespace {

// 27 key/values: every scalar type, an array of every element type, and general.alignment.
void write_every_type(gguf_test::writer& w, uint32_t alignment) {
  w.kv_str("general.architecture", "llama");
  w.kv<uint32_t>("general.alignment", vt::UINT32, alignment);
  w.kv<uint8_t>("t.u8", vt::UINT8, 200);
  w.kv<int8_t>("t.i8", vt::INT8, -5);
  w.kv<uint16_t>("t.u16", vt::UINT16, 60000);
  w.kv<int16_t>("t.i16", vt::INT16, -30000);
  w.kv<uint32_t>("t.u32", vt::UINT32, 4000000000u);
  w.kv<int32_t>("t.i32", vt::INT32, -123456);
  w.kv<float>("t.f32", vt::FLOAT32, 1.5f);
  w.kv<uint8_t>("t.bool", vt::BOOL, 1);
  w.kv<uint64_t>("t.u64", vt::UINT64, UINT64_MAX);
  w.kv<int64_t>("t.i64", vt::INT64, INT64_MIN);
  w.kv<double>("t.f64", vt::FLOAT64, 3.25);
  w.kv_str("t.str", "h\xc3\xa9llo");
  w.arr_of<uint8_t>("a.u8", vt::UINT8, {1, 2, 255});
  w.arr_of<int8_t>("a.i8", vt::INT8, {-1, 2});
  w.arr_of<uint16_t>("a.u16", vt::UINT16, {65535});
  w.arr_of<int16_t>("a.i16", vt::INT16, {-7, 8, 9});
  w.arr_of<uint32_t>("a.u32", vt::UINT32, {7, 4294967295u});
  w.arr_of<int32_t>("a.i32", vt::INT32, {-3, 4, 5});
  w.arr_of<float>("a.f32", vt::FLOAT32, {0.5f, -2.0f});
  w.arr_of<uint8_t>("a.bool", vt::BOOL, {1, 0, 1});
  w.arr_of<uint64_t>("a.u64", vt::UINT64, {0, UINT64_MAX});
  w.arr_of<int64_t>("a.i64", vt::INT64, {INT64_MIN, INT64_MAX});
  w.arr_of<double>("a.f64", vt::FLOAT64, {0.125});
  w.arr_str("a.str", {"a", "", "tok\xe2\x96\x81"});
  w.arr("a.empty", vt::INT32, 0);
}

const std::vector<tensor_spec> k_tensors = {
    {"token_embd.weight", {8, 3}, ggml_type::F32},
    {"blk.0.attn_q.weight", {64, 2}, ggml_type::Q4_0},
    {"blk.0.ffn_down.weight", {256, 2}, ggml_type::Q4_K},
    {"output_norm.weight", {8}, ggml_type::F16},
    {"blk.0.ffn_up.weight", {256, 1, 1, 2}, ggml_type::Q6_K},
    {"bf", {4, 2, 3}, ggml_type::BF16},
    {"q8", {32}, ggml_type::Q8_0},
};

void check_every_type(const gguf_file& f) {
  CHECK_EQ(f.kvs().size(), size_t(27));
  CHECK_EQ(f.get_string("general.architecture"), std::string("llama"));
  CHECK_EQ(f.find("t.u8")->u, uint64_t(200));
  CHECK_EQ(f.find("t.i8")->i, int64_t(-5));
  CHECK_EQ(f.find("t.u16")->u, uint64_t(60000));
  CHECK_EQ(f.find("t.i16")->i, int64_t(-30000));
  CHECK_EQ(f.find("t.u32")->u, uint64_t(4000000000u));
  CHECK_EQ(f.find("t.i32")->i, int64_t(-123456));
  CHECK_EQ(f.find("t.f32")->f, 1.5);
  CHECK_EQ(f.find("t.bool")->i, int64_t(1));
  CHECK_EQ(f.find("t.u64")->u, UINT64_MAX);
  CHECK_EQ(f.find("t.i64")->i, INT64_MIN);
  CHECK_EQ(f.find("t.f64")->f, 3.25);
  CHECK_EQ(f.find("t.str")->str, std::string("h\xc3\xa9llo"));
  CHECK(f.find("t.f64")->type == vt::FLOAT64);
  CHECK(f.find("a.u8")->uints == std::vector<uint64_t>({1, 2, 255}));
  CHECK(f.find("a.i8")->ints == std::vector<int64_t>({-1, 2}));
  CHECK(f.find("a.u16")->uints == std::vector<uint64_t>({65535}));
  CHECK(f.find("a.i16")->ints == std::vector<int64_t>({-7, 8, 9}));
  CHECK(f.find("a.u32")->uints == std::vector<uint64_t>({7, 4294967295u}));
  CHECK(f.find("a.i32")->ints == std::vector<int64_t>({-3, 4, 5}));
  CHECK(f.find("a.f32")->floats == std::vector<double>({0.5, -2.0}));
  CHECK(f.find("a.bool")->ints == std::vector<int64_t>({1, 0, 1}));
  CHECK(f.find("a.u64")->uints == std::vector<uint64_t>({0, UINT64_MAX}));
  CHECK(f.find("a.i64")->ints == std::vector<int64_t>({INT64_MIN, INT64_MAX}));
  CHECK(f.find("a.f64")->floats == std::vector<double>({0.125}));
  CHECK(f.find("a.str")->strings == std::vector<std::string>({"a", "", "tok\xe2\x96\x81"}));
  CHECK(f.find("a.str")->type == vt::ARRAY && f.find("a.str")->array_type == vt::STRING);
  CHECK_EQ(f.find("a.str")->array_size(), uint64_t(3));
  CHECK_EQ(f.find("a.bool")->array_size(), uint64_t(3));
  CHECK_EQ(f.find("a.f32")->array_size(), uint64_t(2));
  CHECK_EQ(f.find("a.u64")->array_size(), uint64_t(2));
  CHECK_EQ(f.find("a.empty")->array_size(), uint64_t(0));
  CHECK_EQ(f.find("t.u8")->array_size(), uint64_t(0));
  CHECK(f.find("absent") == nullptr);
  CHECK(f.find("") == nullptr);
}

void check_tensors(const gguf_file& f, const gguf_test::built_file& b) {
  REQUIRE(f.tensors().size() == k_tensors.size());
  for (size_t i = 0; i < k_tensors.size(); ++i) {
    const gguf_tensor& t = f.tensors()[i];
    const tensor_spec& s = k_tensors[i];
    CHECK_EQ(t.name, s.name);
    CHECK(t.type == s.type);
    CHECK_EQ(t.n_dims, uint32_t(s.ne.size()));
    int64_t n = 1;
    for (size_t d = 0; d < 4; ++d) {
      const int64_t want = d < s.ne.size() ? s.ne[d] : 1;
      CHECK_EQ(t.ne[d], want);
      n *= want;
    }
    CHECK_EQ(t.n_elements(), n);
    CHECK_EQ(t.offset, b.offsets[i]);
    CHECK_EQ(t.n_bytes, b.sizes[i]);
    CHECK(t.data == b.bytes.data() + b.data_offset + b.offsets[i]);
    bool same = true;
    for (uint64_t k = 0; k < t.n_bytes; ++k) same = same && t.data[k] == gguf_test::pattern_byte(i, k);
    CHECK(same);
    CHECK(f.find_tensor(s.name) == &t);
  }
  CHECK(f.find_tensor("missing.weight") == nullptr);
}

}  // namespace

TEST_CASE("gguf: valid v3 file with every value type and several tensor types reads back exactly") {
  auto b = gguf_test::build_file(3, 27, [](gguf_test::writer& w) { write_every_type(w, 64); }, k_tensors, 64);
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "every.gguf");
  CHECK_EQ(f->version(), uint32_t(3));
  CHECK_EQ(f->alignment(), uint64_t(64));
  CHECK_EQ(f->file_size(), uint64_t(b.bytes.size()));
  CHECK_EQ(f->path(), std::string("every.gguf"));
  CHECK_EQ(b.data_offset % 64, uint64_t(0));
  check_every_type(*f);
  check_tensors(*f, b);
  // q4_K [256, 2]: 2 blocks of 144 bytes; q6_K [256,1,1,2]: 2 blocks of 210 bytes
  CHECK_EQ(f->find_tensor("blk.0.ffn_down.weight")->n_bytes, uint64_t(288));
  CHECK_EQ(f->find_tensor("blk.0.ffn_up.weight")->n_bytes, uint64_t(420));
}

TEST_CASE("gguf: valid v2 file with the default alignment reads back exactly") {
  auto b = gguf_test::build_file(
      2, 2, [](gguf_test::writer& w) {
        w.kv_str("general.architecture", "qwen2");
        w.kv<uint32_t>("qwen2.block_count", vt::UINT32, 2);
      },
      k_tensors);
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "v2.gguf");
  CHECK_EQ(f->version(), uint32_t(2));
  CHECK_EQ(f->alignment(), uint64_t(32));
  CHECK_EQ(b.data_offset % 32, uint64_t(0));
  CHECK_EQ(f->get_u64("qwen2.block_count"), uint64_t(2));
  check_tensors(*f, b);
}

TEST_CASE("gguf: a file with no tensors and no keys is valid") {
  gguf_test::writer w;
  w.header(3, 0, 0);
  auto f = gguf_file::from_memory(w.bytes.data(), w.bytes.size(), "empty-model.gguf");
  CHECK_EQ(f->kvs().size(), size_t(0));
  CHECK_EQ(f->tensors().size(), size_t(0));
}

TEST_CASE("gguf: ggml type table matches llama.cpp type_traits") {
  struct row { uint32_t id; const char* name; uint32_t blk; uint32_t size; };
  const row rows[] = {
      {0, "f32", 1, 4},         {1, "f16", 1, 2},         {2, "q4_0", 32, 18},     {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},      {7, "q5_1", 32, 24},      {8, "q8_0", 32, 34},     {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},  {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},   {16, "iq2_xxs", 256, 66}, {17, "iq2_xs", 256, 74},
      {18, "iq3_xxs", 256, 98}, {19, "iq1_s", 256, 50},   {20, "iq4_nl", 32, 18},  {21, "iq3_s", 256, 110},
      {22, "iq2_s", 256, 82},   {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},        {25, "i16", 1, 2},
      {26, "i32", 1, 4},        {27, "i64", 1, 8},        {28, "f64", 1, 8},       {29, "iq1_m", 256, 56},
      {30, "bf16", 1, 2},       {34, "tq1_0", 256, 54},   {35, "tq2_0", 256, 66},  {39, "mxfp4", 32, 17},
  };
  for (const row& r : rows) {
    const ggml_type_traits* t = ggml_type_info(r.id);
    REQUIRE(t != nullptr);
    CHECK_EQ(std::string(t->name), std::string(r.name));
    CHECK_EQ(t->block_size, r.blk);
    CHECK_EQ(t->type_size, r.size);
  }
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 41u, 1000u, 0xffffffffu}) {
    CHECK(ggml_type_info(id) == nullptr);
  }
  CHECK_EQ(ggml_row_size(ggml_type::Q4_K, 512), uint64_t(288));
  CHECK_EQ(ggml_row_size(ggml_type::F16, 3), uint64_t(6));
  CHECK_EQ(ggml_row_size(ggml_type::MXFP4, 64), uint64_t(34));
  CHECK_THROWS_WITH(ggml_row_size(ggml_type::Q4_0, 33), "not a multiple of the block size 32 of type q4_0");
  CHECK_THROWS_WITH(ggml_row_size(ggml_type::F64, UINT64_MAX / 4), "size overflow");
  CHECK_THROWS_WITH(ggml_row_size(static_cast<ggml_type>(4), 32), "unknown ggml type id 4");
}

TEST_CASE("gguf: gguf_value_type_name names every type") {
  CHECK_EQ(std::string(gguf_value_type_name(vt::UINT8)), std::string("u8"));
  CHECK_EQ(std::string(gguf_value_type_name(vt::STRING)), std::string("str"));
  CHECK_EQ(std::string(gguf_value_type_name(vt::ARRAY)), std::string("arr"));
  CHECK_EQ(std::string(gguf_value_type_name(vt::FLOAT64)), std::string("f64"));
  CHECK_EQ(std::string(gguf_value_type_name(static_cast<vt>(13))), std::string("unknown"));
}
