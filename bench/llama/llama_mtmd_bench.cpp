// (Not built by this project; bench/vision.mjs says how.) llama.cpp's multimodal path timed on one raw RGB image:
//   llama_mtmd_bench MODEL MMPROJ IMAGE.rgb W H REPS THREADS
// Per repetition, on a fresh KV cache: tokenize the prompt with the image (preprocessing), encode the image chunk
// (mtmd_encode_chunk: encode time), then evaluate every chunk and take the next token's logits (time to first
// token = tokenize + encode + prefill). Prints one JSON line: { positions, encode_ms: [...], ttft_ms: [...] }.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

static void quiet(ggml_log_level, const char*, void*) {}
static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 8) return 2;
  const int W = atoi(argv[4]), H = atoi(argv[5]), reps = atoi(argv[6]), threads = atoi(argv[7]);
  llama_log_set(quiet, nullptr);
  mtmd_helper_log_set(quiet, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 3;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096; cp.n_batch = 2048; cp.n_ubatch = 512; cp.n_threads = threads; cp.n_threads_batch = threads;
  llama_context* lctx = llama_init_from_model(model, cp);
  mtmd_context_params p = mtmd_context_params_default();
  p.use_gpu = false; p.n_threads = threads; p.print_timings = false; p.warmup = true;
  mtmd_context* ctx = mtmd_init_from_file(argv[2], model, p);
  if (!ctx) return 4;
  std::vector<unsigned char> rgb((size_t)W * H * 3);
  FILE* f = fopen(argv[3], "rb");
  if (!f || fread(rgb.data(), 1, rgb.size(), f) != rgb.size()) return 5;
  fclose(f);
  const std::string prompt = std::string("Describe ") + mtmd_get_marker(ctx) + " briefly.";
  std::vector<double> enc, ttft;
  size_t positions = 0;
  for (int r = 0; r < reps; ++r) {
    llama_memory_clear(llama_get_memory(lctx), true);
    const double t0 = now_ms();
    mtmd_bitmap* bmp = mtmd_bitmap_init(W, H, rgb.data());
    mtmd_input_text txt{prompt.c_str(), prompt.size(), true, true};
    mtmd_input_chunks* chunks = mtmd_input_chunks_init();
    const mtmd_bitmap* bmps[1] = {bmp};
    if (mtmd_tokenize(ctx, chunks, &txt, bmps, 1) != 0) return 6;
    positions = mtmd_helper_get_n_tokens(chunks);
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {  // encode time alone
      const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
      if (mtmd_input_chunk_get_type(c) != MTMD_INPUT_CHUNK_TYPE_IMAGE) continue;
      const double e0 = now_ms();
      if (mtmd_encode_chunk(ctx, c) != 0) return 7;
      enc.push_back(now_ms() - e0);
    }
    // The TTFT run encodes again inside eval_chunks: subtract the separate encode above from the clock.
    const double pre = now_ms() - t0 - enc.back();
    const double t1 = now_ms();
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(ctx, lctx, chunks, 0, 0, 2048, true, &n_past) != 0) return 8;
    (void)llama_get_logits_ith(lctx, -1);
    ttft.push_back(pre + (now_ms() - t1));
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bmp);
  }
  printf("{\"positions\":%zu,\"encode_ms\":[", positions);
  for (size_t i = 0; i < enc.size(); ++i) printf("%s%.2f", i ? "," : "", enc[i]);
  printf("],\"ttft_ms\":[");
  for (size_t i = 0; i < ttft.size(); ++i) printf("%s%.2f", i ? "," : "", ttft[i]);
  printf("]}\n");
  return 0;
}
