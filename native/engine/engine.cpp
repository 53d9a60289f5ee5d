// The engine loop (see engine.h): thread, loading, KV sizing, inbox, aborts, stats. Invariant: only the engine
// thread touches sched_, kv_, seqs_ and the model's forward pass; the JS thread only appends to inbox_ under
// mu_ and reads stats_. A request is in seqs_ exactly while the scheduler knows it.
#include "engine/engine.h"

#include <algorithm>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <unistd.h>

#include "common/checked_math.h"
#include "common/error.h"
#include "common/siphash.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "backend/cpu/matmul.h"
#include "gguf/gguf_file.h"
#include "model/lora.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_model.h"

namespace spindle {

// A reranker's classifier head (llama.cpp's cls_out: rank pooling multiplies the pooled state by it), read into
// `info` dequantized; absent tensors leave it empty. Throws spindle::error for a head whose shape does not fit.
static void read_classifier_head(const gguf_file& file, model_info& info) {
  if (const gguf_kv* kv = file.find("tokenizer.chat_template.rerank"); kv && kv->type == gguf_value_type::STRING) {
    info.rerank_template = kv->str;
  }
  if (const gguf_kv* kv = file.find(info.arch + ".classifier.output_labels"); kv && kv->type == gguf_value_type::ARRAY) {
    info.cls_labels = kv->strings;
  }
  const gguf_tensor* w = file.find_tensor("cls.output.weight");
  if (!w) return;
  const int64_t n_in = w->ne[0], n_out = w->n_dims >= 2 ? w->ne[1] : 1;
  if (w->n_dims > 2 || n_in != info.n_embd || n_out < 1 || n_out > 64) {
    throw error("cls.output.weight has shape [" + std::to_string(n_in) + ", " + std::to_string(n_out) +
                "]; a classifier head must be [n_embd = " + std::to_string(info.n_embd) + ", 1..64 labels]");
  }
  const uint64_t row_bytes = ggml_row_size(w->type, uint64_t(n_in));
  info.cls_out.resize(size_t(n_in * n_out));
  try {
    for (int64_t r = 0; r < n_out; ++r) cpu_dequantize_row(w->type, w->data + r * row_bytes, info.cls_out.data() + r * n_in, n_in);
  } catch (const std::exception& e) {
    throw error(std::string("cls.output.weight: ") + e.what());
  }
  info.n_cls_out = int32_t(n_out);
  if (const gguf_tensor* b = file.find_tensor("cls.output.bias")) {
    if (b->type != ggml_type::F32 || b->n_elements() != n_out) {
      throw error("cls.output.bias must be F32 with " + std::to_string(n_out) + " values, one per label");
    }
    info.cls_out_bias.resize(size_t(n_out));
    std::memcpy(info.cls_out_bias.data(), b->data, size_t(n_out) * sizeof(float));  // the data may be unaligned
  }
}

// The key is the engine's own (random), so no client can choose a salt that lands in another request's namespace;
// an adapter's namespace is its load's (lora_uid_), so a slot loaded again never matches the old adapter's blocks.
uint64_t engine::cache_salt_of(uint64_t lora_uid, const std::string& cache_salt) const {
  if (lora_uid == 0 && cache_salt.empty()) return 0;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char(lora_uid >> (8 * i));
  bytes += cache_salt;
  const uint64_t h = siphash24(salt_key_[0], salt_key_[1], bytes.data(), bytes.size());
  return h == 0 ? 1 : h;
}

model_info describe_file(const gguf_file& file, const tokenizer& tok) {
  model_info info;
  info.arch = file.get_string_or("general.architecture", "");
  info.name = file.get_string_or("general.name", "");
  info.n_vocab = tok.n_vocab();
  const uint64_t n_ctx = file.get_u64_or(info.arch + ".context_length", 0);
  info.n_ctx_train = n_ctx > uint64_t(INT32_MAX) ? INT32_MAX : int32_t(n_ctx);
  const uint64_t n_embd = file.get_u64_or(info.arch + ".embedding_length", 0);
  info.n_embd = n_embd > uint64_t(INT32_MAX) ? 0 : int32_t(n_embd);
  info.bos_id = tok.bos_id();
  info.eos_id = tok.eos_id();
  info.add_bos = tok.add_bos();
  if (info.bos_id >= 0) info.bos_text = tok.token_text(info.bos_id);
  if (info.eos_id >= 0) info.eos_text = tok.token_text(info.eos_id);
  info.eog_ids = tok.eog_ids();
  for (int32_t id : info.eog_ids) info.eog_texts.push_back(tok.token_text(id));
  static const char* const k_pooling_names[] = {"none", "mean", "cls", "last", "rank"};
  if (const int64_t t = file.get_i64_or(info.arch + ".pooling_type", -1); t >= 0 && t < 5) info.pooling = k_pooling_names[t];
  if (const gguf_kv* kv = file.find("tokenizer.chat_template")) {
    if (kv->type == gguf_value_type::STRING) {
      info.has_chat_template = true;
      info.chat_template = kv->str;
    }
  }
  read_classifier_head(file, info);
  return info;
}

static model_info describe(const model& m, int32_t max_model_len) {
  model_info info = describe_file(m.file(), m.vocab());
  const model_hparams& hp = m.hparams();
  info.arch = hp.arch;
  info.name = hp.name;
  info.n_vocab = hp.n_vocab;
  info.n_ctx_train = hp.n_ctx_train;
  info.n_embd = hp.n_embd;
  info.max_model_len = max_model_len;
  info.device = m.device_name();
  info.kv_dtype = kv_type_name(m.kv_dtype());
  return info;
}

engine::engine(loader_fn loader, engine_options options, sink_fn sink)
    : loader_(std::move(loader)), options_(options), sink_(std::move(sink)) {
  if (options_.loras.size() >= k_max_loras - 1) {
    throw error("at most " + std::to_string(k_max_loras - 2) + " LoRA adapters, got " + std::to_string(options_.loras.size()));
  }
  std::random_device rd;
  for (uint64_t& k : salt_key_) k = (uint64_t(rd()) << 32) ^ rd();
#if SPINDLE_TEST_HOOKS  // test builds only: see inject_test_fault()
  if (const char* at = std::getenv("SPINDLE_TEST_FAIL_FORWARD_AT_STEP")) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(at, &end, 10);
    if (end != at && *end == '\0') test_fail_forward_at_step_ = uint64_t(n);
  }
#endif
  thread_ = std::thread([this] { thread_main(); });
}

