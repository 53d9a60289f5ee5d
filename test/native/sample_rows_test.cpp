// The sampling chain as a spec (backend/sample_rows.h): sampler::sample through plan + sample_row_host gives the
// tokens of the chain written out step by step (penalties, bias, mask, truncation, one draw per token from the
// request's generator); the shortlist finish a GPU uses picks sample_row_host's token whenever it decides, and
// decides in the usual cases; the backend's sample_rows (the CPU's: download + sample_row_host) over strided rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "backend/backend.h"
#include "backend/sample_rows.h"
#include "engine/sampler.h"
#include "engine/softmax_draw.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<float> random_row(int32_t n, uint64_t seed, float spread) {
  sampler_rng rng(seed);
  std::vector<float> l((size_t)n);
  for (float& x : l) x = float((rng.uniform() * 2.0 - 1.0) * spread);
  return l;
}

// The chain of sampler::sample as it was written before specs: every step in place, then the draw from rng.
int32_t chain_step_by_step(const sampling_params& p, std::vector<float> l, const std::vector<int32_t>& context_ids,
                           const std::unordered_map<int32_t, int32_t>& counts, const std::vector<int32_t>& masked,
                           sampler_rng& rng) {
  const int32_t n = int32_t(l.size());
  if (p.repetition_penalty != 1.0f) apply_repetition_penalty(l.data(), context_ids, p.repetition_penalty);
  apply_presence_frequency_penalty(l.data(), counts, p.presence_penalty, p.frequency_penalty);
  for (const auto& [id, bias] : p.logit_bias) l[size_t(id)] += bias;
  if (!masked.empty() && masked.size() < size_t(n)) {
    for (int32_t id : masked) l[size_t(id)] = -std::numeric_limits<float>::infinity();
  }
  if (p.temperature == 0.0f) return argmax(l.data(), n);
  if (!((p.top_k > 0 && p.top_k < n) || p.top_p < 1.0f || p.min_p > 0.0f)) {
    softmax_draw_scratch s;
    return softmax_draw(l.data(), n, p.temperature, rng, s);
  }
  std::vector<token_candidate> c((size_t)n);
  for (int32_t i = 0; i < n; ++i) c[size_t(i)] = {i, l[size_t(i)]};
  keep_top_k(c, p.top_k);
  keep_top_p(c, p.top_p);
  keep_min_p(c, p.min_p);
  return sample_candidates(c, p.temperature, rng);
}

// The shortlist a device builds: the best c of the row (logit descending, id ascending) and, where needed, the
// normalizer summed as keep_top_p sums it (id order, double).
int32_t via_shortlist(std::vector<float> row, const sample_spec& s, bool* decided) {
  const int32_t n = int32_t(row.size());
  apply_logit_edits(row.data(), s);
  const int32_t c = shortlist_size(s, n);
  *decided = false;
  if (c == 0) return -1;
  std::vector<token_candidate> all((size_t)n);
  for (int32_t i = 0; i < n; ++i) all[size_t(i)] = {i, row[size_t(i)]};
  std::partial_sort(all.begin(), all.begin() + c, all.end(), [](const token_candidate& a, const token_candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  });
  double sum = 0;
  if (shortlist_needs_sum(s, n)) {
    for (float v : row) sum += std::exp(double(v - all[0].logit));
  }
  sample_scratch scratch;
  int32_t token = -1;
  *decided = finish_from_shortlist(all.data(), c, n, sum, s, scratch, &token);
  return token;
}

}  // namespace

TEST_CASE("sample_rows: sampler::sample (plan + sample_row_host) is the chain step by step, draw for draw") {
  const int32_t n = 3000;
  sampler_rng pick(99);
  int checked = 0;
  for (int config = 0; config < 60; ++config) {
    sampling_params p;
    p.temperature = config % 7 == 0 ? 0.0f : float(0.2 + pick.uniform() * 1.5);
    p.top_k = config % 3 == 0 ? int32_t(1 + pick.uniform() * 60) : -1;
    p.top_p = config % 4 == 1 ? float(0.5 + pick.uniform() * 0.45) : 1.0f;
    p.min_p = config % 5 == 2 ? float(pick.uniform() * 0.2) : 0.0f;
    p.repetition_penalty = config % 2 ? 1.3f : 1.0f;
    p.presence_penalty = config % 6 == 1 ? 0.5f : 0.0f;
    p.frequency_penalty = config % 6 == 1 ? 0.25f : 0.0f;
    if (config % 4 == 3) p.logit_bias = {{5, 3.0f}, {17, -2.0f}, {5, 1.5f}};  // a repeated id adds twice
    p.seed = uint32_t(1000 + config);
    p.has_seed = true;
    const std::vector<int32_t> prompt = {3, 9, 9, 40, 2999};
    sampler smp(p, n, prompt);
    sampler_rng rng(p.seed);
    std::vector<int32_t> context = {3, 9, 40, 2999};
    std::unordered_map<int32_t, int32_t> counts;
    for (int step = 0; step < 6; ++step) {
      const std::vector<float> row = random_row(n, uint64_t(config * 100 + step), step % 2 ? 3.0f : 12.0f);
      const std::vector<int32_t> masked = step < 2 ? std::vector<int32_t>{1, 2, int32_t(step)} : std::vector<int32_t>{};
      const int32_t want = chain_step_by_step(p, row, context, counts, masked, rng);
      std::vector<float> l = row;
      const int32_t got = smp.sample(l.data(), masked);
      CHECK_EQ(got, want);
      smp.accept(got);
      if (std::find(context.begin(), context.end(), got) == context.end()) context.push_back(got);
      counts[got]++;
      ++checked;
    }
  }
  CHECK_EQ(checked, 360);
}

