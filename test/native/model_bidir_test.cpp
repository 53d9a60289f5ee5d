// Bidirectional spans in the text model (batch_sequence::bidir_spans, gemma3's image embeddings): the queries of a
// span attend every position of it (within a sliding layer's window behind them), the rest stays causal. gemma3
// (window 5 on 7 of 8 layers) against the double-precision reference with the same spans, on an f32 and an f16
// cache; a span longer than the window; the chunk layout and the batch around it never change a bit; a span that
// does not end in its chunk is refused.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "harness.h"
#include "model/model.h"
#include "model_reference.h"

using namespace spindle;

namespace {

std::unique_ptr<model_test::loaded_model> load(const model_test::spec& s, const model_test::built& b, kv_type kv, int threads) {
  return model_test::load_built(b, s.arch + "-bidir", threads, kv);
}

std::vector<int32_t> some_tokens(int n, int n_vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 37 + 11 + salt * 5) % n_vocab);
  t[0] = 1;  // <s>
  return t;
}

// One sequence per entry of `seqs` (each with its own spans), forwarded together in the given chunk layouts (chunk
// boundaries as positions; every sequence's layout is its own); logits of every row.   [seq][n * n_vocab]
std::vector<std::vector<float>> run(model& m, const std::vector<std::vector<int32_t>>& seqs,
                                    const std::vector<std::vector<int32_t>>& spans,
                                    const std::vector<std::vector<int>>& cuts) {
  const int64_t V = m.hparams().n_vocab;
  auto kv = m.new_kv_cache(64, 4);
  std::vector<std::vector<int32_t>> tables(seqs.size());
  int32_t next_block = 0;
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t p = 0; p < seqs[i].size(); p += 4) tables[i].push_back(next_block++);
  std::vector<std::vector<float>> out(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) out[i].resize(seqs[i].size() * V);
  std::vector<size_t> step(seqs.size(), 0);  // index into cuts[i] of the next chunk's end
  for (;;) {
    std::vector<batch_sequence> batch;
    std::vector<size_t> who;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (step[i] >= cuts[i].size()) continue;
      const int begin = step[i] == 0 ? 0 : cuts[i][step[i] - 1], end = cuts[i][step[i]];
      batch_sequence b;
      b.tokens = seqs[i].data() + begin;
      b.n_tokens = end - begin;
      b.first_pos = begin;
      b.block_table = tables[i].data();
      b.n_table = (int32_t)tables[i].size();
      b.n_logits = b.n_tokens;
      b.bidir_spans = spans[i].empty() ? nullptr : spans[i].data();
      b.n_bidir_spans = (int32_t)spans[i].size() / 2;
      batch.push_back(b);
      who.push_back(i);
      step[i]++;
    }
    if (batch.empty()) break;
    int64_t rows = 0;
    for (const batch_sequence& b : batch) rows += b.n_logits;
    std::vector<float> logits(rows * V);
    m.forward_batch(batch, *kv, logits.data());
    const float* p = logits.data();
    for (size_t j = 0; j < batch.size(); ++j) {
      std::memcpy(out[who[j]].data() + (int64_t)batch[j].first_pos * V, p, batch[j].n_tokens * V * sizeof(float));
      p += batch[j].n_tokens * V;
    }
  }
  return out;
}

double max_diff(const std::vector<float>& got, const std::vector<model_test::dvec>& want) {
  double d = 0;
  const size_t V = want[0].size();
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t v = 0; v < V; ++v) d = std::max(d, std::fabs((double)got[t * V + v] - want[t][v]));
  return d;
}

// spans [3, 11) (8 positions: longer than the window of 5) and [14, 17) of 20 tokens
const std::vector<int32_t> k_spans = {3, 11, 14, 17};
const std::vector<std::pair<int, int>> k_span_pairs = {{3, 11}, {14, 17}};

}  // namespace

