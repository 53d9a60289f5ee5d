// CUDA matmul / matmul_expert / get_rows against the CPU backend and a double-precision reference on the
// dequantized weights: for every weight type the GPU's error must be no worse than twice the CPU's (the CPU
// computes with llama.cpp's activation formats; the GPU quantizes activations per 32 values for q8_0 / q4_0 and
// per 256 for the k-quants, as llama.cpp's q8_K, with f32 scales),
// get_rows must equal the CPU's dequantization bit for bit, and every output row must have the same bits
// whether its token is alone or in a call with others (batch invariance).
#include <cstdlib>
#include <cstring>
#include <random>

#include "backend/cpu/matmul.h"
#include "gpu_test_util.h"
#include "kernels_util.h"

using namespace gpu_test;

namespace {

// y_ref[t, o] = sum_i deq(W)[o, i] * x[t, i] in double.
std::vector<double> reference(ggml_type type, const std::vector<uint8_t>& w, int64_t n_in, int64_t row0,
                              int64_t n_out, const std::vector<float>& x, int64_t n_tok) {
  const size_t row_bytes = ggml_row_size(type, (uint64_t)n_in);
  std::vector<float> deq((size_t)n_in);
  std::vector<double> y((size_t)(n_tok * n_out));
  for (int64_t o = 0; o < n_out; ++o) {
    cpu_dequantize_row(type, w.data() + (row0 + o) * row_bytes, deq.data(), n_in);
    for (int64_t t = 0; t < n_tok; ++t) {
      double s = 0;
      for (int64_t i = 0; i < n_in; ++i) s += (double)deq[i] * x[t * n_in + i];
      y[t * n_out + o] = s;
    }
  }
  return y;
}

struct shape {
  int64_t n_in, n_out;
};

// 256-value super-block types (the k-quants, iq4_xs): rows of whole super-blocks.
bool super_block(ggml_type t) { return ggml_type_info((uint32_t)t)->block_size == 256; }

std::vector<shape> shapes_for(ggml_type t) {
  const bool k_quant = super_block(t);
  const bool is_float = t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16;
  std::vector<shape> s = {{k_quant ? 256 : 64, 80}, {k_quant ? 1024 : 512, 1000}, {2048, 96}};
  if (is_float) s.push_back({44, 33});  // n_in not a multiple of the 8-value unit
  return s;
}

const char* type_name(ggml_type t) { return ggml_type_info((uint32_t)t)->name; }

}  // namespace

TEST_CASE("cuda matmul: every weight type vs CPU and reference, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(7);
  for (ggml_type type : kernels_test::weight_types()) {
    if (!be.gpu->supports_type(type)) continue;  // the CPU-only types (reference kernels): see the last case
    for (const shape& sh : shapes_for(type)) {
      const int64_t n_tok = 13;
      const std::vector<uint8_t> w = kernels_test::random_rows(type, sh.n_out, sh.n_in, rng);
      const std::vector<float> x = kernels_test::random_activations(n_tok, sh.n_in, rng);
      backend_weight cw = be.cpu->upload_weight(type, w.data(), sh.n_in, sh.n_out);
      backend_weight gw = be.gpu->upload_weight(type, w.data(), sh.n_in, sh.n_out);
      buf cx(*be.cpu, x), gx(*be.gpu, x), cy(*be.cpu, n_tok * sh.n_out), gy(*be.gpu, n_tok * sh.n_out);
      be.cpu->matmul(cw, cx.p(), n_tok, cy.p());
      be.gpu->matmul(gw, gx.p(), n_tok, gy.p());
      const std::vector<double> ref = reference(type, w, sh.n_in, 0, sh.n_out, x, n_tok);
      const std::vector<float> yc = cy.get(), yg = gy.get();
      const double ec = rel_err(yc, ref), eg = rel_err(yg, ref);
      std::printf("  matmul %-5s %5lld x %5lld: rel err gpu %.2e cpu %.2e\n", type_name(type), (long long)sh.n_out,
                  (long long)sh.n_in, eg, ec);
      CHECK(eg <= 2 * ec + 1e-6);
      for (int64_t n : {1, 2, 3, 5}) {  // the first n tokens alone: same bits as inside the 13-token call
        buf gy1(*be.gpu, n * sh.n_out);
        be.gpu->matmul(gw, gx.p(), n, gy1.p());
        const std::vector<float> y1 = gy1.get();
        CHECK(same_bits(y1.data(), yg.data(), (size_t)(n * sh.n_out)));
      }
      be.cpu->release_weight(cw);
      be.gpu->release_weight(gw);
    }
  }
}

