// Shared by the K / V store type tests (attention_kv16_test.cpp, attention_kvq8_test.cpp, attention_kvq4_test.cpp,
// attention_kvfp8_test.cpp; the shapes and their parameters by attention_tiled_test.cpp too): attention shapes, a
// paged store of a type written through store_kv beside the f32 store of the values it holds, and the per-item kernel
// check (a kernel over the typed rows == the same kernel over the f32 rows, bitwise). stored_value reads a store
// with plain arithmetic (fp16.h's conversions; fp8 codes by their definition; q8_0's scale x int8, q4_0's scale x
// (nibble - 8)), sharing nothing with the kernels' readers.
#pragma once
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_paged.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/ops.h"
#include "harness.h"

namespace kv_store_test {

using namespace spindle;

struct shape {
  int32_t n_head, n_head_kv, dk, dv;
  int64_t n_past, n_tokens;
};

// The attention parameters of a shape; row strides padded by k_pad / v_pad values.
inline attention_params params_of(const shape& s, int64_t k_pad = 0, int64_t v_pad = 0) {
  attention_params a;
  a.n_head = s.n_head;
  a.n_head_kv = s.n_head_kv;
  a.head_dim_k = s.dk;
  a.head_dim_v = s.dv;
  a.n_past = s.n_past;
  a.n_tokens = s.n_tokens;
  a.k_row_stride = (int64_t)s.n_head_kv * s.dk + k_pad;
  a.v_row_stride = (int64_t)s.n_head_kv * s.dv + v_pad;
  a.scale = 1.0f / std::sqrt((float)s.dk);
  return a;
}

// The value of a finite 8-bit float code by its definition: m mantissa bits, exponent bias b (exponent field 0:
// subnormal, mantissa x 2^(1-b-m)).
inline float fp8_by_definition(uint8_t x, int m, int b) {
  const int e = (x & 0x7f) >> m, man = x & ((1 << m) - 1);
  const float v = e == 0 ? std::ldexp((float)man, 1 - b - m) : std::ldexp((float)((1 << m) + man), e - b - m);
  return x & 0x80 ? -v : v;
}

// Value i of a store of type t, as f32.
inline float stored_value(const std::vector<float>& store, kv_type t, int64_t i) {
  const unsigned char* bytes = reinterpret_cast<const unsigned char*>(store.data());
  uint16_t h;
  switch (t) {
    case kv_type::fp8_e4m3: return fp8_by_definition(bytes[i], 3, 7);
    case kv_type::fp8_e5m2: return fp8_by_definition(bytes[i], 2, 15);
    case kv_type::f16: std::memcpy(&h, bytes + 2 * i, 2); return fp16_to_f32(h);
    case kv_type::bf16: std::memcpy(&h, bytes + 2 * i, 2); return bf16_to_f32(h);
    case kv_type::q8_0: std::memcpy(&h, bytes + i / 32 * 34, 2); return fp16_to_f32(h) * (float)(int8_t)bytes[i / 32 * 34 + 2 + i % 32];
    case kv_type::q4_0: {
      // value j of a block: the low nibble of byte j for j < 16, the high nibble of byte j - 16 after; minus 8
      std::memcpy(&h, bytes + i / 32 * 18, 2);
      const int j = (int)(i % 32), byte = bytes[i / 32 * 18 + 2 + j % 16];
      return fp16_to_f32(h) * (float)((j < 16 ? byte % 16 : byte / 16) - 8);
    }
    case kv_type::f32: break;
  }
  return store[(size_t)i];
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A paged store of type t (positions in reversed block order) written through store_kv, and the f32 store holding
// its values.
struct paged_pair {
  paged_attention_params p;
  std::vector<int32_t> table;
  std::vector<float> ks, vs, k32, v32, q;
  paged_pair(cpu_backend& be, const shape& s, kv_type t, uint32_t seed) {
    const int32_t bs = 16;
    const int64_t n_pos = s.n_past + s.n_tokens, n_used = (n_pos + bs - 1) / bs;
    p.attn = params_of(s);
    p.block_size = bs;
    p.n_blocks = (int32_t)n_used;
    table.resize((size_t)n_used);
    for (int64_t b = 0; b < n_used; ++b) table[b] = (int32_t)(n_used - 1 - b);
    p.block_table = table.data();
    p.n_table = (int32_t)n_used;
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    const int64_t kd = p.attn.k_row_stride, vd = p.attn.v_row_stride, rows = n_used * bs;
    std::vector<float> k_new((size_t)(n_pos * kd)), v_new((size_t)(n_pos * vd));
    for (float& x : k_new) x = d(g);
    for (float& x : v_new) x = d(g);
    q.resize((size_t)(s.n_tokens * s.n_head * s.dk));
    for (float& x : q) x = 4.0f * d(g);
    std::vector<int64_t> slot((size_t)n_pos);
    for (int64_t j = 0; j < n_pos; ++j) slot[j] = attention_paged_row(p, j);
    ks.assign((size_t)kv_store_floats(t, rows * kd), NAN);
    vs.assign((size_t)kv_store_floats(t, rows * vd), NAN);
    be.store_kv(ks.data(), vs.data(), slot.data(), k_new.data(), v_new.data(), n_pos, kd, vd, t);
    p.attn.kv = t;
    k32.assign((size_t)(rows * kd), NAN);
    v32.assign((size_t)(rows * vd), NAN);
    for (int64_t j = 0; j < n_pos; ++j) {
      for (int64_t e = 0; e < kd; ++e) k32[slot[j] * kd + e] = stored_value(ks, t, slot[j] * kd + e);
      for (int64_t e = 0; e < vd; ++e) v32[slot[j] * vd + e] = stored_value(vs, t, slot[j] * vd + e);
    }
  }
  paged_attention_params f32_params() const {
    paged_attention_params r = p;
    r.attn.kv = kv_type::f32;
    return r;
  }
};

// Every (token, head) through one per-item kernel over the pair's typed rows and over its f32 rows.
template <class Kernel>
void check_per_item(const paged_pair& pp, Kernel kernel) {
  const attention_params& a = pp.p.attn;
  const int32_t group = a.n_head / a.n_head_kv;
  const int64_t n_pos = a.n_past + a.n_tokens;
  std::vector<const void*> kt((size_t)n_pos), vt((size_t)n_pos), k32((size_t)n_pos), v32((size_t)n_pos);
  for (int64_t j = 0; j < n_pos; ++j) {
    const int64_t r = attention_paged_row(pp.p, j);
    kt[j] = reinterpret_cast<const char*>(pp.ks.data()) + kv_bytes(a.kv, r * a.k_row_stride);
    vt[j] = reinterpret_cast<const char*>(pp.vs.data()) + kv_bytes(a.kv, r * a.v_row_stride);
    k32[j] = pp.k32.data() + r * a.k_row_stride;
    v32[j] = pp.v32.data() + r * a.v_row_stride;
  }
  std::vector<float> scratch((size_t)ops_attention_scratch(n_pos, a.head_dim_v) + 64);
  std::vector<float> got((size_t)a.head_dim_v), want((size_t)a.head_dim_v);
  bool all_same = true;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    for (int32_t h = 0; h < a.n_head; ++h) {
      const int64_t ko = (int64_t)(h / group) * a.head_dim_k, vo = (int64_t)(h / group) * a.head_dim_v;
      const float* qh = pp.q.data() + (t * a.n_head + h) * a.head_dim_k;
      kernel(qh, kv_rows{nullptr, 0, kt.data(), ko, a.kv}, kv_rows{nullptr, 0, vt.data(), vo, a.kv},
             a.n_past + t + 1, a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), got.data());
      kernel(qh, kv_rows{nullptr, 0, k32.data(), ko}, kv_rows{nullptr, 0, v32.data(), vo}, a.n_past + t + 1,
             a.head_dim_k, a.head_dim_v, a.scale, scratch.data(), want.data());
      all_same = all_same && same_bits(got, want);
    }
  }
  CHECK(all_same);
}

