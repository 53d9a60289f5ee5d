// Sampler tests: each step against its definition, sets never left over many draws, seeds reproducible.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "engine/request.h"
#include "engine/sampler.h"
#include "harness.h"

using namespace spindle;

static std::vector<float> random_logits(int32_t n, uint64_t seed) {
  sampler_rng rng(seed);
  std::vector<float> l(static_cast<size_t>(n));
  for (float& x : l) x = float(rng.uniform() * 8.0 - 4.0);
  return l;
}

static std::vector<double> softmax(const std::vector<float>& l) {
  float m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(double(l[i] - m));
  for (double& x : p) x /= s;
  return p;
}

// Draws `n` tokens with a fresh sampler per draw sequence (same logits every time).
static std::vector<int32_t> draws(const sampling_params& p, const std::vector<float>& logits, int n) {
  sampler s(p, int32_t(logits.size()), {});
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    out.push_back(s.sample(l.data(), {}));
  }
  return out;
}

TEST_CASE("sampler: temperature 0 is argmax, top-k 1 is argmax") {
  auto logits = random_logits(1000, 1);
  const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  sampling_params greedy;
  greedy.temperature = 0;
  for (int32_t t : draws(greedy, logits, 20)) CHECK_EQ(t, best);
  sampling_params k1;
  k1.top_k = 1;
  k1.temperature = 1.5f;
  for (int32_t t : draws(k1, logits, 200)) CHECK_EQ(t, best);
}

TEST_CASE("sampler: argmax ties go to the lowest id") {
  std::vector<float> l = {1, 3, 3, 2};
  CHECK_EQ(argmax(l.data(), 4), 1);
}

TEST_CASE("sampler: top-k never leaves the k best over many draws") {
  auto logits = random_logits(500, 2);
  std::vector<int32_t> order(500);
  for (int32_t i = 0; i < 500; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
  std::set<int32_t> allowed(order.begin(), order.begin() + 5);
  sampling_params p;
  p.top_k = 5;
  p.seed = 7;
  p.has_seed = true;
  std::set<int32_t> seen;
  for (int32_t t : draws(p, logits, 3000)) {
    CHECK(allowed.count(t) == 1);
    seen.insert(t);
  }
  CHECK(seen.size() > 1);  // it really samples
}

TEST_CASE("sampler: top-p keeps exactly the smallest prefix reaching p") {
  // probabilities 0.5, 0.3, 0.15, 0.05
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto kept = [&](float p) {
    std::vector<token_candidate> c;
    for (int32_t i = 0; i < 4; ++i) c.push_back({i, l[size_t(i)]});
    keep_top_p(c, p);
    std::set<int32_t> ids;
    for (auto& t : c) ids.insert(t.id);
    return ids;
  };
  CHECK(kept(0.4f) == std::set<int32_t>({0}));
  CHECK(kept(0.79f) == std::set<int32_t>({0, 1}));
  CHECK(kept(0.81f) == std::set<int32_t>({0, 1, 2}));
  CHECK(kept(0.99f) == std::set<int32_t>({0, 1, 2, 3}));
  CHECK(kept(1.0f).size() == 4);
}

TEST_CASE("sampler: top-p never samples outside the nucleus (large vocab, past the sorted prefix)") {
  auto logits = random_logits(5000, 3);  // flat-ish: the nucleus needs more than 256 tokens
  auto probs = softmax(logits);
  std::vector<int32_t> order(5000);
  for (int32_t i = 0; i < 5000; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[size_t(a)] > probs[size_t(b)]; });
  std::set<int32_t> allowed;
  double cum = 0;
  for (int32_t id : order) {
    allowed.insert(id);
    cum += probs[size_t(id)];
    if (cum >= 0.9) break;
  }
  CHECK(allowed.size() > 256);
  sampling_params p;
  p.top_p = 0.9f;
  p.has_seed = true;
  p.seed = 11;
  std::set<int32_t> seen;
  for (int32_t t : draws(p, logits, 4000)) {
    CHECK(allowed.count(t) == 1);
    seen.insert(t);
  }
  CHECK(seen.size() > 100);
}

TEST_CASE("sampler: min-p never samples below p * max probability") {
  auto logits = random_logits(800, 4);
  auto probs = softmax(logits);
  const double pmax = *std::max_element(probs.begin(), probs.end());
  sampling_params p;
  p.min_p = 0.3f;
  p.temperature = 2.0f;  // flattens the draw, not the min-p set (min-p runs before temperature)
  p.has_seed = true;
  p.seed = 5;
  std::set<int32_t> seen;
  for (int32_t t : draws(p, logits, 3000)) {
    CHECK(probs[size_t(t)] >= 0.3 * pmax * (1 - 1e-5));
    seen.insert(t);
  }
  CHECK(seen.size() > 1);
}

