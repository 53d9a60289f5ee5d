// Paged attention: scattered block tables give bitwise the result of contiguous attention(), match the plain
// reference, and bad tables throw.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/attention_paged.h"
#include "backend/cpu/cpu_backend.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<float> rand_vec(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

attention_params small_params() {
  attention_params a;
  a.n_head = 4;
  a.n_head_kv = 2;
  a.head_dim_k = 16;
  a.head_dim_v = 16;
  a.k_row_stride = 32;
  a.v_row_stride = 32;
  a.scale = 0.25f;
  return a;
}

}  // namespace

TEST_CASE("attention_paged: scattered blocks equal contiguous attention bitwise, and the reference") {
  cpu_backend be(2);
  const int32_t bs = 4, n_blocks = 16;
  const int64_t n = 13, stride = 32, row_q = 4 * 16;
  auto q = rand_vec(n * row_q, 1), k = rand_vec(n * stride, 2), v = rand_vec(n * stride, 3);
  const std::vector<int32_t> table = {9, 2, 15, 0};  // positions 0..15 -> blocks 9, 2, 15, 0
  std::vector<float> ks(n_blocks * bs * stride, NAN), vs(n_blocks * bs * stride, NAN);  // unused rows NaN
  paged_attention_params p;
  p.attn = small_params();
  p.block_table = table.data();
  p.n_table = 4;
  p.block_size = bs;
  p.n_blocks = n_blocks;
  for (int64_t pos = 0; pos < n; ++pos) {
    const int64_t row = attention_paged_row(p, pos);
    std::memcpy(&ks[row * stride], &k[pos * stride], stride * sizeof(float));
    std::memcpy(&vs[row * stride], &v[pos * stride], stride * sizeof(float));
  }
  std::vector<float> want(n * row_q), got(n * row_q), ref(n * row_q), chunked(n * row_q);
  attention_params a = small_params();
  a.n_tokens = n;
  be.attention(a, q.data(), k.data(), v.data(), want.data());
  p.attn.n_tokens = n;
  be.attention_paged(p, q.data(), ks.data(), vs.data(), got.data());
  CHECK(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
  attention_paged_ref(p, q.data(), ks.data(), vs.data(), ref.data());
  double d = 0;
  for (size_t i = 0; i < ref.size(); ++i) d = std::max(d, (double)std::fabs(ref[i] - got[i]));
  CHECK(d < 1e-5);
  for (int64_t start = 0; start < n; start += 5) {  // chunks 5, 5, 3 against the paged store
    p.attn.n_past = start;
    p.attn.n_tokens = std::min<int64_t>(5, n - start);
    be.attention_paged(p, q.data() + start * row_q, ks.data(), vs.data(), chunked.data() + start * row_q);
  }
  CHECK(std::memcmp(want.data(), chunked.data(), want.size() * sizeof(float)) == 0);
}

TEST_CASE("attention_paged: tables that do not cover the positions or hold bad ids throw") {
  cpu_backend be(1);
  std::vector<float> q(64), kv(8 * 4 * 32), out(64);
  std::vector<int32_t> table = {1, 8};
  paged_attention_params p;
  p.attn = small_params();
  p.attn.n_tokens = 1;
  p.attn.n_past = 8;  // position 8 needs 3 blocks of 4
  p.block_table = table.data();
  p.n_table = 2;
  p.block_size = 4;
  p.n_blocks = 8;
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()), "does not cover");
  p.attn.n_past = 4;  // needs blocks 1 and 8; 8 is out of range
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()), "out of range");
  table[1] = 3;
  be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data());
  p.attn.n_head_kv = 3;
  CHECK_THROWS_WITH(be.attention_paged(p, q.data(), kv.data(), kv.data(), out.data()), "head");
}
