// Whole models on the CUDA backend against the CPU backend: teacher-forced logits of every position (the same
// token sequence on both), for the dense (llama, qwen2, qwen3, gemma3), hybrid (lfm2) and MoE (qwen3moe, lfm2moe) test
// models in every weight type, and batch invariance on the GPU (sequences prefilled in chunks and batched with others
// == each alone, bit for bit). Tolerances, relative to the largest |logit| of the CPU run:
//   F32 2e-5; F16 2e-3, BF16 2e-2 (the CPU rounds activations to f16 / bf16 as llama.cpp does, the GPU keeps
//   f32: one bf16 ulp is 4e-3); every quantized type 6e-2 (the CPU quantizes activations to llama.cpp's
//   q8_0 / q8_1 / q8_K, the GPU to q8 per 32 or 256 values with f32 scales; cuda_matmul_test shows the GPU's
//   matmul error is at most twice the CPU's, so most of this is the CPU's own error through the layers),
// and the greedy token must agree wherever the CPU's top two logits are further apart than that tolerance.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "lfm2_test_gguf.h"
#include "lora_test_gguf.h"
#include "model/lora.h"
#include "model/model.h"
#include "moe_test_gguf.h"

using namespace gpu_test;

namespace {

struct file {
  std::string path;
  explicit file(const model_test::built& b, const std::string& tag) : path(model_test::write_temp(b, tag)) {}
  ~file() { std::error_code ec; std::filesystem::remove(path, ec); }
};

std::unique_ptr<model> load_on(const std::string& path, const char* device, kv_type kv = kv_type::f32,
                               bool step_graphs = true) {
  model_options o;
  o.threads = 2;
  o.device = device;
  o.kv = kv;
  o.step_graphs = step_graphs;
  return model::load(path, o);
}

std::vector<int32_t> prompt(int n, int n_vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 37 + salt * 13 + 5) % n_vocab);
  t[0] = 1;
  return t;
}

// Logits of every position [n, n_vocab]: a 7-token chunk, the rest up to decode_from as one chunk, then one token
// per call (decode steps) from decode_from on.
std::vector<float> all_logits(model& m, const std::vector<int32_t>& tokens, int decode_from = INT32_MAX) {
  const int64_t V = m.hparams().n_vocab, n = (int64_t)tokens.size(), chunk_end = std::min<int64_t>(n, decode_from);
  std::vector<float> out(n * V);
  auto seq = m.new_sequence(n);
  m.forward(*seq, tokens.data(), 7, out.data(), true);
  if (chunk_end > 7) m.forward(*seq, tokens.data() + 7, chunk_end - 7, out.data() + 7 * V, true);
  for (int64_t t = std::max<int64_t>(chunk_end, 7); t < n; ++t) {
    m.forward(*seq, tokens.data() + t, 1, out.data() + t * V, true);
  }
  return out;
}

double tolerance(ggml_type t) {
  switch (t) {
    case ggml_type::F32: return 2e-5;
    case ggml_type::F16: return 2e-3;
    case ggml_type::BF16: return 2e-2;
    default: return 6e-2;
  }
}

// Compares the two backends' logits (the GPU's KV cache of type kv, the CPU's of type cpu_kv: the GPU cache's rounding
// adds kv_tol) over n_tokens positions (all_logits: decode steps from decode_from on); prints the figures.
// routed (MoE models with quantized weights): the two backends quantize activations differently (about 2% of a
// logit's scale), and a token whose k-th and next expert scores lie closer than that may take another expert on
// one backend, moving that position's logits by far more than the weight type's tolerance (the lfm2moe fixture's
// smallest CPU margins between the chosen and the next sigmoid score are 1.1e-3 .. 5e-3 with scores near 0.6). So
// there the tolerance holds for the median position, beside greedy agreement at every decided position; f32
// weights route bit for bit and keep the max.
void compare(const std::string& what, ggml_type type, const std::string& path, kv_type kv = kv_type::f32,
             double kv_tol = 0, bool routed = false, kv_type cpu_kv = kv_type::f32, int n_tokens = 24,
             int decode_from = INT32_MAX) {
  auto cpu = load_on(path, "cpu", cpu_kv);
  auto gpu = load_on(path, "cuda", kv);
  CHECK(gpu->kv_dtype() == kv);
  const int64_t V = cpu->hparams().n_vocab;
  const std::vector<int32_t> toks = prompt(n_tokens, (int)V, 1);
  const std::vector<float> lc = all_logits(*cpu, toks, decode_from), lg = all_logits(*gpu, toks, decode_from);
  const double tol = tolerance(type) + kv_tol, rel = max_rel(lg, lc);
  int agree = 0, decided = 0;
  double scale = 0;
  for (float v : lc) scale = std::max(scale, (double)std::fabs(v));
  for (size_t t = 0; t < toks.size(); ++t) {
    const float* c = lc.data() + t * V;
    const float* g = lg.data() + t * V;
    const int64_t ac = std::max_element(c, c + V) - c, ag = std::max_element(g, g + V) - g;
    float second = -INFINITY;
    for (int64_t v = 0; v < V; ++v) if (v != ac) second = std::max(second, c[v]);
    if (c[ac] - second > tol * scale) {
      ++decided;
      agree += ac == ag;
    }
  }
  std::printf("  %-9s %-5s max |gpu - cpu| / max |cpu| = %.2e (tol %.0e), greedy %d/%d decided positions agree\n",
              what.c_str(), ggml_type_info((uint32_t)type)->name, rel, tol, agree, decided);
  CHECK_EQ(agree, decided);
  if (!routed || type == ggml_type::F32) {
    CHECK(rel <= tol);
    return;
  }
  std::vector<double> per_pos(toks.size());  // each position's max |gpu - cpu| / max |cpu|
  int over = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    double d = 0;
    for (int64_t v = 0; v < V; ++v) d = std::max(d, (double)std::fabs(lg[t * V + v] - lc[t * V + v]));
    per_pos[t] = d / scale;
    over += per_pos[t] > tol;
  }
  std::vector<double> sorted = per_pos;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double median = sorted[sorted.size() / 2];
  std::printf("            routed: median position %.2e, %d/%zu positions over tol\n", median, over, toks.size());
  CHECK(median <= tol);
}

