// CUDA row ops against the CPU backend (the reference): norms, softmax, rope, elementwise ops, attention
// (contiguous and paged, causal and not, sliding windows on both against the CPU's attention_paged_ref, batches that
// mix causal and non-causal segments), LFM2's short
// convolution, the ViT encoder's layer_norm / GELU and gemma3's GEGLU. Tolerances are relative to the output's scale
// and stated per op; batch invariance (a row's bits alone == inside a larger call) is checked where an op
// reduces across a row.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "backend/cpu/attention_paged.h"
#include "backend/cpu/fp16.h"
#include "backend/cpu/fp8.h"
#include "gpu_test_util.h"
#include "kernels_util.h"

using namespace gpu_test;

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// n_tokens query rows after n_past positions, n_head / n_head_kv heads of hd dims, K and V rows of the heads plus
// k_pad / v_pad floats, scale 1 / sqrt(hd), causal.
attention_params attention_shape(int64_t n_tokens, int64_t n_past, int32_t n_head, int32_t n_head_kv, int32_t hd,
                                 int64_t k_pad, int64_t v_pad) {
  attention_params p;
  p.n_tokens = n_tokens;
  p.n_past = n_past;
  p.n_head = n_head;
  p.n_head_kv = n_head_kv;
  p.head_dim_k = p.head_dim_v = hd;
  p.k_row_stride = (int64_t)n_head_kv * hd + k_pad;
  p.v_row_stride = (int64_t)n_head_kv * hd + v_pad;
  p.scale = 1.0f / std::sqrt((float)hd);
  return p;
}

// The bits a store of type kv keeps for v (16-bit and fp8 types: rounded to nearest even, fp8 saturating; the CPU's
// conversions, fp16.h / fp8.h), and their value.
uint16_t kv_bits(float v, kv_type kv) {
  switch (kv) {
    case kv_type::f16: return f32_to_fp16(v);
    case kv_type::bf16: return f32_to_bf16(v);
    case kv_type::fp8_e4m3: return f32_to_fp8_e4m3(v);
    case kv_type::fp8_e5m2: return f32_to_fp8_e5m2(v);
    default: return 0;
  }
}
float kv_value(uint16_t bits, kv_type kv) {
  switch (kv) {
    case kv_type::f16: return fp16_to_f32(bits);
    case kv_type::bf16: return bf16_to_f32(bits);
    case kv_type::fp8_e4m3: return fp8_e4m3_to_f32((uint8_t)bits);
    case kv_type::fp8_e5m2: return fp8_e5m2_to_f32((uint8_t)bits);
    default: return 0;
  }
}

// x as a store of type kv keeps it (f32: as it is).
std::vector<float> kv_rounded(const std::vector<float>& x, kv_type kv) {
  std::vector<float> r(x);
  if (kv != kv_type::f32) for (float& v : r) v = kv_value(kv_bits(v, kv), kv);
  return r;
}

// x stored as kv elements (the bits a 16-bit or fp8 store holds, packed into float slots; f32: x).
std::vector<float> kv_store_of(const std::vector<float>& x, kv_type kv) {
  if (kv == kv_type::f32) return x;
  std::vector<float> out((size_t)kv_store_floats(kv, (int64_t)x.size()));
  unsigned char* b = reinterpret_cast<unsigned char*>(out.data());
  const int64_t width = kv_bytes(kv, 1);
  for (size_t i = 0; i < x.size(); ++i) {
    const uint16_t h = kv_bits(x[i], kv);
    std::memcpy(b + i * width, &h, (size_t)width);  // little-endian: an fp8 code is the low byte
  }
  return out;
}

const char* kv_name(kv_type kv) { return kv_type_name(kv); }

// Attention over 16-bit and fp8 stores against the CPU's f32 attention over the stored values, relative to the
// output's scale: f32 stores 1e-5 (three tf32 products), f16 and fp8 (computed as f16) 2e-5 and bf16 2e-4 (q and the
// probabilities in hi + lo parts of the type: 2^-20 / 2^-15 of them; the host emulation of the split measured 1e-5 /
// 3e-5 of a sum's scale).
double attention_tolerance(kv_type kv) { return kv == kv_type::bf16 ? 2e-4 : kv == kv_type::f32 ? 1e-5 : 2e-5; }

// Every store type of the CUDA backend.
const kv_type k_cuda_kv_types[] = {kv_type::f32, kv_type::f16, kv_type::bf16, kv_type::fp8_e4m3, kv_type::fp8_e5m2};

// Sequences' positions in one paged store for the sliding-window tests: sequence s has n_pos[s] positions in blocks
// of 16 rows (its own blocks, in shuffled order), each row n_head_kv heads of hd dims plus 8 floats of padding, values
// N(0, 1) as a store of type kv keeps them. NaN at sequence s's positions below poison[s] (a window start none of its
// queries goes under: a kernel that read one would put NaN into its output) and in every row no position uses.
struct window_store {
  static constexpr int32_t bs = 16;
  kv_type kv;
  int64_t width;
  int32_t n_blocks = 0;
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> k, v;  // the stored values, [n_blocks * bs, width]
  window_store(const std::vector<int64_t>& n_pos, const std::vector<int64_t>& poison, int32_t n_head_kv, int32_t hd,
               kv_type kv_, std::mt19937& rng)
      : kv(kv_), width((int64_t)n_head_kv * hd + 8) {
    for (int64_t n : n_pos) n_blocks += (int32_t)((n + bs - 1) / bs);
    std::vector<int32_t> ids((size_t)n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    k.assign((size_t)(n_blocks * bs * width), NAN);
    v.assign(k.size(), NAN);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    size_t next = 0;
    for (size_t s = 0; s < n_pos.size(); ++s) {
      const int64_t used = (n_pos[s] + bs - 1) / bs;
      tables.emplace_back(ids.begin() + (int64_t)next, ids.begin() + (int64_t)next + used);
      next += (size_t)used;
      for (int64_t j = poison[s]; j < n_pos[s]; ++j) {
        const int64_t row = row_of(s, j);
        for (int64_t e = 0; e < width; ++e) k[(size_t)(row * width + e)] = nd(rng), v[(size_t)(row * width + e)] = nd(rng);
      }
    }
    k = kv_rounded(k, kv);
    v = kv_rounded(v, kv);
  }
  int64_t row_of(size_t s, int64_t j) const { return (int64_t)tables[s][(size_t)(j / bs)] * bs + j % bs; }
  // sequence s's paged parameters for attention a (its kv set to the store's)
  paged_attention_params seq(size_t s, const attention_params& a) const {
    paged_attention_params pp;
    pp.attn = a;
    pp.attn.kv = kv;
    pp.block_table = tables[s].data();
    pp.n_table = (int32_t)tables[s].size();
    pp.block_size = bs;
    pp.n_blocks = n_blocks;
    return pp;
  }
  // sequence s's first n positions in order (a contiguous cache of them), as stored
  std::vector<float> contiguous(const std::vector<float>& x, size_t s, int64_t n) const {
    std::vector<float> out;
    for (int64_t j = 0; j < n; ++j) {
      const float* r = x.data() + row_of(s, j) * width;
      out.insert(out.end(), r, r + width);
    }
    return out;
  }
};

// The first position the query at position pos attends under a sliding window (0 for none): pos - window + 1.
int64_t window_start(int64_t pos, int32_t window) { return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0; }

}  // namespace

TEST_CASE("cuda elementwise ops: add, add_row_vector, scale_rows, swiglu, sigmoid") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(1);
  const int64_t rows = 7, n = 1000;
  const std::vector<float> a = randn(rows * n, rng), b = randn(rows * n, rng), v = randn(n, rng);
  const std::vector<float> s = randn(rows, rng);
  for (int op = 0; op < 5; ++op) {
    buf ca(*be.cpu, a), cb(*be.cpu, b), cv(*be.cpu, v), ga(*be.gpu, a), gb(*be.gpu, b), gv(*be.gpu, v);
    switch (op) {
      case 0: be.cpu->add(ca.p(), cb.p(), ca.p(), rows * n); be.gpu->add(ga.p(), gb.p(), ga.p(), rows * n); break;
      case 1: be.cpu->add_row_vector(ca.p(), cv.p(), rows, n); be.gpu->add_row_vector(ga.p(), gv.p(), rows, n); break;
      case 2: be.cpu->scale_rows(ca.p(), s.data(), rows, n); be.gpu->scale_rows(ga.p(), s.data(), rows, n); break;
      case 3: be.cpu->swiglu(ca.p(), cb.p(), ca.p(), rows * n); be.gpu->swiglu(ga.p(), gb.p(), ga.p(), rows * n); break;
      case 4: be.cpu->sigmoid(ca.p(), rows * n); be.gpu->sigmoid(ga.p(), rows * n); break;
    }
    const double tol = op >= 3 ? 1e-6 : 0.0;  // swiglu, sigmoid: expf may differ from the CPU's exp in the last bit
    CHECK(max_rel(ga.get(), ca.get()) <= tol);
  }
}

TEST_CASE("cuda rms_norm and softmax: within 1e-6 of the CPU, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(2);
  for (int64_t n : {64, 2048, 5000}) {
    const int64_t rows = 5;
    const std::vector<float> x = randn(rows * n, rng, 3.0f), w = randn(n, rng);
    buf cx(*be.cpu, x), gx(*be.gpu, x), cw(*be.cpu, w), gw(*be.gpu, w), cy(*be.cpu, rows * n), gy(*be.gpu, rows * n);
    be.cpu->rms_norm(cx.p(), cw.p(), cy.p(), rows, n, 1e-6f);
    be.gpu->rms_norm(gx.p(), gw.p(), gy.p(), rows, n, 1e-6f);
    const std::vector<float> yg = gy.get();
    CHECK(max_rel(yg, cy.get()) <= 1e-6);
    buf gy1(*be.gpu, n);
    be.gpu->rms_norm(gx.p() + 2 * n, gw.p(), gy1.p(), 1, n, 1e-6f);
    CHECK(same_bits(gy1.get().data(), yg.data() + 2 * n, (size_t)n));
    be.cpu->softmax(cx.p(), rows, n, 0.7f);
    be.gpu->softmax(gx.p(), rows, n, 0.7f);
    CHECK(max_rel(gx.get(), cx.get()) <= 1e-6);
  }
}