// Compiled only in test builds (CMake SPINDLE_TEST_HOOKS): a release engine never reads the variable.
void engine::inject_test_fault() const {
#if SPINDLE_TEST_HOOKS
  if (test_fail_forward_at_step_ != 0 && steps_ == test_fail_forward_at_step_) {
    throw error("injected test fault: the forward pass of step " + std::to_string(steps_) +
                " failed (SPINDLE_TEST_FAIL_FORWARD_AT_STEP)");
  }
#endif
}

engine::~engine() {
  close(false);
  join();
}

uint64_t engine::submit(request r) {
  // Parsed outside the lock (a large grammar takes a while) and before queueing, so a bad one is refused here.
  if (!r.params.grammar.empty() && !r.compiled_grammar) {
    r.compiled_grammar = std::make_shared<const grammar>(grammar_parse(r.params.grammar));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) throw error("the engine is closed");
  if (!load_error_.empty()) throw error("the model failed to load: " + load_error_);
  if (!ready_) throw error("the engine is not ready (the model is still loading)");
  validate_request(r, n_vocab_, max_model_len_);
  validate_request_images(r, vision_.get());
  if (r.lora < -1 || r.lora >= int32_t(k_max_loras) - 1) {
    throw error("lora: adapter slot " + std::to_string(r.lora) + " is out of range [-1, " +
                std::to_string(k_max_loras - 2) + "] (-1: none)");
  }
  r.id = next_id_++;
  r.submitted = std::chrono::steady_clock::now();
  const uint64_t id = r.id;
  message m;
  m.id = id;
  m.req = std::move(r);
  inbox_.push_back(std::move(m));
  stats_.waiting++;
  cv_.notify_one();
  return id;
}

void engine::abort(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;  // close() aborts everything anyway
  message m;
  m.type = message::kind::abort;
  m.id = id;
  inbox_.push_back(std::move(m));
  cv_.notify_one();
}

