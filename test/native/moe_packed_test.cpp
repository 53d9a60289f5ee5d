// cpu_matmul_expert over a packed x8 copy (repack.h): the q4_K gemv kernel of matmul_expert_packed.cpp equals
// the plain reference (expert_dot_q4_K_gemv_ref) and the row kernel bit for bit over many shapes, token counts
// and thread counts; the other packed types equal the unpacked path; backend::matmul_expert, which reads the
// expert's groups of the backend's packed copy of the stacked tensor, equals the unpacked kernel per expert.
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/matmul_expert.h"
#include "backend/cpu/repack.h"
#include "harness.h"
#include "kernels_util.h"

using namespace spindle;
using namespace kernels_test;

namespace {

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// y[t, o] = expert_dot_q4_K_gemv_ref(row o, x_t) for every token and row.
std::vector<float> q4_K_reference(const std::vector<uint8_t>& w, int64_t n_out, int64_t n_in,
                                  const std::vector<float>& x, int64_t n_tokens) {
  const std::vector<uint8_t> act = convert_activations(ggml_type::Q4_K, x, n_tokens, n_in);
  const size_t w_row = cpu_row_bytes(ggml_type::Q4_K, n_in);
  const size_t a_row = cpu_row_bytes(cpu_activation_type(ggml_type::Q4_K), n_in);
  std::vector<float> y((size_t)(n_tokens * n_out));
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t o = 0; o < n_out; ++o)
      y[t * n_out + o] = expert_dot_q4_K_gemv_ref(n_in, w.data() + o * w_row, act.data() + t * a_row);
  return y;
}

// The x8 copy of n_out rows (n_out % 8 == 0), packed group by group with the plain packer.
std::vector<uint8_t> pack_q4_K(const std::vector<uint8_t>& w, int64_t n_out, int64_t n_in) {
  const size_t w_row = cpu_row_bytes(ggml_type::Q4_K, n_in);
  std::vector<uint8_t> p(w.size());
  for (int64_t g = 0; g < n_out / k_pack_rows; ++g)
    pack_group_q4_K(w.data() + g * k_pack_rows * w_row, w_row, n_in / QK_K,
                    (block_q4_Kx8*)(p.data() + g * k_pack_rows * w_row));
  return p;
}

}  // namespace

TEST_CASE("matmul_expert packed: q4_K x8 gemv equals the reference and the row kernel bit for bit") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the packed q4_K x8 kernel needs a CPU with AVX2");
  std::mt19937 rng(21);
  thread_pool one(1), two(2);
  struct shape { int64_t n_out, n_in; };
  const shape shapes[] = {{8, 256}, {16, 512}, {24, 768}, {40, 1024}, {64, 256}, {8, 1536}};
  for (const shape& s : shapes) {
    const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, s.n_out, s.n_in, rng);
    const std::vector<uint8_t> wp = pack_q4_K(w, s.n_out, s.n_in);
    for (int64_t n_tokens : {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 64}) {
      const std::vector<float> x = random_activations(n_tokens, s.n_in, rng);
      const std::vector<float> want = q4_K_reference(w, s.n_out, s.n_in, x, n_tokens);
      for (thread_pool* pool : {&one, &two}) {
        for (cpu_level level : supported_levels()) {
          if (level == cpu_level::scalar) continue;  // the scalar level computes plain sums (no packed kernel)
          std::vector<float> packed(want.size(), -1.0f), rows(want.size(), -2.0f);
          cpu_matmul_expert_at_level(level, *pool, ggml_type::Q4_K, w.data(), s.n_out, s.n_in, x.data(), n_tokens,
                                     packed.data(), wp.data());
          cpu_matmul_expert_at_level(level, *pool, ggml_type::Q4_K, w.data(), s.n_out, s.n_in, x.data(), n_tokens,
                                     rows.data());
          CHECK(bits_equal(packed, want));
          CHECK(bits_equal(rows, want));
        }
      }
    }
  }
}

TEST_CASE("matmul_expert packed: a token's outputs do not depend on the batch (q4_K x8)") {
  if (!cpu_level_supported(cpu_level::avx2)) SKIP("the packed q4_K x8 kernel needs a CPU with AVX2");
  std::mt19937 rng(22);
  thread_pool one(1), two(2);
  const int64_t n_out = 32, n_in = 512, n_tokens = 13;
  const std::vector<uint8_t> w = random_rows(ggml_type::Q4_K, n_out, n_in, rng);
  const std::vector<uint8_t> wp = pack_q4_K(w, n_out, n_in);
  const std::vector<float> x = random_activations(n_tokens, n_in, rng);
  std::vector<float> all((size_t)(n_tokens * n_out));
  cpu_matmul_expert(two, ggml_type::Q4_K, w.data(), n_out, n_in, x.data(), n_tokens, all.data(), wp.data());
  for (int64_t t = n_tokens - 1; t >= 0; --t) {  // each token alone, on one thread, in reverse order
    std::vector<float> y((size_t)n_out);
    cpu_matmul_expert(one, ggml_type::Q4_K, w.data(), n_out, n_in, x.data() + t * n_in, 1, y.data(), wp.data());
    CHECK(std::memcmp(y.data(), all.data() + t * n_out, n_out * sizeof(float)) == 0);
  }
}