TEST_CASE("cuda rope: normal and NEOX, frequency factors and scaling, within 2e-6 of the CPU") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(4);
  const int64_t rows = 6;
  const int32_t n_head = 3, hd = 64;
  const std::vector<int32_t> pos = {0, 1, 17, 300, 4095, 12000};
  const std::vector<float> ff = [&] { std::vector<float> f(32); for (int i = 0; i < 32; ++i) f[i] = 1.0f + 0.25f * i; return f; }();
  buf cff(*be.cpu, ff), gff(*be.gpu, ff);
  for (bool neox : {false, true}) {
    for (int variant = 0; variant < 3; ++variant) {
      rope_params p;
      p.n_rot = variant == 2 ? 32 : 64;
      p.freq_base = variant == 1 ? 1e6f : 10000.0f;
      p.freq_scale = variant == 1 ? 0.25f : 1.0f;
      p.neox = neox;
      const std::vector<float> x = randn(rows * n_head * hd, rng);
      buf cx(*be.cpu, x), gx(*be.gpu, x);
      rope_params pc = p, pg = p;
      if (variant == 2) { pc.freq_factors = cff.p(); pg.freq_factors = gff.p(); }
      be.cpu->rope(cx.p(), rows, n_head, hd, pos.data(), pc);
      be.gpu->rope(gx.p(), rows, n_head, hd, pos.data(), pg);
      CHECK(max_rel(gx.get(), cx.get()) <= 2e-6);
    }
  }
}

TEST_CASE("cuda attention: contiguous and paged, GQA, long contexts, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(5);
  for (int64_t n_past : {0, 37, 300}) {
    attention_params p;
    p.n_tokens = 5;
    p.n_past = n_past;
    p.n_head = 8;
    p.n_head_kv = 2;
    p.head_dim_k = 64;
    p.head_dim_v = 64;
    p.k_row_stride = 2 * 64 + 8;  // padded rows
    p.v_row_stride = 2 * 64;
    p.scale = 0.125f;
    const int64_t n_kv = n_past + p.n_tokens;
    const std::vector<float> q = randn(p.n_tokens * 8 * 64, rng), k = randn(n_kv * p.k_row_stride, rng),
                             v = randn(n_kv * p.v_row_stride, rng);
    buf cq(*be.cpu, q), ck(*be.cpu, k), cv(*be.cpu, v), co(*be.cpu, p.n_tokens * 8 * 64);
    buf gq(*be.gpu, q), gk(*be.gpu, k), gv(*be.gpu, v), go(*be.gpu, p.n_tokens * 8 * 64);
    be.cpu->attention(p, cq.p(), ck.p(), cv.p(), co.p());
    be.gpu->attention(p, gq.p(), gk.p(), gv.p(), go.p());
    const std::vector<float> og = go.get();
    CHECK(max_rel(og, co.get()) <= 1e-5);
    // the last query alone (n_past + 4, one token): same bits
    attention_params p1 = p;
    p1.n_tokens = 1;
    p1.n_past = n_past + 4;
    buf go1(*be.gpu, 8 * 64);
    be.gpu->attention(p1, gq.p() + 4 * 8 * 64, gk.p(), gv.p(), go1.p());
    CHECK(same_bits(go1.get().data(), og.data() + 4 * 8 * 64, 8 * 64));

    // paged: positions scattered over a store of blocks of 16 in shuffled order
    const int32_t bs = 16, n_table = (int32_t)((n_kv + bs - 1) / bs), n_blocks = n_table + 3;
    std::vector<int32_t> table(n_table);
    std::iota(table.begin(), table.end(), 3);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<float> ks((size_t)(n_blocks * bs * p.k_row_stride), 0.0f), vs((size_t)(n_blocks * bs * p.v_row_stride), 0.0f);
    for (int64_t j = 0; j < n_kv; ++j) {
      const int64_t row = (int64_t)table[j / bs] * bs + j % bs;
      std::copy_n(k.begin() + j * p.k_row_stride, p.k_row_stride, ks.begin() + row * p.k_row_stride);
      std::copy_n(v.begin() + j * p.v_row_stride, p.v_row_stride, vs.begin() + row * p.v_row_stride);
    }
    paged_attention_params pp;
    pp.attn = p;
    pp.block_table = table.data();
    pp.n_table = n_table;
    pp.block_size = bs;
    pp.n_blocks = n_blocks;
    buf gks(*be.gpu, ks), gvs(*be.gpu, vs), gop(*be.gpu, p.n_tokens * 8 * 64);
    be.gpu->attention_paged(pp, gq.p(), gks.p(), gvs.p(), gop.p());
    CHECK(same_bits(gop.get().data(), og.data(), og.size()));
    pp.n_blocks = 2;
    CHECK_THROWS_WITH(be.gpu->attention_paged(pp, gq.p(), gks.p(), gvs.p(), gop.p()), "out of range");
  }
}

TEST_CASE("cuda short_conv: the CPU's result, and chunked calls == one call") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(6);
  const int64_t n_ch = 300, n_tok = 9;
  const int32_t l_cache = 3, d = l_cache - 1;
  const std::vector<float> bcx = randn(n_tok * 3 * n_ch, rng), w = randn(l_cache * n_ch, rng), st = randn(d * n_ch, rng);
  buf cb(*be.cpu, bcx), cw(*be.cpu, w), cs(*be.cpu, st), cy(*be.cpu, n_tok * n_ch);
  buf gb(*be.gpu, bcx), gw(*be.gpu, w), gs(*be.gpu, st), gy(*be.gpu, n_tok * n_ch);
  be.cpu->short_conv(cb.p(), n_tok, n_ch, l_cache, cw.p(), cs.p(), cy.p());
  be.gpu->short_conv(gb.p(), n_tok, n_ch, l_cache, gw.p(), gs.p(), gy.p());
  const std::vector<float> yg = gy.get(), sg = gs.get();
  CHECK(max_rel(yg, cy.get()) <= 1e-6);
  CHECK(max_rel(sg, cs.get()) <= 0.0);
  buf gs2(*be.gpu, st), gy2(*be.gpu, n_tok * n_ch);
  for (int64_t t0 : {0, 1, 4}) {  // chunks [0,1) [1,4) [4,9)
    const int64_t t1 = t0 == 0 ? 1 : t0 == 1 ? 4 : n_tok;
    be.gpu->short_conv(gb.p() + t0 * 3 * n_ch, t1 - t0, n_ch, l_cache, gw.p(), gs2.p(), gy2.p() + t0 * n_ch);
  }
  CHECK(same_bits(gy2.get().data(), yg.data(), yg.size()));
  CHECK(same_bits(gs2.get().data(), sg.data(), sg.size()));
}

TEST_CASE("cuda gather_bx_rows: the B * X rows short_conv folds into its state, the CPU's bits, rows scattered") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(16);
  const int64_t n_ch = 300, n_rows = 7, n_dst = 10;
  const std::vector<float> bcx = randn(n_rows * 3 * n_ch, rng), dst0 = randn(n_dst * n_ch, rng);
  const std::vector<int64_t> src = {6, 0, 3, 3}, dst = {9, 2, 0, 5};
  buf cb(*be.cpu, bcx), cd(*be.cpu, dst0), gb(*be.gpu, bcx), gd(*be.gpu, dst0);
  be.cpu->gather_bx_rows(cb.p(), src.data(), (int64_t)src.size(), n_ch, cd.p(), dst.data());
  be.gpu->gather_bx_rows(gb.p(), src.data(), (int64_t)src.size(), n_ch, gd.p(), dst.data());
  const std::vector<float> want = cd.get(), got = gd.get();
  CHECK(same_bits(got.data(), want.data(), want.size()));
  CHECK(same_bits(got.data() + n_ch, dst0.data() + n_ch, n_ch));  // a row no one writes keeps its values
  // the rows equal the state a conv over those rows leaves: state row d - 1 after token t is B * X of row t
  const int32_t l_cache = 3;
  const std::vector<float> w = randn(l_cache * n_ch, rng);
  buf gw(*be.gpu, w), gs(*be.gpu, (l_cache - 1) * n_ch), gy(*be.gpu, 4 * n_ch);
  be.gpu->short_conv(gb.p(), 4, n_ch, l_cache, gw.p(), gs.p(), gy.p());  // rows 0..3: the state ends with row 3
  const std::vector<float> st = gs.get();
  CHECK(same_bits(st.data() + n_ch, got.data(), n_ch));  // dst row 0 was gathered from bcx row 3
}

TEST_CASE("cuda backend: memory reporting and clear errors") {
  REQUIRE_GPU();
  pair be;
  uint64_t free_b = 0, total_b = 0;
  CHECK(be.gpu->device_memory(&free_b, &total_b));
  CHECK(free_b > 0 && free_b <= total_b);
  CHECK_THROWS_WITH(be.gpu->alloc_f32(int64_t(1) << 46), "out of device memory");
  const float ok = 1.0f;
  buf after(*be.gpu, std::vector<float>{ok});  // the backend still works after a failed allocation
  CHECK(after.get()[0] == 1.0f);
  CHECK(!be.gpu->supports_type(ggml_type::IQ2_XXS));
}

TEST_CASE("cuda copy_rows: gather and scatter as the CPU's row copies") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(8);
  const int64_t width = 300, n_src = 9, n_dst = 12;
  const std::vector<float> src = randn(n_src * width, rng), dst0 = randn(n_dst * width, rng);
  const std::vector<int64_t> to = {11, 0, 5, 3}, from = {8, 8, 1, 0};
  for (int mode = 0; mode < 3; ++mode) {  // scatter, gather, both
    const int64_t* d = mode != 1 ? to.data() : nullptr;
    const int64_t* s = mode != 0 ? from.data() : nullptr;
    buf cs(*be.cpu, src), cd(*be.cpu, dst0), gs(*be.gpu, src), gd(*be.gpu, dst0);
    be.cpu->copy_rows(cd.p(), d, cs.p(), s, 4, width);
    be.gpu->copy_rows(gd.p(), d, gs.p(), s, 4, width);
    const std::vector<float> a = cd.get(), b = gd.get();
    CHECK(same_bits(a.data(), b.data(), a.size()));
  }
}

