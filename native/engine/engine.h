// The engine: one dedicated thread that loads the model and then runs `while (running) step()`.
// JS-facing calls (submit / abort / close / stats) only lock a mutex, touch the inbox and wake the loop;
// the loop drains the inbox between steps and reports through `sink` (called on the engine thread, must not
// block). Invariants: the engine thread never waits on its caller; every submitted request gets exactly one
// output with finish != none (stop | length | abort, or an error); after close() the thread reports `closed`
// last and exits.
//
// Each step: drain the inbox (submits go to the scheduler's waiting queue, aborts free KV at once), schedule
// (decodes first, then prompt chunks, within the token budget; preempting the newest when KV runs out), one
// model forward_batch over every chunk, sample each chunk that ends its sequence's known tokens (each request
// has its own random stream), stop checks, postprocess (blocks of finished sequences are freed in the same
// step), one event with every output of the step. A preempted sequence is recomputed; its tokens stay exact.
// Speculative decoding: a decode may carry draft tokens (a request's prediction, n-gram lookup, a draft model);
// the forward pass returns logits for each, and the sequence samples row by row, exactly as plain decoding
// would, stopping at the first sampled token that differs from its draft. Every emitted token is drawn from the
// target model's distribution with the request's own random stream, so greedy and seeded outputs equal plain
// decoding's. A draft model (engine_options::draft_loader) keeps KV for exactly what the target has computed
// (every chunk of the target's forward pass also runs through it) and proposes greedily, one batched step per
// draft token.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/sample_rows.h"
#include "engine/drafter.h"
#include "engine/grammar_vocab.h"
#include "engine/request.h"