void engine::close(bool drain) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) {
    drain_ = drain_ && drain;  // a later abort-close overrides an earlier drain-close
  } else {
    closing_ = true;
    drain_ = drain;
  }
  cv_.notify_one();
}

void engine::join() {
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

engine_stats engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<int32_t> engine::image_layout(int width, int height) const {
  std::shared_ptr<vision_model> v;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_) throw error("the engine is not ready (the model is still loading)");
    v = vision_;
  }
  if (!v) throw error("this model does not take images (no vision projector is loaded: start it with an mmproj file)");
  return v->layout(v->plan(width, height));
}

std::shared_ptr<model> engine::loaded_model() const {
  std::lock_guard<std::mutex> lock(mu_);
  return model_;
}

// ---- engine thread ----

void engine::thread_main() {
  if (load()) {
    std::vector<request_output> outs;
    while (wait_and_drain(outs)) {
      step(outs);
      update_stats();
      emit_step(outs);
    }
    abort_all(outs);
    update_stats();
    emit_step(outs);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.closed = true;
    stats_.running = stats_.waiting = 0;
  }
  engine_event ev;
  ev.type = engine_event::kind::closed;
  sink_(std::move(ev));
}

// Bytes of memory available to new allocations (MemAvailable), or 0 when unknown.
static uint64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return uint64_t(pages) * uint64_t(page);
#endif
  return 0;
}

// KV bytes on a GPU under vLLM's gpu_memory_utilization rule: fraction * total - (total - free).
static uint64_t gpu_kv_budget(double fraction, uint64_t free_bytes, uint64_t total_bytes) {
  const double limit = fraction * (double)total_bytes, used = (double)(total_bytes - std::min(free_bytes, total_bytes));
  if (limit <= used) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", fraction);
    throw error(std::string("gpu memory utilization ") + f + " leaves no room for the KV cache: the model "
                "and other processes already use " + std::to_string(uint64_t(used) >> 20) + " MiB of the GPU's " +
                std::to_string(total_bytes >> 20) + " MiB; raise it or give kvCacheMemory in bytes");
  }
  return uint64_t(limit - used);
}

// KV bytes per token of a model's attention layers (its K / V element type: 4 bytes a value, 2 for 16-bit stores, 1
// for fp8, 34 / 18 per 32 for q8_0 / q4_0: kv_bytes).
static uint64_t kv_bytes_per_token(const model& m) {
  const model_hparams& hp = m.hparams();
  const uint64_t values = block_manager_bytes_per_token(hp.n_layer_kv > 0 ? hp.n_layer_kv : hp.n_layer, hp.n_head_kv,
                                                        hp.head_dim_k, hp.head_dim_v, 1);
  return (uint64_t)kv_bytes(m.kv_dtype(), (int64_t)values);
}