TEST_CASE("cuda attention_paged_batch: one launch for many sequences == each alone") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(12);
  const int32_t bs = 4, n_blocks = 40, heads = 4, kvh = 2, hd = 32;
  const int64_t width = kvh * hd;
  const std::vector<float> ks = randn((size_t)(n_blocks * bs * width), rng), vs = randn((size_t)(n_blocks * bs * width), rng);
  buf gk(*be.gpu, ks), gv(*be.gpu, vs);
  const std::vector<std::vector<int32_t>> tables = {{3, 9, 1}, {0}, {7, 2, 5, 4, 11}};
  const int64_t n_past[3] = {6, 0, 13}, n_tok[3] = {3, 2, 5};
  std::vector<paged_attention_params> seqs(3);
  for (int s = 0; s < 3; ++s) {
    seqs[s].attn = attention_params{n_tok[s], n_past[s], heads, kvh, hd, hd, width, width, 0.2f};
    seqs[s].block_table = tables[s].data();
    seqs[s].n_table = (int32_t)tables[s].size();
    seqs[s].block_size = bs;
    seqs[s].n_blocks = n_blocks;
  }
  const std::vector<float> q = randn(10 * heads * hd, rng);
  buf gq(*be.gpu, q), gout(*be.gpu, 10 * heads * hd);
  be.gpu->attention_paged_batch(seqs.data(), 3, gq.p(), gk.p(), gv.p(), gout.p());
  const std::vector<float> all = gout.get();
  int64_t at = 0;
  for (int s = 0; s < 3; ++s) {
    buf one(*be.gpu, n_tok[s] * heads * hd);
    be.gpu->attention_paged(seqs[s], gq.p() + at * heads * hd, gk.p(), gv.p(), one.p());
    CHECK(same_bits(one.get().data(), all.data() + at * heads * hd, (size_t)(n_tok[s] * heads * hd)));
    at += n_tok[s];
  }
}

TEST_CASE("cuda 16-bit and fp8 K / V stores: store_kv rounds to nearest even, attention is f32 attention over the stored values, batched == alone") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(14);
  for (const kv_type kv : {kv_type::f16, kv_type::bf16, kv_type::fp8_e4m3, kv_type::fp8_e5m2}) {
    for (const int32_t hd : {64, 128}) {
      const int32_t bs = 16, n_blocks = 64, heads = 8, kvh = 2;
      const int64_t width = kvh * hd, rows = (int64_t)n_blocks * bs;
      const std::vector<float> kf = randn((size_t)(rows * width), rng), vf = randn((size_t)(rows * width), rng);
      // the f32 store holds the values rounded as the typed one keeps them
      const std::vector<float> kr = kv_rounded(kf, kv), vr = kv_rounded(vf, kv);
      buf k32(*be.gpu, kr), v32(*be.gpu, vr), knew(*be.gpu, kf), vnew(*be.gpu, vf);
      buf k16(*be.gpu, kv_store_floats(kv, rows * width)), v16(*be.gpu, kv_store_floats(kv, rows * width));
      std::vector<int64_t> slot((size_t)rows);
      for (int64_t r = 0; r < rows; ++r) slot[(size_t)r] = r;
      be.gpu->store_kv(k16.p(), v16.p(), slot.data(), knew.p(), vnew.p(), rows, width, width, kv);
      // the store's bits: each value rounded to nearest even
      const std::vector<float> raw = k16.get();
      const std::vector<float> want = kv_store_of(kf, kv);
      CHECK(std::memcmp(raw.data(), want.data(), (size_t)kv_bytes(kv, rows * width)) == 0);
      // the CPU's store of the same rows holds the same bits
      std::vector<float> ck((size_t)kv_store_floats(kv, rows * width)), cv(ck.size());
      be.cpu->store_kv(ck.data(), cv.data(), slot.data(), kf.data(), vf.data(), rows, width, width, kv);
      CHECK(ck.size() == raw.size() && std::memcmp(ck.data(), raw.data(), ck.size() * sizeof(float)) == 0);
      // prompts (many rows: the rows shape) and decode rows (one per sequence: the splits shape), 1 .. 700 positions
      std::vector<std::vector<int32_t>> tables(4);
      for (int s = 0; s < 4; ++s)
        for (int b = 0; b < 48; ++b) tables[(size_t)s].push_back((b * 7 + s * 13) % n_blocks);
      struct shape { int64_t n_past, n_tok; };
      for (const std::vector<shape>& batch : {std::vector<shape>{{0, 300}, {40, 64}},
                                              std::vector<shape>{{0, 1}, {37, 1}, {699, 1}, {256, 1}}}) {
        std::vector<paged_attention_params> seqs(batch.size());
        int64_t n_q = 0;
        for (size_t s = 0; s < batch.size(); ++s) {
          attention_params a{batch[s].n_tok, batch[s].n_past, heads, kvh, hd, hd, width, width, 1.0f / std::sqrt((float)hd)};
          seqs[s].attn = a;
          seqs[s].block_table = tables[s].data();
          seqs[s].n_table = (int32_t)tables[s].size();
          seqs[s].block_size = bs;
          seqs[s].n_blocks = n_blocks;
          n_q += batch[s].n_tok;
        }
        const std::vector<float> q = randn((size_t)(n_q * heads * hd), rng);
        buf gq(*be.gpu, q), o32(*be.gpu, n_q * heads * hd), o16(*be.gpu, n_q * heads * hd);
        be.gpu->attention_paged_batch(seqs.data(), (int64_t)seqs.size(), gq.p(), k32.p(), v32.p(), o32.p());
        for (auto& sq : seqs) sq.attn.kv = kv;
        be.gpu->attention_paged_batch(seqs.data(), (int64_t)seqs.size(), gq.p(), k16.p(), v16.p(), o16.p());
        const std::vector<float> a32 = o32.get(), a16 = o16.get();
        const double err = max_rel(a16, a32);
        // each sequence alone: the bits of the batched launch
        bool same = true;
        int64_t at = 0;
        for (const paged_attention_params& sq : seqs) {
          const int64_t n = sq.attn.n_tokens * heads * hd;
          buf one(*be.gpu, n);
          be.gpu->attention_paged(sq, gq.p() + at, k16.p(), v16.p(), one.p());
          same = same && same_bits(one.get().data(), a16.data() + at, (size_t)n);
          at += n;
        }
        std::printf("  %s store, hd %d, %zu sequences: max rel err vs f32 attention over the stored values %.2e, "
                    "alone %s\n", kv_name(kv), hd, batch.size(), err, same ? "same bits" : "DIFFER");
        CHECK(err <= attention_tolerance(kv));
        CHECK(same);
      }
    }
  }
}

// fp8 stores at their edges: every code's value, the midpoints between neighbouring codes and a float either side,
// subnormals, values past the largest finite one, infinities, NaN, -0: the GPU's conversion (CUDA's SATFINITE one)
// writes the bits the CPU's fp8.h writes (the attention tests read ordinary values back).
TEST_CASE("cuda fp8 K / V stores at the edges: store_kv gives the CPU's bits for every code, midpoint, overflow and NaN") {
  REQUIRE_GPU();
  pair be;
  for (const kv_type kv : {kv_type::fp8_e4m3, kv_type::fp8_e5m2}) {
    std::vector<float> x = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 1e-30f, -1e-30f};
    for (int c = 0; c < 256; ++c) {
      const float v = kv_value((uint16_t)c, kv);
      if (!std::isfinite(v)) continue;
      const float next = kv_value((uint16_t)((c & 0x80) | ((c & 0x7f) + 1)), kv);
      x.push_back(v);
      if (std::isfinite(next) && (c & 0x7f) < 0x7f) {
        const float mid = (float)(((double)v + (double)next) / 2);
        for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) x.push_back(m);
      }
    }
    while (x.size() % 64 != 0) x.push_back(1.0f);  // whole rows of 64
    const int64_t width = 64, rows = (int64_t)x.size() / width;
    std::vector<int64_t> slot((size_t)rows);
    for (int64_t r = 0; r < rows; ++r) slot[(size_t)r] = r;
    buf src(*be.gpu, x), ks(*be.gpu, kv_store_floats(kv, rows * width)), vs(*be.gpu, kv_store_floats(kv, rows * width));
    be.gpu->store_kv(ks.p(), vs.p(), slot.data(), src.p(), src.p(), rows, width, width, kv);
    std::vector<float> ck((size_t)kv_store_floats(kv, rows * width)), cv(ck.size());
    be.cpu->store_kv(ck.data(), cv.data(), slot.data(), x.data(), x.data(), rows, width, width, kv);
    const std::vector<float> got = ks.get();
    const uint8_t* g = reinterpret_cast<const uint8_t*>(got.data());
    const uint8_t* c = reinterpret_cast<const uint8_t*>(ck.data());
    int differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (g[i] != c[i] && differ++ < 5) std::printf("  %s: %a stored as 0x%02x on the GPU, 0x%02x on the CPU\n", kv_name(kv), x[i], g[i], c[i]);
    }
    std::printf("  %s: %zu values at the edges, %d stored differently\n", kv_name(kv), x.size(), differ);
    CHECK_EQ(differ, 0);
  }
}