const std::vector<ggml_type>& all_types() {
  static const std::vector<ggml_type> t = {ggml_type::F32,  ggml_type::F16,    ggml_type::BF16, ggml_type::Q8_0,
                                           ggml_type::Q4_0, ggml_type::Q4_1,   ggml_type::Q5_0, ggml_type::Q5_1,
                                           ggml_type::IQ4_NL, ggml_type::Q2_K, ggml_type::Q3_K, ggml_type::Q4_K,
                                           ggml_type::Q5_K, ggml_type::Q6_K,   ggml_type::IQ4_XS};
  return t;
}

model_test::spec dense_spec(const std::string& arch, ggml_type t) {
  model_test::spec s;
  s.arch = arch;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  s.qkv_bias = arch == "qwen2";
  s.weight_type = t;
  s.seed = 21;
  return s;
}

// gemma3: dense_spec's widths in 6 layers (the default pattern: layer 5 global, the others sliding) with a window
// of `window` positions (8: compare's 24 positions, batch_invariance's 5 .. 12 and decode_run's up to 60 see it
// slide), tied output, rope.freq_base 1e6 scaled by 8 on the global layer; head dim 64 (4 / 2 heads: the tensor-core
// attention kernels) or 256 (key_length; q is 1024 wide: the per-row kernel, with an f32 KV cache on the GPU).
model_test::spec gemma3_spec(ggml_type t, int head_dim, int window = 8) {
  model_test::spec s = dense_spec("gemma3", t);
  s.n_layer = 6;
  s.head_dim = head_dim;
  s.sliding_window = window;
  s.tied = true;
  s.rope_base = 1e6f;
  s.rope_scale = 8.0f;
  return s;
}

lfm2_test::spec lfm2_spec(ggml_type t) {
  lfm2_test::spec s;
  s.n_embd = 256;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 512;
  s.weight_type = t;
  return s;
}

// lfm2moe: lfm2_spec's layers, the first dense, the rest MoE (sigmoid gating with a selection bias).
lfm2_test::spec lfm2moe_spec(ggml_type t) {
  lfm2_test::spec s = lfm2_spec(t);
  s.n_expert = 6;
  s.n_used = 2;
  s.n_ff_exp = 256;
  s.n_dense_lead = 1;
  return s;
}

moe_test::moe_spec moe_spec(ggml_type t) {
  moe_test::moe_spec m;
  m.base = dense_spec("qwen3", t);
  m.n_expert = 6;
  m.n_used = 2;
  m.n_ff_exp = 256;
  return m;
}

// Three sequences prefilled in chunks and batched with each other == each alone in its own cache, bitwise.
void batch_invariance(const std::string& path, kv_type kv_dtype = kv_type::f32) {
  auto m = load_on(path, "cuda", kv_dtype);
  const int64_t V = m->hparams().n_vocab;
  const std::vector<std::vector<int32_t>> seqs = {prompt(9, (int)V, 2), prompt(5, (int)V, 3), prompt(12, (int)V, 4)};
  std::vector<std::vector<float>> alone;
  for (const auto& s : seqs) {
    auto kv = m->new_kv_cache(2, 16, 1);
    const int32_t table[2] = {0, 1};
    batch_sequence b{s.data(), (int32_t)s.size(), 0, table, 2, (int32_t)s.size(), 0};
    alone.emplace_back(s.size() * V);
    m->forward_batch({b}, *kv, alone.back().data());
  }
  auto kv = m->new_kv_cache(8, 4, 3);  // blocks of 4: every sequence spans several, interleaved
  const int32_t t0[3] = {7, 0, 5}, t1[2] = {1, 6}, t2[3] = {2, 4, 3};
  const int32_t* tables[3] = {t0, t1, t2};
  const int32_t tables_n[3] = {3, 2, 3};
  // step 1: 4 tokens of s0, all of s1, 7 of s2; step 2: the rest of s0 and s2
  const int32_t split[3] = {4, 5, 7};
  std::vector<float> step1((4 + 5 + 7) * V), step2((5 + 5) * V);
  std::vector<batch_sequence> b1, b2;
  for (int i = 0; i < 3; ++i)
    b1.push_back({seqs[i].data(), split[i], 0, tables[i], tables_n[i], split[i], i});
  m->forward_batch(b1, *kv, step1.data());
  for (int i : {0, 2})
    b2.push_back({seqs[i].data() + split[i], (int32_t)seqs[i].size() - split[i], split[i], tables[i], tables_n[i],
                  (int32_t)seqs[i].size() - split[i], i});
  m->forward_batch(b2, *kv, step2.data());
  CHECK(same_bits(step1.data(), alone[0].data(), 4 * V));
  CHECK(same_bits(step1.data() + 4 * V, alone[1].data(), 5 * V));
  CHECK(same_bits(step1.data() + 9 * V, alone[2].data(), 7 * V));
  CHECK(same_bits(step2.data(), alone[0].data() + 4 * V, 5 * V));
  CHECK(same_bits(step2.data() + 5 * V, alone[2].data() + 7 * V, 5 * V));
}

