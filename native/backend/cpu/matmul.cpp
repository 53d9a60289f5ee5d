// cpu_matmul: convert x once into the weight type's activation format, then hand out chunks of output rows
// to the pool's threads; each thread walks a chunk in tiles of up to max_rows rows x max_tokens tokens.
// F32 / F16 / BF16 batches from cpu_panel_min_tokens tokens go through panels instead (matmul_panel.cpp).
// Invariant (batch invariance): every y[t, o] is one tile-kernel output computed over the full row, and tile
// kernels give bitwise the same value for (o, t) in any tile shape, so neither n_tokens, the other rows of x,
// the chunking below nor the thread count can change it; a panel kernel gives the tile kernel's bits (panel.h),
// so taking the panel path for some token counts changes nothing either.
#include "backend/cpu/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "backend/cpu/panel.h"
#include "backend/cpu/quants.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/repack.h"
#include "backend/cpu/vec_dot.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

bool cpu_supports_type(ggml_type type) {
  switch (type) {
    case ggml_type::F32: case ggml_type::F16: case ggml_type::BF16:
    case ggml_type::Q8_0: case ggml_type::Q4_0: case ggml_type::Q4_1: case ggml_type::Q5_0: case ggml_type::Q5_1:
    case ggml_type::IQ4_NL: case ggml_type::Q2_K: case ggml_type::Q3_K: case ggml_type::Q4_K: case ggml_type::Q5_K:
    case ggml_type::Q6_K: case ggml_type::IQ4_XS:
      return true;
    default:
      return false;
  }
}

void cpu_dequantize_row(ggml_type type, const void* src, float* dst, int64_t n) {
  if (!cpu_supports_type(type))
    throw error("cpu_dequantize_row: unsupported ggml type " + std::to_string((uint32_t)type));
  const size_t bytes = cpu_row_bytes(type, n);  // validates n against the block size
  if (n == 0) return;
  if (src == nullptr || dst == nullptr) throw error("cpu_dequantize_row: null buffer");
  switch (type) {
    case ggml_type::F32: std::memcpy(dst, src, bytes); return;
    case ggml_type::F16: dequantize_row_f16((const uint16_t*)src, dst, n); return;
    case ggml_type::BF16: dequantize_row_bf16((const uint16_t*)src, dst, n); return;
    case ggml_type::Q8_0: dequantize_row_q8_0((const block_q8_0*)src, dst, n); return;
    case ggml_type::Q4_0: dequantize_row_q4_0((const block_q4_0*)src, dst, n); return;
    case ggml_type::Q4_K: dequantize_row_q4_K((const block_q4_K*)src, dst, n); return;
    case ggml_type::Q6_K: dequantize_row_q6_K((const block_q6_K*)src, dst, n); return;
    case ggml_type::Q4_1: dequantize_row_q4_1((const block_q4_1*)src, dst, n); return;
    case ggml_type::Q5_0: dequantize_row_q5_0((const block_q5_0*)src, dst, n); return;
    case ggml_type::Q5_1: dequantize_row_q5_1((const block_q5_1*)src, dst, n); return;
    case ggml_type::Q2_K: dequantize_row_q2_K((const block_q2_K*)src, dst, n); return;
    case ggml_type::Q3_K: dequantize_row_q3_K((const block_q3_K*)src, dst, n); return;
    case ggml_type::Q5_K: dequantize_row_q5_K((const block_q5_K*)src, dst, n); return;
    case ggml_type::IQ4_NL: dequantize_row_iq4_nl((const block_iq4_nl*)src, dst, n); return;
    case ggml_type::IQ4_XS: dequantize_row_iq4_xs((const block_iq4_xs*)src, dst, n); return;
    default: return;
  }
}

void cpu_matmul(thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out, int64_t n_in, const float* x,
                int64_t n_tokens, float* y, const packed_weight* packed) {
  cpu_matmul_at_level(cpu_active_level(), pool, wtype, W, n_out, n_in, x, n_tokens, y, packed);
}

