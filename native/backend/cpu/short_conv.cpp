// The gated short convolution of LFM2 on the CPU (see short_conv.h and backend::short_conv).
// Layout: bcx [n_tokens, 3 * n_ch] (B | C | X per row), w [l_cache, n_ch] tap-major, state [d, n_ch] with
// d = l_cache - 1 rows of B*X, oldest first; the input of tap k for token t is row t - d + k of (state ++ B*X).
// Invariant: channels are independent; each kernel call writes only y and state in its channel range, and it
// reads the old state of that range before it overwrites it.
#include "backend/cpu/short_conv.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SHORT_CONV_X86 1
#include <immintrin.h>
#define SHORT_CONV_AVX2 __attribute__((target("avx2,fma")))
#else
#define SHORT_CONV_X86 0
#endif

namespace spindle {

void short_conv_check(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                      const float* state, const float* y) {
  if (n_tokens < 0 || n_ch <= 0 || l_cache < 2) {
    throw error("short_conv: need n_tokens >= 0, n_ch > 0 and l_cache >= 2, got " + std::to_string(n_tokens) +
                ", " + std::to_string(n_ch) + ", " + std::to_string(l_cache));
  }
  if ((n_tokens > 0 && (!bcx || !y)) || !w || !state) throw error("short_conv: null buffer");
}

namespace {

// Input of tap k for token t in channel c: a state row (t - d + k < 0) or the product B * X of that token.
inline float conv_input(const float* bcx, const float* state, int64_t n_ch, int32_t d, int64_t t, int32_t k,
                        int64_t c) {
  const int64_t j = t - d + k;
  if (j < 0) return state[(d + j) * n_ch + c];
  const float* row = bcx + j * 3 * n_ch;
  return row[c] * row[2 * n_ch + c];
}

// state <- the last d rows of (state ++ B*X) for channels [c0, c1). Ascending rows read row n_tokens + i >= i
// of the old state before row i is overwritten.
void update_state(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t d, float* state, int64_t c0,
                  int64_t c1) {
  if (n_tokens == 0) return;
  for (int32_t i = 0; i < d; ++i) {
    for (int64_t c = c0; c < c1; ++c) state[i * n_ch + c] = conv_input(bcx, state, n_ch, d, n_tokens, i, c);
  }
}

}  // namespace

void short_conv_ref(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                    float* state, float* y) {
  short_conv_check(bcx, n_tokens, n_ch, l_cache, w, state, y);
  const int32_t d = l_cache - 1;
  const int32_t n_unfused = l_cache / 8 * 8 + (l_cache % 8 >= 4 ? 4 : 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < n_ch; ++c) {
      float acc = 0.0f;
      for (int32_t k = 0; k < l_cache; ++k) {
        const float in = conv_input(bcx, state, n_ch, d, t, k, c);
        if (k < n_unfused) {
          volatile float p = in * w[k * n_ch + c];  // rounded product, never contracted into the add
          acc = acc + p;
        } else {
          acc = std::fma(in, w[k * n_ch + c], acc);
        }
      }
      y[t * n_ch + c] = bcx[t * 3 * n_ch + n_ch + c] * acc;
    }
  }
  update_state(bcx, n_tokens, n_ch, d, state, 0, n_ch);
}

void short_conv_range(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                      float* state, float* y, int64_t c0, int64_t c1) {
  const int32_t d = l_cache - 1;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* gate = bcx + t * 3 * n_ch + n_ch;  // C
    for (int64_t c = c0; c < c1; ++c) {
      float acc = 0.0f;
      for (int32_t k = 0; k < l_cache; ++k) acc += conv_input(bcx, state, n_ch, d, t, k, c) * w[k * n_ch + c];
      y[t * n_ch + c] = gate[c] * acc;
    }
  }
  update_state(bcx, n_tokens, n_ch, d, state, c0, c1);
}

#if SHORT_CONV_X86

namespace {

SHORT_CONV_AVX2 inline __m256 load8(const float* p, int64_t nl, __m256i mask) {
  return nl == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask);
}

SHORT_CONV_AVX2 inline void store8(float* p, __m256 v, int64_t nl, __m256i mask) {
  if (nl == 8) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, mask, v);
}

