// Decode / prompt micro-benchmark of the model forward pass: loads a GGUF, runs a prompt of n_prompt tokens,
// then decodes n_gen tokens one at a time (greedy on the logits), printing tok/s of both phases and the time
// per decode step spent in the lm head share. For profiling (perf record -g /tmp/decode_bench ...).
// Not part of the CMake build; compile by hand from the repository root against a core library:
//   g++ -std=c++17 -O2 -g -Inative bench/native/decode_bench.cpp build-perf/libspindle_core.a -o /tmp/decode_bench -lpthread
//   /tmp/decode_bench model.gguf [n_prompt=128] [n_gen=16] [threads=2]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/model.h"

using namespace spindle;

static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.gguf [n_prompt] [n_gen] [threads]\n", argv[0]);
    return 2;
  }
  const int n_prompt = argc > 2 ? std::atoi(argv[2]) : 128;
  const int n_gen = argc > 3 ? std::atoi(argv[3]) : 16;
  model_options opt;
  opt.threads = argc > 4 ? std::atoi(argv[4]) : 2;
  try {
    auto m = model::load(argv[1], opt);
    const int32_t n_vocab = m->hparams().n_vocab;
    auto seq = m->new_sequence(n_prompt + n_gen + 1);
    std::vector<int32_t> prompt((size_t)std::max(1, n_prompt));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = (int32_t)((i * 7919 + 13) % (size_t)n_vocab);
    std::vector<float> logits((size_t)n_vocab);
    double t0 = now_s();
    m->forward(*seq, prompt.data(), (int64_t)prompt.size(), logits.data(), false);
    const double t_pp = now_s() - t0;
    int32_t tok = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
    t0 = now_s();
    for (int i = 0; i < n_gen; ++i) {
      m->forward(*seq, &tok, 1, logits.data(), false);
      tok = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const double t_tg = now_s() - t0;
    std::printf("pp%d: %.2f tok/s   tg%d: %.2f tok/s (%.2f ms/token)   last token %d\n", (int)prompt.size(),
                prompt.size() / t_pp, n_gen, n_gen / t_tg, 1e3 * t_tg / std::max(1, n_gen), tok);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
