// The ggml type table: names as llama.cpp prints them, elements per block and bytes per block.
// Invariant: the values match type_traits in ggml/src/ggml.c (block sizes QK4_0 = 32, QK_K = 256, ...; byte
// sizes = sizeof(block_xxx) from ggml-common.h); ids missing from the enum (removed types) map to nullptr.
#include "gguf/ggml_type.h"

#include <string>

#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

namespace {

struct type_entry {
  uint32_t id;
  ggml_type_traits traits;
};

// {id, {name, elements per block, bytes per block}}
constexpr type_entry k_types[] = {
    {0, {"f32", 1, 4}},
    {1, {"f16", 1, 2}},
    {2, {"q4_0", 32, 18}},
    {3, {"q4_1", 32, 20}},
    {6, {"q5_0", 32, 22}},
    {7, {"q5_1", 32, 24}},
    {8, {"q8_0", 32, 34}},
    {9, {"q8_1", 32, 36}},
    {10, {"q2_K", 256, 84}},
    {11, {"q3_K", 256, 110}},
    {12, {"q4_K", 256, 144}},
    {13, {"q5_K", 256, 176}},
    {14, {"q6_K", 256, 210}},
    {15, {"q8_K", 256, 292}},
    {16, {"iq2_xxs", 256, 66}},
    {17, {"iq2_xs", 256, 74}},
    {18, {"iq3_xxs", 256, 98}},
    {19, {"iq1_s", 256, 50}},
    {20, {"iq4_nl", 32, 18}},
    {21, {"iq3_s", 256, 110}},
    {22, {"iq2_s", 256, 82}},
    {23, {"iq4_xs", 256, 136}},
    {24, {"i8", 1, 1}},
    {25, {"i16", 1, 2}},
    {26, {"i32", 1, 4}},
    {27, {"i64", 1, 8}},
    {28, {"f64", 1, 8}},
    {29, {"iq1_m", 256, 56}},
    {30, {"bf16", 1, 2}},
    {34, {"tq1_0", 256, 54}},
    {35, {"tq2_0", 256, 66}},
    {39, {"mxfp4", 32, 17}},
};

constexpr uint32_t k_max_id = 40;  // one past the largest id in k_types

// Dense lookup by id; entries with block_size 0 are unknown ids.
struct type_table {
  ggml_type_traits by_id[k_max_id] = {};
  constexpr type_table() {
    for (const type_entry& e : k_types) by_id[e.id] = e.traits;
  }
};

constexpr type_table k_table{};

}  // namespace

const ggml_type_traits* ggml_type_info(uint32_t type_id) {
  if (type_id >= k_max_id) return nullptr;
  const ggml_type_traits& t = k_table.by_id[type_id];
  return t.block_size == 0 ? nullptr : &t;
}

uint64_t ggml_row_size(ggml_type type, uint64_t n) {
  const ggml_type_traits* info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) throw error("unknown ggml type id " + std::to_string(static_cast<uint32_t>(type)));
  if (n % info->block_size != 0) {
    throw error("row of " + std::to_string(n) + " elements is not a multiple of the block size " +
                std::to_string(info->block_size) + " of type " + info->name);
  }
  return checked_mul(n / info->block_size, info->type_size, "ggml_row_size");  // bytes
}

}  // namespace spindle
