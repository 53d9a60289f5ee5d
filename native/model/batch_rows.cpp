// Shared forward_batch steps (see batch_rows.h).
#include "model/batch_rows.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

int64_t check_batch_sequences(const std::vector<batch_sequence>& batch, int32_t n_blocks, int32_t block_size,
                              int32_t n_vocab) {
  if (batch.empty()) throw error("forward_batch: empty batch");
  uint64_t total = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const batch_sequence& b = batch[i];
    const std::string at = "forward_batch: sequence " + std::to_string(i) + ": ";
    if (!b.tokens || b.n_tokens <= 0 || b.first_pos < 0) throw error(at + "needs tokens and first_pos >= 0");
    if (b.n_logits < 0 || b.n_logits > b.n_tokens) throw error(at + "n_logits out of [0, n_tokens]");
    if (b.n_rollback < 0 || b.n_rollback >= b.n_tokens) throw error(at + "n_rollback out of [0, n_tokens)");
    const int64_t end = (int64_t)b.first_pos + b.n_tokens;
    if (end > INT32_MAX || !b.block_table || b.n_table < 0 || end > (int64_t)b.n_table * block_size) {
      throw error(at + "block table does not cover " + std::to_string(end) + " positions");
    }
    for (int64_t j = 0; j < (end + block_size - 1) / block_size; ++j) {
      if (b.block_table[j] < 0 || b.block_table[j] >= n_blocks) {
        throw error(at + "block id " + std::to_string(b.block_table[j]) + " out of range [0, " +
                    std::to_string(n_blocks) + ")");
      }
    }
    for (int32_t t = 0; t < b.n_tokens; ++t) {
      if (b.tokens[t] == k_embedding_token && b.embd) continue;
      if (b.tokens[t] < 0 || b.tokens[t] >= n_vocab) {
        throw error(at + "token id " + std::to_string(b.tokens[t]) + " at index " + std::to_string(t) +
                    " out of range [0, " + std::to_string(n_vocab) + ")");
      }
    }
    if (b.n_bidir_spans < 0 || (b.n_bidir_spans > 0 && !b.bidir_spans)) throw error(at + "bad bidirectional span list");
    for (int32_t k = 0; k < b.n_bidir_spans; ++k) {
      const int32_t sb = b.bidir_spans[2 * k], se = b.bidir_spans[2 * k + 1];
      if (sb < 0 || se <= sb || (k > 0 && sb < b.bidir_spans[2 * k - 1])) {
        throw error(at + "bidirectional spans must be sorted, disjoint and non-empty");
      }
      if (sb < end && se > b.first_pos && (se > end || sb < b.first_pos)) {
        throw error(at + "bidirectional span [" + std::to_string(sb) + ", " + std::to_string(se) + ") is not inside the chunk [" +
                    std::to_string(b.first_pos) + ", " + std::to_string(end) + "): each of its rows must see all the others");
      }
    }
    if (b.sample != nullptr && b.argmax == nullptr) throw error(at + "sample specs need an argmax (ids) buffer");
    if (b.hidden != nullptr && b.argmax != nullptr) throw error(at + "hidden rows take no argmax or sample");
    for (int32_t r = 0; b.sample != nullptr && r < b.n_logits; ++r) {
      const sample_spec& sp = b.sample[r];
      const int32_t n_ids = std::min(b.argmax_n, n_vocab);
      for (int32_t e = 0; e < sp.n_edits; ++e) {
        const logit_edit& d = sp.edits[e];
        if (d.id < 0 || d.id >= n_ids || (e > 0 && d.op < sp.edits[e - 1].op)) {
          throw error(at + "sample edit " + std::to_string(e) + " (id " + std::to_string(d.id) +
                      ") is outside [0, " + std::to_string(n_ids) + ") or out of op order");
        }
      }
    }
    total = checked_add(total, (uint64_t)b.n_tokens, "forward_batch tokens");
  }
  if (total > (uint64_t)INT32_MAX) throw error("forward_batch: too many tokens in one batch");
  return (int64_t)total;
}

void check_logits_buffer(const std::vector<batch_sequence>& batch, const float* logits) {
  for (const batch_sequence& b : batch)
    if (b.n_logits > 0 && b.argmax == nullptr && b.hidden == nullptr && logits == nullptr) {
      throw error("forward_batch: null logits buffer");
    }
}

