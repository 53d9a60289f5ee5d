// The row-interleaved weight layout of the GPU backends ("x32"): rows in groups of 32, and within a group the
// bytes of one *unit* (a K-quant super-block, a q8_0 / q4_0 block, or 8 float values) of all 32 rows side by
// side, field by field, so that lane l of a warp reading row 32g + l finds its bytes next to its neighbours'.
//   unit bytes of a group = 32 * (bytes of one row's unit); the fields of a unit (e.g. q4_K: d|dmin, scales, qs)
//   are stored one after the other; a field whose size is a multiple of 16 bytes is interleaved in 16-byte
//   chunks ([chunk][lane][16 B]: a warp's 16-byte loads are contiguous), a smaller one lane after lane
//   ([lane][size]).
//   group g, unit u starts at byte (g * n_units + u) * 32 * unit_bytes.
// Rows are padded to a multiple of 32 and float rows to a multiple of 8 values with zeros.
// Invariant: packing is a pure byte permutation plus zero padding: x32_unpack_row() gives back the source
// row's bytes exactly (and x32_value() its dequantized values), which test/native/pack_x32_test.cpp checks.
#pragma once
#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"

namespace spindle {

constexpr int k_x32_rows = 32;  // rows per group (one warp)

struct x32_field {
  int32_t offset;  // byte offset inside one row's unit (the source block)
  int32_t size;    // bytes
};

struct x32_format {
  ggml_type type = ggml_type::F32;
  int32_t unit_values = 0;  // values per unit
  int32_t unit_bytes = 0;   // bytes of one row's unit
  int32_t n_fields = 0;
  x32_field fields[4] = {};
};

// The format of a type, or nullptr when the GPU layout does not know it.
const x32_format* x32_format_of(ggml_type type);

struct x32_shape {
  int64_t n_in = 0, n_out = 0;  // the source matrix
  int64_t n_units = 0;          // units per row (n_in padded to whole units)
  int64_t n_groups = 0;         // ceil(n_out / 32)
  uint64_t bytes = 0;           // packed size
};

// Throws spindle::error when the type is unknown or n_in does not fill whole source blocks.
x32_shape x32_shape_of(ggml_type type, int64_t n_in, int64_t n_out);

// Packs n_out rows of n_in elements (GGUF row-major bytes) into out (resized to shape.bytes).
void x32_pack(ggml_type type, const void* src, int64_t n_in, int64_t n_out, std::vector<uint8_t>& out);

// Byte offset of field f of row r's unit u in the packed buffer (chunk c for interleaved fields).
uint64_t x32_field_offset(const x32_format& fmt, const x32_shape& sh, int64_t r, int64_t u, int f);

// Row r's source bytes (ggml_row_size(type, n_in)), gathered back from the packed buffer.
std::vector<uint8_t> x32_unpack_row(ggml_type type, const uint8_t* packed, int64_t n_in, int64_t n_out, int64_t r);

}  // namespace spindle
