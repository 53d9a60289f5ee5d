// Packing of weight rows into the layouts of repack.h (plain C++, run once per weight).
// Invariant: every packer only moves values (see repack.h); an x8 copy is made exactly for the (level, type)
// pairs with a packed kernel, a row copy exactly where row_copy_pays.
#include "backend/cpu/repack.h"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "backend/cpu/vec_dot.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

void packed_weight::free_deleter::operator()(uint8_t* p) const { std::free(p); }

packed_weight::packed_weight(ggml_type type, pack_layout layout, int64_t n_rows, int64_t n_in, size_t bytes)
    : type_(type), layout_(layout), n_rows_(n_rows), n_in_(n_in), bytes_(bytes) {
  // Large copies on 2 MiB boundaries and, on Linux, in transparent huge pages where the system allows them
  // (one-token matmuls stream every byte: fewer TLB misses; a hint only).
  const size_t huge = (size_t)2 << 20, align = bytes >= huge ? huge : 64;
  void* p = nullptr;
  if (posix_memalign(&p, align, bytes == 0 ? 64 : bytes) != 0 || p == nullptr)
    throw error("cpu backend: out of memory packing a weight (" + std::to_string(bytes) + " bytes)");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == huge) (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
#endif
  data_.reset((uint8_t*)p);
}

namespace {

// Row copies pay where the row kernel is memory-bound on one token (q6_K: about a quarter faster from 2 MiB pages)
// and the level has no packed kernel for the type.
bool row_copy_pays(cpu_level level, ggml_type type) {
  return type == ggml_type::Q6_K && level != cpu_level::scalar && cpu_level_supported(level) &&
         cpu_packed_kernel(level, type).fn == nullptr;
}

}  // namespace

bool cpu_packed_supported(cpu_level level, ggml_type type) {
  return cpu_packed_kernel(level, type).fn != nullptr || row_copy_pays(level, type);
}

void pack_group_q4_K(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q4_Kx8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_q4_Kx8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_q4_K& in = ((const block_q4_K*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      out.dmin[r] = in.dmin;
      for (int k = 0; k < 3; ++k) std::memcpy(&out.scales[k][r], in.scales + 4 * k, 4);
      for (int w = 0; w < 32; ++w) std::memcpy(&out.qs[w][r], in.qs + 4 * w, 4);
    }
  }
}

void pack_group_q8_0(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q8_0x8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_q8_0x8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_q8_0& in = ((const block_q8_0*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      for (int l = 0; l < 8; ++l) std::memcpy(&out.qs[l][r], in.qs + 4 * l, 4);
    }
  }
}

void pack_group_q5_0(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q5_0x8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_q5_0x8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_q5_0& in = ((const block_q5_0*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      std::memcpy(&out.qh[r], in.qh, 4);
      for (int w = 0; w < 4; ++w) std::memcpy(&out.qs[w][r], in.qs + 4 * w, 4);
    }
  }
}

void pack_group_iq4_xs(const uint8_t* rows, size_t row_bytes, int64_t nb, block_iq4_xsx8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_iq4_xsx8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_iq4_xs& in = ((const block_iq4_xs*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      out.scales_h[r] = in.scales_h;
      std::memcpy(&out.scales_l[r], in.scales_l, 4);
      for (int w = 0; w < 32; ++w) std::memcpy(&out.qs[w][r], in.qs + 4 * w, 4);
    }
  }
}

// q4_0 and iq4_nl (the same block layout).
void pack_group_q4_0(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q4_0x8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_q4_0x8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_q4_0& in = ((const block_q4_0*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      for (int w = 0; w < 4; ++w) std::memcpy(&out.qs[w][r], in.qs + 4 * w, 4);
    }
  }
}

int q6_K_value(const block_q6_K& b, int e) {
  const int h = e / 128, p = e % 128;  // half, position in the half
  const int low = (b.ql[64 * h + p % 64] >> (p < 64 ? 0 : 4)) & 15;
  const int top = (b.qh[32 * h + p % 32] >> (2 * (p / 32))) & 3;
  return low | top << 4;
}

