// Prompt logprobs (vLLM's prompt_logprobs) through the engine on a small real model (llama, F32): each prompt
// token's logprob and top alternatives equal compute_logprobs over the model's own logits rows from one forward
// pass, bit for bit, whatever the chunking; the request still generates exactly the tokens it would without them
// (greedy and seeded), next to another request that is unchanged; a cached prefix is never used for them; images
// are refused.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "harness.h"
#include "model/model.h"
#include "engine_outputs.h"
#include "model_test_gguf.h"

using namespace spindle;

namespace {

struct model_file : model_test::temp_llama {
  explicit model_file(int64_t context_length = 64) : temp_llama("llama-prompt-logprobs", context_length) {}
};

std::vector<int32_t> tokens_of(const std::vector<request_output>& steps) {
  std::vector<int32_t> t;
  for (const request_output& o : steps) t.insert(t.end(), o.tokens.begin(), o.tokens.end());
  return t;
}

// The prompt logprobs of a request's outputs, and how many steps carried some.
std::vector<token_logprob> prompt_lps_of(const std::vector<request_output>& steps, int* carriers = nullptr) {
  std::vector<token_logprob> lps;
  int n = 0;
  for (const request_output& o : steps) {
    if (o.prompt_logprobs.empty()) continue;
    lps = o.prompt_logprobs;
    n++;
  }
  if (carriers) *carriers = n;
  return lps;
}

std::vector<int32_t> prompt_of(int n, int salt, int n_vocab) {
  std::vector<int32_t> t((size_t)n);
  for (int i = 0; i < n; ++i) t[(size_t)i] = (int32_t)((i * 29 + salt * 13 + 3) % n_vocab);
  return t;
}

request generation(std::vector<int32_t> prompt, int32_t prompt_logprobs, float temperature = 0) {
  request r;
  r.prompt = std::move(prompt);
  r.params.temperature = temperature;
  r.params.has_seed = true;
  r.params.seed = 7;
  r.params.max_tokens = 5;
  r.params.ignore_eos = true;
  r.params.prompt_logprobs = prompt_logprobs;
  return r;
}

// The reference: every logits row of `prompt` from one forward pass, scored against the next prompt token.
std::vector<token_logprob> reference(model& m, const std::vector<int32_t>& prompt, int32_t top) {
  const int64_t V = m.hparams().n_vocab, n = (int64_t)prompt.size();
  auto kv = m.new_kv_cache(1, (int32_t)n);
  const std::vector<int32_t> table = {0};
  std::vector<float> logits((size_t)(n * V));
  batch_sequence b{prompt.data(), (int32_t)n, 0, table.data(), 1, (int32_t)n};
  m.forward_batch({b}, *kv, logits.data());
  std::vector<token_logprob> out;
  for (int64_t p = 0; p + 1 < n; ++p) out.push_back(compute_logprobs(logits.data() + p * V, (int32_t)V, prompt[(size_t)p + 1], top));
  return out;
}

bool same(const std::vector<token_logprob>& a, const std::vector<token_logprob>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].logprob != b[i].logprob || a[i].rank != b[i].rank || a[i].top_ids != b[i].top_ids ||
        a[i].top_logprobs != b[i].top_logprobs)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("engine prompt logprobs: the model's rows scored against the prompt, bit for bit, in any chunking") {
  model_file f;
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(21, 1, V);
  std::vector<int32_t> plain_tokens;
  // the step's whole budget; chunks of 6; of 5 (21 = 4 x 5 + 1: the last prompt token comes alone, as a decode)
  for (int32_t chunk : {0, 6, 5}) {
    engine_test::outputs outs;
    engine_options o;
    o.max_model_len = 64;
    o.chunked_prefill_size = chunk;
    engine e([&] { return f.load(); }, o, outs.sink());
    REQUIRE(outs.wait_ready());
    std::vector<std::vector<int32_t>> generated;
    for (int32_t top : {0, 3}) {
      const std::vector<request_output> steps = outs.wait(e.submit(generation(prompt, top)));
      int carriers = 0;
      const std::vector<token_logprob> lps = prompt_lps_of(steps, &carriers);
      CHECK(carriers == 1);  // with the first token only
      CHECK(lps.size() == prompt.size() - 1);
      CHECK(same(lps, reference(*ref_model, prompt, top)));
      CHECK(lps[0].top_ids.size() == (size_t)top);
      generated.push_back(tokens_of(steps));
    }
    const std::vector<request_output> plain_steps = outs.wait(e.submit(generation(prompt, -1)));
    CHECK(prompt_lps_of(plain_steps).empty());
    const std::vector<int32_t> plain = tokens_of(plain_steps);
    CHECK(plain.size() == 5u);
    for (const std::vector<int32_t>& g : generated) CHECK(g == plain);  // the same tokens with prompt logprobs
    if (plain_tokens.empty()) plain_tokens = plain;
    CHECK(plain == plain_tokens);  // whatever the chunking
  }
}