TEST_CASE("sampler: draws follow softmax(logits / temperature)") {
  std::vector<float> l = {0.0f, 1.0f, 2.0f};
  sampling_params p;
  p.temperature = 0.7f;
  p.has_seed = true;
  p.seed = 99;
  const int n = 30000;
  std::map<int32_t, int> counts;
  for (int32_t t : draws(p, l, n)) counts[t]++;
  std::vector<float> scaled = {0.0f / 0.7f, 1.0f / 0.7f, 2.0f / 0.7f};
  auto expect = softmax(scaled);
  for (int32_t i = 0; i < 3; ++i) CHECK_NEAR(double(counts[i]) / n, expect[size_t(i)], 0.015);
}

TEST_CASE("sampler: the same seed gives the same tokens, another seed other tokens") {
  auto logits = random_logits(300, 6);
  sampling_params p;
  p.has_seed = true;
  p.seed = 1234;
  p.top_k = 50;
  p.top_p = 0.95f;
  auto a = draws(p, logits, 100);
  auto b = draws(p, logits, 100);
  CHECK(a == b);
  p.seed = 1235;
  CHECK(draws(p, logits, 100) != a);
  sampling_params unseeded;  // random seed per sampler
  CHECK(draws(unseeded, logits, 100) != draws(unseeded, logits, 100));
}

TEST_CASE("sampler: repetition penalty divides positive and multiplies non-positive logits") {
  std::vector<float> l = {2.0f, -2.0f, 0.0f, 4.0f};
  apply_repetition_penalty(l.data(), {0, 1, 2}, 2.0f);
  CHECK_NEAR(l[0], 1.0, 1e-6);
  CHECK_NEAR(l[1], -4.0, 1e-6);
  CHECK_NEAR(l[2], 0.0, 1e-6);
  CHECK_NEAR(l[3], 4.0, 1e-6);  // not in the context
}

TEST_CASE("sampler: presence and frequency penalties follow OpenAI") {
  std::vector<float> l = {1.0f, 1.0f, 1.0f};
  apply_presence_frequency_penalty(l.data(), {{0, 3}, {2, 1}}, 0.5f, 0.25f);
  CHECK_NEAR(l[0], 1.0 - 3 * 0.25 - 0.5, 1e-6);
  CHECK_NEAR(l[1], 1.0, 1e-6);
  CHECK_NEAR(l[2], 1.0 - 0.25 - 0.5, 1e-6);
}

TEST_CASE("sampler: penalties cover prompt (repetition) and output (presence) and change greedy") {
  std::vector<float> base = {5.0f, 4.9f, 1.0f};
  sampling_params p;
  p.temperature = 0;
  p.repetition_penalty = 1.1f;
  sampler s(p, 3, {0});  // token 0 is in the prompt: 5 / 1.1 < 4.9
  std::vector<float> l = base;
  CHECK_EQ(s.sample(l.data(), {}), 1);
  CHECK_NEAR(l[0], 5.0 / 1.1, 1e-5);

  sampling_params q;
  q.temperature = 0;
  q.presence_penalty = 2.0f;
  sampler t(q, 3, {0});  // presence ignores the prompt
  l = base;
  CHECK_EQ(t.sample(l.data(), {}), 0);
  t.accept(0);
  l = base;
  CHECK_EQ(t.sample(l.data(), {}), 1);  // 5 - 2 < 4.9
}

TEST_CASE("sampler: masked ids are never drawn") {
  std::vector<float> logits = {10.0f, 9.0f, 0.0f, 0.0f};
  sampling_params p;
  p.has_seed = true;
  p.seed = 3;
  sampler s(p, 4, {});
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l = logits;
    int32_t t = s.sample(l.data(), {0, 1});
    CHECK(t == 2 || t == 3);
  }
  sampling_params g;
  g.temperature = 0;
  sampler gs(g, 4, {});
  std::vector<float> l = logits;
  CHECK_EQ(gs.sample(l.data(), {0}), 1);
}