void pack_group_q6_K(const uint8_t* rows, size_t row_bytes, int64_t nb, block_q6_Kx8* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    block_q6_Kx8& out = dst[b];
    for (int r = 0; r < k_pack_rows; ++r) {
      const block_q6_K& in = ((const block_q6_K*)(rows + (size_t)r * row_bytes))[b];
      out.d[r] = in.d;
      for (int k = 0; k < 4; ++k) std::memcpy(&out.scales[k][r], in.scales + 4 * k, 4);
      uint8_t v[QK_K];  // the block's 6-bit values in element order (q6_K_value for every e, in bulk)
      for (int h = 0; h < 2; ++h)
        for (int part = 0; part < 4; ++part)  // elements 128h + 32 part + i
          for (int i = 0; i < 32; ++i)
            v[128 * h + 32 * part + i] = (uint8_t)(((in.ql[64 * h + 32 * (part & 1) + i] >> (part >= 2 ? 4 : 0)) & 15) |
                                                   ((in.qh[32 * h + i] >> (2 * part)) & 3) << 4);
      // element of byte k of group A (second = false) or B (true) of even chunk j at lane position l
      auto elem = [](int j, int l, bool second, int k) { return 32 * j + (k >= 2 ? 32 : 0) + 4 * l + (second ? 2 : 0) + k % 2; };
      for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 8; ++l) {
          uint8_t a[4], bq[4], hb[4];
          for (int k = 0; k < 4; ++k) {
            const int a0 = v[elem(4 * h, l, false, k)], b0 = v[elem(4 * h, l, true, k)];
            const int a2 = v[elem(4 * h + 2, l, false, k)], b2 = v[elem(4 * h + 2, l, true, k)];
            a[k] = (uint8_t)((a0 & 15) | (a2 & 15) << 4);
            bq[k] = (uint8_t)((b0 & 15) | (b2 & 15) << 4);
            hb[k] = (uint8_t)((a0 >> 4) | (b0 >> 4) << 2 | (a2 >> 4) << 4 | (b2 >> 4) << 6);
          }
          std::memcpy(&out.ql[16 * h + 2 * l][r], a, 4);
          std::memcpy(&out.ql[16 * h + 2 * l + 1][r], bq, 4);
          std::memcpy(&out.qh[8 * h + l][r], hb, 4);
        }
      }
    }
  }
}

void pair_q8_K_row(const block_q8_K* x, block_q8_K* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    out[b].d = x[b].d;
    std::memcpy(out[b].bsums, x[b].bsums, sizeof(x[b].bsums));
    const int8_t* in = x[b].qs;
    int8_t* o = out[b].qs;
    for (int m = 0; m < 4; ++m)
      for (int l = 0; l < 8; ++l) {
        const int e = 64 * m + 4 * l;
        int8_t* w = o + 64 * m + 8 * l;
        w[0] = in[e], w[1] = in[e + 1], w[2] = in[e + 32], w[3] = in[e + 33];
        w[4] = in[e + 2], w[5] = in[e + 3], w[6] = in[e + 34], w[7] = in[e + 35];
      }
  }
}

void pair_q8_K_row_in_place(block_q8_K* x, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const block_q8_K plain = x[b];
    pair_q8_K_row(&plain, x + b, 1);
  }
}

std::unique_ptr<packed_weight> cpu_pack_weight(cpu_level level, thread_pool& pool, ggml_type type, const void* W,
                                               int64_t n_out, int64_t n_in) {
  const bool x8 = cpu_packed_kernel(level, type).fn != nullptr;
  if (!x8 && !row_copy_pays(level, type)) return nullptr;
  if (n_out <= 0 || (x8 && n_out < k_pack_rows)) return nullptr;
  if (W == nullptr) throw error("cpu_pack_weight: null weight");
  const size_t row_bytes = cpu_row_bytes(type, n_in);  // validates n_in
  const int64_t n_rows = x8 ? n_out / k_pack_rows * k_pack_rows : n_out, nb = n_in / cpu_block_size(type);
  auto packed = std::make_unique<packed_weight>(type, x8 ? pack_layout::x8 : pack_layout::rows, n_rows, n_in,
                                                (size_t)checked_mul(row_bytes, (uint64_t)n_rows, "packed weight"));
  const uint8_t* src = (const uint8_t*)W;
  uint8_t* dst = packed->data();
  const int64_t n_units = x8 ? n_rows / k_pack_rows : n_rows;  // groups or rows
  const size_t unit_bytes = x8 ? row_bytes * k_pack_rows : row_bytes;
  pool.run([&](int ith, int nth) {
    int64_t u0, u1;
    thread_pool::split(n_units, ith, nth, &u0, &u1);
    if (!x8) {
      std::memcpy(dst + (size_t)u0 * unit_bytes, src + (size_t)u0 * unit_bytes, (size_t)(u1 - u0) * unit_bytes);
      return;
    }
    for (int64_t g = u0; g < u1; ++g) {
      const uint8_t* rows = src + (size_t)g * unit_bytes;
      uint8_t* out = dst + (size_t)g * unit_bytes;
      switch (type) {
        case ggml_type::Q4_K: pack_group_q4_K(rows, row_bytes, nb, (block_q4_Kx8*)out); break;
        case ggml_type::Q8_0: pack_group_q8_0(rows, row_bytes, nb, (block_q8_0x8*)out); break;
        case ggml_type::Q6_K: pack_group_q6_K(rows, row_bytes, nb, (block_q6_Kx8*)out); break;
        case ggml_type::Q5_0: pack_group_q5_0(rows, row_bytes, nb, (block_q5_0x8*)out); break;
        case ggml_type::IQ4_XS: pack_group_iq4_xs(rows, row_bytes, nb, (block_iq4_xsx8*)out); break;
        case ggml_type::Q4_0:
        case ggml_type::IQ4_NL: pack_group_q4_0(rows, row_bytes, nb, (block_q4_0x8*)out); break;
        default: break;  // unreachable: the types with x8 kernels are the ones above
      }
    }
  });
  return packed;
}

}  // namespace spindle