// Tap input of 8 channels starting at c (see conv_input).
SHORT_CONV_AVX2 inline __m256 input8(const float* bcx, const float* state, int64_t n_ch, int32_t d, int64_t t,
                                     int32_t k, int64_t c, int64_t nl, __m256i mask) {
  const int64_t j = t - d + k;
  if (j < 0) return load8(state + (d + j) * n_ch + c, nl, mask);
  const float* row = bcx + j * 3 * n_ch;
  return _mm256_mul_ps(load8(row + c, nl, mask), load8(row + 2 * n_ch + c, nl, mask));
}

// Channels [c, c + nl) of every token, nl <= 8, in short_conv_ref's operation order lane by lane.
SHORT_CONV_AVX2 void conv_group(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                                float* state, float* y, int64_t c, int64_t nl) {
  const int32_t d = l_cache - 1;
  const int32_t n_unfused = l_cache / 8 * 8 + (l_cache % 8 >= 4 ? 4 : 0);
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < 8; ++i) lanes[i] = i < nl ? -1 : 0;
  const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  for (int64_t t = 0; t < n_tokens; ++t) {
    __m256 acc = _mm256_setzero_ps();
    for (int32_t k = 0; k < l_cache; ++k) {
      const __m256 in = input8(bcx, state, n_ch, d, t, k, c, nl, mask);
      const __m256 wk = load8(w + k * n_ch + c, nl, mask);
      if (k < n_unfused) {
        __m256 p = _mm256_mul_ps(in, wk);
        asm("" : "+x"(p));  // keeps the product rounded: GCC would contract mul + add into an FMA here
        acc = _mm256_add_ps(acc, p);
      } else {
        acc = _mm256_fmadd_ps(in, wk, acc);
      }
    }
    const __m256 gate = load8(bcx + t * 3 * n_ch + n_ch + c, nl, mask);
    store8(y + t * n_ch + c, _mm256_mul_ps(gate, acc), nl, mask);
  }
  if (n_tokens == 0) return;
  for (int32_t i = 0; i < d; ++i) {  // ascending rows: see update_state
    store8(state + i * n_ch + c, input8(bcx, state, n_ch, d, n_tokens, i, c, nl, mask), nl, mask);
  }
}

}  // namespace

void short_conv_range_avx2(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                           float* state, float* y, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; c += 8) {
    conv_group(bcx, n_tokens, n_ch, l_cache, w, state, y, c, std::min<int64_t>(8, c1 - c));
  }
}

#else

void short_conv_range_avx2(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                           float* state, float* y, int64_t c0, int64_t c1) {
  throw error("short_conv: the AVX2 kernel is not available on this architecture");
}

#endif

namespace {
constexpr int64_t k_min_parallel_outputs = 1 << 14;  // below this, one thread (same result, less overhead)
}

void cpu_backend::short_conv(const float* bcx, int64_t n_tokens, int64_t n_ch, int32_t l_cache, const float* w,
                             float* state, float* y) {
  short_conv_check(bcx, n_tokens, n_ch, l_cache, w, state, y);
  const bool avx2 = avx2_;
  const auto range = [&](int64_t c0, int64_t c1) {
    if (avx2) short_conv_range_avx2(bcx, n_tokens, n_ch, l_cache, w, state, y, c0, c1);
    else short_conv_range(bcx, n_tokens, n_ch, l_cache, w, state, y, c0, c1);
  };
  const int64_t n_groups = (n_ch + 7) / 8;  // threads get whole groups of 8 channels
  if (pool_.size() == 1 || n_groups < 2 || n_tokens * n_ch < k_min_parallel_outputs) {
    range(0, n_ch);
    return;
  }
  pool_.run([&](int ith, int nth) {
    int64_t gb, ge;
    thread_pool::split(n_groups, ith, nth, &gb, &ge);
    if (gb < ge) range(gb * 8, std::min(n_ch, ge * 8));
  });
}

void cpu_backend::gather_bx_rows(const float* bcx, const int64_t* src_rows, int64_t n, int64_t n_ch, float* dst,
                                 const int64_t* dst_rows) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = bcx + src_rows[i] * 3 * n_ch;
    float* out = dst + dst_rows[i] * n_ch;
    for (int64_t c = 0; c < n_ch; ++c) out[c] = row[c] * row[2 * n_ch + c];  // conv_input's product
  }
}

}  // namespace spindle
