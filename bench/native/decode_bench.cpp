// Prompt / decode / batched-decode micro-benchmark of the model forward pass (no engine, no sampling work):
//   pp  = one prompt of n_prompt tokens in one forward call (tokens/s),
//   tg  = n_gen single-token forward calls of one sequence (tokens/s),
//   bN  = n_gen forward_batch steps of n_seqs sequences, one token each (total tokens/s; the logits of every step
//         are read back, the next tokens are fixed pseudo-random ids rather than a host argmax, as
//         llama-batched-bench does), and the same steps with the model's argmax per sequence (as the engine runs
//         greedy requests: on a GPU one id per sequence comes back instead of n_seqs x n_vocab logits).
// With n_prompt > 8, also greedy decode after an n_prompt-token prompt (the serving workload's TPOT, which
// attends over n_prompt.. positions; the tg / bN figures above start after 8 tokens), and with
// SPINDLE_BENCH_CONTEXT_BATCH=1 n_seqs such sequences at once (n_seqs prompts prefilled per repetition: slow).
// A warm-up pass runs first (it also makes the backend's packed weight copies); each figure is the best of
// reps. The prompt figure is also printed as time to first token (ms) for a prompt of n_prompt tokens.
// SPINDLE_BENCH_ONLY=batch times the bN figures only (after the warm-up: for profiling a batch step).
// SPINDLE_BENCH_KV=f16 | bf16: a 16-bit KV cache (--dtype float16 / bfloat16) where the backend has one.
// Built with the tests (build/spindle_decode_bench); for profiling: perf record -g build/spindle_decode_bench ...
//   spindle_decode_bench model.gguf [n_prompt=128] [n_gen=16] [threads=2] [n_seqs=16] [reps=3] [device=cpu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

using namespace spindle;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int32_t argmax(const float* v, int32_t n) { return (int32_t)(std::max_element(v, v + n) - v); }

std::vector<int32_t> prompt_ids(int n, int salt, int32_t n_vocab) {
  std::vector<int32_t> ids((size_t)std::max(1, n));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)((i * 7919 + 13 + salt * 104729) % (size_t)n_vocab);
  return ids;
}

// Seconds for one prompt of n_prompt tokens on a fresh sequence.
double time_prompt(model& m, int n_prompt) {
  const int32_t n_vocab = m.hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_ids(n_prompt, 1, n_vocab);
  auto seq = m.new_sequence((int64_t)prompt.size() + 1);
  std::vector<float> logits((size_t)n_vocab);
  const double t0 = now_s();
  m.forward(*seq, prompt.data(), (int64_t)prompt.size(), logits.data(), false);
  return now_s() - t0;
}

// Host time of the greedy argmax over the vocabulary in the last time_decode (llama-bench's tg reads the logits
// back but picks no token: this is the part of tg's per-token time it does not spend).
double g_argmax_s = 0;

// Seconds for n_gen greedy single-token steps after an 8-token prompt.
double time_decode(model& m, int n_gen) {
  const int32_t n_vocab = m.hparams().n_vocab;
  const std::vector<int32_t> prompt = prompt_ids(8, 2, n_vocab);
  auto seq = m.new_sequence(8 + n_gen + 1);
  std::vector<float> logits((size_t)n_vocab);
  m.forward(*seq, prompt.data(), 8, logits.data(), false);
  int32_t tok = argmax(logits.data(), n_vocab);
  const double t0 = now_s();
  g_argmax_s = 0;
  for (int i = 0; i < n_gen; ++i) {
    m.forward(*seq, &tok, 1, logits.data(), false);
    const double ta = now_s();
    tok = argmax(logits.data(), n_vocab);
    g_argmax_s += now_s() - ta;
  }
  return now_s() - t0;
}

