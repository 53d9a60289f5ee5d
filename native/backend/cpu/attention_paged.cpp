// Paged attention (see attention_paged.h): the CPU override points the attention kernels at the store's rows
// (a table of row starts per position, no copy); attention_paged_ref is the plain reference the tests compare
// against.
#include "backend/cpu/attention_paged.h"

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/ops.h"
#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

void attention_paged_check(const paged_attention_params& p) {
  const attention_params& a = p.attn;
  if (a.n_head <= 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0 || a.n_tokens < 0 || a.n_past < 0 ||
      a.head_dim_k <= 0 || a.head_dim_v <= 0) {
    throw error("attention_paged: invalid head counts or token range");
  }
  if (a.window < 0) throw error("attention_paged: a sliding window must be >= 0, got " + std::to_string(a.window));
  if (std::find(std::begin(k_kv_types), std::end(k_kv_types), a.kv) == std::end(k_kv_types)) {
    throw error("attention_paged: unknown K / V store type " + std::to_string((int)a.kv));
  }
  attention_kv_blocks_check(a, "attention_paged");
  if (a.k_row_stride < (int64_t)a.n_head_kv * a.head_dim_k || a.v_row_stride < (int64_t)a.n_head_kv * a.head_dim_v) {
    throw error("attention_paged: row stride smaller than a KV row");
  }
  if (p.block_size <= 0 || p.n_blocks <= 0 || p.n_table < 0 || (p.n_table > 0 && !p.block_table)) {
    throw error("attention_paged: invalid block size, block count or table");
  }
  const int64_t n_pos = checked_add((uint64_t)a.n_past, (uint64_t)a.n_tokens, "attention_paged positions");
  if (n_pos > (int64_t)p.n_table * p.block_size) {
    throw error("attention_paged: block table of " + std::to_string(p.n_table) + " blocks does not cover " +
                std::to_string(n_pos) + " positions");
  }
  const int64_t n_used = (n_pos + p.block_size - 1) / p.block_size;
  for (int64_t i = 0; i < n_used; ++i) {
    if (p.block_table[i] < 0 || p.block_table[i] >= p.n_blocks) {
      throw error("attention_paged: block id " + std::to_string(p.block_table[i]) + " out of range [0, " +
                  std::to_string(p.n_blocks) + ")");
    }
  }
}

void attention_kv_blocks_check(const attention_params& a, const char* who) {
  if (!kv_whole_blocks(a.kv, a.head_dim_k) || !kv_whole_blocks(a.kv, a.head_dim_v) ||
      !kv_whole_blocks(a.kv, a.k_row_stride) || !kv_whole_blocks(a.kv, a.v_row_stride)) {
    throw error(std::string(who) + ": a " + kv_type_name(a.kv) +
                " K / V store needs head dims and row strides that are multiples of 32");
  }
}

int64_t attention_paged_row(const paged_attention_params& p, int64_t pos) {
  return (int64_t)p.block_table[pos / p.block_size] * p.block_size + pos % p.block_size;
}

namespace {

// Value i of a K / V store of type t, widened to f32 (q8_0: block i / 32's f16 scale times its int8 i % 32; q4_0:
// times its nibble i % 32 less 8).
double kv_at(const float* store, kv_type t, int64_t i) {
  switch (t) {
    case kv_type::f16: return fp16_to_f32(reinterpret_cast<const uint16_t*>(store)[i]);
    case kv_type::bf16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(store)[i]);
    case kv_type::fp8_e4m3: return fp8_e4m3_to_f32(reinterpret_cast<const uint8_t*>(store)[i]);
    case kv_type::fp8_e5m2: return fp8_e5m2_to_f32(reinterpret_cast<const uint8_t*>(store)[i]);
    case kv_type::q8_0: {
      const unsigned char* b = reinterpret_cast<const unsigned char*>(store) + i / 32 * 34;
      uint16_t d;
      std::memcpy(&d, b, 2);
      return (double)fp16_to_f32(d) * (double)(int8_t)b[2 + i % 32];
    }
    case kv_type::q4_0: {
      const unsigned char* b = reinterpret_cast<const unsigned char*>(store) + i / 32 * 18;
      uint16_t d;
      std::memcpy(&d, b, 2);
      const int j = (int)(i % 32), q = j < 16 ? b[2 + j] & 0x0f : b[2 + j - 16] >> 4;
      return (double)fp16_to_f32(d) * (double)(q - 8);
    }
    case kv_type::f32: break;
  }
  return store[i];
}

}  // namespace