// Paged attention over the pair's typed store on 1 and 2 threads == over its f32 store, bitwise; the plain
// reference over the typed store within 1e-5.
inline void check_paged(cpu_backend& one, cpu_backend& two, const paged_pair& pp, const shape& s) {
  const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
  std::vector<float> want(n_out, NAN), ref(n_out, NAN);
  one.attention_paged(pp.f32_params(), pp.q.data(), pp.k32.data(), pp.v32.data(), want.data());
  for (cpu_backend* be : {&one, &two}) {
    std::vector<float> got(n_out, NAN);
    be->attention_paged(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), got.data());
    CHECK(same_bits(got, want));
  }
  attention_paged_ref(pp.p, pp.q.data(), pp.ks.data(), pp.vs.data(), ref.data());
  double d = 0;
  for (size_t i = 0; i < n_out; ++i) d = std::max(d, (double)std::fabs(ref[i] - want[i]));
  CHECK(d < 1e-5);
}

// attention() over a contiguous cache of type t (row strides padded by k_pad / v_pad values) on 1 and 2 threads ==
// over the f32 cache of its values, bitwise.
inline void check_contiguous(cpu_backend& one, cpu_backend& two, const shape& s, kv_type t, int64_t k_pad, int64_t v_pad,
                             uint32_t seed) {
  const attention_params a = params_of(s, k_pad, v_pad);
  const int64_t n_pos = s.n_past + s.n_tokens;
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> q((size_t)(s.n_tokens * s.n_head * s.dk)), kf((size_t)(n_pos * a.k_row_stride)),
      vf((size_t)(n_pos * a.v_row_stride));
  for (float& x : q) x = 4.0f * d(g);
  for (float& x : kf) x = d(g);
  for (float& x : vf) x = d(g);
  std::vector<float> kt((size_t)kv_store_floats(t, (int64_t)kf.size())), vt((size_t)kv_store_floats(t, (int64_t)vf.size()));
  one.store_kv(kt.data(), vt.data(), nullptr, kf.data(), vf.data(), n_pos, a.k_row_stride, a.v_row_stride, t);
  for (size_t i = 0; i < kf.size(); ++i) kf[i] = stored_value(kt, t, (int64_t)i);
  for (size_t i = 0; i < vf.size(); ++i) vf[i] = stored_value(vt, t, (int64_t)i);
  const size_t n_out = (size_t)(s.n_tokens * s.n_head * s.dv);
  std::vector<float> want(n_out, NAN);
  one.attention(a, q.data(), kf.data(), vf.data(), want.data());
  attention_params at = a;
  at.kv = t;
  for (cpu_backend* be : {&one, &two}) {
    std::vector<float> got(n_out, NAN);
    be->attention(at, q.data(), kt.data(), vt.data(), got.data());
    CHECK(same_bits(got, want));
  }
}

