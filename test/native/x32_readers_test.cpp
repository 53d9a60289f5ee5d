// The GPU's weight readers (native/backend/cuda/x32_types.cuh, x32_types_more.cuh) run on the CPU, so CI checks
// every type's x32 decoding without a GPU. The handful of CUDA intrinsics the readers use are defined below in
// plain C++ with the device's integer and IEEE float semantics, and mmv_x32's loop is replayed lane by lane:
//   value(): the CPU dequantizer's bits, for every element of every row (get_rows on the GPU);
//   dot_unit(): each row . activations against a double-precision sum over the *same* quantized activations
//     (dequantized weights x d * q), so a wrong weight bit, scale, min or sub-block order shows (one element of
//     512 moves the sum by ~2e-3 of its magnitude; the bound is 1e-4), and the same bits whether a lane takes
//     1, 2 or 8 tokens at a time (the kernel's batch invariance per reader).
// What this cannot check: the kernels' memory layouts on the device, shared memory, warps, the tensor-core
// kernels (the GPU suite, test/gpu, does).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/fp16.h"
#include "backend/cpu/matmul.h"
#include "backend/pack_x32.h"
#include "harness.h"
#include "kernels_util.h"

#include "cuda_host_shim.h"  // the device vocabulary of the readers, on the host

#include "backend/cuda/x32_types.cuh"
#include "backend/cuda/x32_types_more.cuh"
#include "x32_host_act.h"

using namespace spindle;

namespace {

// mmv_x32 with one K segment, one lane at a time: y [n_tok, n_out].
template <class Q, int NT>
std::vector<float> run_mmv(const std::vector<uint8_t>& packed, const x32_shape& xs, const mmv_act& a) {
  std::vector<float> y((size_t)(a.n_tok * xs.n_out));
  for (int64_t r = 0; r < xs.n_out; ++r) {
    const uint8_t* base = packed.data() + (uint64_t)(r / 32) * xs.n_units * (32 * Q::unit_bytes);
    for (int t0 = 0; t0 < a.n_tok; t0 += NT) {
      float acc[NT] = {};
      for (int64_t u = 0; u < xs.n_units; ++u)
        Q::template dot_unit<NT>(base + (uint64_t)u * (32 * Q::unit_bytes), (int)(r % 32), u, a, t0, acc);
      for (int t = 0; t < NT && t0 + t < a.n_tok; ++t) y[(t0 + t) * xs.n_out + r] = acc[t];
    }
  }
  return y;
}

// value(j) of every element of row r.
template <class Q>
std::vector<float> row_values(const std::vector<uint8_t>& packed, const x32_shape& xs, int64_t r) {
  std::vector<float> v((size_t)xs.n_in);
  const uint8_t* base = packed.data() + (uint64_t)(r / 32) * xs.n_units * (32 * Q::unit_bytes);
  for (int64_t i = 0; i < xs.n_in; ++i) {
    const uint8_t* gb = base + (uint64_t)(i / Q::unit_values) * (32 * Q::unit_bytes);
    v[i] = Q::value(gb, (int)(r % 32), (int)(i % Q::unit_values));
  }
  return v;
}

bool is_float_type(ggml_type t) { return t == ggml_type::F32 || t == ggml_type::F16 || t == ggml_type::BF16; }

template <class Q>
void check_reader(ggml_type type, std::mt19937& rng) {
  const int64_t n_out = 45, n_tok = 11;  // a ragged row group, a ragged last token tile
  for (const int64_t n_in : is_float_type(type) ? std::vector<int64_t>{44, 512} : std::vector<int64_t>{512}) {
    const packed_case pc = make_case(type, n_out, n_in, n_tok, act_format_of(type), !is_float_type(type), rng);
    const std::vector<uint8_t>& w = pc.w;
    const std::vector<uint8_t>& packed = pc.packed;
    const x32_shape& xs = pc.xs;
    const host_act& act = pc.act;
    const std::vector<float>& x = act.xf;

    // value(): the CPU dequantizer's bits
    const size_t row_bytes = ggml_row_size(type, (uint64_t)n_in);
    std::vector<std::vector<float>> deq((size_t)n_out, std::vector<float>((size_t)n_in));
    bool same = true;
    for (int64_t r = 0; r < n_out; ++r) {
      cpu_dequantize_row(type, w.data() + r * row_bytes, deq[r].data(), n_in);
      const std::vector<float> v = row_values<Q>(packed, xs, r);
      same = same && std::memcmp(v.data(), deq[r].data(), v.size() * sizeof(float)) == 0;
    }
    CHECK(same);

    // dot_unit(): against the double sum over the same quantized activations; 1, 2 and 8 tokens per lane agree
    const std::vector<float> y1 = run_mmv<Q, 1>(packed, xs, act.view);
    const std::vector<float> y2 = run_mmv<Q, 2>(packed, xs, act.view);
    const std::vector<float> y8 = run_mmv<Q, 8>(packed, xs, act.view);
    CHECK(std::memcmp(y1.data(), y8.data(), y1.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
    double worst = 0;
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int64_t r = 0; r < n_out; ++r) {
        double ref = 0, mag = 0;
        for (int64_t i = 0; i < n_in; ++i) {
          const double xi = is_float_type(type) ? (double)x[t * n_in + i] : act.deq[t * n_in + i];
          ref += (double)deq[r][i] * xi;
          mag += std::fabs((double)deq[r][i] * xi);
        }
        worst = std::max(worst, std::fabs(y1[t * n_out + r] - ref) / (mag + 1e-30));
      }
    }
    std::printf("  x32 reader %-6s n_in %3lld: values %s the CPU's, dot rel err %.1e\n", ggml_type_info((uint32_t)type)->name,
                (long long)n_in, same ? "==" : "!=", worst);
    CHECK(worst <= 1e-4);
  }
}

}  // namespace