// Greedy decoding of three sequences in one paged cache, batched, for 40 steps, with the batch changing shape
// (a sequence leaves for 6 steps, then comes back): every step's logits, concatenated. Blocks of 4 positions,
// so tables grow while decoding.
std::vector<float> decode_run(const std::string& path, int n_seqs = 3, bool step_graphs = true) {
  auto m = load_on(path, "cuda", kv_type::f32, step_graphs);
  const int64_t V = m->hparams().n_vocab;
  std::vector<std::vector<int32_t>> prompts = {prompt(9, (int)V, 5), prompt(20, (int)V, 6), prompt(3, (int)V, 7)};
  for (int s = 3; s < n_seqs; ++s) prompts.push_back(prompt(4 + s, (int)V, 5 + s));
  auto kv = m->new_kv_cache(n_seqs * 16, 4, n_seqs);
  std::vector<std::vector<int32_t>> tables(n_seqs);
  for (int s = 0; s < n_seqs; ++s)
    for (int b = 0; b < 16; ++b) tables[s].push_back(n_seqs * b + (s + b) % n_seqs);  // interleaved blocks
  std::vector<int32_t> pos(n_seqs), next(n_seqs);
  std::vector<float> all, logits(n_seqs * V);
  for (int s = 0; s < n_seqs; ++s) {  // prefill each alone (the 20-token prompt exceeds the graph limit: op by op)
    batch_sequence b{prompts[s].data(), (int32_t)prompts[s].size(), 0, tables[s].data(), 16, 1, s};
    m->forward_batch({b}, *kv, logits.data());
    all.insert(all.end(), logits.begin(), logits.begin() + V);
    next[s] = (int32_t)(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    pos[s] = (int32_t)prompts[s].size();
  }
  for (int step = 0; step < 40; ++step) {
    std::vector<batch_sequence> batch;
    std::vector<int> who;
    for (int s = 0; s < n_seqs; ++s) {
      if (s == 1 && step >= 10 && step < 16) continue;
      batch.push_back({&next[s], 1, pos[s], tables[s].data(), 16, 1, s});
      who.push_back(s);
    }
    m->forward_batch(batch, *kv, logits.data());
    all.insert(all.end(), logits.begin(), logits.begin() + (int64_t)who.size() * V);
    for (size_t i = 0; i < who.size(); ++i) {
      const float* row = logits.data() + i * V;
      next[who[i]] = (int32_t)(std::max_element(row, row + V) - row);
      ++pos[who[i]];
    }
  }
  return all;
}

// Greedy decoding after prompts longer than one 256-position attention chunk (decode attention merges chunks), two
// sequences batched for 16 steps: every step's logits. Blocks of 8 positions.
std::vector<float> long_decode_run(const std::string& path) {
  auto m = load_on(path, "cuda");
  const int64_t V = m->hparams().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {prompt(300, (int)V, 8), prompt(257, (int)V, 9)};
  auto kv = m->new_kv_cache(2 * 40, 8, 2);
  std::vector<std::vector<int32_t>> tables(2);
  for (int s = 0; s < 2; ++s)
    for (int b = 0; b < 40; ++b) tables[s].push_back(2 * b + (s + b) % 2);
  std::vector<int32_t> pos(2), next(2);
  std::vector<float> all, logits(2 * V);
  for (int s = 0; s < 2; ++s) {
    batch_sequence b{prompts[s].data(), (int32_t)prompts[s].size(), 0, tables[s].data(), 40, 1, s};
    m->forward_batch({b}, *kv, logits.data());
    next[s] = (int32_t)(std::max_element(logits.begin(), logits.begin() + V) - logits.begin());
    pos[s] = (int32_t)prompts[s].size();
  }
  for (int step = 0; step < 16; ++step) {
    std::vector<batch_sequence> batch;
    for (int s = 0; s < 2; ++s) batch.push_back({&next[s], 1, pos[s], tables[s].data(), 40, 1, s});
    m->forward_batch(batch, *kv, logits.data());
    all.insert(all.end(), logits.begin(), logits.end());
    for (int s = 0; s < 2; ++s) {
      const float* row = logits.data() + s * V;
      next[s] = (int32_t)(std::max_element(row, row + V) - row);
      ++pos[s];
    }
  }
  return all;
}

}  // namespace

