// Copies of quantized weight matrices made once (at a weight's first matmul) for faster matmuls, in 64-byte
// aligned memory that large copies get in 2 MiB pages where the OS allows (fewer TLB misses when a one-token
// matmul streams every byte). Two layouts:
//   x8:   row-interleaved groups of 8 rows for the packed kernels: super-block b of a group holds block b of each
//         of its 8 rows side by side, 32-bit words of the rows interleaved, so one 256-bit load gives the same 4
//         bytes of all 8 rows (8 rows in the 8 int32 lanes). Rows past the last whole group are not copied:
//         kernels take them from the original rows.
//   rows: the original rows unchanged (types whose row kernel is the fastest; the copy only brings the pages).
// Invariant: a copy holds exactly the integers and fp16 scales of its source rows, only rearranged (q4_K, q8_0,
// q4_0, iq4_nl, q5_0, iq4_xs: a byte permutation; q6_K: its 6-bit values regrouped into other bytes), so nothing is rounded or dropped.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_more.h"
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

// Block b of 8 q5_0 rows (176 bytes = 8 x 22): qh[r] = row r's 32 high bits (bit e: element e), qs[w][r] = bytes
// 4w .. 4w + 4 of its qs (elements 4w .. 4w + 4 in the low nibbles, 16 + 4w .. in the high).
struct block_q5_0x8 {
  uint16_t d[k_pack_rows];      // fp16 block scale of row r
  uint32_t qh[k_pack_rows];     // row r's high bits
  uint32_t qs[4][k_pack_rows];  // qs[w][r]: 32-bit word w of row r's qs
};
static_assert(sizeof(block_q5_0x8) == 8 * sizeof(block_q5_0), "block_q5_0x8 must be 8 q5_0 blocks");

// Block b of 8 q4_0 or iq4_nl rows (144 bytes = 8 x 18; the two types share the layout): qs[w][r] = bytes
// 4w .. 4w + 4 of row r's 16 qs bytes, i.e. elements 4w .. 4w + 4 (low nibbles) and 16 + 4w .. (high).
struct block_q4_0x8 {
  uint16_t d[k_pack_rows];      // fp16 block scale of row r
  uint32_t qs[4][k_pack_rows];  // qs[w][r]: 32-bit word w of row r's qs
};
static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0), "block_q4_0x8 must be 8 q4_0 blocks");

// Block b of 8 iq4_xs rows (1088 bytes = 8 x 136): the file's fields of row r side by side; qs[w][r] = bytes
// 4w .. 4w + 4 of row r's qs (sub-block j in words 4j .. 4j + 3: elements 4k .. 4k + 4 of it in the low nibbles
// of word 4j + k, 16 + 4k .. in the high).
struct block_iq4_xsx8 {
  uint16_t d[k_pack_rows];         // fp16 super-block scale of row r
  uint16_t scales_h[k_pack_rows];  // high 2 bits of row r's 8 sub-block scales
  uint32_t scales_l[k_pack_rows];  // low 4 bits of them, the file's 4 bytes
  uint32_t qs[32][k_pack_rows];    // qs[w][r]: 32-bit word w of row r's qs
};
static_assert(sizeof(block_iq4_xsx8) == 8 * sizeof(block_iq4_xs), "block_iq4_xsx8 must be 8 iq4_xs blocks");

// Block b of 8 q6_K rows (1680 bytes = 8 x 210), its 6-bit values regrouped for multiplying two chunks' scales
// at once. With q(e) the 6-bit value of element e (0..63) of a row's block, chunk j = elements 32j .. 32j + 32, and
// for an even chunk j and lane position l (0..7) the 4-value groups
//   A(j, l) = q(32j + 4l), q(32j + 4l + 1), q(32j + 32 + 4l), q(32j + 32 + 4l + 1)
//   B(j, l) = q(32j + 4l + 2), q(32j + 4l + 3), q(32j + 32 + 4l + 2), q(32j + 32 + 4l + 3),
// half h (chunks 4h .. 4h + 4) of a row is stored, byte k (0..3) of each 32-bit word, as
//   ql[16h + 2l]:     low nibble of A(4h, l)[k],  high nibble: low nibble of A(4h + 2, l)[k]
//   ql[16h + 2l + 1]: the same for B(4h, l)[k] and B(4h + 2, l)[k]
//   qh[8h + l]:       top two bits of A(4h, l)[k] in bits 0-1, B(4h, l)[k] 2-3, A(4h + 2, l)[k] 4-5, B(4h + 2, l)[k] 6-7
// (pair_q8_K_row puts the activations in the matching order). Scales and d are the file's bytes.
struct block_q6_Kx8 {
  uint16_t d[k_pack_rows];           // fp16 super-block scale of row r
  uint32_t scales[4][k_pack_rows];   // scales[k][r]: int8 scales 4k .. 4k + 4 of row r
  uint32_t ql[32][k_pack_rows];      // ql[w][r]: 32-bit word w of row r, as above
  uint32_t qh[16][k_pack_rows];      // qh[w][r]: 32-bit word w of row r, as above
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

// The 6-bit value of element e (0..255) of a q6_K block: the file layout (ggml's ql / qh packing).
int q6_K_value(const block_q6_K& b, int e);

// One activation row (nb q8_K blocks) in the order the packed q6_K kernel reads it: d and bsums as they are, and
// per block, for each pair of chunks (2m, 2m + 1) and lane position l, the 8 bytes
//   x(64m + 4l), x(64m + 4l + 1), x(64m + 32 + 4l), x(64m + 32 + 4l + 1),
//   x(64m + 4l + 2), x(64m + 4l + 3), x(64m + 32 + 4l + 2), x(64m + 32 + 4l + 3)
// at qs[64m + 8l] (the activations of A(2m, l) and B(2m, l) in block_q6_Kx8's notation).
void pair_q8_K_row(const block_q8_K* x, block_q8_K* out, int64_t nb);
void pair_q8_K_row_in_place(block_q8_K* x, int64_t nb);  // the same, through a one-block copy

}  // namespace spindle