namespace {

struct matmul_plan {
  tile_kernel kernel;
  packed_kernel pk;      // with wp: the kernel for rows [0, packed_rows)
  const uint8_t* w;      // [n_out, w_row] bytes
  size_t w_row;          // bytes per weight row
  const uint8_t* wp;     // packed groups of 8 rows (repack.h), or null
  size_t wp_group;       // bytes per packed group
  int64_t packed_rows;   // rows [0, packed_rows) are read from wp (a multiple of 8), the others from w
  const uint8_t* act;    // [n_tokens, act_row] bytes, activations in the kernel's format
  const uint8_t* act_pk; // the same in the packed kernel's order (act itself unless pk.paired_q8_K)
  size_t act_row;        // bytes per activation row
  int64_t n_out, n_in, n_tokens;
  int64_t chunk_tokens;  // tokens whose activations are walked against all of a thread's rows at a time
  float* y;              // [n_tokens, n_out]
};

// Rows [r0, r1) (r0 a multiple of 8 in the packed range, else of max_rows): token chunks x row tiles x token tiles.
void matmul_rows(const matmul_plan& p, int64_t r0, int64_t r1) {
  const int mr = p.kernel.max_rows, mt = p.kernel.max_tokens, pmt = p.pk.max_tokens;
  for (int64_t t0 = 0; t0 < p.n_tokens; t0 += p.chunk_tokens) {
    const int64_t t1 = std::min(p.n_tokens, t0 + p.chunk_tokens);
    int64_t o = r0;
    for (const int64_t packed_end = std::min(r1, p.packed_rows); o < packed_end;) {
      const uint8_t* group = p.wp + (size_t)(o / k_pack_rows) * p.wp_group;
      // fn16 where it has two groups and more than one token: alone, one token streams weights from DRAM
      // faster through the one-group kernel (measured: 16384 x 8192 q4_K, 2 threads, ~30 vs ~40 GB/s).
      const bool two = p.pk.fn16 != nullptr && t1 - t0 > 1 && o + 2 * k_pack_rows <= packed_end;
      const packed_tile_fn fn = two ? p.pk.fn16 : p.pk.fn;
      for (int64_t t = t0; t < t1; t += pmt) {
        const int nt = (int)std::min<int64_t>(pmt, t1 - t);
        fn(p.n_in, group, p.act_pk + t * p.act_row, p.act_row, nt, p.y + t * p.n_out + o, p.n_out);
      }
      o += two ? 2 * k_pack_rows : k_pack_rows;
    }
    for (; o < r1; o += mr) {
      const int nr = (int)std::min<int64_t>(mr, r1 - o);
      for (int64_t t = t0; t < t1; t += mt) {
        const int nt = (int)std::min<int64_t>(mt, t1 - t);
        p.kernel.fn(p.n_in, p.w + o * p.w_row, p.w_row, nr, p.act + t * p.act_row, p.act_row, nt,
                    p.y + t * p.n_out + o, p.n_out);
      }
    }
  }
}

// Threads take chunks of row tiles from a shared counter (a thread that the OS delays leaves its work to the
// others instead of holding up the whole op); which thread computes a row never changes its bits.
void matmul_chunks(const matmul_plan& p, std::atomic<int64_t>& next, int64_t chunk_rows) {
  for (;;) {
    const int64_t r0 = next.fetch_add(chunk_rows, std::memory_order_relaxed);
    if (r0 >= p.n_out) return;
    matmul_rows(p, r0, std::min(p.n_out, r0 + chunk_rows));
  }
}

// Points the plan's weights at the packed copy where it applies (x8 groups with the level's packed kernel, or
// a copy of all rows); throws on a copy that does not belong to this matrix.
void use_packed(matmul_plan& p, cpu_level level, ggml_type wtype, const packed_weight* packed) {
  p.wp = nullptr;
  p.wp_group = 0;
  p.packed_rows = 0;
  if (packed == nullptr) return;
  const bool x8 = packed->layout() == pack_layout::x8;
  if (packed->type() != wtype || packed->n_in() != p.n_in ||
      (x8 ? packed->n_groups() > p.n_out / k_pack_rows : packed->n_rows() != p.n_out))
    throw error("cpu_matmul: packed weight does not match the matrix");
  if (!x8) {
    p.w = packed->data();  // the same rows, in the copy's pages
    return;
  }
  p.pk = cpu_packed_kernel(level, wtype);
  if (p.pk.fn == nullptr) return;  // a level without the packed kernel reads the file rows
  p.wp = packed->data();
  p.wp_group = packed->group_bytes();
  p.packed_rows = packed->n_groups() * k_pack_rows;
}

// act_row bytes per token written by fill(t, row) for every token, tokens split over threads when there are
// enough, into a buffer grown and never shrunk per calling thread and Slot (no allocation per matmul once warm).
template <int Slot, class Fill>
uint8_t* fill_token_rows(thread_pool& pool, int64_t n_tokens, size_t act_row, Fill&& fill) {
  thread_local std::vector<uint8_t> scratch;
  const size_t act_bytes = (size_t)checked_mul(act_row, (uint64_t)n_tokens, "cpu_matmul activations");
  if (scratch.size() < act_bytes) scratch.resize(act_bytes);
  uint8_t* out = scratch.data();
  auto run = [&](int ith, int nth) {
    int64_t t0, t1;
    thread_pool::split(n_tokens, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) fill(t, out + t * act_row);
  };
  if (n_tokens >= 4 && pool.size() > 1) pool.run(run);
  else run(0, 1);
  return out;
}

// Converts the activations once into the kernel's format (f32 rows are used in place).
const uint8_t* convert_activations(thread_pool& pool, ggml_type act_type, const float* x, int64_t n_tokens,
                                   int64_t n_in, size_t act_row) {
  if (act_type == ggml_type::F32) return (const uint8_t*)x;
  return fill_token_rows<0>(pool, n_tokens, act_row, [&](int64_t t, uint8_t* row) {
    cpu_convert_activation(act_type, x + t * n_in, row, n_in);
  });
}

// The activations in the packed kernel's order: `act` itself, or (pk.paired_q8_K) paired copies of its q8_K rows.
const uint8_t* packed_activations(thread_pool& pool, const packed_kernel& pk, const uint8_t* act, int64_t n_tokens,
                                  int64_t n_in, size_t act_row) {
  if (!pk.paired_q8_K) return act;
  return fill_token_rows<1>(pool, n_tokens, act_row, [&](int64_t t, uint8_t* row) {
    pair_q8_K_row((const block_q8_K*)(act + t * act_row), (block_q8_K*)row, n_in / QK_K);
  });
}

}  // namespace