TEST_CASE("cuda models: fused launches (SPINDLE_CUDA_FUSE) give the bits of the separate ones") {
  REQUIRE_GPU();
  // 8 query heads of 64 dims per 2 KV heads: each attention tile's output is one q8_256 group (quantized in the
  // attention kernel); gate / up over mmv8's bytes (one mmv_x32 launch); rope with the K/V store; short and long
  // contexts (chunks merged in the decode kernel)
  model_test::spec sp = dense_spec("llama", ggml_type::Q4_K);
  sp.n_embd = 512;
  sp.n_head = 8;
  sp.n_head_kv = 2;
  sp.n_ff = 16384;  // gate / up of 4.7 MB each: past k_mmv8_max_bytes
  file d(model_test::build(sp), "llama-fuse");
  for (bool long_ctx : {false, true}) {
    const auto run = [&] { return long_ctx ? long_decode_run(d.path) : decode_run(d.path); };
    const std::vector<float> separate = with_env("SPINDLE_CUDA_FUSE", "0", run);
    const std::vector<float> fused = run();
    REQUIRE(separate.size() == fused.size());
    CHECK(same_bits(separate.data(), fused.data(), fused.size()));
    // decode attention blocks of 1-8 warps in every launch (quantizing their output with fewer than 8 too)
    const std::vector<float> fewer = with_env("SPINDLE_CUDA_ATTN_WARPS", "context", run);
    REQUIRE(fewer.size() == fused.size());
    CHECK(same_bits(fewer.data(), fused.data(), fused.size()));
  }
  std::printf("  fused launches: the bits of separate ones, short and long contexts; so do fewer-warp attention blocks\n");
}

TEST_CASE("cuda models: step graphs replay decode steps with the bits of op-by-op steps") {
  REQUIRE_GPU();
  const auto check = [](const std::string& path, const char* what, int n_seqs = 3) {
    const cuda_graph_counts c0 = cuda_step_graph_counts();
    const std::vector<float> plain = with_env("SPINDLE_CUDA_GRAPHS", "0", [&] { return decode_run(path, n_seqs); });
    const cuda_graph_counts c1 = cuda_step_graph_counts();
    const std::vector<float> graphed = decode_run(path, n_seqs);
    const cuda_graph_counts c2 = cuda_step_graph_counts();
    CHECK(c1.replayed == c0.replayed);  // graphs off: none
    CHECK(c1.captured == c0.captured);
    CHECK(c2.replayed - c1.replayed >= 20);  // most of the 40 decode steps replay
    CHECK(c2.captured - c1.captured >= 2);   // at least the two batch shapes
    CHECK(c2.op_by_op == c1.op_by_op);
    std::printf("  %-16s steps: %llu replayed, %llu captured\n", what, (unsigned long long)(c2.replayed - c1.replayed),
                (unsigned long long)(c2.captured - c1.captured));
    REQUIRE(plain.size() == graphed.size());
    CHECK(same_bits(plain.data(), graphed.data(), plain.size()));
  };
  for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
    file d(model_test::build(dense_spec("llama", t)), "llama");
    file l(lfm2_test::build(lfm2_spec(t)), "lfm2");
    check(d.path, t == ggml_type::F32 ? "f32 llama" : "q4_K llama");
    check(l.path, t == ggml_type::F32 ? "f32 lfm2" : "q4_K lfm2");
  }
  // k-quant experts: every MoE layer takes the grouped path with routing on the device, so MoE decode steps
  // replay too
  file m(moe_test::build_qwen3moe(moe_spec(ggml_type::Q4_K)), "qwen3moe");
  check(m.path, "q4_K qwen3moe");
  // 8 sequences x 2 experts = 16 entries (>= 2 x 6 experts): the sorted-tiles expert path, replayed too
  check(m.path, "q4_K qwen3moe x8", 8);
  file lm(lfm2_test::build(lfm2moe_spec(ggml_type::Q4_K)), "lfm2moe");  // sigmoid gating and a selection bias
  check(lm.path, "q4_K lfm2moe");
  file g(model_test::build(gemma3_spec(ggml_type::Q4_K, 64)), "gemma3");  // windowed layers: their window slides
  check(g.path, "q4_K gemma3");
}

TEST_CASE("cuda models: model_options step_graphs = false (enforceEager) runs that model's steps op by op, same bits") {
  REQUIRE_GPU();
  file d(model_test::build(dense_spec("llama", ggml_type::Q4_K)), "llama");
  const cuda_graph_counts c0 = cuda_step_graph_counts();
  const std::vector<float> eager = decode_run(d.path, 3, false);
  const cuda_graph_counts c1 = cuda_step_graph_counts();
  CHECK(c1.replayed == c0.replayed);
  CHECK(c1.captured == c0.captured);
  const std::vector<float> graphed = decode_run(d.path);
  CHECK(cuda_step_graph_counts().replayed > c1.replayed);  // another model of the process still replays
  REQUIRE(eager.size() == graphed.size());
  CHECK(same_bits(eager.data(), graphed.data(), eager.size()));
}

