// cpu_matmul_expert (llama.cpp's ggml_mul_mat_id arithmetic): the AVX2 kernels equal their plain references
// bit for bit (F32 / F16 vec_dot order, Q4_K repacked-gemv order), every other case equals cpu_matmul, results
// do not depend on token count, token order or threads; backend::matmul_expert picks the expert's slice of a
// stacked weight and rejects experts that do not fit; scale_rows multiplies rows.
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_expert.h"
#include "harness.h"
#include "kernels_util.h"

using namespace spindle;
using namespace kernels_test;

namespace {

// Reference value of every (t, o) for the type's expert arithmetic.
std::vector<float> reference(ggml_type type, const std::vector<uint8_t>& w, int64_t n_out, int64_t n_in,
                             const std::vector<float>& x, int64_t n_tokens) {
  const std::vector<uint8_t> act = convert_activations(type, x, n_tokens, n_in);
  const size_t w_row = cpu_row_bytes(type, n_in), a_row = cpu_row_bytes(cpu_activation_type(type), n_in);
  std::vector<float> y(n_tokens * n_out);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t o = 0; o < n_out; ++o) {
      const uint8_t* wr = w.data() + o * w_row;
      const uint8_t* xr = act.data() + t * a_row;
      float v = 0.0f;
      if (type == ggml_type::F32) v = expert_dot_f32_ref(n_in, (const float*)wr, (const float*)xr);
      if (type == ggml_type::F16) v = expert_dot_f16_ref(n_in, (const uint16_t*)wr, (const uint16_t*)xr);
      if (type == ggml_type::Q4_K) v = expert_dot_q4_K_gemv_ref(n_in, wr, xr);
      y[t * n_out + o] = v;
    }
  }
  return y;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("matmul_expert: AVX2 kernels equal the ggml_mul_mat_id references bit for bit") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 expert kernels need a CPU with AVX2");
  std::mt19937 rng(5);
  thread_pool pool(2);
  struct shape { ggml_type type; int64_t n_out, n_in; };
  // F32 row lengths cover ggml's tail paths: whole 32-steps, +8 (unfused), +12 (8 + 4 unfused), +13 (+1 fma)
  const shape shapes[] = {{ggml_type::F32, 24, 64}, {ggml_type::F32, 9, 72}, {ggml_type::F32, 16, 44},
                          {ggml_type::F32, 8, 77}, {ggml_type::F32, 5, 7},   {ggml_type::F16, 16, 96},
                          {ggml_type::F16, 8, 45}, {ggml_type::Q4_K, 16, 256}, {ggml_type::Q4_K, 24, 768}};
  for (const shape& s : shapes) {
    for (int64_t n_tokens : {1, 3, 9}) {
      const std::vector<uint8_t> w = random_rows(s.type, s.n_out, s.n_in, rng);
      const std::vector<float> x = random_activations(n_tokens, s.n_in, rng);
      std::vector<float> y(n_tokens * s.n_out, -1.0f);
      cpu_matmul_expert_at_level(cpu_level::avx2, pool, s.type, w.data(), s.n_out, s.n_in, x.data(), n_tokens,
                                 y.data());
      CHECK(bitwise_equal(y, reference(s.type, w, s.n_out, s.n_in, x, n_tokens)));
    }
  }
}

TEST_CASE("matmul_expert: Q4_K gemv order differs from the gemm order of cpu_matmul only in rounding") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the AVX2 Q4_K gemv needs a CPU with AVX2");
  std::mt19937 rng(6);
  thread_pool pool(1);
  const int64_t n_out = 32, n_in = 1024, n_tokens = 4;
  const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, n_out, n_in, rng);
  const std::vector<float> x = random_activations(n_tokens, n_in, rng);
  std::vector<float> a(n_tokens * n_out), b(n_tokens * n_out);
  cpu_matmul_expert_at_level(cpu_level::avx2, pool, ggml_type::Q4_K, w.data(), n_out, n_in, x.data(), n_tokens, a.data());
  cpu_matmul_at_level(cpu_level::avx2, pool, ggml_type::Q4_K, w.data(), n_out, n_in, x.data(), n_tokens, b.data());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK_NEAR(a[i], b[i], 1e-5 * (std::fabs(b[i]) + 1.0));
    differ += !same_bits(a[i], b[i]);
  }
  CHECK(differ > 0);  // the two orders really are different, so the test above exercises the gemv order
}