TEST_CASE("cuda matmul_expert: expert slices vs reference, batch-invariant") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(11);
  for (ggml_type type : kernels_test::weight_types()) {
    if (!be.gpu->supports_type(type)) continue;  // the CPU-only types (reference kernels): see the last case
    const bool k_quant = super_block(type);
    const int64_t n_in = k_quant ? 256 : 64, n_expert = 5;
    for (int64_t n_out : {48, 64}) {  // 48: experts straddle the 32-row groups
      const std::vector<uint8_t> w = kernels_test::random_rows(type, n_out * n_expert, n_in, rng);
      const int64_t n_tok = 6;
      const std::vector<float> x = kernels_test::random_activations(n_tok, n_in, rng);
      backend_weight cw = be.cpu->upload_weight(type, w.data(), n_in, n_out * n_expert);
      backend_weight gw = be.gpu->upload_weight(type, w.data(), n_in, n_out * n_expert);
      buf cx(*be.cpu, x), gx(*be.gpu, x);
      for (int64_t e : {0, 3, 4}) {
        buf cy(*be.cpu, n_tok * n_out), gy(*be.gpu, n_tok * n_out), gy1(*be.gpu, n_out);
        be.cpu->matmul_expert(cw, e, n_out, cx.p(), n_tok, cy.p());
        be.gpu->matmul_expert(gw, e, n_out, gx.p(), n_tok, gy.p());
        be.gpu->matmul_expert(gw, e, n_out, gx.p() + n_in, 1, gy1.p());  // token 1 alone
        const std::vector<double> ref = reference(type, w, n_in, e * n_out, n_out, x, n_tok);
        const std::vector<float> yc = cy.get(), yg = gy.get(), y1 = gy1.get();
        CHECK(rel_err(yg, ref) <= 2 * rel_err(yc, ref) + 1e-6);
        CHECK(same_bits(y1.data(), yg.data() + n_out, (size_t)n_out));
      }
      CHECK_THROWS_WITH(be.gpu->matmul_expert(gw, n_expert, n_out, gx.p(), 1, gx.p()), "does not fit");
      be.cpu->release_weight(cw);
      be.gpu->release_weight(gw);
    }
  }
}

TEST_CASE("cuda get_rows: the CPU's dequantized rows, bit for bit") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(3);
  for (ggml_type type : kernels_test::weight_types()) {
    if (!be.gpu->supports_type(type)) continue;  // the CPU-only types (reference kernels): see the last case
    const bool k_quant = super_block(type);
    const int64_t n_in = k_quant ? 512 : 96, n_rows = 70;
    const std::vector<uint8_t> w = kernels_test::random_rows(type, n_rows, n_in, rng);
    const std::vector<int32_t> ids = {0, 69, 31, 32, 5, 5, 64};
    backend_weight cw = be.cpu->upload_weight(type, w.data(), n_in, n_rows);
    backend_weight gw = be.gpu->upload_weight(type, w.data(), n_in, n_rows);
    buf cy(*be.cpu, (int64_t)ids.size() * n_in), gy(*be.gpu, (int64_t)ids.size() * n_in);
    be.cpu->get_rows(cw, ids.data(), (int64_t)ids.size(), cy.p());
    be.gpu->get_rows(gw, ids.data(), (int64_t)ids.size(), gy.p());
    const std::vector<float> yc = cy.get(), yg = gy.get();
    CHECK(same_bits(yc.data(), yg.data(), yc.size()));
    const int32_t bad = (int32_t)n_rows;
    CHECK_THROWS_WITH(be.gpu->get_rows(gw, &bad, 1, gy.p()), "out of range");
    be.cpu->release_weight(cw);
    be.gpu->release_weight(gw);
  }
}