TEST_CASE("x32 readers on the host: every GPU weight type decodes to the CPU's values and dots exactly") {
  std::mt19937 rng(17);
  int checked = 0;
  for (ggml_type type : kernels_test::weight_types()) {
    switch (type) {
      case ggml_type::F32: check_reader<x32_f32>(type, rng); break;
      case ggml_type::F16: check_reader<x32_f16>(type, rng); break;
      case ggml_type::BF16: check_reader<x32_bf16>(type, rng); break;
      case ggml_type::Q8_0: check_reader<x32_q8_0>(type, rng); break;
      case ggml_type::Q4_0: check_reader<x32_q4_0>(type, rng); break;
      case ggml_type::Q4_1: check_reader<x32_q4_1>(type, rng); break;
      case ggml_type::Q5_0: check_reader<x32_q5_0>(type, rng); break;
      case ggml_type::Q5_1: check_reader<x32_q5_1>(type, rng); break;
      case ggml_type::IQ4_NL: check_reader<x32_iq4_nl>(type, rng); break;
      case ggml_type::Q2_K: check_reader<x32_q2_K>(type, rng); break;
      case ggml_type::Q3_K: check_reader<x32_q3_K>(type, rng); break;
      case ggml_type::Q4_K: check_reader<x32_q4_K>(type, rng); break;
      case ggml_type::Q5_K: check_reader<x32_q5_K>(type, rng); break;
      case ggml_type::Q6_K: check_reader<x32_q6_K>(type, rng); break;
      case ggml_type::IQ4_XS: check_reader<x32_iq4_xs>(type, rng); break;
      default: CHECK(!"a CPU weight type without a GPU reader"); continue;
    }
    CHECK(x32_format_of(type) != nullptr);
    ++checked;
  }
  CHECK_EQ(checked, (int)kernels_test::weight_types().size());
}

TEST_CASE("x32 readers on the host: the emulated intrinsics") {
  CHECK_EQ(__dp4a((int)0x80FF7F01u, (int)0x7F02FF80u, 5), 5 + 1 * -128 + 127 * -1 + -1 * 2 + -128 * 127);
  CHECK_EQ((uint32_t)__vsubss4((int)0x807F0010u, (int)0x01FF1020u), 0x807FF0F0u);
  CHECK_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x7046u), 0x77004466u);
}