void fill_batch_rows(const std::vector<batch_sequence>& batch, int32_t block_size, dense_scratch& s) {
  int64_t at = 0;
  s.embd_rows.clear();
  s.embd_src.clear();
  for (const batch_sequence& b : batch) {
    const float* next_embd = b.embd;
    for (int32_t t = 0; t < b.n_tokens; ++t, ++at) {
      const int64_t pos = (int64_t)b.first_pos + t;
      s.tokens[at] = b.tokens[t];
      if (b.tokens[t] == k_embedding_token) {  // looked up as id 0, then overwritten by batch_input_rows
        s.tokens[at] = 0;
        s.embd_rows.push_back(at);
        s.embd_src.push_back(next_embd);
        next_embd += s.n_embd;
      }
      s.pos[at] = (int32_t)pos;
      s.kv_rows[at] = (int64_t)b.block_table[pos / block_size] * block_size + pos % block_size;
    }
  }
}

void batch_input_rows(backend& be, const backend_weight& tok_embd, dense_scratch& s, int64_t n,
                      const float* token_scale) {
  be.get_rows(tok_embd, s.tokens.data(), n, s.x.data());
  if (token_scale) be.scale_rows(s.x.data(), token_scale, n, tok_embd.n_in);  // before the image rows go in
  if (s.embd_rows.empty()) return;
  const int64_t m = (int64_t)s.embd_rows.size(), width = tok_embd.n_in;
  s.embd_host.resize(size_t(m * width));
  for (int64_t i = 0; i < m; ++i) std::copy(s.embd_src[i], s.embd_src[i] + width, s.embd_host.data() + i * width);
  if (s.embd.size() < m * width) s.embd = backend_buffer(be, m * width);
  be.upload(s.embd.data(), s.embd_host.data(), m * width);
  be.copy_rows(s.x.data(), s.embd_rows.data(), s.embd.data(), nullptr, m, width);
}