TEST_CASE("matmul_expert: other types and levels compute what cpu_matmul computes") {
  std::mt19937 rng(7);
  thread_pool pool(2);
  for (cpu_level level : supported_levels()) {
    for (ggml_type type : weight_types()) {
      const bool own = level != cpu_level::scalar &&
                       (type == ggml_type::F32 || type == ggml_type::F16 || type == ggml_type::Q4_K);
      const int64_t n_in = cpu_block_size(type) == 1 ? 64 : 256, n_out = own ? 12 : 16, n_tokens = 5;
      if (own && type != ggml_type::Q4_K) continue;  // covered bit for bit above
      // Q4_K with n_out % 8 != 0: llama.cpp does not repack it, so neither kernel of this file applies
      const std::vector<uint8_t> w = random_rows(type, n_out, n_in, rng);
      const std::vector<float> x = random_activations(n_tokens, n_in, rng);
      std::vector<float> a(n_tokens * n_out), b(n_tokens * n_out);
      cpu_matmul_expert_at_level(level, pool, type, w.data(), n_out, n_in, x.data(), n_tokens, a.data());
      cpu_matmul_at_level(level, pool, type, w.data(), n_out, n_in, x.data(), n_tokens, b.data());
      CHECK(bitwise_equal(a, b));
    }
  }
}

TEST_CASE("matmul_expert: a token's outputs do not depend on the batch or the threads") {
  std::mt19937 rng(8);
  thread_pool one(1), two(2);
  for (ggml_type type : {ggml_type::F32, ggml_type::F16, ggml_type::Q4_K, ggml_type::Q6_K, ggml_type::Q8_0}) {
    const int64_t n_in = 512, n_out = 64, n_tokens = 11;
    const std::vector<uint8_t> w = random_rows(type, n_out, n_in, rng);
    const std::vector<float> x = random_activations(n_tokens, n_in, rng);
    std::vector<float> all(n_tokens * n_out);
    cpu_matmul_expert(two, type, w.data(), n_out, n_in, x.data(), n_tokens, all.data());
    for (int64_t t = n_tokens - 1; t >= 0; --t) {  // each token alone, on one thread, in reverse order
      std::vector<float> y(n_out);
      cpu_matmul_expert(one, type, w.data(), n_out, n_in, x.data() + t * n_in, 1, y.data());
      CHECK(std::memcmp(y.data(), all.data() + t * n_out, n_out * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("backend::matmul_expert: expert e is rows [e * n_out, (e + 1) * n_out) of the stacked weight") {
  std::mt19937 rng(9);
  auto be = make_cpu_backend(2);
  const int64_t n_in = 256, n_out = 16, n_expert = 4, n_tokens = 3;
  for (ggml_type type : {ggml_type::F32, ggml_type::Q4_K}) {
    const std::vector<uint8_t> w = random_rows(type, n_out * n_expert, n_in, rng);
    const backend_weight bw = be->upload_weight(type, w.data(), n_in, n_out * n_expert);
    const std::vector<float> x = random_activations(n_tokens, n_in, rng);
    thread_pool pool(1);
    const size_t slice = cpu_row_bytes(type, n_in) * n_out;
    for (int64_t e = 0; e < n_expert; ++e) {
      std::vector<float> y(n_tokens * n_out), want(n_tokens * n_out);
      be->matmul_expert(bw, e, n_out, x.data(), n_tokens, y.data());
      cpu_matmul_expert(pool, type, w.data() + e * slice, n_out, n_in, x.data(), n_tokens, want.data());
      CHECK(bitwise_equal(y, want));
    }
    std::vector<float> y(n_tokens * n_out);
    CHECK_THROWS_WITH(be->matmul_expert(bw, n_expert, n_out, x.data(), n_tokens, y.data()), "does not fit");
    CHECK_THROWS_WITH(be->matmul_expert(bw, -1, n_out, x.data(), n_tokens, y.data()), "does not fit");
    CHECK_THROWS_WITH(be->matmul_expert(bw, 0, 24, x.data(), n_tokens, y.data()), "does not fit");
  }
}

TEST_CASE("backend::scale_rows multiplies each row by its factor") {
  auto be = make_cpu_backend(1);
  std::vector<float> x = {1, 2, 3, -4, 5, 6}, s = {0.5f, -2.0f};
  be->scale_rows(x.data(), s.data(), 2, 3);
  const std::vector<float> want = {0.5f, 1.0f, 1.5f, 8.0f, -10.0f, -12.0f};
  CHECK(bitwise_equal(x, want));
}