TEST_CASE("cuda models: dense llama / qwen2 / qwen3 logits vs the CPU backend, every weight type") {
  REQUIRE_GPU();
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    for (ggml_type t : all_types()) {
      const model_test::spec s = dense_spec(arch, t);
      file f(model_test::build(s), arch);
      compare(arch, t, f.path);
    }
  }
}

// gemma3: sliding-window layers (window 8 of 24 positions), their own rope, q / k norms, post norms, geglu, embeddings
// times sqrt(n_embd), every weight type at head dims 64 and 256; then 300 positions with a window of 40 (the windows
// of positions 256 .. 294 straddle the tensor-core kernels' 256-position chunks, every window two or more of the
// per-row kernel's 32-position splits), positions 280 .. 299 as decode steps (the split-K decode kernel). The weight
// types' tolerances are the dense models': the CPU's own error against a double reference on the dequantized
// weights measured at most 3.3e-2 of the logit scale on these models (q3_K, head dim 64; dense_spec's llama: 2.5e-2).
TEST_CASE("cuda models: gemma3 logits vs the CPU backend (sliding-window layers), head dims 64 and 256") {
  REQUIRE_GPU();
  for (int hd : {64, 256}) {
    const std::string what = "gemma3/" + std::to_string(hd);
    for (ggml_type t : all_types()) {
      file f(model_test::build(gemma3_spec(t, hd)), "gemma3");
      compare(what, t, f.path);
    }
    for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
      file f(model_test::build(gemma3_spec(t, hd, 40)), "gemma3-long");
      compare(what + " long", t, f.path, kv_type::f32, 0, false, kv_type::f32, 300, 280);
    }
  }
}

TEST_CASE("cuda models: lfm2, qwen3moe and lfm2moe logits vs the CPU backend") {
  REQUIRE_GPU();
  for (ggml_type t : all_types()) {
    file f(lfm2_test::build(lfm2_spec(t)), "lfm2");
    compare("lfm2", t, f.path);
  }
  for (ggml_type t : {ggml_type::F32, ggml_type::Q8_0, ggml_type::Q4_K}) {
    file f(moe_test::build_qwen3moe(moe_spec(t)), "qwen3moe");
    compare("qwen3moe", t, f.path, kv_type::f32, 0, true);
    file g(lfm2_test::build(lfm2moe_spec(t)), "lfm2moe");
    compare("lfm2moe", t, g.path, kv_type::f32, 0, true);
  }
}

// LoRA adapters on the GPU (backend::lora_add's default there: matmul, matmul, scale, add) against the CPU backend's
// (its own rank-one kernel: the same products, another summation order): an F32 / F16 adapter of rank 8 / 16 on
// every projection and the output head of a Q4_K and an F16 model, within the weight type's tolerance; rows with and
// without the adapter mixed in one batch get their bits alone.
TEST_CASE("cuda models: LoRA adapters vs the CPU backend; mixed rows as alone") {
  REQUIRE_GPU();
  for (ggml_type t : {ggml_type::Q4_K, ggml_type::F16}) {
    const model_test::spec s = dense_spec("llama", t);
    const model_test::built base = model_test::build(s);
    for (const auto& [type, rank] : {std::pair<ggml_type, int>{ggml_type::F32, 8}, {ggml_type::F16, 16}}) {
      lora_test::adapter_spec a;
      a.type = type;
      a.rank = rank;
      a.alpha = float(rank);
      a.targets = {"output.weight"};
      for (int il = 0; il < s.n_layer; ++il) {
        for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
          a.targets.push_back("blk." + std::to_string(il) + "." + n + ".weight");
        }
      }
      file f(base, "llama-lora"), af(lora_test::build_adapter(base, a), "llama-lora-adapter");
      auto cpu = load_on(f.path, "cpu");
      auto gpu = load_on(f.path, "cuda");
      auto lc = cpu->load_lora(af.path, 1), lg = gpu->load_lora(af.path, 1);
      const int64_t V = cpu->hparams().n_vocab;
      const std::vector<int32_t> t1 = prompt(12, (int)V, 3), t2 = prompt(9, (int)V, 4);
      const auto run = [&](model& m, const lora_adapter* l1, bool with_other) {
        auto kv = m.new_kv_cache(2, 32);
        std::vector<int32_t> tab0 = {0}, tab1 = {1};
        std::vector<batch_sequence> batch;
        batch_sequence b1{t1.data(), (int32_t)t1.size(), 0, tab0.data(), 1, (int32_t)t1.size()};
        b1.lora = l1;
        batch.push_back(b1);
        if (with_other) batch.push_back(batch_sequence{t2.data(), (int32_t)t2.size(), 0, tab1.data(), 1, (int32_t)t2.size()});
        std::vector<float> out((t1.size() + (with_other ? t2.size() : 0)) * V);
        m.forward_batch(batch, *kv, out.data());
        out.resize(t1.size() * V);
        return out;
      };
      const std::vector<float> c = run(*cpu, lc.get(), false), g = run(*gpu, lg.get(), false);
      const std::vector<float> base_g = run(*gpu, nullptr, false);
      const double rel = max_rel(g, c), moved = max_rel(base_g, c);
      std::printf("  lora %s model, %s adapter rank %d: max |gpu - cpu| / max |cpu| = %.2e (tol %.0e); the adapter moves %.2e\n",
                  ggml_type_info((uint32_t)t)->name, ggml_type_info((uint32_t)type)->name, rank, rel, tolerance(t), moved);
      CHECK(rel <= tolerance(t));
      CHECK(moved > 10 * tolerance(t));  // the comparison is not vacuous
      CHECK(run(*gpu, lg.get(), true) == g);  // beside a base-model sequence: the same bits
    }
  }
}