uint64_t step_graph_key(const std::vector<batch_sequence>& batch, int64_t n_tokens, const dense_scratch& s) {
  if (n_tokens > 512 || !s.embd_rows.empty()) return 0;
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (n_tokens, n_logits) of each sequence
  const auto mix = [&](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (const batch_sequence& b : batch) {
    if (b.n_tokens > 16 || b.n_rollback > 0) return 0;  // rollback rows may go through the host
    if (b.hidden != nullptr) return 0;                  // hidden rows (embeddings): a shape of their own
    if (b.lora != nullptr) return 0;                    // LoRA deltas: row runs the graph would not see change
    mix((uint64_t)b.n_tokens);
    mix((uint64_t)b.n_logits);
  }
  return h == 0 ? 1 : h;
}

void batch_output_logits(backend& be, const std::vector<batch_sequence>& batch, dense_scratch& s,
                         const model_hparams& hp, const backend_buffer& norm, const backend_weight& output,
                         const backend_buffer* bias, float* logits, step_graph_scope& graph) {
  // gather the wanted rows of x into cur: the logits rows [n_out, n_embd], then the hidden rows [n_hidden, n_embd]
  int64_t n_out = 0, n_hidden = 0, at = 0;
  for (const batch_sequence& b : batch) (b.hidden ? n_hidden : n_out) += b.n_logits;
  int64_t logit_row = 0, hidden_row = n_out;
  for (const batch_sequence& b : batch) {
    if (b.n_logits > 0) {
      const int64_t first = at + b.n_tokens - b.n_logits;
      int64_t& row = b.hidden ? hidden_row : logit_row;
      be.copy(s.cur.data() + row * hp.n_embd, s.x.data() + first * hp.n_embd, (int64_t)b.n_logits * hp.n_embd);
      row += b.n_logits;
    }
    at += b.n_tokens;
  }
  if (n_out + n_hidden == 0) {
    graph.end();
    return;
  }
  be.rms_norm(s.cur.data(), norm.data(), s.cur.data(), n_out + n_hidden, hp.n_embd, hp.rms_eps);
  if (n_hidden > 0) {  // no step graph is open (step_graph_key): the rows can come back now
    hidden_row = n_out;
    for (const batch_sequence& b : batch) {
      if (!b.hidden || b.n_logits == 0) continue;
      be.download(b.hidden, s.cur.data() + hidden_row * hp.n_embd, (int64_t)b.n_logits * hp.n_embd);
      hidden_row += b.n_logits;
    }
  }
  if (n_out == 0) {
    graph.end();
    return;
  }
  const int64_t n_logits = (int64_t)checked_mul((uint64_t)n_out, (uint64_t)hp.n_vocab, "logits");
  if (s.logits.size() < n_logits) s.logits = backend_buffer(be, n_logits);
  be.matmul(output, s.cur.data(), n_out, s.logits.data());  // [n_out, n_vocab]
  s.lora.add_delta_logits(be, output, s.cur.data(), s.logits.data());
  if (bias != nullptr && bias->data() != nullptr) be.add_row_vector(s.logits.data(), bias->data(), n_out, hp.n_vocab);
  if (hp.logit_scale != 0.0f) {  // granite: times 1 / logit_scale, as llama.cpp scales them
    if ((int64_t)s.logit_scale.size() < n_out) s.logit_scale.assign((size_t)n_out, 1.0f / hp.logit_scale);
    be.scale_rows(s.logits.data(), s.logit_scale.data(), n_out, hp.n_vocab);
  }
  graph.end();
  // rows whose sequence wants only its token (greedy or sampled): ids; every other row: the logits (runs of rows
  // at a time)
  bool any_ids = false;
  for (const batch_sequence& b : batch) any_ids = any_ids || (b.n_logits > 0 && !b.hidden && b.argmax != nullptr);
  if (!any_ids) {
    be.download(logits, s.logits.data(), n_logits);
    return;
  }
  // one argmax_rows / sample_rows / download per run of consecutive sequences that want the same (a GPU syncs
  // once per call, not once per sequence)
  enum class want { logits, argmax, sample };
  const auto wanted = [](const batch_sequence& b) {
    return b.argmax == nullptr ? want::logits : b.sample == nullptr ? want::argmax : want::sample;
  };
  std::vector<int32_t> ids;
  std::vector<sample_spec> specs;
  int64_t row = 0;
  for (size_t i = 0; i < batch.size();) {
    if (batch[i].n_logits == 0 || batch[i].hidden) {
      ++i;
      continue;
    }
    const want w = wanted(batch[i]);
    const int64_t n_ids = std::min<int64_t>(batch[i].argmax_n, hp.n_vocab);
    size_t end = i;
    int64_t run_rows = 0;
    specs.clear();
    for (; end < batch.size(); ++end) {
      const batch_sequence& b = batch[end];
      if (b.n_logits == 0 || b.hidden) continue;
      if (wanted(b) != w || (w != want::logits && std::min<int64_t>(b.argmax_n, hp.n_vocab) != n_ids)) break;
      run_rows += b.n_logits;
      if (w == want::sample) specs.insert(specs.end(), b.sample, b.sample + b.n_logits);
    }
    float* rows = s.logits.data() + row * hp.n_vocab;
    if (w == want::logits) {
      be.download(logits + row * hp.n_vocab, rows, run_rows * hp.n_vocab);
    } else {
      ids.resize((size_t)run_rows);
      if (w == want::argmax) be.argmax_rows(rows, run_rows, hp.n_vocab, n_ids, ids.data());
      else be.sample_rows(rows, run_rows, hp.n_vocab, n_ids, specs.data(), ids.data());
      int64_t at = 0;
      for (size_t k = i; k < end; ++k) {
        if (batch[k].n_logits == 0 || batch[k].hidden) continue;
        std::copy(ids.begin() + at, ids.begin() + at + batch[k].n_logits, batch[k].argmax);
        at += batch[k].n_logits;
      }
    }
    row += run_rows;
    i = end;
  }
}

void append_attention_calls(std::vector<paged_attention_params>& out, const paged_attention_params& base,
                            const batch_sequence& b) {
  const int32_t end = b.first_pos + b.n_tokens;
  int32_t at = b.first_pos;  // the first row not yet in a call
  const auto call = [&](int32_t n, bool causal) {
    if (n <= 0) return;
    paged_attention_params pp = base;
    pp.attn.n_tokens = n;
    pp.attn.n_past = at;
    pp.attn.causal = causal;
    out.push_back(pp);
    at += n;
  };
  for (int32_t k = 0; k < b.n_bidir_spans; ++k) {
    const int32_t sb = b.bidir_spans[2 * k], se = b.bidir_spans[2 * k + 1];
    if (se <= at || sb >= end) continue;  // outside this chunk (check_batch_sequences: a span it reaches ends in it)
    call(sb - at, true);
    call(se - at, false);
  }
  call(end - at, true);
}

}  // namespace spindle