TEST_CASE("model bidir: gemma3 with bidirectional spans matches the reference (f32 and f16 caches)") {
  const model_test::spec s = model_test::gemma3_spec();
  const model_test::built b = model_test::build(s);
  const std::vector<int32_t> tokens = some_tokens(20, b.n_vocab, 0);
  const auto want = model_test::reference_forward(b, s, tokens, true, k_span_pairs);
  const auto causal = model_test::reference_forward(b, s, tokens, true);
  double moved = 0;
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t v = 0; v < want[t].size(); ++v) moved = std::max(moved, std::fabs(want[t][v] - causal[t][v]));
  std::printf("  the spans move the reference's logits by %.2e\n", moved);
  for (auto [kv, tol] : {std::pair<kv_type, double>{kv_type::f32, 2e-4}, {kv_type::f16, 2e-2}}) {
    auto l = load(s, b, kv, 2);
    const auto got = run(*l->m, {tokens}, {k_spans}, {{2, 17, 20}});
    const double d = max_diff(got[0], want);
    std::printf("  kv %s: max |logit diff| %.2e (tol %.0e)\n", kv == kv_type::f32 ? "f32" : "f16", d, tol);
    CHECK(d <= tol);
    CHECK(moved > 100 * tol);
  }
}

TEST_CASE("model bidir: chunk layouts, threads and the batch around a sequence with spans never change a bit") {
  const model_test::spec s = model_test::gemma3_spec();
  const model_test::built b = model_test::build(s);
  const std::vector<int32_t> tokens = some_tokens(20, b.n_vocab, 0), other = some_tokens(13, b.n_vocab, 3);
  for (kv_type kv : {kv_type::f32, kv_type::f16, kv_type::q8_0}) {
    if (kv == kv_type::q8_0 && model_test::head_dim(s) % 32 != 0) continue;  // block types need whole blocks
    auto one = load(s, b, kv, 1);
    auto two = load(s, b, kv, 2);
    const auto whole = run(*one->m, {tokens}, {k_spans}, {{20}})[0];
    CHECK(whole == run(*two->m, {tokens}, {k_spans}, {{20}})[0]);
    CHECK(whole == run(*two->m, {tokens}, {k_spans}, {{3, 11, 14, 17, 18, 19, 20}})[0]);
    CHECK(whole == run(*two->m, {tokens}, {k_spans}, {{1, 12, 17, 20}})[0]);
    // beside a causal sequence (and its chunks), in one batch
    const auto both = run(*two->m, {other, tokens}, {{}, k_spans}, {{5, 13}, {11, 20}});
    CHECK(both[1] == whole);
    CHECK(both[0] == run(*one->m, {other}, {{}}, {{13}})[0]);
  }
}

TEST_CASE("model bidir: a span not inside the chunk that reaches it is refused") {
  const model_test::spec s = model_test::gemma3_spec();
  const model_test::built b = model_test::build(s);
  auto l = load(s, b, kv_type::f32, 1);
  const std::vector<int32_t> tokens = some_tokens(20, b.n_vocab, 0);
  CHECK_THROWS_WITH(run(*l->m, {tokens}, {k_spans}, {{8, 20}}), "is not inside the chunk [0, 8)");
  CHECK_THROWS_WITH(run(*l->m, {tokens}, {{5, 3}}, {{20}}), "sorted, disjoint and non-empty");
  // a chunk that starts inside a span (its first rows came from an earlier chunk, which could not see the rest)
  auto kv = l->m->new_kv_cache(8, 4);
  const std::vector<int32_t> table = {0, 1, 2, 3, 4};
  batch_sequence first;
  first.tokens = tokens.data();
  first.n_tokens = 5;
  first.block_table = table.data();
  first.n_table = 5;
  l->m->forward_batch({first}, *kv, nullptr);
  batch_sequence rest = first;
  rest.tokens = tokens.data() + 5;
  rest.first_pos = 5;
  rest.n_tokens = 15;
  rest.bidir_spans = k_spans.data();
  rest.n_bidir_spans = 2;
  CHECK_THROWS_WITH(l->m->forward_batch({rest}, *kv, nullptr), "span [3, 11) is not inside the chunk [5, 20)");
}