namespace spindle {

class model;
class kv_cache;
class lora_adapter;
class scheduler;
class vision_model;
struct sched_sequence;
struct schedule_output;
struct scheduled_chunk;
struct sampled_token;
struct sequence;

// The default tokens per step on the CPU (engine_options::max_num_batched_tokens = 0).
constexpr int32_t k_cpu_step_tokens = 256;

// Adapter slots an engine has, plus one (slots 0 .. k_max_loras - 2).
constexpr size_t k_max_loras = 1 << 15;

// A LoRA adapter file the engine loads with its model (model/lora.h); requests pick it by index (request::lora).
struct lora_spec {
  std::string path;
  float scale = 1.0f;  // the user scale (llama.cpp's --lora-scaled): the delta is scale * alpha / rank * B A x
};

struct engine_options {
  int32_t max_model_len = 0;  // tokens (prompt + output); 0 = the model's trained context length
  int32_t max_num_seqs = 256;           // sequences holding KV at once
  int32_t max_num_batched_tokens = 0;   // tokens per step; 0: 2048 (GPU) or k_cpu_step_tokens (CPU), at least
                                        // max_model_len when prompts never split
  int32_t chunked_prefill_size = 0;     // prompt tokens per sequence per step; 0: the step's budget
                                        // (max_num_batched_tokens, as vLLM V1); -1 = never split a prompt
  int32_t block_size = 16;              // tokens per KV block
  // Automatic prefix caching (vLLM's --enable-prefix-caching, on by default; SGLang's radix cache): KV blocks of
  // earlier prompts are shared by later ones that start with the same tokens. Models with recurrent state
  // (LFM2) keep a state checkpoint per block for it (on the CPU backend; on CUDA they run without it for now).
  bool enable_prefix_caching = true;
  // > 1: bytes. On the CPU, (0, 1]: fraction of available host memory (0 = 0.25, at most 2 GiB). On a GPU, as
  // vLLM's gpu_memory_utilization: the fraction of the device's total memory the engine may hold, weights
  // included, so the KV cache gets fraction * total - (memory already in use) (0 = 0.9).
  double kv_cache_memory = 0;
  // Speculative decoding (n-gram drafts for every request; a request's prediction drafts whatever this says).
  speculative_config speculative;
  // A draft model for speculative decoding (vLLM's speculative_config.model): loaded on the engine thread after
  // the target; it must share the target's vocabulary and keep no recurrent state. Null: none.
  std::function<std::shared_ptr<model>()> draft_loader;
  // Vision: the mmproj file of the model's vision projector ("" = text only) and its image token limits.
  std::string mmproj_path;
  int32_t image_min_tokens = 0;  // 0 = the projector's default
  int32_t image_max_tokens = 0;
  // LoRA adapters loaded after the model (a load error names the file); requests choose one by index.
  std::vector<lora_spec> loras;
};

// Facts about the loaded model that the TypeScript layer needs (chat template, special tokens).
struct model_info {
  std::string arch;
  std::string name;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_embd = 0;  // {arch}.embedding_length (0 when the file does not say)
  int32_t max_model_len = 0;
  int32_t max_num_batched_tokens = 0;  // tokens per engine step, the default resolved (0 before loading)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;
  std::vector<int32_t> eog_ids;
  std::string bos_text;  // "" when bos_id < 0
  std::string eos_text;
  std::vector<std::string> eog_texts;
  bool has_chat_template = false;
  std::string chat_template;  // tokenizer.chat_template
  std::string device;         // the backend the loaded model runs on ("cpu", "cuda"); "" before loading
  std::string kv_dtype;       // its KV cache's element type ("float32", "float16", "bfloat16"); "" before loading
  std::string mmproj;         // the loaded vision projector's file ("" = the model takes no images)
  // The file's {arch}.pooling_type (llama.cpp's names: "none", "mean", "cls", "last", "rank"), "" when absent:
  // how its embeddings are pooled when a request does not say.
  std::string pooling;
  // Rerankers (rank pooling): the classifier head over the pooled hidden state, dequantized: cls.output.weight
  // [n_cls_out (1..64) rows of n_embd] (empty: none), cls.output.bias [n_cls_out] (empty: none), {arch}.classifier.
  // output_labels, and tokenizer.chat_template.rerank (the prompt with {query} and {document}; "" when absent).
  std::vector<float> cls_out;
  std::vector<float> cls_out_bias;
  int32_t n_cls_out = 0;
  std::vector<std::string> cls_labels;
  std::string rerank_template;
};

class gguf_file;
class tokenizer;
// Model facts from the file's metadata and tokenizer alone (no weights); n_ctx_train from
// {arch}.context_length, max_model_len left 0. Throws spindle::error on malformed metadata.
model_info describe_file(const gguf_file& file, const tokenizer& tok);

struct engine_event {
  enum class kind : uint8_t { ready, load_error, step, closed, lora, cache_flush };
  kind type = kind::step;
  model_info info;                      // ready
  std::string message;                  // load_error; lora, cache_flush: "" when it succeeded, else why not
  int32_t lora_slot = -1;               // lora: the adapter slot the event is about
  int32_t blocks_dropped = 0;           // cache_flush: cached prefix blocks forgotten
  std::vector<request_output> outputs;  // step: one entry per request that changed this step
};

struct engine_stats {
  bool ready = false;
  bool closed = false;
  int32_t running = 0;
  int32_t waiting = 0;  // queued on the engine thread or still in the inbox
  uint64_t prompt_tokens = 0;     // prefilled so far
  uint64_t generated_tokens = 0;  // sampled so far
  uint64_t requests_finished = 0;
  uint64_t steps = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;
  int32_t kv_blocks_free = 0;
  int32_t kv_block_size = 0;      // tokens per block
  uint64_t preemptions = 0;
  uint64_t computed_tokens = 0;   // tokens forwarded (prompt chunks, recomputes, decodes)
  uint64_t images_encoded = 0;    // images run through the vision encoder
  double image_encode_seconds = 0;  // time spent encoding them (preprocessing included)
  uint64_t failed_steps = 0;      // steps whose forward pass threw (their requests failed)
  double step_seconds = 0;        // wall time of the steps (scheduling, forward pass, sampling, bookkeeping)
  double forward_seconds = 0;     // of that, the forward passes (draft model included; host work and device)
  bool prefix_caching = false;    // in effect (asked for, and the model has no recurrent state)
  uint64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache (vLLM's metric)
  uint64_t prefix_cache_hits = 0;     // of those, tokens whose KV was found there
  int32_t kv_blocks_cached = 0;       // blocks holding cached prefixes (in use or free)
  uint64_t spec_drafts = 0;           // decodes that verified draft tokens (vLLM's spec_decode_num_drafts)
  uint64_t spec_draft_tokens = 0;     // draft tokens verified
  uint64_t spec_accepted_tokens = 0;  // of those, accepted
};

class engine {
 public:
  using loader_fn = std::function<std::shared_ptr<model>()>;  // runs on the engine thread
  using sink_fn = std::function<void(engine_event&&)>;       // runs on the engine thread