// The ViT encoder's ops. Tolerances against the CPU (relative to the output's scale): layer_norm 1e-5 (the GPU sums
// in f32 block reductions, the CPU in double), gelu / gelu_quick 2e-6 (CUDA's expf vs ggml's vectorized one, both
// about 1 ulp), non-causal attention 1e-5 as the causal one.
TEST_CASE("cuda layer_norm: with and without weight / bias, in place, within 1e-5 of the CPU, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(21);
  for (int64_t n : {1152, 13, 4304}) {
    const int64_t rows = 6;
    std::vector<float> x = randn(rows * n, rng, 2.0f);
    for (float& e : x) e += 1.5f;  // a mean to take out
    const std::vector<float> w = randn(n, rng), b = randn(n, rng);
    buf cw(*be.cpu, w), cb(*be.cpu, b), gw(*be.gpu, w), gb(*be.gpu, b);
    for (int mode = 0; mode < 4; ++mode) {
      buf cx(*be.cpu, x), gx(*be.gpu, x), cy(*be.cpu, rows * n), gy(*be.gpu, rows * n);
      const float* cwp = mode & 1 ? cw.p() : nullptr;
      const float* cbp = mode & 2 ? cb.p() : nullptr;
      const float* gwp = mode & 1 ? gw.p() : nullptr;
      const float* gbp = mode & 2 ? gb.p() : nullptr;
      be.cpu->layer_norm(cx.p(), cwp, cbp, cy.p(), rows, n, 1e-6f);
      be.gpu->layer_norm(gx.p(), gwp, gbp, gy.p(), rows, n, 1e-6f);
      const std::vector<float> yg = gy.get();
      CHECK(max_rel(yg, cy.get()) <= 1e-5);
      buf gy1(*be.gpu, n);
      be.gpu->layer_norm(gx.p() + 3 * n, gwp, gbp, gy1.p(), 1, n, 1e-6f);
      CHECK(same_bits(gy1.get().data(), yg.data() + 3 * n, (size_t)n));
      be.gpu->layer_norm(gx.p(), gwp, gbp, gx.p(), rows, n, 1e-6f);  // in place
      CHECK(same_bits(gx.get().data(), yg.data(), yg.size()));
    }
  }
}

TEST_CASE("cuda gelu and gelu_quick: within 2e-6 of the CPU, huge |x| safe, in place") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(22);
  std::vector<float> x = randn(10007, rng, 4.0f);
  for (float v : {30.0f, 100.0f, 1e13f, 1e20f, 3e38f}) x.push_back(v), x.push_back(-v);
  const int64_t n = (int64_t)x.size();
  for (int op = 0; op < 2; ++op) {
    buf cx(*be.cpu, x), gx(*be.gpu, x), cy(*be.cpu, n), gy(*be.gpu, n);
    if (op == 0) be.cpu->gelu(cx.p(), cy.p(), n), be.gpu->gelu(gx.p(), gy.p(), n);
    else be.cpu->gelu_quick(cx.p(), cy.p(), n), be.gpu->gelu_quick(gx.p(), gy.p(), n);
    const std::vector<float> yg = gy.get(), yc = cy.get();
    CHECK(max_rel(std::vector<float>(yg.begin(), yg.begin() + 10007), std::vector<float>(yc.begin(), yc.begin() + 10007)) <= 2e-6);
    for (int64_t i = 10007; i < n; ++i) CHECK(std::fabs(x[i]) < 100.0f || yg[i] == (x[i] > 0 ? x[i] : 0.0f));
    if (op == 0) be.gpu->gelu(gx.p(), gx.p(), n);
    else be.gpu->gelu_quick(gx.p(), gx.p(), n);
    CHECK(same_bits(gx.get().data(), yg.data(), yg.size()));
  }
}

TEST_CASE("cuda non-causal attention: ViT shapes, contiguous and paged, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(23);
  struct shape { int64_t n_tokens, n_past; int32_t n_head, n_head_kv, hd; };
  for (const shape s : {shape{1, 0, 4, 4, 64}, shape{7, 0, 4, 4, 72}, shape{256, 0, 16, 16, 72},
                        shape{1024, 0, 16, 16, 72}, shape{40, 9, 8, 2, 64}}) {
    attention_params p = attention_shape(s.n_tokens, s.n_past, s.n_head, s.n_head_kv, s.hd, 8, 0);  // padded K rows
    p.causal = false;
    const int64_t n_kv = s.n_past + s.n_tokens, q_row = (int64_t)s.n_head * s.hd;
    const std::vector<float> q = randn(s.n_tokens * q_row, rng), k = randn(n_kv * p.k_row_stride, rng),
                             v = randn(n_kv * p.v_row_stride, rng);
    buf cq(*be.cpu, q), ck(*be.cpu, k), cv(*be.cpu, v), co(*be.cpu, s.n_tokens * q_row);
    buf gq(*be.gpu, q), gk(*be.gpu, k), gv(*be.gpu, v), go(*be.gpu, s.n_tokens * q_row);
    be.cpu->attention(p, cq.p(), ck.p(), cv.p(), co.p());
    be.gpu->attention(p, gq.p(), gk.p(), gv.p(), go.p());
    const std::vector<float> og = go.get();
    CHECK(max_rel(og, co.get()) <= 1e-5);
    // the last m rows alone (n_past grows by the rows left out: the same positions): same bits
    const int64_t m = std::max<int64_t>(1, s.n_tokens / 3);
    attention_params pm = p;
    pm.n_tokens = m;
    pm.n_past = p.n_past + s.n_tokens - m;
    buf gom(*be.gpu, m * q_row);
    be.gpu->attention(pm, gq.p() + (s.n_tokens - m) * q_row, gk.p(), gv.p(), gom.p());
    CHECK(same_bits(gom.get().data(), og.data() + (s.n_tokens - m) * q_row, (size_t)(m * q_row)));
    // paged, blocks of 16 in reverse order: alone, and in one batch launch after the m-row call
    const int32_t bs = 16, n_table = (int32_t)((n_kv + bs - 1) / bs);
    std::vector<int32_t> table(n_table);
    for (int32_t i = 0; i < n_table; ++i) table[i] = n_table - 1 - i;
    std::vector<float> ks((size_t)(n_table * bs * p.k_row_stride)), vs((size_t)(n_table * bs * p.v_row_stride));
    for (int64_t j = 0; j < n_kv; ++j) {
      const int64_t row = (int64_t)table[j / bs] * bs + j % bs;
      std::copy_n(k.begin() + j * p.k_row_stride, p.k_row_stride, ks.begin() + row * p.k_row_stride);
      std::copy_n(v.begin() + j * p.v_row_stride, p.v_row_stride, vs.begin() + row * p.v_row_stride);
    }
    paged_attention_params pp;
    pp.attn = p;
    pp.block_table = table.data();
    pp.n_table = n_table;
    pp.block_size = bs;
    pp.n_blocks = n_table;
    buf gks(*be.gpu, ks), gvs(*be.gpu, vs), gop(*be.gpu, s.n_tokens * q_row);
    be.gpu->attention_paged(pp, gq.p(), gks.p(), gvs.p(), gop.p());
    CHECK(same_bits(gop.get().data(), og.data(), og.size()));
    paged_attention_params two[2] = {pp, pp};
    two[0].attn = pm;  // the last m rows, then all rows: one launch
    std::vector<float> q2(q.begin() + (s.n_tokens - m) * q_row, q.end());
    q2.insert(q2.end(), q.begin(), q.end());
    buf gq2(*be.gpu, q2), go2(*be.gpu, (m + s.n_tokens) * q_row);
    be.gpu->attention_paged_batch(two, 2, gq2.p(), gks.p(), gvs.p(), go2.p());
    const std::vector<float> o2 = go2.get();
    CHECK(same_bits(o2.data(), og.data() + (s.n_tokens - m) * q_row, (size_t)(m * q_row)));
    CHECK(same_bits(o2.data() + m * q_row, og.data(), og.size()));
    // a causal item, then the non-causal one (two launches): each has its own call's bits
    two[0].attn.causal = true;
    be.gpu->attention_paged_batch(two, 2, gq2.p(), gks.p(), gvs.p(), go2.p());
    const std::vector<float> o3 = go2.get();
    buf goc(*be.gpu, m * q_row);
    be.gpu->attention_paged(two[0], gq2.p(), gks.p(), gvs.p(), goc.p());
    CHECK(same_bits(o3.data(), goc.get().data(), (size_t)(m * q_row)));
    CHECK(same_bits(o3.data() + m * q_row, og.data(), og.size()));
  }
}

TEST_CASE("cuda attention: head dims 32..256 and query-head groups 1..16 (split and merged), as the CPU") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(31);
  struct shape { int64_t n_tokens, n_past; int32_t n_head, n_head_kv, hd; };
  for (const shape s : {shape{3, 0, 4, 4, 32}, shape{2, 140, 14, 2, 64}, shape{4, 129, 16, 1, 128},
                        shape{1, 600, 8, 8, 128}, shape{2, 257, 6, 2, 256}, shape{1, 1000, 32, 8, 64}}) {
    const attention_params p = attention_shape(s.n_tokens, s.n_past, s.n_head, s.n_head_kv, s.hd, 0, 0);
    const int64_t n_kv = s.n_past + s.n_tokens, q_row = (int64_t)s.n_head * s.hd;
    const std::vector<float> q = randn(s.n_tokens * q_row, rng), k = randn(n_kv * p.k_row_stride, rng),
                             v = randn(n_kv * p.v_row_stride, rng);
    buf cq(*be.cpu, q), ck(*be.cpu, k), cv(*be.cpu, v), co(*be.cpu, s.n_tokens * q_row);
    buf gq(*be.gpu, q), gk(*be.gpu, k), gv(*be.gpu, v), go(*be.gpu, s.n_tokens * q_row);
    be.cpu->attention(p, cq.p(), ck.p(), cv.p(), co.p());
    be.gpu->attention(p, gq.p(), gk.p(), gv.p(), go.p());
    const std::vector<float> og = go.get();
    const double err = max_rel(og, co.get());
    std::printf("  attention %lld tokens after %lld, %d/%d heads of %d: max rel err %.2e\n", (long long)s.n_tokens,
                (long long)s.n_past, s.n_head, s.n_head_kv, s.hd, err);
    CHECK(err <= 1e-5);
    // the last query alone: same bits
    attention_params p1 = p;
    p1.n_tokens = 1;
    p1.n_past = n_kv - 1;
    buf go1(*be.gpu, q_row);
    be.gpu->attention(p1, gq.p() + (s.n_tokens - 1) * q_row, gk.p(), gv.p(), go1.p());
    CHECK(same_bits(go1.get().data(), og.data() + (s.n_tokens - 1) * q_row, (size_t)q_row));
  }
}

