// Embedding requests through the engine on a small real model (llama, F32): the pooled hidden states (mean, cls,
// last) equal the model's own hidden rows pooled in double, whatever the chunking, the batch around them or the
// prefix cache; nothing is generated; an input may fill the whole context.
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "engine/engine.h"
#include "harness.h"
#include "model/model.h"
#include "model_test_gguf.h"

using namespace spindle;

namespace {

struct model_file : model_test::temp_llama {
  explicit model_file(int64_t context_length = 64) : temp_llama("llama-embed", context_length) {}
};

// The engine's finished outputs, by id.
struct finished_outputs {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, request_output> done;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  bool ready = false;

  engine::sink_fn sink() {
    return [this](engine_event&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.type == engine_event::kind::ready) ready = true;
      for (request_output& o : ev.outputs) {
        auto& t = tokens[o.id];
        t.insert(t.end(), o.tokens.begin(), o.tokens.end());
        if (o.finish != finish_reason::none) done[o.id] = std::move(o);
      }
      cv.notify_all();
    };
  }
  bool wait_ready() {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return ready; });
  }
  request_output wait(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return done.count(id) != 0; });
    return done.count(id) ? done[id] : request_output{};
  }
};

std::vector<int32_t> prompt_of(int n, int salt, int n_vocab) {
  std::vector<int32_t> t((size_t)n);
  for (int i = 0; i < n; ++i) t[(size_t)i] = (int32_t)((i * 37 + salt * 11 + 5) % n_vocab);
  return t;
}

request embed_request(std::vector<int32_t> prompt, pooling_type p) {
  request r;
  r.prompt = std::move(prompt);
  r.pooling = p;
  return r;
}

// The reference: every hidden row of `prompt` from one forward_batch, pooled in double as the engine pools.
std::vector<float> reference(model& m, const std::vector<int32_t>& prompt, pooling_type p) {
  const int64_t E = m.hparams().n_embd, n = (int64_t)prompt.size();
  auto kv = m.new_kv_cache(1, (int32_t)n);
  const std::vector<int32_t> table = {0};
  std::vector<float> rows((size_t)(n * E));
  batch_sequence b{prompt.data(), (int32_t)n, 0, table.data(), 1, (int32_t)n};
  b.hidden = rows.data();
  m.forward_batch({b}, *kv, nullptr);
  std::vector<float> out((size_t)E);
  for (int64_t i = 0; i < E; ++i) {
    double sum = 0;
    for (int64_t t = 0; t < n; ++t) sum += rows[(size_t)(t * E + i)];
    out[(size_t)i] = p == pooling_type::mean ? float(sum * (1.0 / double(n)))
                     : p == pooling_type::cls ? rows[(size_t)i]
                                              : rows[(size_t)((n - 1) * E + i)];
  }
  return out;
}

}  // namespace

TEST_CASE("engine embeddings: mean, cls and last pooling equal the model's hidden rows pooled, in any chunking") {
  model_file f;
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(23, 1, V);
  for (int32_t chunk : {0, 5}) {  // the step's whole budget, or chunks of 5 tokens
    finished_outputs outs;
    engine_options o;
    o.max_model_len = 64;
    o.chunked_prefill_size = chunk;
    engine e([&] { return f.load(); }, o, outs.sink());
    REQUIRE(outs.wait_ready());
    for (pooling_type p : {pooling_type::mean, pooling_type::cls, pooling_type::last}) {
      const uint64_t id = e.submit(embed_request(prompt, p));
      const request_output r = outs.wait(id);
      CHECK(r.finish == finish_reason::stop);
      CHECK(r.error.empty());
      CHECK(outs.tokens[id].empty());  // nothing generated
      CHECK(r.embedding == reference(*ref_model, prompt, p));
      CHECK(r.queue_seconds >= 0);
      CHECK(r.prefill_seconds >= 0);
    }
  }
}

TEST_CASE("engine embeddings: batched with generation, both unchanged; the prefix cache serves last pooling only") {
  model_file f;
  auto ref_model = f.load();
  const int V = ref_model->hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_of(40, 2, V), gen_prompt = prompt_of(9, 3, V);
  finished_outputs outs;
  engine_options o;
  o.max_model_len = 64;
  o.block_size = 8;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  request g;
  g.prompt = gen_prompt;
  g.params.temperature = 0;
  g.params.max_tokens = 6;
  g.params.ignore_eos = true;
  const uint64_t alone = e.submit(g);
  outs.wait(alone);
  const uint64_t gen = e.submit(g);
  const uint64_t mean = e.submit(embed_request(prompt, pooling_type::mean));
  const uint64_t last = e.submit(embed_request(prompt, pooling_type::last));
  CHECK(outs.wait(gen).finish == finish_reason::length);
  CHECK(outs.tokens[gen] == outs.tokens[alone]);
  CHECK(outs.wait(mean).embedding == reference(*ref_model, prompt, pooling_type::mean));
  const request_output l = outs.wait(last);
  CHECK(l.embedding == reference(*ref_model, prompt, pooling_type::last));
  // the same input again: last pooling starts from the cached blocks (at least one token is computed), mean
  // pooling computes every row again
  const request_output l2 = outs.wait(e.submit(embed_request(prompt, pooling_type::last)));
  const request_output m2 = outs.wait(e.submit(embed_request(prompt, pooling_type::mean)));
  CHECK(l2.cached_tokens > 0);
  CHECK(m2.cached_tokens == 0);
  CHECK(l2.embedding == l.embedding);
  CHECK(m2.embedding == reference(*ref_model, prompt, pooling_type::mean));
}

TEST_CASE("engine embeddings: an input may fill the context; one token more is refused at submit") {
  model_file f;
  finished_outputs outs;
  engine_options o;
  o.max_model_len = 32;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  const int V = 40;
  const request_output r = outs.wait(e.submit(embed_request(prompt_of(32, 4, V), pooling_type::mean)));
  CHECK(r.error.empty());
  CHECK(r.embedding.size() == 32u);  // n_embd of the test model
  CHECK_THROWS_WITH(e.submit(embed_request(prompt_of(33, 4, V), pooling_type::mean)),
                    "the input has 33 tokens; maxModelLen is 32");
}