  engine(loader_fn loader, engine_options options, sink_fn sink);  // starts the thread
  ~engine();  // close(false) and join()
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  // Validates (throws spindle::error: not ready, closed, or a bad request) and queues; returns the id.
  uint64_t submit(request r);
  // Aborts a queued or running request; unknown or finished ids are ignored.
  void abort(uint64_t id);
  // Stops taking requests. drain: let queued and running requests finish; else abort them. Non-blocking.
  void close(bool drain);
  void join();  // waits for the thread to exit (after close)
  engine_stats stats() const;
  // The loaded model, shared with whoever needs its tokenizer (null before ready or after a load error).
  std::shared_ptr<model> loaded_model() const;
  // The prompt positions of a width x height image (marker ids, -1 per embedding). Throws spindle::error when
  // the engine is not ready, has no vision model, or the size is not positive.
  std::vector<int32_t> image_layout(int width, int height) const;
  // Runtime LoRA adapters (vLLM's /v1/load_lora_adapter): queues loading `spec` into adapter slot `slot` (any slot
  // in [0, k_max_loras - 1) not holding an adapter); the engine thread loads it between steps and reports an
  // engine_event::kind::lora (message "" or the load error). A request naming a slot that holds no adapter when it
  // starts fails. Throws spindle::error when the engine is not ready or closed, or the slot is out of range.
  void load_lora(int32_t slot, lora_spec spec);
  // Empties `slot` (an event as above): requests already started keep the adapter until they finish; its cached
  // prefix blocks are never matched again (each load is a namespace of its own).
  void unload_lora(int32_t slot);
  // Empties the prefix cache (SGLang's /flush_cache, vLLM's reset_prefix_cache): the engine thread forgets every
  // cached block between steps, only while no request is running or waiting (one that is would lose nothing, but
  // its blocks would stay cached), and reports an engine_event::kind::cache_flush ("" or why not). Throws
  // spindle::error when the engine is not ready or closed.
  void flush_prefix_cache();

 private:
  struct message {
    enum class kind : uint8_t { submit, abort, load_lora, unload_lora, flush_cache } type = kind::submit;
    uint64_t id = 0;
    request req;      // submit
    int32_t slot = -1;  // load_lora / unload_lora
    lora_spec lora;   // load_lora
  };
  void queue_lora(message m, const char* what);  // checks the slot and the state, then queues a lora message
  void handle_lora(message& m);  // engine thread: a load or unload, reported as an event
  void queue_control(message m);  // checks the state, then queues a message that is no request
  void handle_flush();            // engine thread: a prefix-cache flush, reported as an event

  void thread_main();
  // The prefix-cache namespace of a request: 0 for the base model without a cache_salt, else a keyed hash of the
  // adapter's load number and the salt.
  uint64_t cache_salt_of(uint64_t lora_uid, const std::string& cache_salt) const;
  bool load();
  // Scheduler + paged KV cache from options_ (and the draft model's KV over the same blocks, when it has one).
  void make_cache(const model& m, int32_t max_len, const model* draft);
  bool wait_and_drain(std::vector<request_output>& outs);
  void start_request(request r, std::vector<request_output>& outs);
  void handle_abort(uint64_t id, std::vector<request_output>& outs);
  void abort_all(std::vector<request_output>& outs);
  void step(std::vector<request_output>& outs);  // engine_step.cpp
  void run_forward(const schedule_output& so);   // engine_step.cpp
  // Samples the rows of one chunk (1 + its drafts) into `out`, stopping at the first rejected draft; returns the
  // scheduler's record of it. chosen: the model's greedy tokens of the rows (greedy_only sequences), or null:
  // sample `rows`. engine_step.cpp.
  sampled_token verify_chunk(const scheduled_chunk& c, sequence& seq, float* rows, const int32_t* chosen,
                             request_output& out);
  void propose_draft(const sched_sequence& s, int32_t max_draft, std::vector<int32_t>& draft);
  // Fills the placeholder drafts of chunks whose sequence asked the draft model (engine_draft.cpp).
  void run_draft_model(schedule_output& so);
  void check_draft_model(const model& target, const model& draft) const;  // throws spindle::error
  void fail_step(const schedule_output& so, const std::string& message, std::vector<request_output>& outs);
  // out's queue / prefill seconds with seq's first token, its decode seconds with its finish.
  void record_phases(sequence& seq, request_output& out);
  // Adds an embedding request's hidden rows of chunk c (at `rows`; null: the chunk has none it needs) to its
  // pooled state; finish_embedding, after its last chunk, puts the embedding into out and finishes the request
  // (engine_step.cpp).
  void pool_chunk(const scheduled_chunk& c, sequence& seq, const float* rows);
  // Prompt logprobs: the chunk's rows [n_tokens, model rows] scored against the prompt tokens they predict.
  void score_prompt_rows(const scheduled_chunk& c, sequence& seq, const float* rows);
  // Whether chunk c gets a logits row at every position (prompt logprobs) instead of only its sampled ones.
  bool all_rows(const scheduled_chunk& c) const;
  void finish_embedding(const scheduled_chunk& c, sequence& seq, request_output& out);
  // Test hook: throws from the forward pass of the step named by the environment variable
  // SPINDLE_TEST_FAIL_FORWARD_AT_STEP (1-based, read once at construction). Test builds only (CMake
  // SPINDLE_TEST_HOOKS); elsewhere a no-op that never reads the environment.
  void inject_test_fault() const;
  void finish_sequence(uint64_t id);  // drops the sequence (its blocks are already freed); counts it
  void update_stats();
  void emit_step(std::vector<request_output>& outs);

