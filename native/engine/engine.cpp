// The engine loop (see engine.h). Invariant: only the engine thread touches waiting_, running_ and the
// model's forward pass; the JS thread only appends to inbox_ under mu_ and reads stats_.
#include "engine/engine.h"

#include <algorithm>
#include <climits>

#include "common/error.h"
#include "engine/sequence.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace spindle {

model_info describe_file(const gguf_file& file, const tokenizer& tok) {
  model_info info;
  info.arch = file.get_string_or("general.architecture", "");
  info.name = file.get_string_or("general.name", "");
  info.n_vocab = tok.n_vocab();
  const uint64_t n_ctx = file.get_u64_or(info.arch + ".context_length", 0);
  info.n_ctx_train = n_ctx > uint64_t(INT32_MAX) ? INT32_MAX : int32_t(n_ctx);
  info.bos_id = tok.bos_id();
  info.eos_id = tok.eos_id();
  info.add_bos = tok.add_bos();
  if (info.bos_id >= 0) info.bos_text = tok.token_text(info.bos_id);
  if (info.eos_id >= 0) info.eos_text = tok.token_text(info.eos_id);
  info.eog_ids = tok.eog_ids();
  for (int32_t id : info.eog_ids) info.eog_texts.push_back(tok.token_text(id));
  if (const gguf_kv* kv = file.find("tokenizer.chat_template")) {
    if (kv->type == gguf_value_type::STRING) {
      info.has_chat_template = true;
      info.chat_template = kv->str;
    }
  }
  return info;
}

static model_info describe(const model& m, int32_t max_model_len) {
  model_info info = describe_file(m.file(), m.vocab());
  const model_hparams& hp = m.hparams();
  info.arch = hp.arch;
  info.name = hp.name;
  info.n_vocab = hp.n_vocab;
  info.n_ctx_train = hp.n_ctx_train;
  info.max_model_len = max_model_len;
  return info;
}

engine::engine(loader_fn loader, engine_options options, sink_fn sink)
    : loader_(std::move(loader)), options_(options), sink_(std::move(sink)) {
  thread_ = std::thread([this] { thread_main(); });
}

engine::~engine() {
  close(false);
  join();
}

uint64_t engine::submit(request r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) throw error("the engine is closed");
  if (!load_error_.empty()) throw error("the model failed to load: " + load_error_);
  if (!ready_) throw error("the engine is not ready (the model is still loading)");
  validate_request(r, n_vocab_, max_model_len_);
  r.id = next_id_++;
  const uint64_t id = r.id;
  inbox_.push_back(message{false, id, std::move(r)});
  stats_.waiting++;
  cv_.notify_one();
  return id;
}

void engine::abort(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing_) return;  // close() aborts everything anyway
  inbox_.push_back(message{true, id, {}});
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
      emit_step(outs);
    }
    abort_all(outs);
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

bool engine::load() {
  engine_event ev;
  try {
    std::shared_ptr<model> m = loader_();
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
    ev.info = describe(*m, max_len);
    logits_.assign(size_t(hp.n_vocab), 0.0f);
    std::lock_guard<std::mutex> lock(mu_);
    model_ = std::move(m);
    n_vocab_ = std::min(hp.n_vocab, model_->vocab().n_vocab());
    max_model_len_ = max_len;
    ready_ = true;
    stats_.ready = true;
  } catch (const std::exception& e) {
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
  ev.type = engine_event::kind::ready;
  sink_(std::move(ev));
  return true;
}

// Blocks while there is nothing to do; moves the inbox into waiting_ / applies aborts. Returns false when the
// loop should exit (closing, and either aborting or drained).
bool engine::wait_and_drain(std::vector<request_output>& outs) {
  std::vector<message> inbox;
  bool closing, drain;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !inbox_.empty() || closing_ || running_ || !waiting_.empty(); });
    inbox.swap(inbox_);
    closing = closing_;
    drain = drain_;
  }
  for (message& m : inbox) {
    if (m.is_abort) {
      handle_abort(m.id, outs);
    } else {
      waiting_.push_back(std::move(m.req));
    }
  }
  if (closing && !drain) return false;
  if (closing && !running_ && waiting_.empty()) return false;
  return true;
}

