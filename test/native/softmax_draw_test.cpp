// softmax_draw: the whole-vocabulary draw of untruncated sampling, against its definition.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "engine/sampler.h"
#include "engine/softmax_draw.h"
#include "harness.h"

using namespace spindle;

TEST_CASE("softmax_draw: weights are exp within 2 ulp, vector lanes and scalar tail alike; -inf, NaN and exp(<-87) weigh 0") {
  for (int32_t n : {1, 3, 4, 7, 64, 129, 1001}) {  // tails of every length past the 4-wide lanes
    std::vector<float> l((size_t)n), w((size_t)n);
    for (int32_t i = 0; i < n; ++i) l[(size_t)i] = -86.0f * float(i) / float(n) + 0.37f * float(i % 5);
    const float mx = *std::max_element(l.begin(), l.end());
    softmax_weights(l.data(), n, mx, 1.0f, w.data());
    double worst = 0;
    for (int32_t i = 0; i < n; ++i) {
      const float x = l[(size_t)i] - mx;  // the float argument the weights see
      if (x < -87.0f) {
        CHECK(w[(size_t)i] == 0.0f);
        continue;
      }
      const double e = std::exp(double(x));
      worst = std::max(worst, std::fabs(double(w[(size_t)i]) - e) / e);
    }
    CHECK(worst < 2.4e-7);  // 2 ulp (measured: 6e-8)
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {0.0f, -inf, std::nanf(""), -88.0f, -1.0f, -inf, 0.5f, -200.0f, -0.25f};
  std::vector<float> w(l.size());
  softmax_weights(l.data(), int32_t(l.size()), 0.5f, 1.0f, w.data());
  CHECK(w[1] == 0.0f);
  CHECK(w[2] == 0.0f);
  CHECK(w[5] == 0.0f);
  CHECK(w[7] == 0.0f);
  CHECK(w[6] == 1.0f);
  CHECK(w[0] > 0.0f);
  CHECK(w[3] == 0.0f);  // -88.5 below the floor
}

TEST_CASE("softmax_draw: draws over a 128k vocabulary follow softmax(logits / T), masked ids never drawn") {
  const int32_t n = 128256;
  std::vector<float> l((size_t)n, -12.0f);
  const float inf = std::numeric_limits<float>::infinity();
  // mass on ids in different blocks (and a block's last / first positions), a masked id with a high logit nearby
  const std::vector<int32_t> hot = {5, 63, 64, 70000, 128255};
  const std::vector<float> hot_logit = {2.0f, 1.0f, 1.5f, 2.5f, 0.5f};
  for (size_t k = 0; k < hot.size(); ++k) l[(size_t)hot[k]] = hot_logit[k];
  l[65] = -inf;
  const float temperature = 0.8f;
  double z = 0;
  std::vector<double> p((size_t)n);
  for (int32_t i = 0; i < n; ++i) z += p[(size_t)i] = l[(size_t)i] == -inf ? 0.0 : std::exp(double(l[(size_t)i]) / temperature);
  sampler_rng rng(17);
  softmax_draw_scratch s;
  const int draws = 20000;
  std::map<int32_t, int> counts;
  for (int d = 0; d < draws; ++d) counts[softmax_draw(l.data(), n, temperature, rng, s)]++;
  CHECK(counts.count(65) == 0);
  for (int32_t id : hot) CHECK_NEAR(double(counts[id]) / draws, p[(size_t)id] / z, 0.012);
  int rest = draws;
  for (int32_t id : hot) rest -= counts[id];
  double p_rest = 1.0;
  for (int32_t id : hot) p_rest -= p[(size_t)id] / z;
  CHECK_NEAR(double(rest) / draws, p_rest, 0.012);
}

TEST_CASE("softmax_draw: one rng value per draw, the argmax when no logit is finite, reproducible") {
  std::vector<float> l(300, -std::numeric_limits<float>::infinity());
  sampler_rng a(3), b(3);
  softmax_draw_scratch s;
  CHECK(softmax_draw(l.data(), 300, 1.0f, a, s) == 0);  // every id masked: argmax_first
  b.next();
  CHECK(a.next() == b.next());  // the draw took exactly one value
  for (int i = 0; i < 300; ++i) l[(size_t)i] = float((i * 37) % 11) * 0.3f;
  sampler_rng c(9), d(9);
  for (int k = 0; k < 50; ++k) CHECK(softmax_draw(l.data(), 300, 0.9f, c, s) == softmax_draw(l.data(), 300, 0.9f, d, s));
}
