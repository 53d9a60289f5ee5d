// The per-batch steps every model's forward_batch shares: the host arrays of a batch (token ids, positions,
// paged cache rows) and the output head over only the rows whose logits are wanted.
// Invariant: rows are in batch order (sequence after sequence, token after token), and the logits of a row
// come from the same kernels whatever else is in the batch.
#pragma once
#include <vector>

#include "backend/backend.h"
#include "model/dense_model.h"
#include "model/model.h"

namespace spindle {

// Checks every sequence of a batch against a paged cache of n_blocks blocks of block_size slots and a vocabulary
// of n_vocab ids (tokens, first_pos, n_logits, the block table's coverage and ids); returns the total token count.
// Throws spindle::error naming the sequence and the problem.
int64_t check_batch_sequences(const std::vector<batch_sequence>& batch, int32_t n_blocks, int32_t block_size,
                              int32_t n_vocab);

// Appends the attention calls of one sequence's rows to `out`: one causal call (base with b's n_tokens and
// first_pos), or, around bidirectional spans (batch_sequence::bidir_spans), consecutive calls over its rows in order:
// causal runs, and each span's rows as a non-causal call whose n_past is the span's first row in this chunk (so they
// see every position up to the span's end). base: heads, strides, scale, window, store; its table and block fields.
void append_attention_calls(std::vector<paged_attention_params>& out, const paged_attention_params& base,
                            const batch_sequence& b);

// Throws when some sequence wants logits rows (not only their argmax) and the buffer is null.
void check_logits_buffer(const std::vector<batch_sequence>& batch, const float* logits);

// s.tokens / s.pos / s.kv_rows [n] for the batch: row = block_table[pos / block_size] * block_size + pos % block_size.
void fill_batch_rows(const std::vector<batch_sequence>& batch, int32_t block_size, dense_scratch& s);

// x [n, n_embd] = the input row of every token: its vocabulary embedding, or (image placeholders,
// k_embedding_token) the row its sequence's embd supplies (filled by fill_batch_rows). token_scale: host [n], the
// vocabulary rows' factors (gemma3's sqrt(n_embd)), applied before the image rows go in; null: none.
void batch_input_rows(backend& be, const backend_weight& tok_embd, dense_scratch& s, int64_t n,
                      const float* token_scale = nullptr);

// A forward pass's step graph (backend::graph_begin / graph_end): opened for a decode-like batch (key != 0),
// ended before the logits are read back, dropped (graph_abort) if the pass throws before that.
class step_graph_scope {
 public:
  step_graph_scope(backend& be, uint64_t key) : be_(be), open_(key != 0) {
    if (open_) be_.graph_begin(key);
  }
  ~step_graph_scope() {
    if (open_) be_.graph_abort();
  }
  void end() {
    if (open_) be_.graph_end();
    open_ = false;
  }
  step_graph_scope(const step_graph_scope&) = delete;
  step_graph_scope& operator=(const step_graph_scope&) = delete;

 private:
  backend& be_;
  bool open_;
};

// The step-graph key of a batch: decode-like batches (every sequence brings at most 16 tokens, 512 in all, no
// image rows; s filled by fill_batch_rows) get the hash of their per-sequence token and logit counts, so steps
// of one shape share a graph; anything else (prefill chunks, whose shapes rarely repeat) gets 0: op by op.
uint64_t step_graph_key(const std::vector<batch_sequence>& batch, int64_t n_tokens, const dense_scratch& s);

// logits [sum of n_logits, n_vocab] = output(rms_norm(last n_logits rows of each sequence in s.x)) (+ bias, when
// set), over the sequences without hidden rows; a sequence with batch_sequence::hidden gets its rms_norm rows
// there instead (embeddings). Uses s.cur and s.logits as scratch. Nothing is written when no sequence wants
// logits. The step graph (when open) ends once the logits are computed, before they are read back.
void batch_output_logits(backend& be, const std::vector<batch_sequence>& batch, dense_scratch& s,
                         const model_hparams& hp, const backend_buffer& norm, const backend_weight& output,
                         const backend_buffer* bias, float* logits, step_graph_scope& graph);

}  // namespace spindle