void cpu_matmul_at_level(cpu_level level, thread_pool& pool, ggml_type wtype, const void* W, int64_t n_out,
                         int64_t n_in, const float* x, int64_t n_tokens, float* y, const packed_weight* packed) {
  if (!cpu_supports_type(wtype))
    throw error("cpu_matmul: unsupported weight type " + std::to_string((uint32_t)wtype));
  if (n_out < 0 || n_in < 0 || n_tokens < 0) throw error("cpu_matmul: negative dimension");
  const ggml_type act_type = cpu_activation_type(wtype);
  matmul_plan p;
  p.w_row = cpu_row_bytes(wtype, n_in);  // throws if n_in is not a multiple of the block size
  p.act_row = cpu_row_bytes(act_type, n_in);
  checked_mul(checked_mul((uint64_t)n_out, (uint64_t)n_tokens, "cpu_matmul output"), 4, "cpu_matmul output");
  if (n_out == 0 || n_tokens == 0) return;
  if (W == nullptr || x == nullptr || y == nullptr) throw error("cpu_matmul: null buffer");
  if (n_in == 0) {
    std::fill(y, y + n_out * n_tokens, 0.0f);
    return;
  }
  p.kernel = cpu_tile_kernel(level, wtype);
  if (p.kernel.fn == nullptr)
    throw error(std::string("cpu_matmul: kernel level ") + cpu_level_name(level) + " is not available here");
  p.w = (const uint8_t*)W;
  p.n_out = n_out;
  p.n_in = n_in;
  p.n_tokens = n_tokens;
  p.y = y;
  use_packed(p, level, wtype, packed);
  if (cpu_panel_pays(level, wtype, n_tokens)) {  // F32 / F16 / BF16 batches: the same bits, outer products
    cpu_matmul_panels(level, pool, wtype, p.w, n_out, n_in, x, n_tokens, y);
    return;
  }
  p.act = convert_activations(pool, act_type, x, n_tokens, n_in, p.act_row);
  p.act_pk = p.wp ? packed_activations(pool, p.pk, p.act, n_tokens, n_in, p.act_row) : p.act;
  // Keep a chunk's activations around 256 KiB (L2) while a thread's row tiles stream past them; chunks are
  // whole token tiles of both kernels.
  const int64_t mt = p.wp ? std::lcm<int64_t>(p.kernel.max_tokens, p.pk.max_tokens) : p.kernel.max_tokens;
  p.chunk_tokens = std::max<int64_t>(mt, (int64_t)((256 * 1024) / p.act_row) / mt * mt);
  if (pool.size() == 1) {
    matmul_rows(p, 0, n_out);
    return;
  }
  // About 8 chunks per thread, each a whole number of row tiles (of packed groups when there are some).
  const int64_t mr = p.wp ? (p.pk.fn16 && n_tokens > 1 ? 2 : 1) * k_pack_rows : p.kernel.max_rows;
  const int64_t n_tiles = (n_out + mr - 1) / mr;
  const int64_t chunk_rows = std::max<int64_t>(1, n_tiles / (8 * (int64_t)pool.size())) * mr;
  std::atomic<int64_t> next{0};
  pool.run([&](int, int) { matmul_chunks(p, next, chunk_rows); });
}

}  // namespace spindle