// Decode attention blocks take fewer than 8 warps only in launches of many blocks (large batches); with
// SPINDLE_CUDA_ATTN_WARPS=context every launch sizes them by context, so single rows cover the 1-, 2- and 4-warp
// kernels here: their outputs must have the 8-warp kernels' bits (the fused output quantization of fewer-warp
// blocks: the model test of fused launches).
TEST_CASE("cuda attention: decode blocks of 1, 2, 4 warps give the bits of 8-warp blocks") {
  REQUIRE_GPU();
  pair be;
  std::unique_ptr<backend> fewer = with_env("SPINDLE_CUDA_ATTN_WARPS", "context", [] { return make_backend("cuda", 0); });
  std::mt19937 rng(41);
  bool same = true;
  // 1 to 8 splits of 32 positions (1, 2, 4, 8 warps), past one and two chunks (merged in the kernel); head dims 64
  // (1..8 warps) and 128 (2, 4); query-head groups of 4 and 1
  // (every store type)
  for (const kv_type kv : k_cuda_kv_types)
    for (const int32_t hd : {64, 128})
      for (const int32_t kvh : {8, 32})
        for (const int64_t n_kv : {5, 32, 33, 64, 100, 200, 256, 300, 700}) {
          attention_params p = attention_shape(1, n_kv - 1, 32, kvh, hd, 8, 8);
          p.kv = kv;
          const std::vector<float> q = randn(32 * hd, rng), k = kv_store_of(randn(n_kv * p.k_row_stride, rng), kv),
                                   v = kv_store_of(randn(n_kv * p.v_row_stride, rng), kv);
          buf gq(*be.gpu, q), gk(*be.gpu, k), gv(*be.gpu, v), go(*be.gpu, 32 * hd);
          buf fq(*fewer, q), fk(*fewer, k), fv(*fewer, v), fo(*fewer, 32 * hd);
          be.gpu->attention(p, gq.p(), gk.p(), gv.p(), go.p());
          fewer->attention(p, fq.p(), fk.p(), fv.p(), fo.p());
          const bool eq = same_bits(go.get().data(), fo.get().data(), (size_t)(32 * hd));
          if (!eq) std::printf("  %s store, hd %d, %d KV heads, %lld positions: the bits differ\n", kv_name(kv), hd, kvh,
                               (long long)n_kv);
          same = same && eq;
        }
  CHECK(same);
}

TEST_CASE("cuda attention: a prompt in one launch has the bits of each row alone (tensor-core row and split shapes)") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(37);
  struct shape { int64_t n_tokens, n_past; int32_t n_head, n_head_kv, hd; bool causal; };
  // every store type (the CPU computes over the stored values)
  for (const kv_type kv : k_cuda_kv_types)
    // whole and partial tiles; query-head groups of 4, 7 (14 of a tile's 16 rows), 1 (16 query rows per tile), 2,
    // 16 and 32 (two tiles side by side); head dims 64, 40 (padded), 128 and 96; one chunk of positions and several
    // (chunk partials merged: past 256 and 512 positions), past positions before the prompt, causal and not
    for (const shape s : {shape{37, 0, 32, 8, 64, true}, shape{16, 1000, 8, 2, 64, true}, shape{50, 3, 7, 1, 40, true},
                          shape{24, 40, 2, 2, 64, false}, shape{130, 70, 12, 3, 64, true}, shape{70, 200, 16, 8, 128, true},
                          shape{40, 0, 4, 4, 96, true}, shape{20, 300, 16, 1, 64, true}, shape{9, 20, 32, 1, 128, false},
                          shape{300, 260, 8, 8, 64, true}}) {
      attention_params p = attention_shape(s.n_tokens, s.n_past, s.n_head, s.n_head_kv, s.hd, 8, 8);  // wide rows
      p.causal = s.causal;
      p.kv = kv;
      const int64_t n_kv = s.n_past + s.n_tokens, q_row = (int64_t)s.n_head * s.hd, bs = 16;
      const int64_t n_table = (n_kv + bs - 1) / bs;
      std::vector<int32_t> table((size_t)n_table);
      for (int64_t b = 0; b < n_table; ++b) table[(size_t)b] = (int32_t)((b * 5 + 3) % n_table);  // shuffled blocks
      const std::vector<float> q = randn(s.n_tokens * q_row, rng),
                               k = kv_rounded(randn(n_table * bs * p.k_row_stride, rng), kv),
                               v = kv_rounded(randn(n_table * bs * p.v_row_stride, rng), kv);
      paged_attention_params pp;
      pp.attn = p;
      pp.block_table = table.data();
      pp.n_table = n_table;
      pp.block_size = (int32_t)bs;
      pp.n_blocks = n_table;
      buf gq(*be.gpu, q), gk(*be.gpu, kv_store_of(k, kv)), gv(*be.gpu, kv_store_of(v, kv)), go(*be.gpu, s.n_tokens * q_row);
      be.gpu->attention_paged(pp, gq.p(), gk.p(), gv.p(), go.p());  // every row in one launch: the row shape
      const std::vector<float> og = go.get();
      bool same = true;
      for (int64_t t = 0; t < s.n_tokens; ++t) {  // each row alone: the split shape
        paged_attention_params p1 = pp;
        p1.attn.n_tokens = 1;
        p1.attn.n_past = s.causal ? s.n_past + t : n_kv - 1;
        buf go1(*be.gpu, q_row);
        be.gpu->attention_paged(p1, gq.p() + t * q_row, gk.p(), gv.p(), go1.p());
        same = same && same_bits(go1.get().data(), og.data() + t * q_row, (size_t)q_row);
      }
      CHECK(same);
      // causal: the rows in uneven pieces (3 rows, then 5, ...) as a chunked prompt sends them: other tiles and shapes
      if (s.causal) {
        std::vector<float> pieces((size_t)(s.n_tokens * q_row));
        for (int64_t t = 0, len = 3; t < s.n_tokens; t += len, len = len == 3 ? 5 : 3) {
          paged_attention_params pc = pp;
          pc.attn.n_tokens = std::min<int64_t>(len, s.n_tokens - t);
          pc.attn.n_past = s.n_past + t;
          buf goc(*be.gpu, pc.attn.n_tokens * q_row);
          be.gpu->attention_paged(pc, gq.p() + t * q_row, gk.p(), gv.p(), goc.p());
          const std::vector<float> oc = goc.get();
          std::copy(oc.begin(), oc.end(), pieces.begin() + t * q_row);
        }
        CHECK(same_bits(pieces.data(), og.data(), og.size()));
      }
      // and as the CPU computes it
      paged_attention_params pf = pp;
      pf.attn.kv = kv_type::f32;
      buf ck(*be.cpu, k), cv(*be.cpu, v), cq(*be.cpu, q), co(*be.cpu, s.n_tokens * q_row);
      be.cpu->attention_paged(pf, cq.p(), ck.p(), cv.p(), co.p());
      const double err = max_rel(og, co.get());
      std::printf("  attention (%s store) %lld rows after %lld, %d/%d heads of %d, %s: rows alone %s, max rel err vs cpu %.2e\n",
                  kv_name(kv), (long long)s.n_tokens, (long long)s.n_past, s.n_head, s.n_head_kv, s.hd,
                  s.causal ? "causal" : "non-causal", same ? "same bits" : "DIFFER", err);
      CHECK(err <= attention_tolerance(kv));
    }
}

TEST_CASE("cuda argmax_rows: argmax_first of each row (ties, NaN, -inf, a row prefix), ids only to the host") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(43);
  for (const int64_t n : {int64_t(1), int64_t(7), int64_t(1000), int64_t(128256)}) {
    const int64_t stride = n + 5, rows = 8;
    std::vector<float> x = randn(rows * stride, rng);
    float* r = x.data();
    if (n > 3) {
      r[0 * stride + n / 2] = 50.0f, r[0 * stride + n - 1] = 50.0f;  // a tie: the smaller index
      r[1 * stride + 0] = NAN;                                        // NaN first: index 0
      r[2 * stride + 1] = NAN, r[2 * stride + 2] = 60.0f;             // NaN later: never chosen
      for (int64_t i = 0; i < n; ++i) r[3 * stride + i] = -INFINITY;  // all -inf: index 0
      r[4 * stride + n] = 1e9f;                                       // past the prefix: not seen
      for (int64_t i = 0; i < n; ++i) r[5 * stride + i] = NAN;        // all NaN: index 0
    }
    buf gx(*be.gpu, x);
    std::vector<int32_t> ids((size_t)rows, -1);
    be.gpu->argmax_rows(gx.p(), rows, stride, n, ids.data());
    bool same = true;
    for (int64_t i = 0; i < rows; ++i) same = same && ids[(size_t)i] == argmax_first(x.data() + i * stride, n);
    CHECK(same);
    if (n > 3) CHECK(ids[0] == n / 2);
  }
}