void engine::make_cache(const model& m, int32_t max_len, const model* draft) {
  const engine_options& o = options_;
  // a draft model keeps its KV in blocks of its own, one per block of the target's (the same block tables)
  const uint64_t bytes_per_token = kv_bytes_per_token(m) + (draft ? kv_bytes_per_token(*draft) : 0);
  uint64_t budget = 0, dev_free = 0, dev_total = 0;
  if (o.kv_cache_memory > 1) {
    budget = uint64_t(o.kv_cache_memory);
  } else if (m.device_memory(&dev_free, &dev_total)) {
    budget = gpu_kv_budget(o.kv_cache_memory > 0 ? o.kv_cache_memory : 0.9, dev_free, dev_total);
  } else {
    const uint64_t avail = available_memory_bytes();
    if (avail == 0) throw error("kvCacheMemory: available memory is unknown here; give a size in bytes");
    budget = block_manager_budget_from_fraction(avail, o.kv_cache_memory > 0 ? o.kv_cache_memory : 0.25);
    if (o.kv_cache_memory <= 0) budget = std::min<uint64_t>(budget, uint64_t(2) << 30);  // automatic: <= 2 GiB
  }
  // Recurrent state (one slot per sequence that can run at once) comes out of the same memory budget.
  const uint64_t state_bytes = checked_mul(m.state_bytes_per_slot(), uint64_t(std::max(o.max_num_seqs, 1)), "state slots");
  if (state_bytes > 0 && state_bytes >= budget) {
    throw error("KV cache: the recurrent state of maxNumSeqs " + std::to_string(o.max_num_seqs) + " sequences needs " +
                std::to_string(state_bytes) + " bytes, more than the budget of " + std::to_string(budget) +
                " bytes; give the KV cache more memory or lower maxNumSeqs");
  }
  budget -= state_bytes;
  // Prefix caching of a model with recurrent state keeps a state checkpoint per block, which comes out of each
  // block's share.
  const uint64_t ckpt_bytes = m.checkpoint_bytes_per_block(o.block_size);
  const bool checkpoints = o.enable_prefix_caching && state_bytes > 0 && ckpt_bytes > 0;
  const uint64_t ckpt_per_token = checkpoints ? (ckpt_bytes + uint64_t(o.block_size) - 1) / uint64_t(o.block_size) : 0;
  const int32_t n_blocks =
      block_manager_num_blocks(budget, bytes_per_token + ckpt_per_token, o.block_size, max_len, o.max_num_seqs);
  scheduler_config sc;
  sc.max_model_len = max_len;
  sc.max_num_seqs = o.max_num_seqs;
  sc.enable_prefix_caching = o.enable_prefix_caching && (state_bytes == 0 || checkpoints);
  // Default step budget: 2048 tokens on a GPU; 256 on the CPU, where a 2048-token prefill step takes seconds
  // and every running decode waits for it (BENCHMARKS.md, Serving: with 256 the multi-turn workload's TTFT fell
  // below llama-server's for about 5% of prefill throughput). Prompts that must not split: max_model_len at least.
  const int32_t default_budget = std::string(m.device_name()) == "cpu" ? k_cpu_step_tokens : 2048;
  sc.max_num_batched_tokens = o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens
                              : o.chunked_prefill_size == -1 ? std::max(default_budget, max_len)
                                                             : default_budget;
  // A prompt may take a whole step unless told otherwise (vLLM V1's default): a 1024-token prompt on a GPU is one
  // step, not two of 512 (the serving workload's TTFT at concurrency 1 was ~10 ms over the forward pass's).
  sc.chunked_prefill_size = o.chunked_prefill_size == 0 ? sc.max_num_batched_tokens : o.chunked_prefill_size;
  sched_ = std::make_unique<scheduler>(sc, block_manager(n_blocks, o.block_size));
  kv_ = state_bytes > 0 ? m.new_kv_cache(n_blocks, o.block_size, o.max_num_seqs) : m.new_kv_cache(n_blocks, o.block_size);
  if (checkpoints) m.enable_block_checkpoints(*kv_);
  if (draft) draft_kv_ = draft->new_kv_cache(n_blocks, o.block_size);
  sched_->set_drafter([this](const sched_sequence& s, int32_t max_draft, std::vector<int32_t>& draft) {
    propose_draft(s, max_draft, draft);
  });
}