// Embeddings: the hidden rows (batch_sequence::hidden, the states after the output norm) of a prompt on the GPU
// vs the CPU's, within the logits' tolerance, and the same bits whether the batch also holds a decode-like
// sequence wanting logits (whose logits keep their bits too).
TEST_CASE("cuda models: hidden rows (embeddings) vs the CPU; a batch around them changes no bits") {
  REQUIRE_GPU();
  for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
    file f(model_test::build(dense_spec("llama", t)), "llama-hidden");
    auto cpu = load_on(f.path, "cpu");
    auto gpu = load_on(f.path, "cuda");
    const int V = (int)cpu->hparams().n_vocab, E = (int)cpu->hparams().n_embd;
    const std::vector<int32_t> p = prompt(12, V, 3), q = prompt(3, V, 4), table0 = {0}, table1 = {1};
    const auto hidden_of = [&](model& m, bool with_other, std::vector<float>* other_logits) {
      auto kv = m.new_kv_cache(2, 16);
      std::vector<float> rows((size_t)12 * E), lg((size_t)V);
      batch_sequence h{p.data(), 12, 0, table0.data(), 1, 12};
      h.hidden = rows.data();
      batch_sequence g{q.data(), 3, 0, table1.data(), 1, 1};
      m.forward_batch(with_other ? std::vector<batch_sequence>{g, h} : std::vector<batch_sequence>{h}, *kv,
                      with_other ? lg.data() : nullptr);
      if (other_logits) *other_logits = lg;
      return rows;
    };
    const std::vector<float> c = hidden_of(*cpu, false, nullptr), g_alone = hidden_of(*gpu, false, nullptr);
    std::vector<float> lg_mixed;
    const std::vector<float> g_mixed = hidden_of(*gpu, true, &lg_mixed);
    const double rel = max_rel(g_alone, c);
    std::printf("  hidden rows %-5s max |gpu - cpu| / max |cpu| = %.2e (tol %.0e)\n", ggml_type_info((uint32_t)t)->name,
                rel, tolerance(t));
    CHECK(rel <= tolerance(t));
    CHECK(g_mixed == g_alone);
    std::vector<float> lg_alone((size_t)V);
    auto kv = gpu->new_kv_cache(2, 16);
    batch_sequence g{q.data(), 3, 0, table1.data(), 1, 1};
    gpu->forward_batch({g}, *kv, lg_alone.data());
    CHECK(lg_mixed == lg_alone);
  }
}

TEST_CASE("cuda models: batch invariance (chunked, batched == alone, bitwise)") {
  REQUIRE_GPU();
  for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
    file d(model_test::build(dense_spec("qwen3", t)), "qwen3");
    batch_invariance(d.path);
    file l(lfm2_test::build(lfm2_spec(t)), "lfm2");
    batch_invariance(l.path);
    file m(moe_test::build_qwen3moe(moe_spec(t)), "qwen3moe");
    batch_invariance(m.path);
    file lm(lfm2_test::build(lfm2moe_spec(t)), "lfm2moe");
    batch_invariance(lm.path);
    for (int hd : {64, 256}) {  // windows of 8 over sequences of 5 .. 12 in blocks of 4
      file g(model_test::build(gemma3_spec(t, hd)), "gemma3");
      batch_invariance(g.path);
    }
  }
}