TEST_CASE("cuda matmul: the tensor-core path (many tokens) has the bits of the one-token path, every type it takes") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(17);
  for (ggml_type type : {ggml_type::Q4_K, ggml_type::Q5_K, ggml_type::Q6_K, ggml_type::Q8_0, ggml_type::Q4_0,
                         ggml_type::Q4_1, ggml_type::Q5_0, ggml_type::Q5_1, ggml_type::IQ4_NL, ggml_type::IQ4_XS,
                         ggml_type::Q3_K, ggml_type::Q2_K}) {
    const bool k_quant = super_block(type);
    // rows: one tile, a partial tile, several tiles with few rows per K segment; K: one stage, several, and
    // (q8_0 / q4_0) stages cut short by the K segments
    // (few tiles: K segments in separate blocks, then added; 8192 rows x 130 tokens: enough tiles for one block
    // to add its own segments)
    for (const shape sh : {shape{k_quant ? 256 : 96, 80}, shape{2048, 96}, shape{k_quant ? 1024 : 544, 1000},
                           shape{8192, 64}, shape{k_quant ? 512 : 128, 8192}}) {
      for (int64_t n_tok : {16, 70, 130}) {
        const std::vector<uint8_t> w = kernels_test::random_rows(type, sh.n_out, sh.n_in, rng);
        const std::vector<float> x = kernels_test::random_activations(n_tok, sh.n_in, rng);
        backend_weight gw = be.gpu->upload_weight(type, w.data(), sh.n_in, sh.n_out);
        buf gx(*be.gpu, x), gy(*be.gpu, n_tok * sh.n_out);
        be.gpu->matmul(gw, gx.p(), n_tok, gy.p());
        const std::vector<float> yg = gy.get();
        const std::vector<double> ref = reference(type, w, sh.n_in, 0, sh.n_out, x, n_tok);
        const double err = rel_err(yg, ref);
        std::printf("  mma %-5s %5lld x %5lld, %3lld tokens: rel err %.2e\n", type_name(type), (long long)sh.n_out,
                    (long long)sh.n_in, (long long)n_tok, err);
        CHECK(err <= 3e-2);
        for (int64_t t : {int64_t(0), n_tok / 2, n_tok - 1}) {  // a token alone (the one-token kernel): same bits
          buf gy1(*be.gpu, sh.n_out);
          be.gpu->matmul(gw, gx.p() + t * sh.n_in, 1, gy1.p());
          const std::vector<float> y1 = gy1.get();
          CHECK(same_bits(y1.data(), yg.data() + t * sh.n_out, (size_t)sh.n_out));
        }
        be.gpu->release_weight(gw);
      }
    }
    // experts (rows from a multiple of 32): the same
    const int64_t n_in = k_quant ? 512 : 128, n_out = 64, n_expert = 3, n_tok = 40;
    const std::vector<uint8_t> w = kernels_test::random_rows(type, n_out * n_expert, n_in, rng);
    const std::vector<float> x = kernels_test::random_activations(n_tok, n_in, rng);
    backend_weight gw = be.gpu->upload_weight(type, w.data(), n_in, n_out * n_expert);
    buf gx(*be.gpu, x), gy(*be.gpu, n_tok * n_out), gy1(*be.gpu, n_out);
    be.gpu->matmul_expert(gw, 2, n_out, gx.p(), n_tok, gy.p());
    be.gpu->matmul_expert(gw, 2, n_out, gx.p() + 7 * n_in, 1, gy1.p());
    const std::vector<float> yg = gy.get(), y1 = gy1.get();
    CHECK(rel_err(yg, reference(type, w, n_in, 2 * n_out, n_out, x, n_tok)) <= 3e-2);
    CHECK(same_bits(y1.data(), yg.data() + 7 * n_out, (size_t)n_out));
    be.gpu->release_weight(gw);
  }
}

TEST_CASE("cuda matmul: the eight-lane matvec has the bits of mmv_x32, every super-block type") {
  REQUIRE_GPU();
  pair be;
  std::unique_ptr<backend> x32 = with_env("SPINDLE_CUDA_MMV", "x32", [] { return make_backend("cuda", 0); });
  std::mt19937 rng(23);
  for (ggml_type type : {ggml_type::Q2_K, ggml_type::Q3_K, ggml_type::Q4_K, ggml_type::Q5_K, ggml_type::Q6_K,
                         ggml_type::IQ4_XS}) {
    // K segments 1, 2, 4, 8, 16 (rows x units), rows not a multiple of 4, a row range from row 30 (matmul_expert);
    // all under k_mmv8_max_bytes (larger calls take mmv_x32 either way)
    for (const shape sh : {shape{256, 90}, shape{512, 5001}, shape{1024, 3000}, shape{2048, 2051}, shape{2048, 512},
                           shape{8192, 64}}) {
      const std::vector<uint8_t> w = kernels_test::random_rows(type, sh.n_out, sh.n_in, rng);
      backend_weight a = be.gpu->upload_weight(type, w.data(), sh.n_in, sh.n_out);
      backend_weight b = x32->upload_weight(type, w.data(), sh.n_in, sh.n_out);
      for (int64_t n_tok : {1, 2, 3, 4, 7, 15}) {
        const std::vector<float> x = kernels_test::random_activations(n_tok, sh.n_in, rng);
        buf ax(*be.gpu, x), ay(*be.gpu, n_tok * sh.n_out), bx(*x32, x), by(*x32, n_tok * sh.n_out);
        be.gpu->matmul(a, ax.p(), n_tok, ay.p());
        x32->matmul(b, bx.p(), n_tok, by.p());
        const std::vector<float> ya = ay.get(), yb = by.get();
        CHECK(same_bits(ya.data(), yb.data(), ya.size()));
        if (n_tok == 3 && sh.n_out % 3 == 0) {  // three experts of n_out / 3 rows: expert 1
          const int64_t n_out = sh.n_out / 3;
          buf ey(*be.gpu, n_tok * n_out), fy(*x32, n_tok * n_out);
          be.gpu->matmul_expert(a, 1, n_out, ax.p(), n_tok, ey.p());
          x32->matmul_expert(b, 1, n_out, bx.p(), n_tok, fy.p());
          const std::vector<float> ye = ey.get(), yf = fy.get();
          CHECK(same_bits(ye.data(), yf.data(), ye.size()));
        }
      }
      be.gpu->release_weight(a);
      x32->release_weight(b);
    }
    std::printf("  mmv8 %-5s: bits of mmv_x32 at 1..15 tokens, K segments 1..16\n", type_name(type));
  }
}

