// AVX2 packers of the avx2 panel shape (16 rows, 8 lanes, n % 8 tail; panel.h): per step of 8 elements, a
// 16 x 8 block of the rows transposed in registers into the 8 lane slots of that step; the tail slots (and
// the rows past nr) element by element.
// Invariant: the bytes of pack_panel_ref for the same shape (elements only move; missing rows are zero).
#include "backend/cpu/panel.h"
#include "backend/cpu/vec_dot_avx2.h"

#include <cstring>

namespace spindle {

namespace {

constexpr int k_rows = 16, k_lanes = 8;

}  // namespace

#if SPINDLE_HAVE_X86_KERNELS

namespace {

// Tail slots n - n % 8 .. n of rows [0, nr) (element_bytes each); rows past nr are zero already.
void pack_tail(int64_t n, const uint8_t* rows, size_t rb, int nr, size_t es, uint8_t* panel) {
  for (int64_t k = n - n % k_lanes; k < n; ++k)
    for (int r = 0; r < nr; ++r)
      std::memcpy(panel + ((size_t)k * k_rows + r) * es, rows + (size_t)r * rb + (size_t)k * es, es);
}

}  // namespace

// One step (elements k0 .. k0 + 8) of rows [b0, b0 + 16) (the second 8 absent when `two` is false): y[r] = rows
// b0 + r and b0 + r + 8 in the two 128-bit lanes; three rounds of unpacks transpose each lane 8 x 8, leaving
// element e of rows 0-7 | 8-15 in one register, stored at out + e * lane_bytes (16 bytes only when not `two`).
SPINDLE_AVX2 inline void pack_step_16bit(const uint8_t* rows, size_t rb, int nr, int b0, bool two, int64_t k0,
                                         uint8_t* out, size_t lane_bytes) {
  __m256i y[8], s1[8], s2[8];
  for (int r = 0; r < 8; ++r) {
    const int lo_row = b0 + r, hi_row = b0 + r + 8;
    const __m128i lo = lo_row < nr
                           ? _mm_loadu_si128((const __m128i*)((const uint16_t*)(rows + (size_t)lo_row * rb) + k0))
                                   : _mm_setzero_si128();
    const __m128i hi = two && hi_row < nr
                           ? _mm_loadu_si128((const __m128i*)((const uint16_t*)(rows + (size_t)hi_row * rb) + k0))
                           : _mm_setzero_si128();
    y[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  }
  for (int p = 0; p < 4; ++p) {  // s1[2p]: elements 0-3 of rows 2p, 2p+1 interleaved; s1[2p+1]: 4-7
    s1[2 * p] = _mm256_unpacklo_epi16(y[2 * p], y[2 * p + 1]);
    s1[2 * p + 1] = _mm256_unpackhi_epi16(y[2 * p], y[2 * p + 1]);
  }
  for (int q = 0; q < 2; ++q) {  // s2[4q + c]: elements 2c, 2c+1 of rows 4q .. 4q+3
    for (int h = 0; h < 2; ++h) {
      s2[4 * q + 2 * h] = _mm256_unpacklo_epi32(s1[4 * q + h], s1[4 * q + 2 + h]);
      s2[4 * q + 2 * h + 1] = _mm256_unpackhi_epi32(s1[4 * q + h], s1[4 * q + 2 + h]);
    }
  }
  for (int c = 0; c < 4; ++c) {
    const __m256i e0 = _mm256_unpacklo_epi64(s2[c], s2[4 + c]), e1 = _mm256_unpackhi_epi64(s2[c], s2[4 + c]);
    if (two) {
      _mm256_storeu_si256((__m256i*)(out + (2 * c) * lane_bytes), e0);
      _mm256_storeu_si256((__m256i*)(out + (2 * c + 1) * lane_bytes), e1);
    } else {
      _mm_storeu_si128((__m128i*)(out + (2 * c) * lane_bytes), _mm256_castsi256_si128(e0));
      _mm_storeu_si128((__m128i*)(out + (2 * c + 1) * lane_bytes), _mm256_castsi256_si128(e1));
    }
  }
}

SPINDLE_AVX2 void pack_panel_avx2_16bit(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  const int64_t steps = n / k_lanes;
  const size_t lane_bytes = (size_t)steps * k_rows * 2;
  std::memset(panel + (size_t)steps * k_lanes * k_rows * 2, 0, (size_t)(n % k_lanes) * k_rows * 2);
  for (int64_t i = 0; i < steps; ++i)
    for (int b0 = 0; b0 < k_rows; b0 += 16)
      pack_step_16bit(rows, rb, nr, b0, b0 + 16 <= k_rows, i * k_lanes, panel + ((size_t)i * k_rows + b0) * 2,
                      lane_bytes);
  pack_tail(n, rows, rb, nr, 2, panel);
}

// Each half of 8 rows: an 8 x 8 f32 transpose (unpack ps, unpack pd, 128-bit lane permutes).
SPINDLE_AVX2 void pack_panel_avx2_f32(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  const int64_t steps = n / k_lanes;
  const size_t lane_bytes = (size_t)steps * k_rows * 4;
  std::memset(panel + (size_t)steps * k_lanes * k_rows * 4, 0, (size_t)(n % k_lanes) * k_rows * 4);
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t k0 = i * k_lanes;
    for (int half = 0; half < k_rows / 8; ++half) {
      __m256 z[8], s1[8], s2[8];
      for (int r = 0; r < 8; ++r) {
        const int row = 8 * half + r;
        z[r] = row < nr ? _mm256_loadu_ps((const float*)(rows + (size_t)row * rb) + k0) : _mm256_setzero_ps();
      }
      for (int p = 0; p < 4; ++p) {  // s1[2p]: elements 0, 1 of rows 2p, 2p+1 (per lane); s1[2p+1]: 2, 3
        s1[2 * p] = _mm256_unpacklo_ps(z[2 * p], z[2 * p + 1]);
        s1[2 * p + 1] = _mm256_unpackhi_ps(z[2 * p], z[2 * p + 1]);
      }
      for (int q = 0; q < 2; ++q) {  // s2[4q + e]: element e (per lane) of rows 4q .. 4q+3
        for (int h = 0; h < 2; ++h) {
          const __m256d a = _mm256_castps_pd(s1[4 * q + h]), b = _mm256_castps_pd(s1[4 * q + 2 + h]);
          s2[4 * q + 2 * h] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
          s2[4 * q + 2 * h + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
        }
      }
      uint8_t* out = panel + ((size_t)i * k_rows + 8 * half) * 4;
      for (int e = 0; e < 4; ++e) {
        _mm256_storeu_ps((float*)(out + e * lane_bytes), _mm256_permute2f128_ps(s2[e], s2[4 + e], 0x20));
        _mm256_storeu_ps((float*)(out + (4 + e) * lane_bytes), _mm256_permute2f128_ps(s2[e], s2[4 + e], 0x31));
      }
    }
  }
  pack_tail(n, rows, rb, nr, 4, panel);
}

#else

void pack_panel_avx2_16bit(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  pack_panel_ref(panel_shape{k_rows, k_lanes, false}, 2, n, rows, rb, nr, panel);
}
void pack_panel_avx2_f32(int64_t n, const uint8_t* rows, size_t rb, int nr, uint8_t* panel) {
  pack_panel_ref(panel_shape{k_rows, k_lanes, false}, 4, n, rows, rb, nr, panel);
}

#endif

}  // namespace spindle