TEST_CASE("sampler: logprobs are log-softmax with rank and top ids") {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f};
  auto probs = softmax(l);
  token_logprob r = compute_logprobs(l.data(), 4, 2, 3);
  CHECK_EQ(r.id, 2);
  CHECK_NEAR(r.logprob, std::log(probs[2]), 1e-5);
  CHECK_EQ(r.rank, 2);
  REQUIRE(r.top_ids.size() == 3);
  CHECK_EQ(r.top_ids[0], 1);
  CHECK_EQ(r.top_ids[1], 2);
  CHECK_EQ(r.top_ids[2], 0);
  CHECK_NEAR(r.top_logprobs[0], std::log(probs[1]), 1e-5);
  CHECK(compute_logprobs(l.data(), 4, 1, 0).top_ids.empty());
}

TEST_CASE("sampler: logprobs of a wide row match a double-precision full-sort reference (ties by id)") {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  const int32_t n = 50021;
  std::vector<float> l((size_t)n);
  for (float& x : l) x = std::round(d(rng) * 64.0f) / 64.0f;  // coarse values: many ties
  l[123] = l[40000] = 30.0f;                                    // a tie at the top: id 123 first
  for (const int32_t chosen : {123, 40000, 7, n - 1}) {
    for (const int32_t n_top : {0, 1, 5, 20}) {
      const token_logprob r = compute_logprobs(l.data(), n, chosen, n_top);
      double sum = 0;
      for (float x : l) sum += std::exp(double(x) - 30.0);
      const double log_z = 30.0 + std::log(sum);
      std::vector<int32_t> ids((size_t)n);
      for (int32_t i = 0; i < n; ++i) ids[(size_t)i] = i;
      std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[(size_t)a] > l[(size_t)b]; });
      CHECK_NEAR(r.logprob, double(l[(size_t)chosen]) - log_z, 1e-6);
      CHECK_EQ(r.rank, int32_t(std::find(ids.begin(), ids.end(), chosen) - ids.begin()) + 1);
      REQUIRE(r.top_ids.size() == size_t(n_top));
      for (int32_t i = 0; i < n_top; ++i) {
        CHECK_EQ(r.top_ids[(size_t)i], ids[(size_t)i]);
        CHECK_NEAR(r.top_logprobs[(size_t)i], double(l[(size_t)ids[(size_t)i]]) - log_z, 1e-6);
      }
    }
  }
}

TEST_CASE("sampler: validate_sampling_params names the field and the range of its limits entry") {
  auto bad = [](auto mutate, const std::string& expect) {
    sampling_params p;
    mutate(p);
    CHECK_THROWS_WITH(validate_sampling_params(p), expect);
  };
  auto msg = [](const param_limit& l) { return std::string(l.name) + " must be " + range_text(l); };
  bad([](sampling_params& p) { p.temperature = -1; }, msg(k_temperature));
  bad([](sampling_params& p) { p.temperature = NAN; }, "temperature");
  bad([](sampling_params& p) { p.top_p = 0; }, msg(k_top_p));
  bad([](sampling_params& p) { p.top_k = -2; }, msg(k_top_k));
  bad([](sampling_params& p) { p.min_p = 1.5f; }, msg(k_min_p));
  bad([](sampling_params& p) { p.repetition_penalty = 0; }, msg(k_repetition_penalty));
  bad([](sampling_params& p) { p.repeat_last_n = -2; }, msg(k_repeat_last_n));
  bad([](sampling_params& p) { p.presence_penalty = 3; }, msg(k_presence_penalty));
  bad([](sampling_params& p) { p.frequency_penalty = -3; }, msg(k_frequency_penalty));
  bad([](sampling_params& p) { p.max_tokens = 0; }, msg(k_max_tokens));
  bad([](sampling_params& p) { p.min_tokens = -1; }, msg(k_min_tokens));
  bad([](sampling_params& p) { p.max_tokens = 2; p.min_tokens = 3; }, "must not exceed maxTokens");
  bad([](sampling_params& p) { p.logprobs = max_logprobs + 1; }, msg(k_logprobs));
  bad([](sampling_params& p) { p.stop.assign(max_stop_strings + 1, "x"); }, "at most " + std::to_string(max_stop_strings));
  bad([](sampling_params& p) { p.stop = {""}; }, "must not be empty");
  bad([](sampling_params& p) { p.stop = {std::string(max_stop_string_bytes + 1, 'a')}; },
      "at most " + std::to_string(max_stop_string_bytes) + " bytes");
  sampling_params ok;
  validate_sampling_params(ok);
}