TEST_CASE("cuda sample_rows: the tokens sample_row_host picks, for every chain, edits of every op, 64 rows of 128256") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(47);
  const logit_edit edits[] = {{5, logit_edit_op::repetition, 1.3f},   {6, logit_edit_op::repetition, 1.3f},
                              {5, logit_edit_op::add_penalty, -0.75f}, {9, logit_edit_op::add_bias, 9.0f},
                              {9, logit_edit_op::add_bias, 4.5f},      {3, logit_edit_op::mask, 0.0f}};
  struct chain {
    float temperature;
    int32_t top_k;
    float top_p, min_p;
  };
  const chain chains[] = {{0.0f, -1, 1.0f, 0.0f},   {1.0f, -1, 1.0f, 0.0f},    {0.7f, -1, 1.0f, 0.0f},
                          {0.8f, 40, 1.0f, 0.0f},   {0.9f, 50, 0.9f, 0.05f},   {1.0f, 1024, 0.95f, 0.0f},
                          {1.0f, -1, 0.9f, 0.0f},   {1.0f, -1, 1.0f, 0.1f},    {1.0f, -1, 0.999f, 0.0f},
                          {1.0f, 5000, 1.0f, 0.0f}};
  const int n_chains = (int)(sizeof chains / sizeof chains[0]);
  for (const int64_t n : {int64_t(1000), int64_t(128256)}) {
    const int64_t stride = n + 3, rows = 64;
    // rows of three spreads: flat (every chain's mass past any shortlist), moderate, peaked
    std::vector<float> x((size_t)(rows * stride));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> v = randn((size_t)stride, rng, r % 3 == 0 ? 0.3f : r % 3 == 1 ? 2.0f : 6.0f);
      std::copy(v.begin(), v.end(), x.begin() + r * stride);
    }
    x[(size_t)(1 * stride + 3)] = x[(size_t)(1 * stride + 30)] = 40.0f;  // a tie at the top
    std::vector<sample_spec> specs((size_t)rows);
    for (int64_t r = 0; r < rows; ++r) {
      const chain& c = chains[r % n_chains];
      sample_spec& s = specs[(size_t)r];
      s.temperature = c.temperature, s.top_k = c.top_k, s.top_p = c.top_p, s.min_p = c.min_p;
      s.u01 = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      if (r % 2 == 1) s.edits = edits, s.n_edits = (int32_t)(sizeof edits / sizeof edits[0]);
    }
    buf gx(*be.gpu, x);
    std::vector<int32_t> got((size_t)rows, -1), alone((size_t)rows, -1);
    be.gpu->sample_rows(gx.p(), rows, stride, n, specs.data(), got.data());
    int same = 0;
    sample_scratch scratch;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row(x.begin() + r * stride, x.begin() + r * stride + n);
      const int32_t want = sample_row_host(row.data(), (int32_t)n, specs[(size_t)r], scratch);
      if (got[(size_t)r] == want) ++same;
      else std::printf("  n %lld row %lld (chain %lld): cuda %d, host %d\n", (long long)n, (long long)r,
                       (long long)(r % n_chains), got[(size_t)r], want);
    }
    CHECK_EQ(same, (int)rows);
    // batch invariance: each row alone (a fresh copy: the call edits its rows in place)
    buf gy(*be.gpu, x);
    for (int64_t r = 0; r < rows; ++r) be.gpu->sample_rows(gy.p() + r * stride, 1, stride, n, &specs[(size_t)r], &alone[(size_t)r]);
    CHECK(alone == got);
  }
}

TEST_CASE("cuda fused layer ops: add_rms_norm, rope_qk, store_kv, rope_store_kv, swiglu_matmul == their op sequences, bitwise") {
  REQUIRE_GPU();
  pair be;
  backend& g = *be.gpu;
  std::mt19937 rng(41);
  // add_rms_norm, also with y aliasing r (the models' use)
  for (int64_t n : {64, 2048}) {
    const int64_t rows = 5;
    const std::vector<float> x = randn(rows * n, rng), r = randn(rows * n, rng), w = randn(n, rng);
    buf x1(g, x), r1(g, r), w1(g, w), y1(g, rows * n);
    g.add(r1.p(), x1.p(), x1.p(), rows * n);
    g.rms_norm(x1.p(), w1.p(), y1.p(), rows, n, 1e-5f);
    buf x2(g, x), r2(g, r), y2(g, rows * n);
    g.add_rms_norm(x2.p(), r2.p(), w1.p(), y2.p(), rows, n, 1e-5f);
    CHECK(same_bits(x1.get().data(), x2.get().data(), (size_t)(rows * n)));
    CHECK(same_bits(y1.get().data(), y2.get().data(), (size_t)(rows * n)));
    buf x3(g, x), r3(g, r);
    g.add_rms_norm(x3.p(), r3.p(), w1.p(), r3.p(), rows, n, 1e-5f);  // y = r
    CHECK(same_bits(y1.get().data(), r3.get().data(), (size_t)(rows * n)));
    // the quantized y add_rms_norm leaves for the matmul after it: the bits of quantizing y afresh
    const std::vector<uint8_t> wq = kernels_test::random_rows(ggml_type::Q8_0, 96, n, rng);
    backend_weight bw = g.upload_weight(ggml_type::Q8_0, wq.data(), n, 96);
    buf x4(g, x), r4(g, r), y4(g, rows * n), m4(g, rows * 96), m1(g, rows * 96);
    g.add_rms_norm(x4.p(), r4.p(), w1.p(), y4.p(), rows, n, 1e-5f);
    g.matmul(bw, y4.p(), rows, m4.p());
    g.matmul(bw, y1.p(), rows, m1.p());  // another input: quantized by the matmul
    CHECK(same_bits(m1.get().data(), m4.get().data(), (size_t)(rows * 96)));
    g.release_weight(bw);
  }
  // rope_qk
  {
    const int64_t rows = 7;
    const int32_t hq = 8, hk = 2, hd = 64;
    std::vector<int32_t> pos(rows);
    for (int64_t i = 0; i < rows; ++i) pos[(size_t)i] = (int32_t)(3 * i + 11);
    rope_params p;
    p.n_rot = 64;
    p.freq_base = 500000.0f;
    p.neox = true;
    const std::vector<float> q = randn(rows * hq * hd, rng), k = randn(rows * hk * hd, rng);
    buf q1(g, q), k1(g, k), q2(g, q), k2(g, k);
    g.rope(q1.p(), rows, hq, hd, pos.data(), p);
    g.rope(k1.p(), rows, hk, hd, pos.data(), p);
    g.rope_qk(q2.p(), k2.p(), rows, hq, hk, hd, pos.data(), p);
    CHECK(same_bits(q1.get().data(), q2.get().data(), q.size()));
    CHECK(same_bits(k1.get().data(), k2.get().data(), k.size()));
  }
  // store_kv
  {
    const int64_t n = 6, k_dim = 128, v_dim = 96, slots = 20;
    const std::vector<int64_t> rows = {3, 17, 0, 9, 12, 5};
    const std::vector<float> kn = randn(n * k_dim, rng), vn = randn(n * v_dim, rng);
    buf kn1(g, kn), vn1(g, vn), ks1(g, slots * k_dim), vs1(g, slots * v_dim), ks2(g, slots * k_dim),
        vs2(g, slots * v_dim);
    g.copy_rows(ks1.p(), rows.data(), kn1.p(), nullptr, n, k_dim);
    g.copy_rows(vs1.p(), rows.data(), vn1.p(), nullptr, n, v_dim);
    g.store_kv(ks2.p(), vs2.p(), rows.data(), kn1.p(), vn1.p(), n, k_dim, v_dim);
    CHECK(same_bits(ks1.get().data(), ks2.get().data(), (size_t)(slots * k_dim)));
    CHECK(same_bits(vs1.get().data(), vs2.get().data(), (size_t)(slots * v_dim)));
  }
  // rope_store_kv: rope_qk then store_kv (both rope styles, a partial rotation, v wider than k)
  for (const bool neox : {true, false}) {
    const int64_t n = 5, slots = 16;
    const int32_t hq = 6, hk = 2, hd = 64, n_rot = neox ? 64 : 32;
    const int64_t k_dim = hk * hd, v_dim = 3 * 40;
    const std::vector<int64_t> rows = {7, 0, 15, 3, 9};
    std::vector<int32_t> pos = {0, 5, 6, 130, 4000};
    rope_params p;
    p.n_rot = n_rot;
    p.freq_base = neox ? 1000000.0f : 10000.0f;
    p.neox = neox;
    const std::vector<float> q = randn(n * hq * hd, rng), k = randn(n * k_dim, rng), v = randn(n * v_dim, rng);
    const std::vector<float> ks0 = randn(slots * k_dim, rng), vs0 = randn(slots * v_dim, rng);
    buf q1(g, q), k1(g, k), v1(g, v), ks1(g, ks0), vs1(g, vs0);
    g.rope_qk(q1.p(), k1.p(), n, hq, hk, hd, pos.data(), p);
    g.store_kv(ks1.p(), vs1.p(), rows.data(), k1.p(), v1.p(), n, k_dim, v_dim);
    buf q2(g, q), k2(g, k), v2(g, v), ks2(g, ks0), vs2(g, vs0);
    g.rope_store_kv(q2.p(), k2.p(), v2.p(), n, hq, hk, hd, pos.data(), p, ks2.p(), vs2.p(), rows.data(), v_dim);
    CHECK(same_bits(q1.get().data(), q2.get().data(), q.size()));
    CHECK(same_bits(k1.get().data(), k2.get().data(), k.size()));
    CHECK(same_bits(ks1.get().data(), ks2.get().data(), ks0.size()));
    CHECK(same_bits(vs1.get().data(), vs2.get().data(), vs0.size()));
  }
  // swiglu_matmul: quantized (one-token and tensor-core paths) and float weights
  for (ggml_type type : {ggml_type::Q4_K, ggml_type::Q6_K, ggml_type::Q8_0, ggml_type::F16}) {
    const int64_t n_in = 512, n_out = 96;
    const std::vector<uint8_t> w = kernels_test::random_rows(type, n_out, n_in, rng);
    backend_weight gw = g.upload_weight(type, w.data(), n_in, n_out);
    for (int64_t n_rows : {1, 5, 40}) {
      const std::vector<float> gate = randn(n_rows * n_in, rng), up = randn(n_rows * n_in, rng);
      buf g1(g, gate), u1(g, up), y1(g, n_rows * n_out), g2(g, gate), y2(g, n_rows * n_out);
      g.swiglu(g1.p(), u1.p(), g1.p(), n_rows * n_in);
      g.matmul(gw, g1.p(), n_rows, y1.p());
      g.swiglu_matmul(gw, g2.p(), u1.p(), n_rows, y2.p());
      CHECK(same_bits(g1.get().data(), g2.get().data(), gate.size()));
      CHECK(same_bits(y1.get().data(), y2.get().data(), (size_t)(n_rows * n_out)));
    }
    g.release_weight(gw);
  }
}