void attention_paged_ref(const paged_attention_params& p, const float* q, const float* k_store,
                         const float* v_store, float* out) {
  attention_paged_check(p);
  const attention_params& a = p.attn;
  const int32_t group = a.n_head / a.n_head_kv;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int64_t pos = a.n_past + t, n_kv = a.causal ? pos + 1 : a.n_past + a.n_tokens;
    // the window's first key: the least j with pos - j < window (0 without one), counted out here rather than
    // through attention_first_pos
    const int64_t j0 = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
    for (int32_t h = 0; h < a.n_head; ++h) {
      const int32_t hkv = h / group;
      const float* qh = q + (t * a.n_head + h) * (int64_t)a.head_dim_k;
      std::vector<double> s((size_t)n_kv);
      double mx = -INFINITY;
      for (int64_t j = j0; j < n_kv; ++j) {
        const int64_t kj = attention_paged_row(p, j) * a.k_row_stride + (int64_t)hkv * a.head_dim_k;
        double d = 0;
        for (int32_t i = 0; i < a.head_dim_k; ++i) d += (double)qh[i] * kv_at(k_store, a.kv, kj + i);
        s[j] = d * a.scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = j0; j < n_kv; ++j) sum += (s[j] = std::exp(s[j] - mx));
      float* oh = out + (t * a.n_head + h) * (int64_t)a.head_dim_v;
      for (int32_t d = 0; d < a.head_dim_v; ++d) {
        double acc = 0;
        for (int64_t j = j0; j < n_kv; ++j) {
          acc += s[j] * kv_at(v_store, a.kv, attention_paged_row(p, j) * a.v_row_stride + (int64_t)hkv * a.head_dim_v + d);
        }
        oh[d] = (float)(acc / sum);
      }
    }
  }
}

void cpu_backend::attention_paged(const paged_attention_params& p, const float* q, const float* k_store,
                                  const float* v_store, float* out) {
  attention_paged_check(p);
  const int64_t n_pos = p.attn.n_past + p.attn.n_tokens;
  if (n_pos == 0) return;
  // Under a sliding window no query reads below the first query's first key (causal or not: a later query's window
  // starts later): the rows start there, and the call runs as one whose cache starts at that position (same keys
  // per query, so the same bits).
  attention_params a = p.attn;
  const int64_t first = attention_first_pos(a, a.n_past);
  a.n_past -= first;
  // Row starts of every position read: the kernels read K / V in place (no copy of the cache).
  thread_local std::vector<const void*> k_rows, v_rows;  // per calling thread: engines may run concurrently
  const int64_t n_read = n_pos - first;
  if ((int64_t)k_rows.size() < n_read) k_rows.resize((size_t)n_read), v_rows.resize((size_t)n_read);
  const int64_t k_row_bytes = kv_bytes(a.kv, a.k_row_stride);
  const int64_t v_row_bytes = kv_bytes(a.kv, a.v_row_stride);
  const char* k_bytes = reinterpret_cast<const char*>(k_store);
  const char* v_bytes = reinterpret_cast<const char*>(v_store);
  for (int64_t pos = first; pos < n_pos; ++pos) {
    const int64_t row = attention_paged_row(p, pos);
    k_rows[pos - first] = k_bytes + row * k_row_bytes;
    v_rows[pos - first] = v_bytes + row * v_row_bytes;
  }
  attention_rows(a, q, nullptr, k_rows.data(), nullptr, v_rows.data(), out);
}

}  // namespace spindle