TEST_CASE("limits: range texts and bounds") {
  CHECK_EQ(range_text(k_temperature), std::string(">= 0"));
  CHECK_EQ(range_text(k_top_p), std::string("in (0, 1]"));
  CHECK_EQ(range_text(k_repetition_penalty), std::string("> 0"));
  CHECK_EQ(range_text(k_logprobs), std::string("an integer in [0, 20]"));
  CHECK_EQ(range_text(k_max_tokens), std::string("an integer >= 1"));
  CHECK_EQ(range_text(k_chunked_prefill_size), std::string("-1 (off) or an integer >= 1"));
  CHECK(in_range(k_chunked_prefill_size, -1) && !in_range(k_chunked_prefill_size, 0));
  CHECK(!in_range(k_top_p, 0) && in_range(k_top_p, 1) && !in_range(k_max_num_seqs, 1.5) && !in_range(k_min_p, NAN));
}

TEST_CASE("sampler: repeat_last_n limits the repetition penalty to the last N tokens") {
  const int32_t V = 8;
  auto logits_after = [&](int32_t last_n, const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
    sampling_params p;
    p.temperature = 0;
    p.repetition_penalty = 2.0f;
    p.repeat_last_n = last_n;
    sampler s(p, V, prompt);
    for (int32_t t : out) s.accept(t);
    std::vector<float> l(V, 1.0f);
    s.sample(l.data(), {});
    return l;
  };
  const std::vector<float> all = logits_after(-1, {1, 2, 3}, {4});
  CHECK(all[1] == 0.5f && all[2] == 0.5f && all[3] == 0.5f && all[4] == 0.5f && all[5] == 1.0f);
  const std::vector<float> last2 = logits_after(2, {1, 2, 3}, {4});  // window: 3, 4
  CHECK(last2[1] == 1.0f && last2[2] == 1.0f && last2[3] == 0.5f && last2[4] == 0.5f);
  const std::vector<float> repeat = logits_after(2, {1, 1}, {1});  // one id, counted once
  CHECK(repeat[1] == 0.5f);
  const std::vector<float> none = logits_after(0, {1, 2, 3}, {4});
  CHECK(none[1] == 1.0f && none[4] == 1.0f);
}

TEST_CASE("sampler: validate_request checks prompt and stop ids against the vocabulary") {
  request r;
  r.prompt = {1, 2, 3};
  validate_request(r, 10, 8);
  r.prompt = {1, 10};
  CHECK_THROWS_WITH(validate_request(r, 10, 8), "prompt token id 10 at position 1 is outside the vocabulary");
  r.prompt = {-1};
  CHECK_THROWS_WITH(validate_request(r, 10, 8), "prompt token id -1");
  r.prompt = {};
  CHECK_THROWS_WITH(validate_request(r, 10, 8), "the prompt is empty");
  r.prompt = std::vector<int32_t>(8, 1);
  CHECK_THROWS_WITH(validate_request(r, 10, 8), "maxModelLen is 8");
  r.prompt = {1};
  r.params.stop_token_ids = {99};
  CHECK_THROWS_WITH(validate_request(r, 10, 8), "stopTokenIds entry 99");
}

TEST_CASE("sampler: top-p keeps a full sort's prefix for nuclei of every width (sorted in growing steps)") {
  const int32_t n = 20000;
  int widths_checked = 0;
  for (const float spread : {40.0f, 12.0f, 4.0f, 1.0f, 0.1f}) {
    std::vector<float> l = random_logits(n, uint64_t(spread * 10));
    for (float& x : l) x *= spread / 4.0f;
    for (const float p : {0.5f, 0.9f, 0.999f, 0.9999999f}) {
      std::vector<token_candidate> c;
      for (int32_t i = 0; i < n; ++i) c.push_back({i, l[size_t(i)]});
      std::vector<token_candidate> ref = c;
      keep_top_p(c, p);
      // the definition: sort everything, keep the shortest prefix whose mass reaches p
      std::sort(ref.begin(), ref.end(), [](const token_candidate& a, const token_candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
      });
      float mx = ref[0].logit;
      double sum = 0;
      for (int32_t i = 0; i < n; ++i) sum += std::exp(double(l[size_t(i)] - mx));
      double cum = 0;
      size_t keep = ref.size();
      for (size_t i = 0; i < ref.size(); ++i) {
        cum += std::exp(double(ref[i].logit - mx)) / sum;
        if (cum >= p) {
          keep = i + 1;
          break;
        }
      }
      ref.resize(keep);
      bool same = c.size() == ref.size();
      for (size_t i = 0; same && i < c.size(); ++i) same = c[i].id == ref[i].id;
      CHECK(same);
      if (keep > 256) ++widths_checked;
    }
  }
  CHECK(widths_checked >= 6);  // nuclei past the first sorted 256 (and past 1024, 4096) were exercised
}