namespace {

struct window_shape { int64_t n_past, n_tokens; };

// attention_paged of every shape x window, every store type and head dims 64 / 128 / 256 (wider heads: f32 stores,
// the per-row kernel), causal or not, against the CPU's plain reference attention_paged_ref within
// attention_tolerance; positions below the first row's window hold NaN (window_store), so a kernel that read one
// (even to mask it) puts NaN into its output. False (after printing the case) on any miss.
bool windowed_attention_matches_reference(pair& be, std::mt19937& rng, const std::vector<window_shape>& shapes,
                                          const std::vector<int32_t>& windows, bool causal) {
  bool ok = true;
  for (const kv_type kv : k_cuda_kv_types)
    for (const int32_t hd : {64, 128, 256}) {
      if (hd > 128 && kv != kv_type::f32) continue;
      for (const window_shape s : shapes)
        for (const int32_t window : windows) {
          attention_params p = attention_shape(s.n_tokens, s.n_past, 8, 2, hd, 8, 8);
          p.causal = causal;
          p.window = window;
          const int64_t n_pos = s.n_past + s.n_tokens, q_row = 8 * (int64_t)hd;
          window_store st({n_pos}, {window_start(s.n_past, window)}, 2, hd, kv, rng);  // rows as attention_shape's
          const paged_attention_params pp = st.seq(0, p);
          const std::vector<float> q = randn((size_t)(s.n_tokens * q_row), rng), ks = kv_store_of(st.k, kv),
                                   vs = kv_store_of(st.v, kv);
          buf gq(*be.gpu, q), gk(*be.gpu, ks), gv(*be.gpu, vs), go(*be.gpu, s.n_tokens * q_row);
          be.gpu->attention_paged(pp, gq.p(), gk.p(), gv.p(), go.p());
          std::vector<float> ref((size_t)(s.n_tokens * q_row));
          attention_paged_ref(pp, q.data(), ks.data(), vs.data(), ref.data());
          const double err = max_rel(go.get(), ref);
          if (!(err <= attention_tolerance(kv))) {
            std::printf("  %s store, hd %d, %lld %s rows after %lld, window %d: max rel err vs the reference %.2e\n",
                        kv_name(kv), hd, (long long)s.n_tokens, causal ? "causal" : "non-causal", (long long)s.n_past,
                        window, err);
            ok = false;
          }
        }
    }
  return ok;
}

}  // namespace

// Sliding-window attention (attention_params::window) against the CPU's plain reference (each query over
// [max(0, P - window + 1), P]): the tensor-core rows shape (prompts), the split-K decode shape (one row over a long
// context) and the per-row kernel (256-dim heads, f32 stores), every store type; nothing below a window is read.
TEST_CASE("cuda sliding-window attention: prompts and decode rows, every store type, as the CPU reference; nothing below a window is read") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(51);
  // a prompt; a prompt chunk after 200 positions (its rows' windows cross the 256-position chunk boundary); decode
  // rows deep into a context (up to 8 chunks, merged). Windows: one position, under a block (16), across blocks,
  // across chunks (256), a long window, past every context.
  CHECK(windowed_attention_matches_reference(be, rng, {{0, 100}, {200, 120}, {2000, 1}, {700, 1}},
                                             {1, 7, 40, 300, 1024, 1 << 20}, /*causal=*/true));
}

// Batch invariance under a window: a prompt's rows in one launch (rows shape) have the bits of each row alone
// (split shape) and of the prompt in uneven pieces; sequences in one attention_paged_batch launch (a prompt with
// decode rows: rows shape; decode rows only: split shape) the bits of each alone; a contiguous cache the paged
// store's bits; and a window as long as every context is no window at all (the same arithmetic).
TEST_CASE("cuda sliding-window attention: batch-invariant (rows alone, pieces, sequences alone), paged == contiguous, a window past the context == none") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(52);
  const int32_t heads = 8, kvh = 2;
  for (const kv_type kv : {kv_type::f32, kv_type::f16, kv_type::bf16})
    for (const int32_t hd : {64, 128, 256}) {
      if (hd > 128 && kv != kv_type::f32) continue;
      const int64_t q_row = (int64_t)heads * hd;
      for (const int32_t window : {7, 40, 300}) {
        // sequence 0: a prompt of 70 rows after 260 positions; 1: a prompt of 50; 2..4: decode rows
        const std::vector<int64_t> n_past = {260, 0, 1500, 37, 600}, n_tok = {70, 50, 1, 1, 1};
        std::vector<int64_t> n_pos, poison;
        for (size_t s = 0; s < n_past.size(); ++s) {
          n_pos.push_back(n_past[s] + n_tok[s]);
          poison.push_back(window_start(n_past[s], window));
        }
        window_store st(n_pos, poison, kvh, hd, kv, rng);
        attention_params a = attention_shape(1, 0, heads, kvh, hd, 8, 8);  // the store's rows
        a.window = window;
        buf gk(*be.gpu, kv_store_of(st.k, kv)), gv(*be.gpu, kv_store_of(st.v, kv));
        int64_t n_q = 0;
        for (int64_t t : n_tok) n_q += t;
        const std::vector<float> q = randn((size_t)(n_q * q_row), rng);
        buf gq(*be.gpu, q);
        // one call of n rows of sequence s from its row t0 (query rows from q row `at`)
        const auto run = [&](size_t s, int64_t t0, int64_t n, int64_t at, int32_t w) {
          attention_params x = a;
          x.n_past = n_past[s] + t0;
          x.n_tokens = n;
          x.window = w;
          buf out(*be.gpu, n * q_row);
          be.gpu->attention_paged(st.seq(s, x), gq.p() + at * q_row, gk.p(), gv.p(), out.p());
          return out.get();
        };
        const std::vector<float> prompt = run(0, 0, n_tok[0], 0, window);
        bool alone = true, pieces = true;
        for (int64_t t = 0; t < n_tok[0]; ++t) {
          alone = alone && same_bits(run(0, t, 1, t, window).data(), prompt.data() + t * q_row, (size_t)q_row);
        }
        for (int64_t t = 0, len = 3; t < n_tok[0]; t += len, len = len == 3 ? 5 : 3) {
          const int64_t n = std::min<int64_t>(len, n_tok[0] - t);
          pieces = pieces && same_bits(run(0, t, n, t, window).data(), prompt.data() + t * q_row, (size_t)(n * q_row));
        }
        // every sequence in one launch, then decode rows only (sequences 2..4) in one launch
        bool batched = true;
        for (const size_t first : {size_t(0), size_t(2)}) {
          std::vector<paged_attention_params> seqs;
          int64_t at0 = 0, rows = 0;
          for (size_t s = 0; s < n_past.size(); ++s) {
            if (s < first) {
              at0 += n_tok[s];
              continue;
            }
            attention_params x = a;
            x.n_past = n_past[s];
            x.n_tokens = n_tok[s];
            seqs.push_back(st.seq(s, x));
            rows += n_tok[s];
          }
          buf out(*be.gpu, rows * q_row);
          be.gpu->attention_paged_batch(seqs.data(), (int64_t)seqs.size(), gq.p() + at0 * q_row, gk.p(), gv.p(), out.p());
          const std::vector<float> all = out.get();
          for (size_t s = first, at = (size_t)at0; s < n_past.size(); at += (size_t)n_tok[s], ++s) {
            const std::vector<float> one = run(s, 0, n_tok[s], (int64_t)at, window);
            batched = batched && same_bits(one.data(), all.data() + (at - at0) * q_row, one.size());
          }
        }
        // a contiguous cache of sequence 0's positions in order (the same stored values)
        attention_params c = a;
        c.n_past = n_past[0];
        c.n_tokens = n_tok[0];
        c.kv = kv;
        buf ck(*be.gpu, kv_store_of(st.contiguous(st.k, 0, n_pos[0]), kv)),
            cv(*be.gpu, kv_store_of(st.contiguous(st.v, 0, n_pos[0]), kv)), co(*be.gpu, n_tok[0] * q_row);
        be.gpu->attention(c, gq.p(), ck.p(), cv.p(), co.p());
        const bool contiguous = same_bits(co.get().data(), prompt.data(), prompt.size());
        std::printf("  %s store, hd %d, window %d: rows alone %s, pieces %s, sequences batched %s, contiguous %s\n",
                    kv_name(kv), hd, window, alone ? "same bits" : "DIFFER", pieces ? "same bits" : "DIFFER",
                    batched ? "same bits" : "DIFFER", contiguous ? "same bits" : "DIFFER");
        CHECK(alone);
        CHECK(pieces);
        CHECK(batched);
        CHECK(contiguous);
      }
      // no poison: a window of every position (or more) is no window
      window_store st({1601}, {0}, kvh, hd, kv, rng);
      attention_params a = attention_shape(1, 1600, heads, kvh, hd, 8, 8);
      buf gk(*be.gpu, kv_store_of(st.k, kv)), gv(*be.gpu, kv_store_of(st.v, kv));
      for (const int64_t n_tokens : {int64_t(1), int64_t(120)}) {
        a.n_tokens = n_tokens;
        a.n_past = 1601 - n_tokens;
        buf gq(*be.gpu, randn((size_t)(n_tokens * q_row), rng)), o0(*be.gpu, n_tokens * q_row), o1(*be.gpu, n_tokens * q_row);
        a.window = 0;
        be.gpu->attention_paged(st.seq(0, a), gq.p(), gk.p(), gv.p(), o0.p());
        a.window = 1601;
        be.gpu->attention_paged(st.seq(0, a), gq.p(), gk.p(), gv.p(), o1.p());
        CHECK(same_bits(o0.get().data(), o1.get().data(), (size_t)(n_tokens * q_row)));
      }
    }
}