  loader_fn loader_;
  engine_options options_;
  sink_fn sink_;

  // Shared with the JS thread, guarded by mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<message> inbox_;
  bool closing_ = false;
  bool drain_ = false;
  bool ready_ = false;
  std::string load_error_;
  int32_t n_vocab_ = 0;        // valid ids for prompts and sampling: min(model rows, tokenizer vocabulary)
  int32_t max_model_len_ = 0;
  uint64_t next_id_ = 1;
  std::shared_ptr<model> model_;
  std::shared_ptr<model> draft_;           // speculative draft model (null: none)
  std::unique_ptr<kv_cache> draft_kv_;     // its KV: the same blocks and slots as kv_
  std::vector<float> draft_logits_;        // [sequences drafting, draft rows]
  std::shared_ptr<vision_model> vision_;  // null: text only; plan/layout are const, encode is engine-thread only
  // LoRA adapters by slot (engine_options::loras first, then runtime loads; null: empty), and each slot's load
  // number (the prefix-cache namespace of its adapter: a new load is never another's). Declared after the models,
  // so destroyed before them (their weights live on the model's backend); running sequences hold their own
  // reference. Engine thread only.
  std::vector<std::shared_ptr<lora_adapter>> loras_;
  std::vector<uint64_t> lora_uid_;
  uint64_t next_lora_uid_ = 1;
  uint64_t salt_key_[2] = {0, 0};  // the keyed hash of cache_salt (cache_salt_of), random per engine
  engine_stats stats_;

  // Engine thread only.
  std::unique_ptr<scheduler> sched_;
  std::unique_ptr<kv_cache> kv_;
  std::map<uint64_t, std::unique_ptr<sequence>> seqs_;  // every unfinished request, by id
  std::unique_ptr<grammar_vocab> grammar_vocab_;         // built by the first request with a grammar
  std::vector<float> logits_;  // [sampling chunks, model rows]; the first n_vocab_ of a row are sampled
  // The model's choices [sampling rows] for chunks whose token the model picks (greedy_only sequences: the
  // argmax; plan_sample ones: sample_rows with their specs), whose logits rows stay unwritten (a GPU copies one id
  // per row instead of the vocabulary), and which chunks of the step those are.
  std::vector<int32_t> chosen_ids_;
  // Embedding requests' hidden rows of the step ([rows, n_embd]) and, per chunk of the step, where its rows start
  // (-1: none).
  std::vector<float> hidden_;
  std::vector<int64_t> chunk_hidden_;
  std::vector<uint8_t> chunk_chosen_;
  // Per chunk of the step: whether its logits rows cover every position (prompt logprobs) rather than the sampled ones.
  std::vector<uint8_t> chunk_all_rows_;
  std::vector<sample_spec> sample_specs_;               // [sampling rows] of plan_sample chunks
  std::vector<std::vector<logit_edit>> sample_edits_;   // [chunks of the step]: the storage of their specs' edits
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, computed_tokens_ = 0, finished_ = 0, steps_ = 0;
  uint64_t failed_steps_ = 0;
  double step_seconds_ = 0, forward_seconds_ = 0;
  uint64_t spec_drafts_ = 0, spec_draft_tokens_ = 0, spec_accepted_tokens_ = 0;
  std::vector<std::vector<int32_t>> chunk_tokens_;  // per speculative chunk of the step: last token + drafts
  uint64_t images_encoded_ = 0;
  double image_encode_seconds_ = 0;
  uint64_t test_fail_forward_at_step_ = 0;  // 0 = off; see inject_test_fault()

  std::thread thread_;
};

}  // namespace spindle
