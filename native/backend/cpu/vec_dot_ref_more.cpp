// Reference dot products of quants_more.h's weight types against their activation formats (the scalar level),
// in the per-block arithmetic of ggml's CPU vec_dot_*_q8_* functions.
// Invariant: every integer product is summed exactly in int32 (per block or super-block; the largest sums stay
// below 2^27); floats enter only as (weight scale * activation scale) * integer sum (plus, for q4_1 / q5_1,
// offset * q8_1's s), added to one running f32 sum in block order.
#include <cstring>

#include "backend/cpu/fp16.h"
#include "backend/cpu/quants_more.h"
#include "backend/cpu/vec_dot.h"

namespace spindle {

namespace {

// sum_j q_j * y_j over a 32-element block with 4-bit quants laid out as in q4_0 (element j < 16: low nibble of
// qs[j], j >= 16: high nibble of qs[j - 16]), each nibble mapped through `level`.
template <class Level>
int nibble_block_dot(const uint8_t* qs, const int8_t* y, Level level) {
  int s = 0;
  for (int j = 0; j < 16; ++j) s += level(qs[j] & 0x0f) * y[j] + level(qs[j] >> 4) * y[j + 16];
  return s;
}

// sum_j q_j * y_j over a q5_0 / q5_1 block, with q_j the unsigned 5-bit quant minus `bias`.
int q5_block_dot(const uint8_t* qs, const uint8_t* qh, int bias, const int8_t* y) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  int s = 0;
  for (int j = 0; j < 16; ++j) {
    s += (((qs[j] & 0x0f) | (int)(((h >> j) & 1) << 4)) - bias) * y[j];
    s += (((qs[j] >> 4) | (int)(((h >> (j + 16)) & 1) << 4)) - bias) * y[j + 16];
  }
  return s;
}

int identity(int v) { return v; }
int iq4nl_level(int v) { return k_iq4nl_values[v]; }

}  // namespace

// sum_b (d * dy) * (q . y)_b + m * s_b, where s_b = fp16(dy * sum of y's quants) (q8_1).
float vec_dot_q4_1_ref(int64_t n, const void* w, const void* x) {
  const block_q4_1* a = (const block_q4_1*)w;
  const block_q8_1* b = (const block_q8_1*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK4_1; ++k) {
    const int isum = nibble_block_dot(a[k].qs, b[k].qs, identity);
    sum += (fp16_to_f32(a[k].d) * fp16_to_f32(b[k].d)) * (float)isum + fp16_to_f32(a[k].m) * fp16_to_f32(b[k].s);
  }
  return sum;
}

float vec_dot_q5_0_ref(int64_t n, const void* w, const void* x) {
  const block_q5_0* a = (const block_q5_0*)w;
  const block_q8_0* b = (const block_q8_0*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK5_0; ++k) {
    const int isum = q5_block_dot(a[k].qs, a[k].qh, 16, b[k].qs);
    sum += (fp16_to_f32(a[k].d) * fp16_to_f32(b[k].d)) * (float)isum;
  }
  return sum;
}

float vec_dot_q5_1_ref(int64_t n, const void* w, const void* x) {
  const block_q5_1* a = (const block_q5_1*)w;
  const block_q8_1* b = (const block_q8_1*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK5_1; ++k) {
    const int isum = q5_block_dot(a[k].qs, a[k].qh, 0, b[k].qs);
    sum += (fp16_to_f32(a[k].d) * fp16_to_f32(b[k].d)) * (float)isum + fp16_to_f32(a[k].m) * fp16_to_f32(b[k].s);
  }
  return sum;
}

