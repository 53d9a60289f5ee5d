// AVX-512 packers of the avx512 panel shapes (64 rows, 16 lanes, padded; BF16 with AVX512_BF16 in pairs; panel.h):
// per step of 16 elements (pairs), blocks of the rows transposed in registers into the 16 lane slots of the step.
// Invariant: the bytes of pack_panel_ref for the same shape (elements only move; past n and past row nr
// the slots get zero from masked loads).
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx512.h"

#if SPINDLE_HAVE_AVX512_KERNELS && !defined(SPINDLE_EMULATE_AVX512)

namespace spindle {

namespace {

constexpr int k_rows = 64, k_lanes = 16;

SPINDLE_AVX512 inline __mmask16 step_mask(int64_t n, int64_t k0) {
  return n - k0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - k0)) - 1);
}

// 16 16-bit elements of row r from k0 (zero past n or past row nr).
SPINDLE_AVX512 inline __m256i load_row16(const uint8_t* rows, size_t rb, int nr, int r, int64_t k0, __mmask16 m) {
  if (r >= nr) return _mm256_setzero_si256();
  return _mm256_maskz_loadu_epi16(m, (const uint16_t*)(rows + (size_t)r * rb) + k0);
}

}  // namespace

// One step i of rows [b0, b0 + 32) (the second 16 absent when `two` is false): z[r] = rows b0 + r and b0 + r + 16
// (16-bit elements i * 16 .. + 16 in each 256-bit half). Within every 128-bit lane the unpacks transpose 8 x 8
// (rows 0..7 of z, then 8..15); vpermt2q joins rows 0-7 and 8-15 of each half. Lane slot e gets 64 bytes (rows
// b0 .. b0 + 32) at out + e * lane_bytes, or 32 (rows b0 .. b0 + 16) when `two` is false.
SPINDLE_AVX512 inline void pack_step_16bit(const uint8_t* rows, size_t rb, int nr, int b0, bool two, int64_t k0,
                                           __mmask16 m, uint8_t* out, size_t lane_bytes) {
  const __m512i idx_lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i idx_hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  __m512i z[16], s1[16], s2[16], s3[16];
  for (int r = 0; r < 16; ++r) {
    const __m256i hi = two ? load_row16(rows, rb, nr, b0 + r + 16, k0, m) : _mm256_setzero_si256();
    z[r] = _mm512_inserti64x4(_mm512_castsi256_si512(load_row16(rows, rb, nr, b0 + r, k0, m)), hi, 1);
  }
  for (int p = 0; p < 8; ++p) {  // s1[2p]: elements 0-3 of rows 2p, 2p+1 interleaved; s1[2p+1]: 4-7
    s1[2 * p] = _mm512_unpacklo_epi16(z[2 * p], z[2 * p + 1]);
    s1[2 * p + 1] = _mm512_unpackhi_epi16(z[2 * p], z[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // s2[4q + c]: elements 2c, 2c+1 of rows 4q .. 4q+3
    for (int h = 0; h < 2; ++h) {
      s2[4 * q + 2 * h] = _mm512_unpacklo_epi32(s1[4 * q + h], s1[4 * q + 2 + h]);
      s2[4 * q + 2 * h + 1] = _mm512_unpackhi_epi32(s1[4 * q + h], s1[4 * q + 2 + h]);
    }
  }
  for (int o = 0; o < 2; ++o) {  // s3[8o + e]: element e of rows 8o .. 8o+7 (per 128-bit lane)
    for (int c = 0; c < 4; ++c) {
      s3[8 * o + 2 * c] = _mm512_unpacklo_epi64(s2[8 * o + c], s2[8 * o + 4 + c]);
      s3[8 * o + 2 * c + 1] = _mm512_unpackhi_epi64(s2[8 * o + c], s2[8 * o + 4 + c]);
    }
  }
  for (int e = 0; e < 8; ++e) {
    const __m512i lo = _mm512_permutex2var_epi64(s3[e], idx_lo, s3[8 + e]);
    const __m512i hi = _mm512_permutex2var_epi64(s3[e], idx_hi, s3[8 + e]);
    if (two) {
      _mm512_storeu_si512(out + e * lane_bytes, lo);
      _mm512_storeu_si512(out + (e + 8) * lane_bytes, hi);
    } else {
      _mm256_storeu_si256((__m256i*)(out + e * lane_bytes), _mm512_castsi512_si256(lo));
      _mm256_storeu_si256((__m256i*)(out + (e + 8) * lane_bytes), _mm512_castsi512_si256(hi));
    }
  }
}

// Rows 16 KiB apart share L1 sets: each row's next k_stage_steps steps (whole cache lines) are first copied into
// a contiguous stage, so they are read from memory once, then transposed from the stage step by step.
constexpr int k_stage_steps = 8;

SPINDLE_AVX512 void pack_panel_avx512_16bit(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  const int64_t steps = (n + k_lanes - 1) / k_lanes;
  const size_t lane_bytes = (size_t)steps * k_rows * 2;
  alignas(64) uint16_t stage[k_rows][16 * k_stage_steps];
  for (int64_t i = 0; i < steps; i += k_stage_steps) {
    for (int r = 0; r < k_rows; ++r) {
      const uint16_t* row = (const uint16_t*)(rows + (size_t)r * rb);
      for (int c = 0; c < k_stage_steps / 2; ++c) {
        const int64_t k0 = (i + 2 * c) * k_lanes, left = n - k0;
        const __mmask32 m = left >= 32 ? (__mmask32)0xffffffffu : left > 0 ? (__mmask32)((1u << left) - 1) : 0;
        if (r < nr && left > 16 * k_stage_steps)  // the same line of the next stage
          _mm_prefetch((const char*)(row + k0 + 16 * k_stage_steps), _MM_HINT_T0);
        _mm512_store_si512(stage[r] + 32 * c, r < nr ? _mm512_maskz_loadu_epi16(m, row + k0) : _mm512_setzero_si512());
      }
    }
    for (int h = 0; h < k_stage_steps && i + h < steps; ++h)
      for (int b0 = 0; b0 < k_rows; b0 += 32)
        pack_step_16bit((const uint8_t*)stage, sizeof stage[0], k_rows, b0, b0 + 32 <= k_rows, 16 * h,
                        (__mmask16)0xffff, panel + ((size_t)(i + h) * k_rows + b0) * 2, lane_bytes);
  }
}

// z: 16 rows x 16 32-bit elements; element e of the 16 rows goes to out + e * lane_bytes (64 bytes). A 16 x 16
// transpose: unpack ps, unpack pd, two rounds of 128-bit lane shuffles.
SPINDLE_AVX512 inline void transpose16_store(const __m512 z[16], uint8_t* out, size_t lane_bytes) {
  __m512 s1[16], s2[16];
  for (int p = 0; p < 8; ++p) {  // s1[2p]: elements 0, 1 of rows 2p, 2p+1 (per lane); s1[2p+1]: 2, 3
    s1[2 * p] = _mm512_unpacklo_ps(z[2 * p], z[2 * p + 1]);
    s1[2 * p + 1] = _mm512_unpackhi_ps(z[2 * p], z[2 * p + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // s2[4q + e]: element e (per lane) of rows 4q .. 4q+3
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(s1[4 * q + h]), b = _mm512_castps_pd(s1[4 * q + 2 + h]);
      s2[4 * q + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      s2[4 * q + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  }
  for (int e = 0; e < 4; ++e) {
    const __m512 lo01 = _mm512_shuffle_f32x4(s2[e], s2[4 + e], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi01 = _mm512_shuffle_f32x4(s2[e], s2[4 + e], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 lo23 = _mm512_shuffle_f32x4(s2[8 + e], s2[12 + e], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi23 = _mm512_shuffle_f32x4(s2[8 + e], s2[12 + e], _MM_SHUFFLE(3, 2, 3, 2));
    _mm512_storeu_ps(out + (0 + e) * lane_bytes, _mm512_shuffle_f32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_ps(out + (4 + e) * lane_bytes, _mm512_shuffle_f32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1)));
    _mm512_storeu_ps(out + (8 + e) * lane_bytes, _mm512_shuffle_f32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0)));
    _mm512_storeu_ps(out + (12 + e) * lane_bytes, _mm512_shuffle_f32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1)));
  }
}

// Per step and block of 16 rows: the 16 f32 elements of each row, transposed.
SPINDLE_AVX512 void pack_panel_avx512_f32(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  const int64_t steps = (n + k_lanes - 1) / k_lanes;
  const size_t lane_bytes = (size_t)steps * k_rows * 4;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t k0 = i * k_lanes;
    const __mmask16 m = step_mask(n, k0);
    for (int b0 = 0; b0 < k_rows; b0 += 16) {
      __m512 z[16];
      for (int r = 0; r < 16; ++r)
        z[r] = b0 + r < nr ? _mm512_maskz_loadu_ps(m, (const float*)(rows + (size_t)(b0 + r) * rb) + k0)
                           : _mm512_setzero_ps();
      transpose16_store(z, panel + ((size_t)i * k_rows + b0) * 4, lane_bytes);
    }
  }
}

// BF16 pairs: per step (32 elements) and block of 16 rows, each row's 16 pairs (32-bit units, zero past n)
// transposed like f32 elements.
SPINDLE_AVX512 void pack_panel_avx512_bf16_pairs(int64_t n, const uint8_t* rows, size_t rb, int nr,
                                                  uint8_t* panel) {
  const int64_t steps = (n + 2 * k_lanes - 1) / (2 * k_lanes);
  const size_t lane_bytes = (size_t)steps * k_rows * 4;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t k0 = i * 2 * k_lanes, left = n - k0;
    const __mmask32 m = left >= 32 ? (__mmask32)0xffffffffu : (__mmask32)((1u << left) - 1);
    for (int b0 = 0; b0 < k_rows; b0 += 16) {
      __m512 z[16];
      for (int r = 0; r < 16; ++r)
        z[r] = b0 + r < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(
                                 m, (const uint16_t*)(rows + (size_t)(b0 + r) * rb) + k0))
                           : _mm512_setzero_ps();
      transpose16_store(z, panel + ((size_t)i * k_rows + b0) * 4, lane_bytes);
    }
  }
}

}  // namespace spindle

#else

namespace spindle {
void pack_panel_avx512_16bit(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  pack_panel_ref(panel_shape{64, 16, true}, 2, n, rows, rb, nr, panel);
}
void pack_panel_avx512_f32(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  pack_panel_ref(panel_shape{64, 16, true}, 4, n, rows, rb, nr, panel);
}
void pack_panel_avx512_bf16_pairs(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  pack_panel_ref(panel_shape{64, 16, true, 2}, 2, n, rows, rb, nr, panel);
}
}  // namespace spindle

#endif
