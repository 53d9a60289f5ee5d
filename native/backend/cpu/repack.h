// Copies of quantized weight matrices made once (at a weight's first matmul) for faster matmuls, in 64-byte
// aligned memory that large copies get in 2 MiB pages where the OS allows (fewer TLB misses when a one-token
// matmul streams every byte). Two layouts:
//   x8:   row-interleaved groups of 8 rows for the packed kernels: super-block b of a group holds block b of each
//         of its 8 rows side by side, 32-bit words of the rows interleaved, so one 256-bit load gives the same 4
//         bytes of all 8 rows (8 rows in the 8 int32 lanes). Rows past the last whole group are not copied:
//         kernels take them from the original rows.
//   rows: the original rows unchanged (types whose row kernel is the fastest; the copy only brings the pages).
// Invariant: a copy is a permutation of the bytes of its source rows (nothing is rounded or dropped), so the
// kernels see exactly the integers and fp16 scales of the file rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/thread_pool.h"
#include "gguf/ggml_type.h"

namespace spindle {

constexpr int k_pack_rows = 8;  // rows per packed group

// Block b of 8 q4_K rows (1152 bytes = 8 x 144). Word w of a row's qs (bytes 4w .. 4w + 4) holds elements
// 64s + 4c .. + 4 (low nibbles, sub-block 2s) and 64s + 32 + 4c .. + 4 (high nibbles, sub-block 2s + 1),
// w = 8s + c.
struct block_q4_Kx8 {
  uint16_t d[k_pack_rows];           // fp16 super-block scale of row r
  uint16_t dmin[k_pack_rows];        // fp16 super-block min scale of row r
  uint32_t scales[3][k_pack_rows];   // scales[k][r]: 32-bit word k of row r's 12 packed scale/min bytes
  uint32_t qs[32][k_pack_rows];      // qs[w][r]: 32-bit word w of row r's qs
};
static_assert(sizeof(block_q4_Kx8) == 8 * sizeof(block_q4_K), "block_q4_Kx8 must be 8 q4_K blocks");

// Block b of 8 q8_0 rows (272 bytes = 8 x 34): qs[l][r] = bytes 4l .. 4l + 4 of row r's block.
struct block_q8_0x8 {
  uint16_t d[k_pack_rows];         // fp16 block scale of row r
  uint32_t qs[8][k_pack_rows];     // qs[l][r]: 32-bit word l of row r's qs
};
static_assert(sizeof(block_q8_0x8) == 8 * sizeof(block_q8_0), "block_q8_0x8 must be 8 q8_0 blocks");

// Block b of 8 q6_K rows (1680 bytes = 8 x 210). Word w of a row's ql (bytes 4w .. 4w + 4) holds the low
// nibbles of elements 128h + 32(w / 8 % 2) + 4c .. + 4 and, in its high nibbles, those 64 further on
// (w = 16h + 8k + c); word w of qh (bytes 4w .. 4w + 4) holds the top two bits of elements 128h + 4c + 32i
// .. + 4 in bit pair i (w = 8h + c).
struct block_q6_Kx8 {
  uint16_t d[k_pack_rows];           // fp16 super-block scale of row r
  uint32_t scales[4][k_pack_rows];   // scales[k][r]: int8 scales 4k .. 4k + 4 of row r
  uint32_t ql[32][k_pack_rows];      // ql[w][r]: 32-bit word w of row r's ql
  uint32_t qh[16][k_pack_rows];      // qh[w][r]: 32-bit word w of row r's qh
};
static_assert(sizeof(block_q6_Kx8) == 8 * sizeof(block_q6_K), "block_q6_Kx8 must be 8 q6_K blocks");

enum class pack_layout { x8, rows };

// A packed copy: x8 groups of the first n_rows rows (a multiple of 8), or all n_rows rows unchanged; owned.
class packed_weight {
 public:
  packed_weight(ggml_type type, pack_layout layout, int64_t n_rows, int64_t n_in, size_t bytes);
  ggml_type type() const { return type_; }
  pack_layout layout() const { return layout_; }
  int64_t n_rows() const { return n_rows_; }
  int64_t n_groups() const { return layout_ == pack_layout::x8 ? n_rows_ / k_pack_rows : 0; }
  int64_t n_in() const { return n_in_; }
  size_t bytes() const { return bytes_; }
  const uint8_t* data() const { return data_.get(); }
  uint8_t* data() { return data_.get(); }
  size_t group_bytes() const { return n_rows_ ? bytes_ / (size_t)n_rows_ * k_pack_rows : 0; }  // x8 only

 private:
  struct free_deleter {
    void operator()(uint8_t* p) const;
  };
  ggml_type type_;
  pack_layout layout_;
  int64_t n_rows_, n_in_;
  size_t bytes_;
  std::unique_ptr<uint8_t, free_deleter> data_;
};

// True if cpu_pack_weight makes a copy of `type` for `level`: the level has a packed (x8) kernel for it, or its
// row kernel streams faster from a copy in large pages (q6_K at the SIMD levels without its packed kernel).
bool cpu_packed_supported(cpu_level level, ggml_type type);

// The copy of W (n_out rows of n_in elements of `type`, rows contiguous) for `level`, made on the pool's
// threads; nullptr when cpu_packed_supported is false or (x8) n_out < 8.
// Throws spindle::error on a bad shape or when memory runs out.
std::unique_ptr<packed_weight> cpu_pack_weight(cpu_level level, thread_pool& pool, ggml_type type, const void* W,
                                               int64_t n_out, int64_t n_in);

// Plain C++ packers of one group (8 rows starting at `rows`, row_bytes apart) into nb packed super-blocks.
void pack_group_q4_K(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q4_Kx8* dst);
void pack_group_q8_0(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q8_0x8* dst);
void pack_group_q6_K(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q6_Kx8* dst);

}  // namespace spindle