// sum_g (sc_g & 15) * (q . y)_g times d * dy, minus sum_g (sc_g >> 4) * (sum of y in group g) times dmin * dy.
float vec_dot_q2_K_ref(int64_t n, const void* w, const void* x) {
  const block_q2_K* a = (const block_q2_K*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {  // group g: elements 16g..16g+16, quarter c = (g / 2) % 4 of half h = g / 8
      const int h = g / 8, c = (g / 2) % 4;
      const uint8_t* q = a[k].qs + 32 * h + 16 * (g % 2);
      int s = 0;
      for (int l = 0; l < 16; ++l) s += ((q[l] >> (2 * c)) & 3) * b[k].qs[16 * g + l];
      isum += (a[k].scales[g] & 0x0f) * s;
      msum += (a[k].scales[g] >> 4) * b[k].bsums[g];
    }
    const float dall = b[k].d * fp16_to_f32(a[k].d), dmin = b[k].d * fp16_to_f32(a[k].dmin);
    sum += dall * (float)isum - dmin * (float)msum;
  }
  return sum;
}

// sum_g (sc_g - 32) * (q . y)_g times d * dy, q in -4..3.
float vec_dot_q3_K_ref(int64_t n, const void* w, const void* x) {
  const block_q3_K* a = (const block_q3_K*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      const int h = g / 8, c = (g / 2) % 4;
      const uint8_t hbit = (uint8_t)(1u << (4 * h + c));
      int s = 0;
      for (int l = 16 * (g % 2); l < 16 * (g % 2) + 16; ++l) {
        const int q = ((a[k].qs[32 * h + l] >> (2 * c)) & 3) - ((a[k].hmask[l] & hbit) ? 0 : 4);
        s += q * b[k].qs[128 * h + 32 * c + l];
      }
      isum += (q3_K_scale(g, a[k].scales) - 32) * s;
    }
    sum += (fp16_to_f32(a[k].d) * b[k].d) * (float)isum;
  }
  return sum;
}

// As q4_K with 5-bit quants: sum_j d*sc_j (q . y)_j - sum_j dmin*m_j (sum of y in sub-block j), times dy.
float vec_dot_q5_K_ref(int64_t n, const void* w, const void* x) {
  const block_q5_K* a = (const block_q5_K*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      q4_K_scale_min(j, a[k].scales, &sc, &m);
      const uint8_t* q = a[k].qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      int s = 0;
      for (int l = 0; l < 32; ++l)
        s += (((q[l] >> shift) & 0x0f) | (((a[k].qh[l] >> j) & 1) << 4)) * b[k].qs[32 * j + l];
      isum += sc * s;
      msum += m * (b[k].bsums[2 * j] + b[k].bsums[2 * j + 1]);
    }
    const float dy = b[k].d;
    sum += (fp16_to_f32(a[k].d) * dy) * (float)isum - (fp16_to_f32(a[k].dmin) * dy) * (float)msum;
  }
  return sum;
}

float vec_dot_iq4_nl_ref(int64_t n, const void* w, const void* x) {
  const block_iq4_nl* a = (const block_iq4_nl*)w;
  const block_q8_0* b = (const block_q8_0*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK4_NL; ++k) {
    const int isum = nibble_block_dot(a[k].qs, b[k].qs, iq4nl_level);
    sum += (fp16_to_f32(b[k].d) * fp16_to_f32(a[k].d)) * (float)isum;
  }
  return sum;
}

// Per sub-block j of 32 (as ggml's vec_dot_iq4_xs_q8_K): (d * dy) * (ls_j - 32) * (levels . y)_j.
float vec_dot_iq4_xs_ref(int64_t n, const void* w, const void* x) {
  const block_iq4_xs* a = (const block_iq4_xs*)w;
  const block_q8_K* b = (const block_q8_K*)x;
  float sum = 0.0f;
  for (int64_t k = 0; k < n / QK_K; ++k) {
    const float d4d8 = fp16_to_f32(a[k].d) * b[k].d;
    for (int j = 0; j < 8; ++j) {
      const int isum = nibble_block_dot(a[k].qs + 16 * j, b[k].qs + 32 * j, iq4nl_level);
      sum += (d4d8 * (float)(iq4_xs_scale(j, a[k]) - 32)) * (float)isum;
    }
  }
  return sum;
}

}  // namespace spindle
