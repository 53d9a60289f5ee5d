// Per-op timings of a backend (built with the tests: build/spindle_op_bench), to see where a decode step's time
// goes before tuning: the cost of one small op (launch / dispatch overhead), each matmul shape of a model at a
// few token counts (time per call and weight bytes per second), decode attention at a few context lengths, and
// choosing tokens from logits rows (argmax, sample_rows' chains, the download + host sampler they replace).
// Each figure is the mean of `reps` back-to-back calls with one sync at the end, after a warm-up call; weights
// hold a fixed byte pattern (timing only, values are meaningless).
//   spindle_op_bench [device=cuda] [reps=200] [n_embd=2048] [n_ff=8192] [n_vocab=128256]
// (SPINDLE_OP_BENCH_ATTENTION=1: the attention timings only)
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "gguf/ggml_type.h"

using namespace spindle;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
double per_call_us(backend& be, int reps, F&& f) {
  f();
  be.sync();
  const double t0 = now_s();
  for (int i = 0; i < reps; ++i) f();
  be.sync();
  return (now_s() - t0) / reps * 1e6;
}

// The same calls recorded as one step graph (backend::graph_begin / graph_end) and replayed: the GPU time per
// call without the host's launch cost (equal to per_call_us on a backend without graphs).
uint64_t g_key = 1;
template <class F>
double per_call_graph_us(backend& be, int reps, F&& f) {
  const uint64_t key = 0x5eed0000 + g_key++;
  const auto step = [&] {
    be.graph_begin(key);
    for (int i = 0; i < reps; ++i) f();
    be.graph_end();
  };
  step();  // first seen: op by op
  step();  // captured
  be.sync();
  const double t0 = now_s();
  step();
  be.sync();
  return (now_s() - t0) / reps * 1e6;
}

struct type_info {
  ggml_type type;
  const char* name;
  int block_values;
  int block_bytes;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string device = argc > 1 ? argv[1] : "cuda";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 200;
  const int64_t n_embd = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int64_t n_ff = argc > 4 ? std::atoll(argv[4]) : 8192;
  const int64_t n_vocab = argc > 5 ? std::atoll(argv[5]) : 128256;
  std::unique_ptr<backend> be = make_backend(device, 2);
  std::printf("backend %s, reps %d\n", be->name(), reps);

  const int64_t max_tok = 512, width = std::max(n_ff, n_embd);
  float* x = be->alloc_f32(max_tok * width);
  float* y = be->alloc_f32(max_tok * std::max(width, n_vocab));
  float* z = be->alloc_f32(max_tok * width);
  std::vector<float> ones((size_t)(max_tok * width), 0.01f);
  be->upload(x, ones.data(), max_tok * width);

  // SPINDLE_OP_BENCH_ATTENTION set: the attention timings only
  if (std::getenv("SPINDLE_OP_BENCH_ATTENTION") == nullptr) {
    // Small ops: what one step pays per op regardless of size.
    std::printf("small ops (one decode row of %lld): us per call launched / in a step graph\n", (long long)n_embd);
    const auto both = [&](const char* name, auto&& f) {
      const double a = per_call_us(*be, reps, f), g = per_call_graph_us(*be, reps, f);
      std::printf("  %-22s %8.2f / %6.2f us\n", name, a, g);
    };
    both("add", [&] { be->add(x, z, z, n_embd); });
    both("rms_norm", [&] { be->rms_norm(x, nullptr, z, 1, n_embd, 1e-5f); });
    both("swiglu (n_ff)", [&] { be->swiglu(x, x, z, n_ff); });
    const int32_t pos[1] = {7};
    rope_params rp;
    rp.n_rot = 64;
    both("rope (32 heads x 64)", [&] { be->rope(z, 1, 32, 64, pos, rp); });
    const int64_t dst_rows[1] = {3};
    both("copy_rows (1 x 512)", [&] { be->copy_rows(z, dst_rows, x, nullptr, 1, 512); });

    // Matmuls of the model's shapes.
    const type_info types[] = {{ggml_type::Q4_K, "q4_K", 256, 144}, {ggml_type::Q6_K, "q6_K", 256, 210},
                               {ggml_type::Q8_0, "q8_0", 32, 34},   {ggml_type::Q4_0, "q4_0", 32, 18},
                               {ggml_type::F16, "f16", 1, 2}};
    struct shape {
      const char* name;
      int64_t n_out, n_in;
    } shapes[] = {{"attn_q/o", n_embd, n_embd}, {"attn_kv", n_embd / 4, n_embd}, {"ffn_up", n_ff, n_embd},
                  {"ffn_down", n_embd, n_ff}, {"output", n_vocab, n_embd}};
    const int toks[] = {1, 2, 8, 64, 512};
    std::printf("matmul: us per call (weight GB/s) by tokens; g1: one token in a step graph\n");
    for (const type_info& ti : types) {
      for (const shape& s : shapes) {
        const int64_t bytes = s.n_out * s.n_in / ti.block_values * ti.block_bytes;
        std::vector<uint8_t> host((size_t)bytes, 0x11);
        backend_weight w = be->upload_weight(ti.type, host.data(), s.n_in, s.n_out);
        std::printf("  %-5s %-9s %6lldx%-6lld", ti.name, s.name, (long long)s.n_out, (long long)s.n_in);
        for (int t : toks) {
          const int r = t >= 64 ? std::max(4, reps / 20) : reps;
          const double us = per_call_us(*be, r, [&] { be->matmul(w, x, t, y); });
          std::printf("  t%-3d %8.1f (%6.0f)", t, us, (double)bytes / (us * 1e-6) / 1e9);
        }
        int flip = 0;  // alternate inputs, so each call quantizes its own (no reuse of the last quantization)
        const double g1 = per_call_graph_us(*be, reps, [&] { be->matmul(w, (flip++ & 1) ? z : x, 1, y); });
        std::printf("  g1 %6.1f (%6.0f)", g1, (double)bytes / (g1 * 1e-6) / 1e9);
        std::printf("\n");
        be->release_weight(w);
      }
    }
  }

