// LoRA adapter loading and application (see lora.h).
// Invariant: load() checks every tensor (suffix, pairing, target, shapes, type) before uploading any of them.
#include "model/lora.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "model/model_tensors.h"

namespace spindle {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_of(const gguf_tensor& t) { return shape_str(t.ne, int(t.n_dims)); }

}  // namespace

std::string lora_unsupported_reason(const std::string& base) {
  if (ends_with(base, "_exps.weight") || ends_with(base, "ffn_gate_inp.weight")) {
    return "adapting MoE experts and routers is not supported";
  }
  if (base == "token_embd.weight") return "adapting the token embeddings is not supported";
  return "it is not a weight matrix Spindle adapts";
}

std::shared_ptr<lora_adapter> lora_adapter::load(const std::string& path, float user_scale, const std::string& arch,
                                                 const std::vector<lora_target>& targets, backend& be) {
  std::unique_ptr<gguf_file> file = gguf_file::open(path);  // throws naming the path
  const auto fail = [&](const std::string& what) { return error("LoRA adapter " + path + ": " + what); };
  const std::string type = file->get_string_or("general.type", "");
  if (type != "adapter") throw fail("general.type is '" + type + "', expected 'adapter'");
  const std::string adapter_type = file->get_string_or("adapter.type", "");
  if (adapter_type != "lora") throw fail("adapter.type is '" + adapter_type + "', expected 'lora'");
  const std::string its_arch = file->get_string_or("general.architecture", "");
  if (its_arch != arch) throw fail("it was made for architecture '" + its_arch + "', the model is '" + arch + "'");
  if (file->find("adapter.alora.invocation_tokens")) {
    throw fail("activated LoRA (adapter.alora.invocation_tokens) is not supported");
  }
  const double alpha = file->get_f64_or("adapter.lora.alpha", 0.0);
  if (!(alpha >= 0) || alpha > 1e6) throw fail("adapter.lora.alpha " + std::to_string(alpha) + " is out of [0, 1e6]");

  // pair the tensors by base name (norm vectors are skipped, as llama.cpp does)
  std::map<std::string, std::pair<const gguf_tensor*, const gguf_tensor*>> ab;
  for (const gguf_tensor& t : file->tensors()) {
    if (ends_with(t.name, ".lora_a")) {
      ab[t.name.substr(0, t.name.size() - 7)].first = &t;
    } else if (ends_with(t.name, ".lora_b")) {
      ab[t.name.substr(0, t.name.size() - 7)].second = &t;
    } else if (!ends_with(t.name, "_norm.weight")) {
      throw fail("tensor '" + t.name + "' is neither a .lora_a nor a .lora_b (nor a norm)");
    }
  }
  if (ab.empty()) throw fail("it holds no .lora_a / .lora_b tensor pairs");

  std::unordered_map<std::string, const backend_weight*> by_name;
  for (const lora_target& t : targets) by_name.emplace(t.name, t.weight);
  struct checked {
    const backend_weight* base;
    const gguf_tensor *a, *b;
  };
  std::vector<checked> todo;
  for (const auto& [name, p] : ab) {
    if (!p.first || !p.second) {
      throw fail("tensor '" + name + (p.first ? ".lora_a' has no .lora_b" : ".lora_b' has no .lora_a"));
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) throw fail("tensor '" + name + "': " + lora_unsupported_reason(name));
    const backend_weight& w = *it->second;
    const gguf_tensor &a = *p.first, &b = *p.second;
    const int64_t rank = a.ne[1];
    if (a.n_dims > 2 || b.n_dims > 2 || a.ne[0] != w.n_in || b.ne[1] != w.n_out || b.ne[0] != rank || rank < 1) {
      throw fail("tensor '" + name + "': lora_a " + shape_of(a) + " and lora_b " + shape_of(b) +
                 " do not adapt a weight of shape [" + std::to_string(w.n_in) + ", " + std::to_string(w.n_out) +
                 "] (expected [" + std::to_string(w.n_in) + ", rank] and [rank, " + std::to_string(w.n_out) +
                 "]; is it for another model?)");
    }
    for (const gguf_tensor* t : {&a, &b}) {
      if (!be.supports_type(t->type)) {
        throw fail("tensor '" + t->name + "' has type " + type_name(t->type) + ", which the " + be.name() +
                   " backend does not compute with");
      }
    }
    todo.push_back({&w, &a, &b});
  }

  std::shared_ptr<lora_adapter> ad(new lora_adapter());
  ad->be_ = &be;
  for (const checked& c : todo) {
    pair p;
    const int64_t rank = c.a->ne[1];
    p.scale = alpha != 0 ? float(double(user_scale) * alpha / double(rank)) : user_scale;
    pair& slot = ad->pairs_.emplace(c.base, p).first->second;  // the destructor releases what was uploaded
    slot.a = be.upload_weight(c.a->type, c.a->data, c.a->ne[0], rank);
    slot.b = be.upload_weight(c.b->type, c.b->data, rank, c.b->ne[1]);
    ad->max_rank_ = std::max(ad->max_rank_, int32_t(rank));
  }
  ad->file_ = std::move(file);
  return ad;
}

lora_adapter::~lora_adapter() {
  for (auto& [w, p] : pairs_) {
    if (p.a.data) be_->release_weight(p.a);
    if (p.b.data) be_->release_weight(p.b);
  }
}

void lora_rows::push(std::vector<run>& runs, const lora_adapter* a, int64_t row0, int64_t n) {
  if (a == nullptr || n <= 0) return;
  if (!runs.empty() && runs.back().adapter == a && runs.back().row0 + runs.back().n_rows == row0) {
    runs.back().n_rows += n;
  } else {
    runs.push_back({a, row0, n});
  }
}

void lora_rows::set(const std::vector<batch_sequence>& batch) {
  token_runs_.clear();
  logits_runs_.clear();
  adapters_.clear();
  int64_t row = 0, logits_row = 0;
  for (const batch_sequence& b : batch) {
    push(token_runs_, b.lora, row, b.n_tokens);
    row += b.n_tokens;
    if (b.hidden == nullptr) {
      push(logits_runs_, b.lora, logits_row, b.n_logits);
      logits_row += b.n_logits;
    }
    if (b.lora && std::find(adapters_.begin(), adapters_.end(), b.lora) == adapters_.end()) adapters_.push_back(b.lora);
  }
}

bool lora_rows::adapts(const backend_weight& w) const {
  for (const lora_adapter* a : adapters_) {
    if (a->find(w)) return true;
  }
  return false;
}

void lora_rows::add(backend& be, const backend_weight& w, const float* x, float* y, const std::vector<run>& runs) {
  for (const run& r : runs) {
    const lora_adapter::pair* p = r.adapter->find(w);
    if (!p) continue;
    const int64_t rank = p->a.n_out, n_out = w.n_out;
    for (int64_t row0 = r.row0; row0 < r.row0 + r.n_rows; row0 += k_tile_rows) {  // row-wise: tiles change nothing
      const int64_t rows = std::min(k_tile_rows, r.row0 + r.n_rows - row0);
      if (low_.size() < rows * rank) low_ = backend_buffer(be, k_tile_rows * int64_t(r.adapter->max_rank()));
      const bool in_place = be.lora_add_in_place(p->b);  // the CPU kernel: no [rows, n_out] scratch
      if (!in_place && delta_.size() < rows * n_out) delta_ = backend_buffer(be, rows * n_out);
      be.lora_add(p->a, p->b, p->scale, x + row0 * w.n_in, rows, y + row0 * n_out, low_.data(),
                  in_place ? nullptr : delta_.data());
    }
  }
}

}  // namespace spindle