TEST_CASE("matmul_expert packed: other packed types give the unpacked bits") {
  std::mt19937 rng(23);
  thread_pool two(2);
  int compared = 0;
  for (cpu_level level : supported_levels()) {
    for (ggml_type type : {ggml_type::Q6_K, ggml_type::Q8_0, ggml_type::Q4_0, ggml_type::IQ4_NL, ggml_type::Q5_0, ggml_type::IQ4_XS}) {
      const int64_t n_out = 24, n_in = 512;
      const std::vector<uint8_t> w = random_rows(type, n_out, n_in, rng);
      const std::unique_ptr<packed_weight> pw = cpu_pack_weight(level, two, type, w.data(), n_out, n_in);
      if (!pw || pw->layout() != pack_layout::x8) continue;  // no x8 copy of this type at this level
      for (int64_t n_tokens : {1, 4, 9, 19, 40}) {
        const std::vector<float> x = random_activations(n_tokens, n_in, rng);
        std::vector<float> a((size_t)(n_tokens * n_out), -1.0f), b((size_t)(n_tokens * n_out), -2.0f);
        cpu_matmul_expert_at_level(level, two, type, w.data(), n_out, n_in, x.data(), n_tokens, a.data(), pw->data());
        cpu_matmul_expert_at_level(level, two, type, w.data(), n_out, n_in, x.data(), n_tokens, b.data());
        CHECK(bits_equal(a, b));
        ++compared;
      }
    }
  }
  if (cpu_level_supported(cpu_level::avx2)) CHECK(compared > 0);  // q8_0 has an x8 kernel at AVX2
  else if (compared == 0) SKIP("no packed x8 kernel at the levels of this CPU (they need AVX2)");
}

TEST_CASE("backend::matmul_expert packed: each expert of a stacked weight equals the unpacked kernel") {
  std::mt19937 rng(24);
  auto be = make_cpu_backend(2);
  thread_pool pool(1);
  const int64_t n_in = 512, n_expert = 5, n_tokens = 11;
  for (ggml_type type : {ggml_type::Q4_K, ggml_type::Q6_K, ggml_type::Q8_0}) {
    for (int64_t n_out : {16, 12}) {  // 12: experts are not whole groups of the stacked copy
      const std::vector<uint8_t> w = random_rows(type, n_out * n_expert, n_in, rng);
      const backend_weight bw = be->upload_weight(type, w.data(), n_in, n_out * n_expert);
      const size_t slice = cpu_row_bytes(type, n_in) * n_out;
      for (int64_t e = n_expert - 1; e >= 0; --e) {
        const std::vector<float> x = random_activations(n_tokens, n_in, rng);
        std::vector<float> y((size_t)(n_tokens * n_out)), want((size_t)(n_tokens * n_out));
        be->matmul_expert(bw, e, n_out, x.data(), n_tokens, y.data());
        cpu_matmul_expert(pool, type, w.data() + e * slice, n_out, n_in, x.data(), n_tokens, want.data());
        CHECK(bits_equal(y, want));
      }
    }
  }
}

TEST_CASE("matmul_expert: token-chunked threads (many tokens) give the one-thread bits for every type") {
  std::mt19937 rng(25);
  thread_pool one(1), two(2);
  const int64_t n_in = 256, n_out = 24, n_tokens = 45;  // 45 >= 16 per chunk x 2 threads: the token split
  for (cpu_level level : supported_levels()) {
    for (ggml_type type : weight_types()) {
      const int64_t n = cpu_block_size(type) == 1 ? 72 : n_in;  // f32 / f16: a length with ggml's tail paths
      const std::vector<uint8_t> w = random_rows(type, n_out, n, rng);
      const std::vector<float> x = random_activations(n_tokens, n, rng);
      std::vector<float> a((size_t)(n_tokens * n_out), -1.0f), b((size_t)(n_tokens * n_out), -2.0f);
      cpu_matmul_expert_at_level(level, two, type, w.data(), n_out, n, x.data(), n_tokens, a.data());
      cpu_matmul_expert_at_level(level, one, type, w.data(), n_out, n, x.data(), n_tokens, b.data());
      CHECK(bits_equal(a, b));
    }
  }
}
