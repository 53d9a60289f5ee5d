// The GPU backends' x32 weight layout (backend/pack_x32.h), checked on the CPU: packing is a byte permutation
// with zero padding (every row unpacks to its source bytes, for every type, ragged row counts and float rows
// that end inside a unit), interleaved fields sit where the layout says, and bad shapes are refused.
#include <cstring>
#include <random>

#include "backend/pack_x32.h"
#include "harness.h"
#include "kernels_util.h"

using namespace spindle;

TEST_CASE("pack_x32: every row unpacks to its source bytes") {
  std::mt19937 rng(9);
  for (ggml_type type : kernels_test::weight_types()) {
    REQUIRE(x32_format_of(type) != nullptr);  // every CPU weight type has a GPU layout
    const bool k_quant = ggml_type_info((uint32_t)type)->block_size == 256;
    const bool is_float = type == ggml_type::F32 || type == ggml_type::F16 || type == ggml_type::BF16;
    for (int64_t n_out : {1, 32, 45, 97}) {
      const int64_t n_in = k_quant ? 512 : is_float ? 44 : 96;
      const std::vector<uint8_t> src = kernels_test::random_rows(type, n_out, n_in, rng);
      std::vector<uint8_t> packed;
      x32_pack(type, src.data(), n_in, n_out, packed);
      const x32_shape sh = x32_shape_of(type, n_in, n_out);
      CHECK_EQ(packed.size(), sh.bytes);
      CHECK_EQ(sh.n_groups, (n_out + 31) / 32);
      const uint64_t row_bytes = ggml_row_size(type, (uint64_t)n_in);
      for (int64_t r = 0; r < n_out; ++r) {
        const std::vector<uint8_t> back = x32_unpack_row(type, packed.data(), n_in, n_out, r);
        CHECK(back.size() == row_bytes && std::memcmp(back.data(), src.data() + r * row_bytes, row_bytes) == 0);
      }
      // a padding row (past n_out) is all zero
      if (n_out % 32 != 0) {
        const std::vector<uint8_t> pad = x32_unpack_row(type, packed.data(), n_in, sh.n_groups * 32, n_out);
        bool zero = true;
        for (uint8_t b : pad) zero = zero && b == 0;
        CHECK(zero);
      }
    }
  }
}

TEST_CASE("pack_x32: field offsets follow the documented interleave") {
  const x32_format& f = *x32_format_of(ggml_type::Q4_K);
  const x32_shape sh = x32_shape_of(ggml_type::Q4_K, 512, 64);
  // row 33 = group 1, lane 1; unit 1 of group 1 starts at (1 * 2 + 1) * 32 * 144
  const uint64_t unit = 3ull * 32 * 144;
  CHECK_EQ(x32_field_offset(f, sh, 33, 1, 0), unit + 1 * 4);             // d dmin: [lane][4 B]
  CHECK_EQ(x32_field_offset(f, sh, 33, 1, 1), unit + 32 * 4 + 1 * 12);   // scales: [lane][12 B]
  CHECK_EQ(x32_field_offset(f, sh, 33, 1, 2), unit + 32 * 16 + 1 * 16);  // qs: [chunk][lane][16 B]
}

TEST_CASE("pack_x32: unsupported types and partial blocks are refused") {
  std::vector<uint8_t> out;
  CHECK_THROWS_WITH(x32_shape_of(ggml_type::IQ2_XXS, 256, 4), "unsupported weight type");
  CHECK_THROWS_WITH(x32_shape_of(ggml_type::Q4_0, 33, 4), "not a multiple of the block size");
  CHECK_THROWS_WITH(x32_shape_of(ggml_type::F32, 0, 4), "empty matrix");
  CHECK(x32_format_of(ggml_type::Q6_K) != nullptr);
}