TEST_CASE("cuda matmul_group: q / k / v and gate / up in one launch have the bits of separate matmuls") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(29);
  struct group {
    std::vector<ggml_type> types;
    std::vector<int64_t> n_out;
  };
  const int64_t n_in = 2048;
  // a Q4_K_M layer's q / k / v (v in q6_K: one mmv8 launch), gate / up (over k_mmv8_max_bytes: one mmv_x32
  // launch; q8_0 and ragged row counts too), four k-quant weights in one launch, and a group with a float weight
  // (separate launches)
  for (const group& gr : {group{{ggml_type::Q4_K, ggml_type::Q4_K, ggml_type::Q6_K}, {2048, 512, 512}},
                          group{{ggml_type::Q4_K, ggml_type::Q4_K}, {8192, 8192}},
                          group{{ggml_type::Q8_0, ggml_type::Q8_0, ggml_type::Q8_0}, {5000, 8192, 33}},
                          group{{ggml_type::Q6_K, ggml_type::Q4_K, ggml_type::Q6_K, ggml_type::Q4_K}, {90, 1500, 64, 2051}},
                          group{{ggml_type::Q4_K, ggml_type::F16}, {256, 96}}}) {
    const int n = (int)gr.types.size();
    std::vector<backend_weight> ws;
    std::vector<const backend_weight*> wp;
    for (int i = 0; i < n; ++i) {
      const std::vector<uint8_t> w = kernels_test::random_rows(gr.types[i], gr.n_out[i], n_in, rng);
      ws.push_back(be.gpu->upload_weight(gr.types[i], w.data(), n_in, gr.n_out[i]));
    }
    for (const backend_weight& w : ws) wp.push_back(&w);
    for (int64_t n_tok : {1, 3, 8, 15, 40}) {
      const std::vector<float> x = kernels_test::random_activations(n_tok, n_in, rng);
      buf gx(*be.gpu, x);
      std::vector<std::unique_ptr<buf>> grouped, alone;
      std::vector<float*> yp;
      for (int i = 0; i < n; ++i) {
        grouped.push_back(std::make_unique<buf>(*be.gpu, n_tok * gr.n_out[i]));
        alone.push_back(std::make_unique<buf>(*be.gpu, n_tok * gr.n_out[i]));
        yp.push_back(grouped.back()->p());
      }
      be.gpu->matmul_group(wp.data(), yp.data(), n, gx.p(), n_tok);
      for (int i = 0; i < n; ++i) be.gpu->matmul(ws[i], gx.p(), n_tok, alone[i]->p());
      for (int i = 0; i < n; ++i) {
        const std::vector<float> a = grouped[i]->get(), b = alone[i]->get();
        CHECK(same_bits(a.data(), b.data(), a.size()));
      }
    }
    for (backend_weight& w : ws) be.gpu->release_weight(w);
  }
  std::printf("  matmul_group: 5 groups at 1..40 tokens, bits of separate matmuls\n");
}

TEST_CASE("cuda: a weight type it has no kernels for is reported, not computed") {
  REQUIRE_GPU();
  pair be;
  std::mt19937 rng(31);
  for (ggml_type type : kernels_test::weight_types()) {
    if (be.gpu->supports_type(type)) continue;
    CHECK(be.cpu->supports_type(type));
    const std::vector<uint8_t> w = kernels_test::random_rows(type, 32, 256, rng);
    CHECK_THROWS_WITH(be.gpu->upload_weight(type, w.data(), 256, 32), type_name(type));
  }
}