TEST_CASE("engine prompt logprobs: the same tokens as without them, greedy and seeded, beside another request") {
  model_file f;
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(17, 2, V), other = prompt_of(9, 3, V);
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 64;
  o.chunked_prefill_size = 6;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  for (float temperature : {0.0f, 0.9f}) {
    const std::vector<int32_t> alone = tokens_of(outs.wait(e.submit(generation(prompt, -1, temperature))));
    const std::vector<int32_t> other_alone = tokens_of(outs.wait(e.submit(generation(other, -1, temperature))));
    const uint64_t a = e.submit(generation(prompt, 2, temperature));
    const uint64_t b = e.submit(generation(other, -1, temperature));
    const std::vector<request_output> sa = outs.wait(a);
    CHECK(tokens_of(sa) == alone);
    CHECK(tokens_of(outs.wait(b)) == other_alone);
    CHECK(same(prompt_lps_of(sa), reference(*ref_model, prompt, 2)));
  }
}

TEST_CASE("engine prompt logprobs: never from a cached prefix; refused with images") {
  model_file f;
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(40, 4, V);
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 64;
  o.block_size = 8;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  const std::vector<request_output> plain = outs.wait(e.submit(generation(prompt, -1)));  // its blocks are cached now
  const std::vector<request_output> again = outs.wait(e.submit(generation(prompt, -1)));
  CHECK(again.front().cached_tokens > 0);
  const std::vector<request_output> scored = outs.wait(e.submit(generation(prompt, 1)));
  CHECK(scored.front().cached_tokens == 0);
  CHECK(same(prompt_lps_of(scored), reference(*ref_model, prompt, 1)));
  CHECK(tokens_of(scored) == tokens_of(plain));
  request with_image = generation(prompt, 0);
  with_image.images.push_back(request_image{});
  CHECK_THROWS_WITH(validate_request(with_image, V, 64),
                    "promptLogprobs cannot be combined with images (an image's positions have no token to score)");
}

TEST_CASE("engine prompt logprobs: a long prompt takes at most k_max_scored_rows scored rows a step, same values") {
  model_file f(1024);
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(600, 5, V), other = prompt_of(300, 6, V);
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 1024;
  o.max_num_batched_tokens = 1024;  // one step could take the whole prompt; the scored rows' cap splits it
  o.chunked_prefill_size = 0;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  const uint64_t a = e.submit(generation(prompt, 1));
  const uint64_t b = e.submit(generation(other, 2));  // two scoring requests share the cap
  CHECK(same(prompt_lps_of(outs.wait(a)), reference(*ref_model, prompt, 1)));
  CHECK(same(prompt_lps_of(outs.wait(b)), reference(*ref_model, other, 2)));
  const engine_stats st = e.stats();
  CHECK(st.steps >= (600 + 300) / 256);  // at least that many steps to score 898 rows 256 at a time
}