// Seconds for n_gen greedy single-token steps after an n_ctx0-token prompt (8 unless given), as the engine runs a
// greedy request: forward_batch with batch_sequence::argmax, so the model picks the token (on a GPU: one id to the
// host). With a spec, as the engine runs a sampled request: the model samples the token (batch_sequence::sample).
double time_decode_greedy(model& m, int n_gen, const sample_spec* spec = nullptr, int n_ctx0 = 8) {
  const int32_t n_vocab = m.hparams().n_vocab, block = n_ctx0 + n_gen + 8;
  auto kv = m.new_kv_cache(1, block, 1);
  const std::vector<int32_t> prompt = prompt_ids(n_ctx0, 2, n_vocab), table = {0};
  int32_t tok = 0;
  batch_sequence b{prompt.data(), n_ctx0, 0, table.data(), 1, 1, 0};
  b.argmax = &tok;
  b.argmax_n = n_vocab;
  b.sample = spec;
  m.forward_batch({b}, *kv, nullptr);
  const double t0 = now_s();
  for (int i = 0; i < n_gen; ++i) {
    const int32_t in = tok;
    b.tokens = &in;
    b.n_tokens = 1;
    b.first_pos = n_ctx0 + i;
    m.forward_batch({b}, *kv, nullptr);
  }
  return now_s() - t0;
}

// Seconds for n_gen forward_batch steps of n_seqs sequences decoding one token each (after 8-token prompts).
double time_batch(model& m, int n_seqs, int n_gen) {
  const int32_t n_vocab = m.hparams().n_vocab, block = 8 + n_gen + 8;
  auto kv = m.new_kv_cache(n_seqs, block, n_seqs);
  std::vector<std::vector<int32_t>> prompts, tables;
  std::vector<batch_sequence> batch((size_t)n_seqs);
  std::vector<int32_t> next((size_t)n_seqs);
  for (int s = 0; s < n_seqs; ++s) {
    prompts.push_back(prompt_ids(8, 10 + s, n_vocab));
    tables.push_back({s});
    batch[s] = batch_sequence{prompts[s].data(), 8, 0, tables[s].data(), 1, 1, s};
  }
  std::vector<float> logits((size_t)n_seqs * n_vocab);
  m.forward_batch(batch, *kv, logits.data());
  for (int s = 0; s < n_seqs; ++s) next[s] = argmax(logits.data() + (size_t)s * n_vocab, n_vocab);
  const double t0 = now_s();
  for (int i = 0; i < n_gen; ++i) {
    for (int s = 0; s < n_seqs; ++s) batch[s] = batch_sequence{&next[s], 1, 8 + i, tables[s].data(), 1, 1, s};
    m.forward_batch(batch, *kv, logits.data());
    // next tokens without a host argmax over n_seqs x n_vocab logits (as llama-batched-bench): the figure is the
    // forward pass with its logits read back, not the host's sampling
    for (int s = 0; s < n_seqs; ++s) next[s] = (int32_t)((s * 7919 + i * 104729 + 17) % n_vocab);
  }
  return now_s() - t0;
}