// Tokens a model samples on the GPU (batch_sequence::sample: backend::sample_rows) are those the host sampler
// draws from the same model's downloaded logits row, for every chain (top-p alone: up to its normalizer's
// rounding, which these rows never meet).
TEST_CASE("cuda models: tokens sampled on the GPU == the host's draws from the same logits, every chain") {
  REQUIRE_GPU();
  file f(model_test::build(dense_spec("llama", ggml_type::Q4_K)), "llama");
  auto m = load_on(f.path, "cuda");
  const int64_t V = m->hparams().n_vocab;
  const std::vector<int32_t> toks = prompt(12, (int)V, 9);
  const int32_t table[1] = {0};
  std::vector<float> row((size_t)V);
  {
    auto kv = m->new_kv_cache(1, 16, 1);
    batch_sequence b{toks.data(), (int32_t)toks.size(), 0, table, 1, 1, 0};
    m->forward_batch({b}, *kv, row.data());
  }
  const logit_edit edits[] = {{3, logit_edit_op::repetition, 1.3f}, {7, logit_edit_op::add_penalty, -0.5f},
                              {11, logit_edit_op::add_bias, 5.0f}, {2, logit_edit_op::mask, 0.0f}};
  struct chain { float temperature; int32_t top_k; float top_p, min_p; int n_edits; };
  int same = 0, n = 0;
  for (const chain c : {chain{0.0f, -1, 1.0f, 0.0f, 4}, chain{1.0f, -1, 1.0f, 0.0f, 0}, chain{0.7f, 40, 0.9f, 0.05f, 4},
                        chain{1.0f, -1, 0.9f, 0.0f, 0}, chain{1.0f, -1, 1.0f, 0.1f, 4}, chain{1.2f, 5, 1.0f, 0.0f, 0}}) {
    for (const double u01 : {0.03, 0.5, 0.97}) {
      sample_spec s;
      s.temperature = c.temperature, s.top_k = c.top_k, s.top_p = c.top_p, s.min_p = c.min_p, s.u01 = u01;
      s.edits = edits, s.n_edits = c.n_edits;
      auto kv = m->new_kv_cache(1, 16, 1);
      int32_t token = -1;
      batch_sequence b{toks.data(), (int32_t)toks.size(), 0, table, 1, 1, 0};
      b.argmax = &token;
      b.argmax_n = (int32_t)V;
      b.sample = &s;
      m->forward_batch({b}, *kv, nullptr);
      std::vector<float> host = row;
      sample_scratch scratch;
      const int32_t want = sample_row_host(host.data(), (int32_t)V, s, scratch);
      ++n;
      if (token == want) ++same;
      else std::printf("  chain t %.1f k %d p %.2f min-p %.2f u %.2f: gpu %d, host %d\n", c.temperature, c.top_k, c.top_p, c.min_p, u01, token, want);
    }
  }
  CHECK_EQ(same, n);
}

// 16-bit KV caches (--dtype float16 / bfloat16): the stored K / V are rounded (f16: 2^-11 relative, bf16: 2^-8), so
// the logits move by about that much more than with f32 stores; batch invariance holds as with f32 (bitwise).
TEST_CASE("cuda models: 16-bit KV caches (f16, bf16) vs the CPU's float32 one; batch invariance with them") {
  REQUIRE_GPU();
  for (const kv_type kv : {kv_type::f16, kv_type::bf16}) {
    const double kv_tol = kv == kv_type::f16 ? 5e-3 : 3e-2;
    for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
      file d(model_test::build(dense_spec("llama", t)), "llama");
      compare(kv == kv_type::f16 ? "llama kv16" : "llama bf16", t, d.path, kv, kv_tol);
      batch_invariance(d.path, kv);
      file l(lfm2_test::build(lfm2_spec(t)), "lfm2");
      compare(kv == kv_type::f16 ? "lfm2 kv16" : "lfm2 bf16", t, l.path, kv, kv_tol);
      batch_invariance(l.path, kv);
      file g(model_test::build(gemma3_spec(t, 64)), "gemma3");  // 16-bit stores: heads of at most 128
      compare(kv == kv_type::f16 ? "gemma3 kv16" : "gemma3 bf16", t, g.path, kv, kv_tol);
      batch_invariance(g.path, kv);
    }
  }
}

// What a cache type moves the CPU's logits from its float32 cache's (max |typed - f32| / max |f32|, compare's prompt).
double cpu_drift(const std::string& path, kv_type kv) {
  auto typed = load_on(path, "cpu", kv), f32 = load_on(path, "cpu");
  const std::vector<int32_t> toks = prompt(24, (int)typed->hparams().n_vocab, 1);
  return max_rel(all_logits(*typed, toks), all_logits(*f32, toks));
}

// fp8 KV caches (vLLM's --kv-cache-dtype fp8 / fp8_e5m2): the GPU against the CPU's cache of the same type. Both
// round each value to the same code (the op test checks the bits), but a value the two backends compute slightly
// differently can land on the neighbouring code (a step is 2^-3 / 2^-2 relative), so the tolerance adds what the
// type itself moves the CPU's logits from float32; batch invariance holds as with every store (bitwise).
TEST_CASE("cuda models: fp8 KV caches (e4m3, e5m2) vs the CPU's fp8 cache; batch invariance with them") {
  REQUIRE_GPU();
  for (const kv_type kv : {kv_type::fp8_e4m3, kv_type::fp8_e5m2}) {
    for (ggml_type t : {ggml_type::F32, ggml_type::Q4_K}) {
      file d(model_test::build(dense_spec("llama", t)), "llama");
      compare(std::string("llama ") + kv_type_name(kv), t, d.path, kv, cpu_drift(d.path, kv), false, kv);
      batch_invariance(d.path, kv);
      file l(lfm2_test::build(lfm2_spec(t)), "lfm2");
      compare(std::string("lfm2 ") + kv_type_name(kv), t, l.path, kv, cpu_drift(l.path, kv), false, kv);
      batch_invariance(l.path, kv);
    }
  }
}