bool engine::load() {
  engine_event ev;
  // declared out here so that a failure after make_cache frees the caches (which use the models' backends)
  // while the models still exist
  std::shared_ptr<model> m, draft;
  std::vector<std::shared_ptr<lora_adapter>> loras;  // destroyed before the models on a failure
  try {
    m = loader_();
    if (!m) throw error("the model loader returned nothing");
    const model_hparams& hp = m->hparams();
    int32_t max_len = options_.max_model_len > 0 ? options_.max_model_len
                      : hp.n_ctx_train > 0        ? hp.n_ctx_train
                                                  : 2048;
    if (hp.n_ctx_train > 0 && max_len > hp.n_ctx_train) {
      throw error("maxModelLen " + std::to_string(max_len) + " exceeds the model's trained context length " +
                  std::to_string(hp.n_ctx_train));
    }
    if (max_len < 2) throw error("maxModelLen must be at least 2 (got " + std::to_string(max_len) + ")");
    std::shared_ptr<vision_model> vision;
    if (!options_.mmproj_path.empty()) {
      backend* be = m->compute_backend();
      if (!be) throw error("this model cannot run a vision projector");
      vision_options vo;
      vo.min_tokens = options_.image_min_tokens;
      vo.max_tokens = options_.image_max_tokens;
      vision = std::make_shared<vision_model>(options_.mmproj_path, *be, m->vocab(), hp.n_embd, vo);
    }
    if (options_.draft_loader) {
      if (vision) throw error("a speculative draft model cannot be combined with a vision projector (mmproj)");
      draft = options_.draft_loader();
      if (!draft) throw error("the draft model loader returned nothing");
      check_draft_model(*m, *draft);
      if (draft->hparams().n_ctx_train > 0 && draft->hparams().n_ctx_train < max_len) {
        throw error("the draft model's context length " + std::to_string(draft->hparams().n_ctx_train) +
                    " is below maxModelLen " + std::to_string(max_len));
      }
      options_.speculative.draft_model = true;
    }
    for (const lora_spec& l : options_.loras) loras.push_back(m->load_lora(l.path, l.scale));  // slots 0..n-1
    ev.info = describe(*m, max_len);  // throws for a malformed classifier head
    make_cache(*m, max_len, draft.get());
    ev.info.max_num_batched_tokens = sched_->config().max_num_batched_tokens;
    if (vision && vision->bidirectional() && ev.info.max_num_batched_tokens < vision->hparams().fixed_tokens()) {
      throw error("maxNumBatchedTokens " + std::to_string(ev.info.max_num_batched_tokens) + " is below an image's " +
                  std::to_string(vision->hparams().fixed_tokens()) + " embeddings, which attend to each other and so "
                  "go through the model in one step (" + vision->hparams().projector + " projector); raise it");
    }
    if (vision) ev.info.mmproj = vision->path();
    std::lock_guard<std::mutex> lock(mu_);
    model_ = std::move(m);
    draft_ = std::move(draft);
    vision_ = std::move(vision);
    loras_ = std::move(loras);
    for (size_t i = 0; i < loras_.size(); ++i) lora_uid_.push_back(next_lora_uid_++);
    n_vocab_ = std::min(hp.n_vocab, model_->vocab().n_vocab());
    max_model_len_ = max_len;
    ready_ = true;
    stats_.ready = true;
  } catch (const std::exception& e) {
    kv_.reset();
    draft_kv_.reset();
    sched_.reset();
    std::string message = e.what();
    if (message.empty()) message = "unknown error while loading the model";
    {
      std::lock_guard<std::mutex> lock(mu_);
      load_error_ = message;
    }
    ev.type = engine_event::kind::load_error;
    ev.message = message;
    sink_(std::move(ev));
    return false;
  }
  update_stats();
  ev.type = engine_event::kind::ready;
  sink_(std::move(ev));
  return true;
}

// Blocks while there is nothing to do; hands submits to the scheduler and applies aborts. Returns false when
// the loop should exit (closing, and either aborting or drained).
bool engine::wait_and_drain(std::vector<request_output>& outs) {
  std::vector<message> inbox;
  bool closing, drain;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !inbox_.empty() || closing_ || sched_->has_unfinished(); });
    inbox.swap(inbox_);
    closing = closing_;
    drain = drain_;
  }
  for (message& m : inbox) {
    switch (m.type) {
      case message::kind::abort: handle_abort(m.id, outs); break;
      case message::kind::submit: start_request(std::move(m.req), outs); break;
      case message::kind::load_lora:
      case message::kind::unload_lora: handle_lora(m); break;
      case message::kind::flush_cache: handle_flush(); break;
    }
  }
  if (closing && !drain) return false;
  if (closing && !sched_->has_unfinished()) return false;
  return true;
}

request_output& engine_output_for(std::vector<request_output>& outs, uint64_t id) {
  for (request_output& o : outs) {
    if (o.id == id) return o;
  }
  outs.emplace_back();
  outs.back().id = id;
  return outs.back();
}