static request_output& output_for(std::vector<request_output>& outs, uint64_t id) {
  for (request_output& o : outs) {
    if (o.id == id) return o;
  }
  outs.emplace_back();
  outs.back().id = id;
  return outs.back();
}

void engine::handle_abort(uint64_t id, std::vector<request_output>& outs) {
  if (running_ && running_->req.id == id) {
    request_output& out = output_for(outs, id);
    running_->finish = finish_reason::abort;
    finish_running(out);
    return;
  }
  auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const request& r) { return r.id == id; });
  if (it == waiting_.end()) return;
  waiting_.erase(it);
  output_for(outs, id).finish = finish_reason::abort;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.waiting--;
  stats_.requests_finished++;
}

void engine::abort_all(std::vector<request_output>& outs) {
  if (running_) handle_abort(running_->req.id, outs);
  while (!waiting_.empty()) handle_abort(waiting_.front().id, outs);
  // Submits that raced with close() are still in the inbox: answer them too.
  std::vector<message> inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
  }
  for (message& m : inbox) {
    if (m.is_abort) continue;
    output_for(outs, m.id).finish = finish_reason::abort;
    std::lock_guard<std::mutex> lock(mu_);
    stats_.waiting--;
    stats_.requests_finished++;
  }
}

void engine::step(std::vector<request_output>& outs) {
  if (!running_ && !waiting_.empty()) start_next(outs);
  if (running_) run_running(outs);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.steps++;
}

// Moves the oldest waiting request into running_. The sequence (sampler tables, [n_vocab] each) is built
// outside mu_, so a submit from JS never waits for it.
void engine::start_next(std::vector<request_output>& outs) {
  request r = std::move(waiting_.front());
  waiting_.pop_front();
  const uint64_t id = r.id;
  std::string failure;
  try {
    // Sampling covers the ids both the model (logit rows) and the tokenizer know: n_vocab_ = min of the two.
    running_ = std::make_unique<sequence>(std::move(r), model_->vocab(), n_vocab_, max_model_len_);
  } catch (const std::exception& e) {  // allocation failure: fail this request, keep the engine alive
    failure = std::string("could not start the request: ") + e.what();
  }
  if (!running_) {
    request_output& out = output_for(outs, id);
    out.error = failure;
    out.finish = finish_reason::abort;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.waiting--;
  if (running_) {
    stats_.running = 1;
  } else {
    stats_.requests_finished++;
  }
}

// One forward of the running sequence (the whole prompt first, then its last token) and one sample.
void engine::run_running(std::vector<request_output>& outs) {
  sequence& seq = *running_;
  request_output& out = output_for(outs, seq.req.id);
  uint64_t n_prefill = 0;
  try {
    if (!seq.kv) {
      seq.kv = model_->new_sequence(seq.kv_capacity());
      model_->forward(*seq.kv, seq.req.prompt.data(), int64_t(seq.req.prompt.size()), logits_.data(), false);
      n_prefill = seq.req.prompt.size();
    } else {
      model_->forward(*seq.kv, &seq.output.back(), 1, logits_.data(), false);
    }
    seq.sample_and_append(logits_.data(), out);
  } catch (const std::exception& e) {
    out.error = e.what();
    if (out.error.empty()) out.error = "unknown error in the engine step";
    seq.finish = finish_reason::abort;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.prompt_tokens += n_prefill;
    stats_.generated_tokens += out.error.empty() ? 1 : 0;
  }
  if (seq.finished()) finish_running(out);
}

// Frees the running sequence (and its KV) in the step it finished.
void engine::finish_running(request_output& out) {
  out.finish = running_->finish;
  running_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.running = 0;
  stats_.requests_finished++;
}

void engine::emit_step(std::vector<request_output>& outs) {
  if (outs.empty()) return;
  engine_event ev;
  ev.type = engine_event::kind::step;
  ev.outputs.swap(outs);
  sink_(std::move(ev));
}

}  // namespace spindle