TEST_CASE("sample_rows: the shortlist finish picks sample_row_host's token whenever it decides") {
  const int32_t n = 5000;
  struct cfg {
    int32_t top_k;
    float top_p, min_p, temperature, spread;
    bool must_decide;
  };
  const cfg cfgs[] = {
      {40, 1.0f, 0.0f, 0.8f, 4.0f, true},      // Ollama's default top-k
      {40, 0.9f, 0.05f, 1.0f, 4.0f, true},     // top-k + top-p + min-p
      {1, 1.0f, 0.0f, 1.5f, 4.0f, true},       // top-k 1: the argmax
      {1024, 0.95f, 0.0f, 1.0f, 1.0f, true},   // the longest top-k a shortlist holds
      {-1, 0.9f, 0.0f, 0.7f, 16.0f, true},     // top-p on a peaked row: the nucleus is short
      {-1, 0.95f, 0.1f, 1.0f, 16.0f, true},    // top-p + min-p
      {-1, 1.0f, 0.1f, 1.0f, 16.0f, true},     // min-p alone on a peaked row: few pass it
      {-1, 0.99f, 0.0f, 1.0f, 0.5f, false},    // top-p on a flat row: past the shortlist -> the whole row
      {-1, 1.0f, 0.01f, 1.0f, 0.5f, false},    // min-p alone on a flat row: all pass -> the whole row
      {2000, 0.9f, 0.0f, 1.0f, 4.0f, false},   // top-k beyond the shortlist: the whole row
  };
  int decided_total = 0;
  for (const cfg& c : cfgs) {
    for (int trial = 0; trial < 25; ++trial) {
      const std::vector<float> row = random_row(n, uint64_t(trial * 31 + c.top_k), c.spread);
      const logit_edit edits[] = {{7, logit_edit_op::repetition, 1.2f}, {8, logit_edit_op::add_bias, 30.0f},
                                  {9, logit_edit_op::mask, 0.0f}};
      sample_spec s;
      s.temperature = c.temperature;
      s.top_k = c.top_k;
      s.top_p = c.top_p;
      s.min_p = c.min_p;
      s.u01 = (trial + 0.5) / 25.0;
      s.edits = edits;
      s.n_edits = trial % 2 && c.must_decide ? 3 : 0;  // (a +30 bias would make a flat row decidable)
      bool decided = false;
      const int32_t got = via_shortlist(row, s, &decided);
      std::vector<float> l = row;
      sample_scratch scratch;
      const int32_t want = sample_row_host(l.data(), n, s, scratch);
      if (decided) {
        CHECK_EQ(got, want);
        ++decided_total;
      }
      if (c.must_decide) CHECK(decided);
      else CHECK(!decided);
    }
  }
  CHECK_EQ(decided_total, 7 * 25);
}

TEST_CASE("sample_rows: the backend samples strided rows as sample_row_host does, edits in place") {
  std::unique_ptr<backend> be = make_cpu_backend(1);
  const int64_t n = 700, stride = 704, rows = 4;
  float* x = be->alloc_f32(rows * stride);
  std::vector<float> host((size_t)(rows * stride));
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row = random_row(int32_t(stride), uint64_t(r + 5), 6.0f);
    std::copy(row.begin(), row.end(), host.begin() + r * stride);
    host[size_t(r * stride + n)] = 1e9f;  // past the row's n ids: never chosen
  }
  be->upload(x, host.data(), rows * stride);
  const logit_edit edits[] = {{0, logit_edit_op::add_bias, 50.0f}};
  sample_spec specs[4];
  specs[0].temperature = 0.0f;                     // argmax
  specs[1].temperature = 0.0f, specs[1].edits = edits, specs[1].n_edits = 1;  // biased argmax: id 0
  specs[2].temperature = 1.0f, specs[2].u01 = 0.3;  // whole-row draw
  specs[3].temperature = 0.9f, specs[3].top_k = 5, specs[3].top_p = 0.8f, specs[3].u01 = 0.7;
  int32_t out[4] = {-1, -1, -1, -1};
  be->sample_rows(x, rows, stride, n, specs, out);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> l(host.begin() + r * stride, host.begin() + r * stride + n);
    sample_scratch scratch;
    CHECK_EQ(out[r], sample_row_host(l.data(), int32_t(n), specs[r], scratch));
    CHECK(out[r] >= 0 && out[r] < n);
  }
  CHECK_EQ(out[1], 0);
  be->free_f32(x);
}