// Builds the sequence (sampler tables, [n_vocab] each) and queues it in the scheduler; a failure fails only
// this request.
void engine::start_request(request r, std::vector<request_output>& outs) {
  const uint64_t id = r.id;
  if (r.pooling != pooling_type::none) {  // embeddings: the prompt's rows only, never a draft after it
    r.speculative = false;
    r.prediction.clear();
  }
  try {
    // Sampling covers the ids both the model (logit rows) and the tokenizer know: n_vocab_ = min of the two.
    std::unique_ptr<output_constraint> constraint;
    if (!r.params.grammar.empty()) {
      if (!r.compiled_grammar) r.compiled_grammar = std::make_shared<const grammar>(grammar_parse(r.params.grammar));
      if (!grammar_vocab_) grammar_vocab_ = std::make_unique<grammar_vocab>(model_->vocab(), n_vocab_);
      constraint = std::make_unique<output_constraint>(
          grammar_vocab_->cache_for(r.params.grammar, r.compiled_grammar, !r.params.skip_special), r.params.grammar_triggers,
          r.params.grammar_reasoning);
    }
    std::shared_ptr<const lora_adapter> lora;
    uint64_t lora_uid = 0;
    if (r.lora >= 0) {
      const size_t slot = size_t(r.lora);
      if (slot >= loras_.size() || !loras_[slot]) {
        throw error("LoRA adapter slot " + std::to_string(r.lora) + " holds no adapter (never loaded, or unloaded)");
      }
      lora = loras_[slot];
      lora_uid = lora_uid_[slot];
    }
    auto seq = std::make_unique<sequence>(std::move(r), model_->vocab(), n_vocab_, max_model_len_, std::move(constraint),
                                          options_.speculative);
    seq->lora = std::move(lora);
    if (!seq->req.images.empty()) {
      seq->images = std::make_unique<request_images>(std::move(seq->req.images), seq->req.prompt, *vision_);
      seq->req.images.clear();
    }
    // mean / cls pooling and prompt logprobs need every row, from position 0: no cached prefix
    const pooling_type pool = seq->req.pooling;
    if (seq->req.params.prompt_logprobs >= 0) seq->prompt_lps.resize(seq->req.prompt.size() - 1);
    const bool scores = pool == pooling_type::none && seq->req.params.prompt_logprobs >= 0;
    std::vector<int32_t> whole_spans;  // image embeddings that attend to each other go through in one step
    if (seq->images) whole_spans = seq->images->spans();
    sched_->add(id, seq->req.prompt, (pool == pooling_type::none || pool == pooling_type::last) && !scores, scores,
                cache_salt_of(lora_uid, seq->req.cache_salt), std::move(whole_spans));
    seqs_[id] = std::move(seq);
  } catch (const std::exception& e) {
    request_output& out = engine_output_for(outs, id);
    out.error = std::string("could not start the request: ") + e.what();
    out.finish = finish_reason::abort;
    sched_->abort(id);
    seqs_.erase(id);
    finished_++;
  }
}

void engine::queue_lora(message m, const char* what) {
  if (m.slot < 0 || m.slot >= int32_t(k_max_loras) - 1) {
    throw error(std::string(what) + ": slot " + std::to_string(m.slot) + " is out of range [0, " + std::to_string(k_max_loras - 2) + "]");
  }
  queue_control(std::move(m));
}

void engine::queue_control(message m) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) throw error("the engine is closed");
  if (!ready_) throw error("the engine is not ready (the model is still loading)");
  inbox_.push_back(std::move(m));
  cv_.notify_one();
}

void engine::flush_prefix_cache() {
  message m;
  m.type = message::kind::flush_cache;
  queue_control(std::move(m));
}

// Between steps, on the engine thread. Messages are handled in order, so requests submitted before the flush
// count as waiting.
void engine::handle_flush() {
  engine_event ev;
  ev.type = engine_event::kind::cache_flush;
  const size_t busy = seqs_.size();
  if (busy > 0) {
    ev.message = "the prefix cache was not flushed: " + std::to_string(busy) + " request" + (busy == 1 ? " is" : "s are") +
                 " running or waiting";
  } else {
    ev.blocks_dropped = sched_->drop_cached_prefixes();
    update_stats();
  }
  sink_(std::move(ev));
}

void engine::load_lora(int32_t slot, lora_spec spec) {
  message m;
  m.type = message::kind::load_lora;
  m.slot = slot;
  m.lora = std::move(spec);
  queue_lora(std::move(m), "load_lora");
}