  // Attention over each K / V store type the backend keeps (f32; f16, bf16 and fp8 on a GPU; the block types on the
  // CPU).
  for (const kv_type kv : {kv_type::f32, kv_type::f16, kv_type::bf16, kv_type::fp8_e4m3, kv_type::fp8_e5m2,
                           kv_type::q8_0, kv_type::q4_0}) {
    if (!be->supports_kv(kv)) continue;
    const char* kv_name = kv_type_name(kv);
    const double kv_elem_bytes = (double)kv_bytes(kv, 32) / 32;
    // Decode attention: one query row per sequence, n_seqs sequences of n_ctx positions (llama-1B heads).
    std::printf("attention_paged_batch, %s K / V, one query per sequence (32 q heads, 8 kv heads, dim 64, block 16):\n",
                kv_name);
    for (int n_seqs : {1, 16, 64}) {
      for (int n_ctx : {128, 1024, 4096}) {
        const int32_t block = 16, per_seq = (n_ctx + block - 1) / block, n_blocks = per_seq * n_seqs;
        const int64_t row = 8 * 64;
        float* k = be->alloc_f32(kv_store_floats(kv, (int64_t)n_blocks * block * row));
        float* v = be->alloc_f32(kv_store_floats(kv, (int64_t)n_blocks * block * row));
        float* q = be->alloc_f32((int64_t)n_seqs * 32 * 64);
        float* o = be->alloc_f32((int64_t)n_seqs * 32 * 64);
        std::vector<int32_t> tables((size_t)n_blocks);
        for (int32_t i = 0; i < n_blocks; ++i) tables[(size_t)i] = i;
        std::vector<paged_attention_params> seqs((size_t)n_seqs);
        for (int s = 0; s < n_seqs; ++s) {
          paged_attention_params& p = seqs[(size_t)s];
          p.attn.n_tokens = 1;
          p.attn.n_past = n_ctx - 1;
          p.attn.n_head = 32;
          p.attn.n_head_kv = 8;
          p.attn.head_dim_k = p.attn.head_dim_v = 64;
          p.attn.k_row_stride = p.attn.v_row_stride = row;
          p.attn.scale = 0.125f;
          p.attn.kv = kv;
          p.block_table = tables.data() + (size_t)s * per_seq;
          p.n_table = per_seq;
          p.block_size = block;
          p.n_blocks = n_blocks;
        }
        const double us = per_call_us(*be, std::max(4, reps / 10),
                                      [&] { be->attention_paged_batch(seqs.data(), n_seqs, q, k, v, o); });
        const double gus = per_call_graph_us(*be, std::max(4, reps / 10),
                                             [&] { be->attention_paged_batch(seqs.data(), n_seqs, q, k, v, o); });
        const double kv_bytes = 2.0 * n_seqs * n_ctx * row * kv_elem_bytes;
        std::printf("  seqs %-3d ctx %-5d %9.1f us (%6.0f GB/s of K/V), in a step graph %9.1f us\n", n_seqs, n_ctx, us,
                    kv_bytes / (us * 1e-6) / 1e9, gus);
        be->free_f32(k);
        be->free_f32(v);
        be->free_f32(q);
        be->free_f32(o);
      }
    }
    // Prompt attention: one causal sequence of n_tok query rows from position 0 (llama-1B and qwen3-0.6B heads).
    std::printf("attention_paged, %s K / V, one prompt (causal, block 16):\n", kv_name);
    struct heads { int32_t n_head, n_head_kv, hd; };
    for (const heads h : {heads{32, 8, 64}, heads{16, 8, 128}}) {
      for (int n_tok : {512, 1024, 4096}) {
        const int32_t block = 16, n_blocks = (n_tok + block - 1) / block;
        const int64_t kv_row = (int64_t)h.n_head_kv * h.hd, q_row = (int64_t)h.n_head * h.hd;
        float* k = be->alloc_f32(kv_store_floats(kv, (int64_t)n_blocks * block * kv_row));
        float* v = be->alloc_f32(kv_store_floats(kv, (int64_t)n_blocks * block * kv_row));
        float* q = be->alloc_f32(n_tok * q_row);
        float* o = be->alloc_f32(n_tok * q_row);
        std::vector<int32_t> table((size_t)n_blocks);
        for (int32_t i = 0; i < n_blocks; ++i) table[(size_t)i] = i;
        paged_attention_params p;
        p.attn.n_tokens = n_tok;
        p.attn.n_head = h.n_head;
        p.attn.n_head_kv = h.n_head_kv;
        p.attn.head_dim_k = p.attn.head_dim_v = h.hd;
        p.attn.k_row_stride = p.attn.v_row_stride = kv_row;
        p.attn.scale = 1.0f / std::sqrt((float)h.hd);
        p.attn.kv = kv;
        p.block_table = table.data();
        p.n_table = n_blocks;
        p.block_size = block;
        p.n_blocks = n_blocks;
        const double us = per_call_us(*be, std::max(4, reps / 10), [&] { be->attention_paged(p, q, k, v, o); });
        const double flops = 4.0 * h.n_head * h.hd * ((double)n_tok * (n_tok + 1) / 2);  // q.k and p.v, causal
        std::printf("  heads %d/%d dim %-3d rows %-5d %9.1f us (%6.1f TFLOP/s)\n", h.n_head, h.n_head_kv, h.hd, n_tok,
                    us, flops / (us * 1e-6) / 1e12);
        be->free_f32(k);
        be->free_f32(v);
        be->free_f32(q);
        be->free_f32(o);
      }
    }
  }
  // Choosing tokens from n_vocab logits rows (random, sd 2): the greedy argmax, sample_rows for the chains a
  // request may ask (no edits), and what the engine did before sample_rows: every row to the host, then the
  // host's sampler.
  std::printf("choosing tokens from %lld logits (us per call):\n", (long long)n_vocab);
  for (const int64_t rows : {int64_t(1), int64_t(64)}) {
    float* l = be->alloc_f32(rows * n_vocab);
    {
      std::vector<float> host((size_t)(rows * n_vocab));
      uint64_t s = 88172645463325252ull;
      for (float& v : host) {  // xorshift, the sum of four uniforms: roughly normal
        float a = 0;
        for (int k = 0; k < 4; ++k) s ^= s << 13, s ^= s >> 7, s ^= s << 17, a += (float)(s >> 40) / 16777216.0f;
        v = (a - 2.0f) * 3.5f;
      }
      be->upload(l, host.data(), rows * n_vocab);
    }
    std::vector<int32_t> ids((size_t)rows);
    const int sreps = std::max(4, reps / 10);
    std::printf("  rows %-3lld argmax_rows %9.1f\n", (long long)rows,
                per_call_us(*be, sreps, [&] { be->argmax_rows(l, rows, n_vocab, n_vocab, ids.data()); }));
    struct chain { const char* name; float temperature; int32_t top_k; float top_p, min_p; };
    for (const chain c : {chain{"temperature 1", 1.0f, -1, 1.0f, 0.0f}, chain{"top-k 40", 0.8f, 40, 1.0f, 0.0f},
                          chain{"top-k 40 top-p 0.9", 0.8f, 40, 0.9f, 0.0f}, chain{"top-p 0.9", 1.0f, -1, 0.9f, 0.0f},
                          chain{"min-p 0.05", 1.0f, -1, 1.0f, 0.05f}}) {
      std::vector<sample_spec> specs((size_t)rows);
      for (int64_t r = 0; r < rows; ++r) {
        sample_spec& sp = specs[(size_t)r];
        sp.temperature = c.temperature, sp.top_k = c.top_k, sp.top_p = c.top_p, sp.min_p = c.min_p;
        sp.u01 = (double(r) + 0.5) / double(rows);
      }
      const double on = per_call_us(*be, sreps, [&] { be->sample_rows(l, rows, n_vocab, n_vocab, specs.data(), ids.data()); });
      std::vector<float> host((size_t)(rows * n_vocab));
      sample_scratch scratch;
      const double off = per_call_us(*be, sreps, [&] {
        be->download(host.data(), l, rows * n_vocab);
        for (int64_t r = 0; r < rows; ++r)
          ids[(size_t)r] = sample_row_host(host.data() + r * n_vocab, (int32_t)n_vocab, specs[(size_t)r], scratch);
      });
      std::printf("  rows %-3lld %-20s sample_rows %9.1f   download + host sampler %9.1f\n", (long long)rows, c.name,
                  on, off);
    }
    be->free_f32(l);
  }
  be->free_f32(x);
  be->free_f32(y);
  be->free_f32(z);
  return 0;
}
