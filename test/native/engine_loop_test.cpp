// Engine loop tests on a scripted fake model: load events, FCFS generation, one event per step, abort,
// close (abort and drain), forward failures, validation at submit.
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>

#include "engine/engine.h"
#include "engine_fakes.h"
#include "harness.h"

using namespace spindle;
using engine_test::fake_model;

namespace {

// Collects the sink's events; wait() blocks until a predicate over them holds (or 5 s pass).
struct collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<engine_event> events;

  engine::sink_fn sink() {
    return [this](engine_event&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(std::move(ev));
      cv.notify_all();
    };
  }
  template <typename Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(5), [&] { return pred(events); });
  }
  bool wait_kind(engine_event::kind k) {
    return wait([k](const std::vector<engine_event>& evs) {
      for (auto& e : evs) if (e.type == k) return true;
      return false;
    });
  }
  bool wait_finished(uint64_t id) {
    return wait([id](const std::vector<engine_event>& evs) {
      for (auto& e : evs)
        for (auto& o : e.outputs) if (o.id == id && o.finish != finish_reason::none) return true;
      return false;
    });
  }
  // Everything reported for one request, merged.
  request_output merged(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    request_output r;
    r.id = id;
    for (auto& e : events) {
      for (auto& o : e.outputs) {
        if (o.id != id) continue;
        r.tokens.insert(r.tokens.end(), o.tokens.begin(), o.tokens.end());
        r.text += o.text;
        if (o.finish != finish_reason::none) r.finish = o.finish;
        if (!o.error.empty()) r.error = o.error;
      }
    }
    return r;
  }
};

// Counts up from the last token through the pieces, EOG ("</s>" = 1) after `len` generated positions.
std::shared_ptr<fake_model> counting_model(int64_t eog_at = 1000) {
  return std::make_shared<fake_model>(
      std::vector<std::string>{"a", "b", "c", "d", "e"},
      [eog_at](int64_t pos, int32_t last) { return pos >= eog_at ? 1 : 3 + (last - 3 + 1 + 5) % 5; });
}

// Engine options with max_model_len (and max_num_seqs) set, the rest their defaults.
engine_options options(int32_t max_model_len, int32_t max_num_seqs = engine_options{}.max_num_seqs) {
  engine_options o;
  o.max_model_len = max_model_len;
  o.max_num_seqs = max_num_seqs;
  return o;
}

request make_request(std::vector<int32_t> prompt, int32_t max_tokens = -1) {
  request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  return r;
}

}  // namespace

TEST_CASE("engine: a load failure is reported, then closed; submit names the failure") {
  collector c;
  engine e([]() -> std::shared_ptr<model> { throw error("model.gguf: bad magic"); }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::closed));
  REQUIRE(c.events.size() == 2);
  CHECK(c.events[0].type == engine_event::kind::load_error);
  CHECK_EQ(c.events[0].message, std::string("model.gguf: bad magic"));
  CHECK_THROWS_WITH(e.submit(make_request({0, 3})), "the model failed to load: model.gguf: bad magic");
}

