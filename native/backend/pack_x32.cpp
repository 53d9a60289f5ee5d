// The x32 weight layout of the GPU backends (see pack_x32.h).
#include "backend/pack_x32.h"

#include <cstring>
#include <string>

#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

namespace {

const x32_format k_formats[] = {
    {ggml_type::F32, 8, 32, 1, {{0, 32}}},
    {ggml_type::F16, 8, 16, 1, {{0, 16}}},
    {ggml_type::BF16, 8, 16, 1, {{0, 16}}},
    {ggml_type::Q8_0, 32, 34, 2, {{0, 2}, {2, 32}}},               // d | qs
    {ggml_type::Q4_0, 32, 18, 2, {{0, 2}, {2, 16}}},               // d | qs
    {ggml_type::Q4_K, 256, 144, 3, {{0, 4}, {4, 12}, {16, 128}}},  // d dmin | scales | qs
    {ggml_type::Q6_K, 256, 210, 4, {{0, 128}, {128, 64}, {192, 16}, {208, 2}}},  // ql | qh | scales | d
    {ggml_type::Q4_1, 32, 20, 2, {{0, 4}, {4, 16}}},                             // d m | qs
    {ggml_type::Q5_0, 32, 22, 3, {{0, 2}, {2, 4}, {6, 16}}},                     // d | qh | qs
    {ggml_type::Q5_1, 32, 24, 3, {{0, 4}, {4, 4}, {8, 16}}},                     // d m | qh | qs
    {ggml_type::IQ4_NL, 32, 18, 2, {{0, 2}, {2, 16}}},                           // d | qs
    {ggml_type::Q2_K, 256, 84, 3, {{0, 16}, {16, 64}, {80, 4}}},                 // scales | qs | d dmin
    {ggml_type::Q3_K, 256, 110, 4, {{0, 32}, {32, 64}, {96, 12}, {108, 2}}},     // hmask | qs | scales | d
    {ggml_type::Q5_K, 256, 176, 4, {{0, 4}, {4, 12}, {16, 32}, {48, 128}}},      // d dmin | scales | qh | qs
    {ggml_type::IQ4_XS, 256, 136, 2, {{0, 8}, {8, 128}}},                        // d scales_h scales_l | qs
};

bool is_float(ggml_type t) { return t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16; }

// Calls fn(packed offset, offset in the row's unit, bytes) for every piece of row r's unit u.
template <typename Fn>
void for_each_piece(const x32_format& fmt, const x32_shape& sh, int64_t r, int64_t u, Fn fn) {
  for (int f = 0; f < fmt.n_fields; ++f) {
    const x32_field& fd = fmt.fields[f];
    const int chunks = fd.size % 16 == 0 ? fd.size / 16 : 1;
    const int chunk_bytes = fd.size % 16 == 0 ? 16 : fd.size;
    for (int c = 0; c < chunks; ++c) {
      fn(x32_field_offset(fmt, sh, r, u, f) + (uint64_t)c * k_x32_rows * 16, fd.offset + c * chunk_bytes,
         (size_t)chunk_bytes);
    }
  }
}

}  // namespace

const x32_format* x32_format_of(ggml_type type) {
  for (const x32_format& f : k_formats)
    if (f.type == type) return &f;
  return nullptr;
}

x32_shape x32_shape_of(ggml_type type, int64_t n_in, int64_t n_out) {
  const x32_format* fmt = x32_format_of(type);
  const ggml_type_traits* info = ggml_type_info((uint32_t)type);
  if (!fmt || !info) throw error("x32 layout: unsupported weight type " + std::string(info ? info->name : "?"));
  if (n_in <= 0 || n_out <= 0) throw error("x32 layout: empty matrix");
  ggml_row_size(type, (uint64_t)n_in);  // throws when n_in does not fill whole blocks
  x32_shape sh;
  sh.n_in = n_in;
  sh.n_out = n_out;
  sh.n_units = (n_in + fmt->unit_values - 1) / fmt->unit_values;
  sh.n_groups = (n_out + k_x32_rows - 1) / k_x32_rows;
  sh.bytes = checked_mul(checked_mul((uint64_t)sh.n_groups, (uint64_t)sh.n_units, "x32 layout"),
                         (uint64_t)k_x32_rows * fmt->unit_bytes, "x32 layout");
  return sh;
}

uint64_t x32_field_offset(const x32_format& fmt, const x32_shape& sh, int64_t r, int64_t u, int f) {
  const int64_t g = r / k_x32_rows, lane = r % k_x32_rows;
  uint64_t at = ((uint64_t)g * sh.n_units + u) * k_x32_rows * fmt.unit_bytes;
  for (int i = 0; i < f; ++i) at += (uint64_t)k_x32_rows * fmt.fields[i].size;
  const int32_t size = fmt.fields[f].size;
  return at + (uint64_t)lane * (size % 16 == 0 ? 16 : size);
}

void x32_pack(ggml_type type, const void* src, int64_t n_in, int64_t n_out, std::vector<uint8_t>& out) {
  const x32_shape sh = x32_shape_of(type, n_in, n_out);
  const x32_format& fmt = *x32_format_of(type);
  out.assign(sh.bytes, 0);
  const uint64_t row_bytes = ggml_row_size(type, (uint64_t)n_in);
  std::vector<uint8_t> unit((size_t)fmt.unit_bytes);
  for (int64_t r = 0; r < n_out; ++r) {
    const uint8_t* row = (const uint8_t*)src + (uint64_t)r * row_bytes;
    for (int64_t u = 0; u < sh.n_units; ++u) {
      const uint64_t begin = (uint64_t)u * fmt.unit_bytes;
      const uint64_t n = is_float(type) && begin + fmt.unit_bytes > row_bytes ? row_bytes - begin : fmt.unit_bytes;
      std::memset(unit.data(), 0, unit.size());
      std::memcpy(unit.data(), row + begin, (size_t)n);
      for_each_piece(fmt, sh, r, u, [&](uint64_t at, int32_t off, size_t bytes) {
        std::memcpy(out.data() + at, unit.data() + off, bytes);
      });
    }
  }
}

std::vector<uint8_t> x32_unpack_row(ggml_type type, const uint8_t* packed, int64_t n_in, int64_t n_out, int64_t r) {
  const x32_shape sh = x32_shape_of(type, n_in, n_out);
  const x32_format& fmt = *x32_format_of(type);
  const uint64_t row_bytes = ggml_row_size(type, (uint64_t)n_in);
  std::vector<uint8_t> all((size_t)(sh.n_units * fmt.unit_bytes));
  for (int64_t u = 0; u < sh.n_units; ++u) {
    uint8_t* unit = all.data() + u * fmt.unit_bytes;
    for_each_piece(fmt, sh, r, u, [&](uint64_t at, int32_t off, size_t bytes) { std::memcpy(unit + off, packed + at, bytes); });
  }
  all.resize((size_t)row_bytes);
  return all;
}

}  // namespace spindle
