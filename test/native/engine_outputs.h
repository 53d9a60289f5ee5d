// Collects an engine's events for the engine tests: every step's output of each request, by id, and readiness.
// Invariant: wait() returns once the request finished (or after 20 s, for a failing test to report).
#pragma once
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace engine_test {

using spindle::engine;
using spindle::engine_event;
using spindle::finish_reason;
using spindle::request_output;

// The engine's outputs, by id: every step's output kept (prompt logprobs come with the first token).
struct outputs {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::vector<request_output>> steps;
  std::map<uint64_t, bool> done;
  bool ready = false;
  std::string load_error;  // the load_error event's message
  std::map<int32_t, std::vector<std::string>> lora_events;  // by slot: each lora event's message ("" = done)
  std::vector<std::pair<std::string, int32_t>> flush_events;  // each cache_flush event's message and blocks dropped

  engine::sink_fn sink() {
    return [this](engine_event&& ev) {
      std::lock_guard<std::mutex> lock(mu);
      if (ev.type == engine_event::kind::ready) ready = true;
      if (ev.type == engine_event::kind::load_error) load_error = ev.message;
      if (ev.type == engine_event::kind::lora) lora_events[ev.lora_slot].push_back(ev.message);
      if (ev.type == engine_event::kind::cache_flush) flush_events.emplace_back(ev.message, ev.blocks_dropped);
      for (request_output& o : ev.outputs) {
        if (o.finish != finish_reason::none) done[o.id] = true;
        steps[o.id].push_back(std::move(o));
      }
      cv.notify_all();
    };
  }
  bool wait_ready() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return ready || !load_error.empty(); });
    return ready;
  }
  // The message of slot's n-th lora event (1-based), once it came ("<timeout>" after 20 s).
  std::string wait_lora(int32_t slot, size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return lora_events[slot].size() >= n; })) return "<timeout>";
    return lora_events[slot][n - 1];
  }
  // The n-th cache_flush event (1-based), once it came ({"<timeout>", -1} after 20 s).
  std::pair<std::string, int32_t> wait_flush(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return flush_events.size() >= n; })) return {"<timeout>", -1};
    return flush_events[n - 1];
  }
  // Every step's output of a finished request.
  std::vector<request_output> wait(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return done.count(id) != 0; });
    return steps[id];
  }
};

}  // namespace engine_test