// Shapes for store types of any head dim (16-bit, fp8): the fast kernels' and their fallbacks'.
inline const shape k_any_dim_shapes[] = {
    {32, 8, 64, 64, 0, 40},    // llama-1B-like prompt
    {32, 8, 64, 64, 300, 1},   // decode over more than one V block (256 positions)
    {16, 8, 128, 128, 17, 9},  // qwen3-like chunk after a prefix
    {4, 2, 96, 40, 7, 23},     // dv % 16 != 0 (8-dim chunks)
    {4, 2, 40, 20, 5, 11},     // dims the tiled kernels leave to the per-item kernel's fallbacks
    {4, 1, 36, 12, 2, 3},      // dv % 8 != 0: the per-item kernel's scalar tail
};
// Shapes for the block types (q8_0, q4_0): head dims of whole 32-value blocks.
inline const shape k_block_shapes[] = {
    {32, 8, 64, 64, 0, 40},    // llama-1B-like prompt
    {32, 8, 64, 64, 300, 1},   // decode over more than one V block (256 positions)
    {16, 8, 128, 128, 17, 9},  // qwen3-like chunk after a prefix
    {4, 2, 96, 32, 7, 23},     // dv 32: one 32-wide V chunk
    {4, 1, 32, 64, 2, 3},      // MQA, dk 32
};

// check_paged over a store of type t for every shape (seeds counting up from `seed`).
template <class Shapes>
void check_paged_all(kv_type t, const Shapes& shapes, uint32_t seed) {
  cpu_backend one(1), two(2);
  for (const shape& s : shapes) check_paged(one, two, paged_pair(one, s, t, seed++), s);
}

// check_per_item with the portable per-item kernel and (where the CPU has AVX2) the AVX2 one, for every shape.
template <class Shapes>
void check_per_item_all(kv_type t, const Shapes& shapes, uint32_t seed) {
  cpu_backend be(1);
  for (const shape& s : shapes) {
    const paged_pair pp(be, s, t, seed++);
    check_per_item(pp, [](const float* q, const kv_rows& k, const kv_rows& v, int64_t n_kv, int32_t dk, int32_t dv,
                          float scale, float* scratch, float* out) {
      ops_attention_head_kv(q, k, v, n_kv, dk, dv, scale, scratch, out);
    });
    if (cpu_level_supported(cpu_level::avx2)) check_per_item(pp, ops_attention_head_kv_avx2);
  }
}

// check_contiguous for every shape, rows padded by k_pad / v_pad values.
template <class Shapes>
void check_contiguous_all(kv_type t, const Shapes& shapes, int64_t k_pad, int64_t v_pad, uint32_t seed) {
  cpu_backend one(1), two(2);
  for (const shape& s : shapes) check_contiguous(one, two, s, t, k_pad, v_pad, seed++);
}

// A paged store of block type t refuses heads that are not whole blocks, naming the type.
inline void check_whole_blocks_refused(kv_type t) {
  cpu_backend be(1);
  paged_attention_params p;
  p.attn = params_of({4, 2, 40, 40, 0, 1});
  p.attn.kv = t;
  int32_t table[1] = {0};
  p.block_table = table;
  p.n_table = 1;
  p.block_size = 16;
  p.n_blocks = 1;
  std::vector<float> q(160), kv(1024), out(160);
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()),
                    std::string("a ") + kv_type_name(t) + " K / V store needs head dims and row strides that are multiples of 32");
}

}  // namespace kv_store_test