TEST_CASE("engine: ready carries the model info; maxModelLen defaults to the trained context") {
  collector c;
  engine e([] { return counting_model(); }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  const model_info& info = c.events[0].info;
  CHECK_EQ(info.arch, std::string("fake"));
  CHECK_EQ(info.n_vocab, 8);
  CHECK_EQ(info.max_model_len, 64);
  CHECK_EQ(info.bos_text, std::string("<s>"));
  CHECK_EQ(info.eos_text, std::string("</s>"));
  CHECK(info.eog_ids == std::vector<int32_t>({1, 2}));
  CHECK(info.has_chat_template);
  CHECK_EQ(info.chat_template, std::string("{{ messages }}"));
  CHECK(e.loaded_model() != nullptr);

  collector d;
  engine too_long([] { return counting_model(); }, options(100), d.sink());
  REQUIRE(d.wait_kind(engine_event::kind::load_error));
  CHECK(d.events[0].message.find("maxModelLen 100 exceeds the model's trained context length 64") !=
        std::string::npos);
}

TEST_CASE("engine: generates token by token, one event per step, until EOG") {
  collector c;
  engine e([] { return counting_model(/*eog_at=*/5); }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t id = e.submit(make_request({0, 3}));  // "<s>a": positions 2, 3, 4 -> b c d, position 5 -> EOG
  REQUIRE(c.wait_finished(id));
  request_output r = c.merged(id);
  CHECK(r.finish == finish_reason::stop);
  CHECK(r.tokens == std::vector<int32_t>({4, 5, 6, 1}));
  CHECK_EQ(r.text, std::string("bcd"));
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& ev : c.events) {
    if (ev.type != engine_event::kind::step) continue;
    REQUIRE(ev.outputs.size() == 1);
    CHECK_EQ(ev.outputs[0].tokens.size(), size_t(1));
  }
}

TEST_CASE("engine: a request's phases: queue and prefill with its first token, decode with its finish") {
  collector c;
  engine e([] { return counting_model(/*eog_at=*/5); }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t id = e.submit(make_request({0, 3}));  // four tokens, the last EOG
  REQUIRE(c.wait_finished(id));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(c.mu);
  std::vector<const request_output*> outs;
  for (auto& ev : c.events)
    for (auto& o : ev.outputs)
      if (o.id == id) outs.push_back(&o);
  REQUIRE(outs.size() == size_t(4));
  for (size_t i = 0; i < outs.size(); ++i) {
    const request_output& o = *outs[i];
    CHECK_EQ(o.queue_seconds >= 0, i == 0);  // -1 elsewhere
    CHECK_EQ(o.prefill_seconds > 0, i == 0);
    CHECK_EQ(o.decode_seconds > 0, i + 1 == outs.size());
    CHECK_EQ(o.inference_seconds > 0, i + 1 == outs.size());
  }
  CHECK(outs[0]->queue_seconds + outs[0]->prefill_seconds + outs.back()->decode_seconds <= wall);
  CHECK(std::fabs(outs.back()->inference_seconds - (outs[0]->prefill_seconds + outs.back()->decode_seconds)) < 1e-3);
}

TEST_CASE("engine: logit rows past the tokenizer's vocabulary are never sampled") {
  collector c;
  // 8 tokenizer ids, 2 padding rows; the model always favours padding row 9.
  auto padded = std::make_shared<fake_model>(std::vector<std::string>{"a", "b", "c", "d", "e"},
                                             [](int64_t, int32_t) { return 9; }, 64, 2);
  engine e([padded] { return padded; }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  CHECK_THROWS_WITH(e.submit(make_request({0, 8})), "prompt token id 8 at position 1 is outside the vocabulary [0, 8)");
  for (float temperature : {0.0f, 1.0f}) {
    request r = make_request({0, 3}, 6);
    r.params.temperature = temperature;
    r.params.ignore_eos = true;
    uint64_t id = e.submit(std::move(r));
    REQUIRE(c.wait_finished(id));
    request_output out = c.merged(id);
    CHECK_EQ(out.error, std::string(""));
    CHECK(out.finish == finish_reason::length);
    REQUIRE(out.tokens.size() == 6);
    for (int32_t t : out.tokens) CHECK(t >= 0 && t < 8);
  }
}

TEST_CASE("engine: the model samples a sampled request's tokens, unless the request wants logprobs") {
  collector c;
  auto m = counting_model();
  engine e([m] { return m; }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  request r = make_request({0, 3}, 4);
  r.params.temperature = 1.0f;
  r.params.seed = 5, r.params.has_seed = true;
  request with_logprobs = r;
  with_logprobs.params.logprobs = 0;
  const uint64_t a = e.submit(std::move(r));
  REQUIRE(c.wait_finished(a));
  CHECK_EQ(m->sampled_rows.load(), 4);  // every token, the first (the prompt's last row) included
  const uint64_t b = e.submit(std::move(with_logprobs));
  REQUIRE(c.wait_finished(b));
  CHECK_EQ(m->sampled_rows.load(), 4);  // sampled on the host from the downloaded rows
  CHECK(c.merged(a).tokens == c.merged(b).tokens);
  CHECK(c.merged(a).tokens == std::vector<int32_t>({4, 5, 6, 7}));
}

TEST_CASE("engine: requests run batched; maxTokens and the context give length") {
  collector c;
  // the engine thread waits in its first output event until all three are queued (a fast step could otherwise run
  // b to its end before d arrives, on a loaded machine)
  std::promise<void> go;
  std::shared_future<void> gate = go.get_future().share();
  std::atomic<bool> first{true};
  auto collect = c.sink();
  engine e([] { return counting_model(); }, options(12), [&, collect](engine_event&& ev) {
    if (!ev.outputs.empty() && first.exchange(false)) gate.wait();
    collect(std::move(ev));
  });
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t a = e.submit(make_request({0, 3}, 3));
  uint64_t b = e.submit(make_request({0, 4}));  // runs until the context (12) is full
  uint64_t d = e.submit(make_request({0, 5}, 2));
  go.set_value();
  REQUIRE(c.wait_finished(d));
  REQUIRE(c.wait_finished(a));
  REQUIRE(c.wait_finished(b));
  CHECK(c.merged(a).tokens == std::vector<int32_t>({4, 5, 6}));
  CHECK(c.merged(a).finish == finish_reason::length);
  CHECK_EQ(c.merged(b).tokens.size(), size_t(10));
  CHECK(c.merged(b).finish == finish_reason::length);
  CHECK(c.merged(b).error.empty());
  CHECK(c.merged(d).finish == finish_reason::length);
  // the shortest request finishes first: the three run together, not one after another
  std::vector<uint64_t> order;
  for (auto& ev : c.events)
    for (auto& o : ev.outputs) if (o.finish != finish_reason::none) order.push_back(o.id);
  CHECK_EQ(order.size(), size_t(3));
  CHECK_EQ(order.back(), b);
  engine_stats s = e.stats();
  CHECK_EQ(s.requests_finished, uint64_t(3));
  CHECK_EQ(s.generated_tokens, uint64_t(15));
  CHECK_EQ(s.prompt_tokens, uint64_t(6));
  CHECK_EQ(s.running, 0);
  CHECK_EQ(s.waiting, 0);
  CHECK_EQ(s.kv_blocks_used, 0);
  CHECK_EQ(s.kv_blocks_free, s.kv_blocks_total);
}

TEST_CASE("engine: abort stops a running request within a step and drops a waiting one") {
  collector c;
  auto m = counting_model();
  m->delay_ms = 2;
  engine e([m] { return m; }, options(0, /*max_num_seqs=*/1), c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t running = e.submit(make_request({0, 3}));
  uint64_t waiting = e.submit(make_request({0, 3}));
  REQUIRE(c.wait([&](const std::vector<engine_event>& evs) { return evs.size() >= 4; }));
  e.abort(waiting);
  e.abort(running);
  e.abort(12345);  // unknown: ignored
  REQUIRE(c.wait_finished(running));
  REQUIRE(c.wait_finished(waiting));
  CHECK(c.merged(running).finish == finish_reason::abort);
  CHECK(c.merged(running).tokens.size() < 40);
  CHECK(c.merged(waiting).finish == finish_reason::abort);
  CHECK(c.merged(waiting).tokens.empty());
  CHECK_EQ(e.stats().requests_finished, uint64_t(2));
}

TEST_CASE("engine: close aborts in-flight requests and reports closed last") {
  collector c;
  auto m = counting_model();
  m->delay_ms = 2;
  engine e([m] { return m; }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t a = e.submit(make_request({0, 3}));
  uint64_t b = e.submit(make_request({0, 3}));
  e.close(false);
  REQUIRE(c.wait_kind(engine_event::kind::closed));
  e.join();
  CHECK(c.merged(a).finish == finish_reason::abort);
  CHECK(c.merged(b).finish == finish_reason::abort);
  CHECK(c.events.back().type == engine_event::kind::closed);
  CHECK_THROWS_WITH(e.submit(make_request({0, 3})), "the engine is closed");
  CHECK(e.stats().closed);
}

TEST_CASE("engine: close with drain lets queued requests finish") {
  collector c;
  engine e([] { return counting_model(); }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t a = e.submit(make_request({0, 3}, 4));
  uint64_t b = e.submit(make_request({0, 4}, 4));
  e.close(true);
  REQUIRE(c.wait_kind(engine_event::kind::closed));
  CHECK(c.merged(a).finish == finish_reason::length);
  CHECK(c.merged(b).finish == finish_reason::length);
  CHECK_EQ(c.merged(b).tokens.size(), size_t(4));
}

TEST_CASE("engine: a failing forward fails that request only") {
  collector c;
  auto m = counting_model();
  m->fail_at_position = 5;
  engine e([m] { return m; }, {}, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  uint64_t a = e.submit(make_request({0, 3}));
  REQUIRE(c.wait_finished(a));
  request_output r = c.merged(a);
  CHECK(r.finish == finish_reason::abort);
  CHECK_EQ(r.error, std::string("injected forward failure"));
  m->fail_at_position = -1;
  uint64_t b = e.submit(make_request({0, 3}, 2));
  REQUIRE(c.wait_finished(b));
  CHECK(c.merged(b).finish == finish_reason::length);
}

TEST_CASE("engine: submit validates before queueing and refuses while loading") {
  collector c;
  std::mutex gate;
  gate.lock();
  engine e([&gate] { std::lock_guard<std::mutex> g(gate); return counting_model(); }, options(16), c.sink());
  CHECK_THROWS_WITH(e.submit(make_request({0, 3})), "not ready");
  gate.unlock();
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  CHECK_THROWS_WITH(e.submit(make_request({0, 8})), "outside the vocabulary");
  CHECK_THROWS_WITH(e.submit(make_request(std::vector<int32_t>(16, 3))), "maxModelLen is 16");
  request bad = make_request({0, 3});
  bad.params.top_p = 2;
  CHECK_THROWS_WITH(e.submit(bad), "topP");
  CHECK_EQ(e.stats().waiting, 0);
}

TEST_CASE("engine: a prompt takes up to the step's whole budget unless chunkedPrefillSize says less") {
  const auto steps_for = [](int32_t chunk, bool gpu) {
    collector c;
    engine_options o;
    o.chunked_prefill_size = chunk;
    engine e([gpu] {
      auto m = std::make_shared<fake_model>(std::vector<std::string>{"a", "b", "c", "d", "e"},
                                            [](int64_t, int32_t) { return 3; }, 4096);
      if (gpu) m->fake_total = m->fake_free = uint64_t(8) << 30;
      return m;
    }, o, c.sink());
    REQUIRE(c.wait_kind(engine_event::kind::ready));
    const uint64_t id = e.submit(make_request(std::vector<int32_t>(1500, 3), 1));
    REQUIRE(c.wait_finished(id));
    CHECK_EQ(c.merged(id).tokens.size(), size_t(1));
    return e.stats().steps;
  };
  CHECK_EQ(steps_for(0, true), uint64_t(1));     // GPU budget 2048: one step (was two of 512)
  CHECK_EQ(steps_for(512, true), uint64_t(3));   // told 512: 512 + 512 + 476
  CHECK_EQ(steps_for(0, false), uint64_t(6));    // CPU budget 256: five of 256 and one of 220
  CHECK_EQ(steps_for(-1, true), uint64_t(1));    // never split
}

TEST_CASE("engine: prompt tokens count a prompt's last token when it comes alone") {
  collector c;
  engine_options o;
  o.chunked_prefill_size = 5;  // a 6-token prompt: 5, then the last one alone (scheduled as a decode)
  engine e([] { return counting_model(); }, o, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  const uint64_t id = e.submit(make_request({3, 4, 5, 6, 7, 3}, 2));
  REQUIRE(c.wait_finished(id));
  const engine_stats st = e.stats();
  CHECK_EQ(st.prompt_tokens, uint64_t(6));
  CHECK_EQ(st.generated_tokens, uint64_t(2));
  CHECK_EQ(st.steps, uint64_t(3));  // 5 prompt tokens, the last one, then the second generated token
  CHECK(st.forward_seconds > 0);
  CHECK(st.step_seconds >= st.forward_seconds);
}

TEST_CASE("engine: on a GPU model, kvCacheMemory is vLLM's gpu_memory_utilization") {
  const auto gpu_model = [] {
    auto m = counting_model();
    m->fake_total = uint64_t(8) << 30;  // 8 GiB device, 2 GiB already in use (weights)
    m->fake_free = uint64_t(6) << 30;
    return m;
  };
  collector c;
  engine_options o;
  o.kv_cache_memory = 0.5;  // may hold 4 GiB: 2 GiB left for the KV cache
  engine e([&] { return gpu_model(); }, o, c.sink());
  REQUIRE(c.wait_kind(engine_event::kind::ready));
  CHECK_EQ(c.events[0].info.device, std::string("fake-gpu"));
  CHECK(e.stats().kv_blocks_total > 0);

  collector d;
  o.kv_cache_memory = 0.2;  // 1.6 GiB < the 2 GiB in use
  engine full([&] { return gpu_model(); }, o, d.sink());
  REQUIRE(d.wait_kind(engine_event::kind::load_error));
  CHECK(d.events[0].message.find("gpu memory utilization 0.2 leaves no room for the KV cache") != std::string::npos);
}