// Seconds for n_gen forward_batch steps of n_seqs greedy sequences (the model picks each next token) after
// n_ctx0-token prompts (8 unless given; each prompt in a forward pass of its own); with a spec, sampled ones.
double time_batch_greedy(model& m, int n_seqs, int n_gen, const sample_spec* spec = nullptr, int n_ctx0 = 8) {
  const int32_t n_vocab = m.hparams().n_vocab, block = n_ctx0 + n_gen + 8;
  auto kv = m.new_kv_cache(n_seqs, block, n_seqs);
  std::vector<std::vector<int32_t>> prompts, tables;
  std::vector<batch_sequence> batch((size_t)n_seqs);
  std::vector<int32_t> next((size_t)n_seqs), in((size_t)n_seqs);
  for (int s = 0; s < n_seqs; ++s) {
    prompts.push_back(prompt_ids(n_ctx0, 10 + s, n_vocab));
    tables.push_back({s});
    batch[s] = batch_sequence{prompts[s].data(), n_ctx0, 0, tables[s].data(), 1, 1, s};
    batch[s].argmax = &next[s];
    batch[s].argmax_n = n_vocab;
    batch[s].sample = spec;
    m.forward_batch({batch[s]}, *kv, nullptr);
  }
  const double t0 = now_s();
  for (int i = 0; i < n_gen; ++i) {
    in = next;
    for (int s = 0; s < n_seqs; ++s) {
      batch[s].tokens = &in[s];
      batch[s].n_tokens = 1;
      batch[s].first_pos = n_ctx0 + i;
    }
    m.forward_batch(batch, *kv, nullptr);
  }
  return now_s() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s model.gguf [n_prompt=128] [n_gen=16] [threads=2] [n_seqs=16] [reps=3] [device=cpu]\n",
                 argv[0]);
    return 2;
  }
  const int n_prompt = argc > 2 ? std::atoi(argv[2]) : 128;
  const int n_gen = argc > 3 ? std::atoi(argv[3]) : 16;
  model_options opt;
  opt.threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int n_seqs = argc > 5 ? std::atoi(argv[5]) : 16;
  const int reps = std::max(1, argc > 6 ? std::atoi(argv[6]) : 3);
  opt.device = argc > 7 ? argv[7] : "cpu";
  const char* kv = std::getenv("SPINDLE_BENCH_KV");
  // SPINDLE_BENCH_KV: f16, bf16 or any kv_type_name (float16, fp8_e4m3, q8_0, ...); else f32
  const std::string kv_name = kv ? kv : "";
  if (!kv_type_of_name(kv_name, &opt.kv)) opt.kv = kv_name == "f16" ? kv_type::f16 : kv_name == "bf16" ? kv_type::bf16 : kv_type::f32;
  try {
    auto m = model::load(argv[1], opt);
    double t = now_s();
    time_prompt(*m, 8);  // warm-up: first matmuls pack the weights (CPU), load kernels (GPU)
    time_decode(*m, 2);
    std::printf("warm-up (packs weights) %.2f s; KV cache %s\n", now_s() - t, kv_type_name(m->kv_dtype()));
    const char* only = std::getenv("SPINDLE_BENCH_ONLY");
    const bool batch_only = only && std::string(only) == "batch";
    double pp = 1e30, tg = 1e30, bt = 1e30, bt_greedy = 1e30, tg_argmax = 0, tg_greedy = 1e30;
    // sampled requests, the model choosing their tokens: the OpenAI default (temperature 1 over the whole
    // vocabulary) and Ollama's (temperature 0.8, top-k 40, top-p 0.9)
    sample_spec chains[2];
    chains[0].temperature = 1.0f, chains[0].u01 = 0.37;
    chains[1].temperature = 0.8f, chains[1].top_k = 40, chains[1].top_p = 0.9f, chains[1].u01 = 0.37;
    double tg_sampled[2] = {1e30, 1e30}, bt_sampled[2] = {1e30, 1e30};
    // Greedy decode at the prompt's context (the serving workload's TPOT: n_prompt in, n_gen out, so decode steps
    // attend over n_prompt..n_prompt + n_gen positions), one sequence and (SPINDLE_BENCH_CONTEXT_BATCH=1) n_seqs.
    const char* ctx_batch = std::getenv("SPINDLE_BENCH_CONTEXT_BATCH");
    const bool at_context = n_prompt > 8;
    const bool batch_at_context = at_context && n_seqs > 0 && ctx_batch && std::string(ctx_batch) == "1";
    double tg_ctx = 1e30, bt_ctx = 1e30;
    for (int r = 0; r < reps; ++r) {
      if (!batch_only) {
        pp = std::min(pp, time_prompt(*m, n_prompt));
        tg_greedy = std::min(tg_greedy, time_decode_greedy(*m, n_gen));
        const double t = time_decode(*m, n_gen);
        if (t < tg) {
          tg = t;
          tg_argmax = g_argmax_s;
        }
      }
      if (n_seqs > 0) bt = std::min(bt, time_batch(*m, n_seqs, n_gen));
      if (n_seqs > 0) bt_greedy = std::min(bt_greedy, time_batch_greedy(*m, n_seqs, n_gen));
      if (at_context && !batch_only) tg_ctx = std::min(tg_ctx, time_decode_greedy(*m, n_gen, nullptr, n_prompt));
      if (batch_at_context) bt_ctx = std::min(bt_ctx, time_batch_greedy(*m, n_seqs, n_gen, nullptr, n_prompt));
      for (int c = 0; c < 2; ++c) {
        if (!batch_only) tg_sampled[c] = std::min(tg_sampled[c], time_decode_greedy(*m, n_gen, &chains[c]));
        if (n_seqs > 0) bt_sampled[c] = std::min(bt_sampled[c], time_batch_greedy(*m, n_seqs, n_gen, &chains[c]));
      }
    }
    std::printf("device %s  pp%d: %.2f tok/s (TTFT %.2f ms)   tg%d: %.2f tok/s (%.3f ms/token)", opt.device.c_str(),
                n_prompt, n_prompt / pp, 1e3 * pp, n_gen, n_gen / tg, 1e3 * tg / std::max(1, n_gen));
    if (n_seqs > 0) std::printf("   b%d: %.2f tok/s (%.2fx tg)", n_seqs, n_seqs * n_gen / bt, (n_seqs * n_gen / bt) / (n_gen / tg));
    std::printf("\n  tg per token: %.1f us of it the host's argmax over %d logits; with the model's argmax (as the "
                "engine's greedy requests): %.2f tok/s (%.3f ms/token)\n", 1e6 * tg_argmax / std::max(1, n_gen),
                m->hparams().n_vocab, n_gen / tg_greedy, 1e3 * tg_greedy / std::max(1, n_gen));
    if (n_seqs > 0) {
      std::printf("  b%d with the model's argmax per sequence (as the engine's greedy requests): %.2f tok/s\n", n_seqs,
                  n_seqs * n_gen / bt_greedy);
    }
    if (at_context && (!batch_only || batch_at_context)) {
      std::printf("  greedy after a %d-token prompt (contexts %d..%d, as the serving workload):", n_prompt, n_prompt,
                  n_prompt + n_gen);
      if (!batch_only) std::printf(" tg %.3f ms/token", 1e3 * tg_ctx / std::max(1, n_gen));
      if (batch_at_context) std::printf("   b%d %.2f tok/s", n_seqs, n_seqs * n_gen / bt_ctx);
      std::printf("\n");
    }
    const char* chain_names[2] = {"temperature 1", "temperature 0.8 top-k 40 top-p 0.9"};
    for (int c = 0; c < 2; ++c) {
      std::printf("  sampled by the model, %s:", chain_names[c]);
      if (!batch_only) std::printf(" tg %.3f ms/token", 1e3 * tg_sampled[c] / std::max(1, n_gen));
      if (n_seqs > 0) std::printf("   b%d %.2f tok/s", n_seqs, n_seqs * n_gen / bt_sampled[c]);
      std::printf("\n");
    }
#ifdef SPINDLE_CUDA
    if (opt.device != "cpu") {
      const cuda_graph_counts c = cuda_step_graph_counts();
      const uint64_t steps = c.replayed + c.captured + c.first_seen;
      std::printf("step graphs: %llu replayed, %llu captured, %llu first seen, %llu op by op, host recording %.1f us "
                  "per step%s\n",
                  (unsigned long long)c.replayed, (unsigned long long)c.captured, (unsigned long long)c.first_seen,
                  (unsigned long long)c.op_by_op, steps ? c.record_seconds / (double)steps * 1e6 : 0.0,
                  std::getenv("SPINDLE_CUDA_GRAPHS") ? " (SPINDLE_CUDA_GRAPHS set)" : "");
    }
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