TEST_CASE("cuda models: a q8_0 or q4_0 KV cache (the CPU's) asked on a GPU is float16; --dtype auto is float16 there; float32 for heads over 128") {
  REQUIRE_GPU();
  file d(model_test::build(dense_spec("llama", ggml_type::F32)), "llama");  // head dim 64: whole blocks
  for (const kv_type kv : {kv_type::q8_0, kv_type::q4_0}) {
    CHECK(load_on(d.path, "cuda", kv)->kv_dtype() == kv_type::f16);
    CHECK(load_on(d.path, "cpu", kv)->kv_dtype() == kv);
  }
  model_options o;
  o.device = "cuda";
  o.kv_auto = true;
  CHECK(model::load(d.path, o)->kv_dtype() == kv_type::f16);
  // heads over 128 dims: the 16-bit and fp8 attention cannot take them, so every type (auto included) is float32
  // there, and the model runs instead of failing its first step
  model_test::spec ws = dense_spec("llama", ggml_type::F32);
  ws.n_embd = 512;
  ws.n_head = 2;
  ws.n_head_kv = 1;  // head dim 256
  file w(model_test::build(ws), "wide");
  for (const kv_type kv : {kv_type::f16, kv_type::fp8_e4m3, kv_type::q8_0}) {
    auto m = load_on(w.path, "cuda", kv);
    CHECK(m->kv_dtype() == kv_type::f32);
  }
  auto wide_auto = model::load(w.path, o);
  CHECK(wide_auto->kv_dtype() == kv_type::f32);
  const std::vector<float> lw = all_logits(*wide_auto, prompt(12, (int)wide_auto->hparams().n_vocab, 3));
  CHECK(std::all_of(lw.begin(), lw.end(), [](float v) { return std::isfinite(v); }));
}

TEST_CASE("cuda models: lfm2 prefix-cache checkpoints and speculative rollback continue with recomputation's logits, bitwise") {
  REQUIRE_GPU();
  file f(lfm2_test::build(lfm2_spec(ggml_type::Q4_K)), "lfm2");
  auto m = load_on(f.path, "cuda");
  const int64_t V = m->hparams().n_vocab;
  const std::vector<int32_t> a = prompt(15, (int)V, 6);
  REQUIRE(m->checkpoint_bytes_per_block(4) > 0);
  auto kv = m->new_kv_cache(16, 4, 3);
  m->enable_block_checkpoints(*kv);
  // a in slot 0 as chunks [0, 7) and [7, 15): checkpoints at 4, 8 (its rows from the slot's state and the chunk), 12
  const int32_t ta[4] = {9, 2, 14, 5};
  std::vector<float> la(15 * V);
  m->forward_batch({batch_sequence{a.data(), 7, 0, ta, 4, 7, 0}}, *kv, la.data());
  m->forward_batch({batch_sequence{a.data() + 7, 8, 7, ta, 4, 8, 0}}, *kv, la.data() + 7 * V);
  for (int p : {4, 8, 12}) {  // a prefix-cache hit on a's first p / 4 blocks, continued in slot 2
    m->restore_from_block(*kv, 2, ta[p / 4 - 1], p);
    std::vector<int32_t> table(ta, ta + p / 4);
    for (int k = p / 4; k < 4; ++k) table.push_back(10 + k);  // fresh blocks after the shared prefix
    std::vector<float> lc((15 - p) * V);
    m->forward_batch({batch_sequence{a.data() + p, 15 - p, p, table.data(), 4, 15 - p, 2}}, *kv, lc.data());
    CHECK(same_bits(lc.data(), la.data() + (size_t)p * V, lc.size()));
  }
  // speculative decoding: a verify chunk [7, 13) keeps the states after 8 .. 12; rolled back to 9, a continues
  // with the logits of the run that never went past 9
  auto kv2 = m->new_kv_cache(16, 4, 1);
  const int32_t tb[4] = {0, 1, 2, 3};
  std::vector<float> l7(7 * V), lv(6 * V), lc(6 * V);
  m->forward_batch({batch_sequence{a.data(), 7, 0, tb, 4, 7, 0}}, *kv2, l7.data());
  batch_sequence verify{a.data() + 7, 6, 7, tb, 4, 6, 0};
  verify.n_rollback = 5;
  m->forward_batch({verify}, *kv2, lv.data());
  m->rollback_state(*kv2, 0, 9);
  m->forward_batch({batch_sequence{a.data() + 9, 6, 9, tb, 4, 6, 0}}, *kv2, lc.data());
  CHECK(same_bits(lc.data(), la.data() + 9 * V, lc.size()));
}

TEST_CASE("cuda models: device 'auto' takes the GPU for every quantization type; a type no backend has is named") {
  REQUIRE_GPU();
  file q5(model_test::build(dense_spec("qwen3", ggml_type::Q5_K)), "qwen3");
  CHECK(std::string(load_on(q5.path, "auto")->device_name()) == "cuda");
  file iq2(model_test::build(dense_spec("qwen3", ggml_type::IQ2_XXS)), "qwen3");  // bytes retyped: loading is the point
  CHECK_THROWS_WITH(load_on(iq2.path, "cuda"), "iq2_xxs");
  CHECK_THROWS_WITH(load_on(iq2.path, "auto"), "iq2_xxs");
}

TEST_CASE("cuda models: device 'cuda' without a usable GPU is a clear error") {
  std::string why;
  if (cuda_usable(&why)) SKIP("a GPU is present");
  CHECK_THROWS_WITH(make_backend("cuda", 1), "device 'cuda' is not available");
}