void engine::unload_lora(int32_t slot) {
  message m;
  m.type = message::kind::unload_lora;
  m.slot = slot;
  queue_lora(std::move(m), "unload_lora");
}

// Between steps, on the engine thread: no forward pass is using the adapters.
void engine::handle_lora(message& m) {
  engine_event ev;
  ev.type = engine_event::kind::lora;
  ev.lora_slot = m.slot;
  const size_t slot = size_t(m.slot);
  try {
    if (m.type == message::kind::load_lora) {
      if (slot < loras_.size() && loras_[slot]) throw error("LoRA adapter slot " + std::to_string(m.slot) + " already holds an adapter");
      std::shared_ptr<lora_adapter> a = model_->load_lora(m.lora.path, m.lora.scale);
      if (slot >= loras_.size()) {
        loras_.resize(slot + 1);
        lora_uid_.resize(slot + 1, 0);
      }
      loras_[slot] = std::move(a);
      lora_uid_[slot] = next_lora_uid_++;
    } else {
      if (slot >= loras_.size() || !loras_[slot]) throw error("LoRA adapter slot " + std::to_string(m.slot) + " holds no adapter");
      loras_[slot].reset();  // running sequences keep theirs
      lora_uid_[slot] = 0;
    }
  } catch (const std::exception& e) {
    ev.message = e.what();
    if (ev.message.empty()) ev.message = "the LoRA adapter could not be loaded";
  }
  sink_(std::move(ev));
}

void engine::handle_abort(uint64_t id, std::vector<request_output>& outs) {
  if (!seqs_.count(id)) return;  // unknown or already finished
  sched_->abort(id);             // frees its KV blocks now
  engine_output_for(outs, id).finish = finish_reason::abort;
  finish_sequence(id);
}

void engine::finish_sequence(uint64_t id) {
  seqs_.erase(id);
  finished_++;
}

void engine::abort_all(std::vector<request_output>& outs) {
  std::vector<uint64_t> ids;
  for (auto& kv : seqs_) ids.push_back(kv.first);
  for (uint64_t id : ids) handle_abort(id, outs);
  // Submits that raced with close() are still in the inbox: answer them too.
  std::vector<message> inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
  }
  for (message& m : inbox) {
    if (m.type != message::kind::submit) continue;  // a LoRA load queued at close: the JS side fails it
    engine_output_for(outs, m.id).finish = finish_reason::abort;
    finished_++;
  }
}

void engine::update_stats() {
  const scheduler_stats ss = sched_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  int32_t in_inbox = 0;
  for (const message& m : inbox_) in_inbox += m.type == message::kind::submit ? 1 : 0;
  stats_.running = ss.running;
  stats_.waiting = ss.waiting + in_inbox;
  stats_.kv_blocks_total = ss.blocks_total;
  stats_.kv_blocks_used = ss.blocks_used;
  stats_.kv_blocks_free = ss.blocks_free;
  stats_.kv_block_size = sched_->blocks().block_size();
  stats_.preemptions = ss.preemptions;
  stats_.prompt_tokens = prompt_tokens_;
  stats_.generated_tokens = generated_tokens_;
  stats_.computed_tokens = computed_tokens_;
  stats_.images_encoded = images_encoded_;
  stats_.image_encode_seconds = image_encode_seconds_;
  stats_.requests_finished = finished_;
  stats_.steps = steps_;
  stats_.step_seconds = step_seconds_;
  stats_.forward_seconds = forward_seconds_;
  stats_.failed_steps = failed_steps_;
  stats_.prefix_caching = sched_->config().enable_prefix_caching;
  stats_.prefix_cache_queries = ss.prefix_cache_queries;
  stats_.prefix_cache_hits = ss.prefix_cache_hits;
  stats_.kv_blocks_cached = ss.blocks_cached;
  stats_.spec_drafts = spec_drafts_;
  stats_.spec_draft_tokens = spec_draft_tokens_;
  stats_.spec_accepted_tokens = spec_accepted_tokens_;
}

void engine::emit_step(std::vector<request_output>& outs) {
  if (outs.empty()) return;
  engine_event ev;
  ev.type = engine_event::kind::step;
  ev.outputs.swap(outs);
  sink_(std::move(ev));
}

}  // namespace spindle