// A windowed decode step recorded as a step graph: the first step runs op by op, the second is captured, the rest
// replay; every step's output has the bits of the same launch outside a step.
TEST_CASE("cuda sliding-window attention: decode steps replayed from a step graph have the bits of op-by-op launches") {
  REQUIRE_GPU();
  pair be;
  backend& g = *be.gpu;
  std::mt19937 rng(53);
  const int32_t heads = 8, kvh = 2, hd = 128, window = 256;
  const std::vector<int64_t> n_pos = {1501, 38, 601, 300};
  std::vector<int64_t> poison;
  for (int64_t n : n_pos) poison.push_back(window_start(n - 1, window));
  window_store st(n_pos, poison, kvh, hd, kv_type::f16, rng);
  std::vector<paged_attention_params> seqs;
  for (size_t s = 0; s < n_pos.size(); ++s) {
    attention_params a = attention_shape(1, n_pos[s] - 1, heads, kvh, hd, 8, 8);
    a.window = window;
    seqs.push_back(st.seq(s, a));
  }
  const int64_t n = (int64_t)seqs.size() * heads * hd;
  buf gk(g, kv_store_of(st.k, kv_type::f16)), gv(g, kv_store_of(st.v, kv_type::f16)), gq(g, n), graphed(g, n),
      eager(g, n);
  const cuda_graph_counts c0 = cuda_step_graph_counts();
  bool same = true;
  for (int step = 0; step < 5; ++step) {
    const std::vector<float> q = randn((size_t)n, rng);
    g.upload(gq.p(), q.data(), n);
    g.graph_begin(0x57494e44);
    g.attention_paged_batch(seqs.data(), (int64_t)seqs.size(), gq.p(), gk.p(), gv.p(), graphed.p());
    g.graph_end();
    g.attention_paged_batch(seqs.data(), (int64_t)seqs.size(), gq.p(), gk.p(), gv.p(), eager.p());
    same = same && same_bits(graphed.get().data(), eager.get().data(), (size_t)n);
  }
  const cuda_graph_counts c1 = cuda_step_graph_counts();
  std::printf("  windowed decode steps: %llu replayed, %llu captured, graphed %s\n",
              (unsigned long long)(c1.replayed - c0.replayed), (unsigned long long)(c1.captured - c0.captured),
              same ? "same bits" : "DIFFER");
  CHECK(c1.replayed - c0.replayed >= 2);
  CHECK(same);
}

TEST_CASE("cuda attention: a negative window, or a batch of sequences with different heads or scales, throws") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(54);
  window_store st({40, 40}, {0, 0}, 2, 64, kv_type::f32, rng);
  attention_params a = attention_shape(4, 36, 8, 2, 64, 8, 8);
  buf gk(*be.gpu, st.k), gv(*be.gpu, st.v), gq(*be.gpu, 8 * 8 * 64), go(*be.gpu, 8 * 8 * 64);
  paged_attention_params pp = st.seq(0, a);
  pp.attn.window = -1;
  CHECK_THROWS_WITH(be.gpu->attention_paged(pp, gq.p(), gk.p(), gv.p(), go.p()), "sliding window");
  pp.attn.causal = false;
  CHECK_THROWS_WITH(be.gpu->attention_paged(pp, gq.p(), gk.p(), gv.p(), go.p()), "sliding window");
  // different windows and causality share a batch (launches of their own); different scales do not, and a bad
  // sequence after a good one fails the call before any launch
  paged_attention_params two[2] = {st.seq(0, a), st.seq(1, a)};
  two[1].attn.window = 8;
  two[1].attn.causal = false;
  be.gpu->attention_paged_batch(two, 2, gq.p(), gk.p(), gv.p(), go.p());
  two[1].attn.scale *= 2.0f;
  CHECK_THROWS_WITH(be.gpu->attention_paged_batch(two, 2, gq.p(), gk.p(), gv.p(), go.p()), "same heads");
}

// Non-causal attention with and without a sliding window (gemma3's image spans: the row at P attends positions
// [max(0, P - window + 1), n_past + n_tokens)) against the CPU's plain reference, every store type and each kernel:
// the tensor-core rows shape (a span of many rows), the split shape (one row over a long context), the per-row
// kernel (256-dim heads, f32 stores); nothing below a window is read.
TEST_CASE("cuda non-causal attention: with and without a window, every store type, as the CPU reference; nothing below a window is read") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(55);
  // a span from position 0; a span after 200 positions (windows crossing the 256-position chunk boundary); a
  // one-row span deep in a context (several chunks, merged); a span past 2 chunks. Windows: one position, under a
  // block (16), across blocks, across chunks (256), past every context; none.
  CHECK(windowed_attention_matches_reference(be, rng, {{0, 100}, {200, 120}, {700, 1}, {530, 64}},
                                             {1, 7, 40, 300, 1 << 20, 0}, /*causal=*/false));
}

// A prompt chunk with an image span as the engine batches it (sequence 0: causal rows, the span's non-causal rows at
// n_past = their start, causal rows again) beside other sequences' decode rows, in one attention_paged_batch call
// (one launch per run of equal causality): every item has the bits of its own call; the chunk's causal rows those of
// one causal call over the whole chunk; the span's rows the CPU reference's values (within attention_tolerance). With
// and without a window, every store type, each kernel.
TEST_CASE("cuda attention_paged_batch: causal and non-causal segments mixed with decode rows == each alone, as the CPU reference") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(56);
  const int32_t heads = 8, kvh = 2;
  bool ok = true;
  for (const kv_type kv : k_cuda_kv_types)
    for (const int32_t hd : {64, 128, 256}) {
      if (hd > 128 && kv != kv_type::f32) continue;
      const int64_t q_row = (int64_t)heads * hd;
      for (const int32_t window : {0, 7, 40}) {
        // sequence 0: a chunk of 80 rows after 30 positions, cut at rows 7 and 71 (a 64-row image span);
        // sequences 1, 2: decode rows
        const int64_t chunk_past = 30, chunk_rows = 80, cut[4] = {0, 7, 71, 80};
        const std::vector<int64_t> n_pos = {chunk_past + chunk_rows, 601, 38};
        window_store st(n_pos, {0, 0, 0}, kvh, hd, kv, rng);
        const attention_params a = attention_shape(1, 0, heads, kvh, hd, 8, 8);  // the store's rows
        std::vector<paged_attention_params> items;
        for (int g = 0; g < 3; ++g) {
          attention_params x = a;
          x.n_past = chunk_past + cut[g];
          x.n_tokens = cut[g + 1] - cut[g];
          x.causal = g != 1;
          x.window = window;
          items.push_back(st.seq(0, x));
        }
        for (size_t s = 1; s < n_pos.size(); ++s) {
          attention_params x = a;
          x.n_past = n_pos[s] - 1;
          x.window = window;
          items.push_back(st.seq(s, x));
        }
        const int64_t n_q = chunk_rows + 2;
        const std::vector<float> q = randn((size_t)(n_q * q_row), rng), ks = kv_store_of(st.k, kv),
                                 vs = kv_store_of(st.v, kv);
        buf gq(*be.gpu, q), gk(*be.gpu, ks), gv(*be.gpu, vs), go(*be.gpu, n_q * q_row);
        be.gpu->attention_paged_batch(items.data(), (int64_t)items.size(), gq.p(), gk.p(), gv.p(), go.p());
        const std::vector<float> all = go.get();
        bool alone = true, reference = true;
        int64_t at = 0;
        for (const paged_attention_params& it : items) {
          const int64_t n = it.attn.n_tokens * q_row;
          buf one(*be.gpu, n);
          be.gpu->attention_paged(it, gq.p() + at, gk.p(), gv.p(), one.p());
          alone = alone && same_bits(one.get().data(), all.data() + at, (size_t)n);
          std::vector<float> ref((size_t)n);
          attention_paged_ref(it, q.data() + at, ks.data(), vs.data(), ref.data());
          const std::vector<float> got(all.begin() + at, all.begin() + at + n);
          reference = reference && max_rel(got, ref) <= attention_tolerance(kv);
          at += n;
        }
        // the chunk as one causal call: its causal segments' rows
        attention_params c = a;
        c.n_past = chunk_past;
        c.n_tokens = chunk_rows;
        c.window = window;
        buf gc(*be.gpu, chunk_rows * q_row);
        be.gpu->attention_paged(st.seq(0, c), gq.p(), gk.p(), gv.p(), gc.p());
        const std::vector<float> causal = gc.get();
        const bool causal_rows = same_bits(causal.data(), all.data(), (size_t)(cut[1] * q_row)) &&
                                 same_bits(causal.data() + cut[2] * q_row, all.data() + cut[2] * q_row,
                                           (size_t)((cut[3] - cut[2]) * q_row));
        if (!(alone && reference && causal_rows)) {
          std::printf("  %s store, hd %d, window %d: items alone %s, reference %s, causal rows %s\n", kv_name(kv), hd,
                      window, alone ? "same bits" : "DIFFER", reference ? "within tolerance" : "OUTSIDE",
                      causal_rows ? "same bits" : "DIFFER");
          ok = false;
        }
      }
    }
  CHECK(ok);
}

// gemma3's GEGLU: the gelu op's value (the same expression, so the same bits) times up, rounded once; within 2e-6 of
// a double-precision tanh-form computation (relative to the output's scale, as gelu against the CPU); huge |gate|
// safe; y may alias gate or up.
TEST_CASE("cuda geglu: gelu(gate) * up with the gelu op's bits, within 2e-6 of a double-precision host computation, in place") {
  REQUIRE_GPU();
  pair be;
  backend& g = *be.gpu;
  std::mt19937 rng(55);
  std::vector<float> gate = randn(10007, rng, 4.0f);
  for (float x : {30.0f, 100.0f, 1e13f, 1e20f, 3e38f}) gate.push_back(x), gate.push_back(-x);
  const int64_t n = (int64_t)gate.size();
  const std::vector<float> up = randn((size_t)n, rng);
  buf gg(g, gate), gu(g, up), gy(g, n), gl(g, n);
  g.geglu(gg.p(), gu.p(), gy.p(), n);
  g.gelu(gg.p(), gl.p(), n);
  const std::vector<float> y = gy.get(), gl_y = gl.get();
  std::vector<float> want((size_t)n);
  for (size_t i = 0; i < want.size(); ++i) want[i] = gl_y[i] * up[i];
  CHECK(same_bits(y.data(), want.data(), want.size()));
  std::vector<float> ref(10007), got(y.begin(), y.begin() + 10007);
  for (size_t i = 0; i < ref.size(); ++i) {
    const double x = gate[i];
    ref[i] = (float)(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))) * up[i]);
  }
  const double err = max_rel(got, ref);
  std::printf("  geglu: max rel err vs the double-precision host computation %.2e\n", err);
  CHECK(err <= 2e-6);
  g.geglu(gg.p(), gu.p(), gg.p(), n);  // y = gate
  CHECK(same_bits(gg.get().data(), y.data(), y.size()));
  buf gg2(g, gate);
  g.geglu(gg2.p(), gu.p(), gu.p(), n);  // y = up
  CHECK(same_bits(gu.get().data(), y.data(), y.size()));
}
