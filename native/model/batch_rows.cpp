// Shared forward_batch steps (see batch_rows.h).
#include "model/batch_rows.h"

#include "common/checked_math.h"
#include "common/error.h"

namespace spindle {

void check_logits_buffer(const std::vector<batch_sequence>& batch, const float* logits) {
  for (const batch_sequence& b : batch)
    if (b.n_logits > 0 && logits == nullptr) throw error("forward_batch: null logits buffer");
}

void fill_batch_rows(const std::vector<batch_sequence>& batch, int32_t block_size, dense_scratch& s) {
  int64_t at = 0;
  for (const batch_sequence& b : batch) {
    for (int32_t t = 0; t < b.n_tokens; ++t, ++at) {
      const int64_t pos = (int64_t)b.first_pos + t;
      s.tokens[at] = b.tokens[t];
      s.pos[at] = (int32_t)pos;
      s.kv_rows[at] = (int64_t)b.block_table[pos / block_size] * block_size + pos % block_size;
    }
  }
}

void batch_output_logits(backend& be, const std::vector<batch_sequence>& batch, dense_scratch& s,
                         const model_hparams& hp, const backend_buffer& norm, const backend_weight& output,
                         const backend_buffer* bias, float* logits) {
  int64_t n_out = 0, at = 0;
  for (const batch_sequence& b : batch) {  // gather the wanted rows of x into cur: [n_out, n_embd]
    if (b.n_logits > 0) {
      const int64_t first = at + b.n_tokens - b.n_logits;
      be.copy(s.cur.data() + n_out * hp.n_embd, s.x.data() + first * hp.n_embd, (int64_t)b.n_logits * hp.n_embd);
    }
    n_out += b.n_logits;
    at += b.n_tokens;
  }
  if (n_out == 0) return;
  const int64_t n_logits = (int64_t)checked_mul((uint64_t)n_out, (uint64_t)hp.n_vocab, "logits");
  if (s.logits.size() < n_logits) s.logits = backend_buffer(be, n_logits);
  float* cur = s.cur.data();
  be.rms_norm(cur, norm.data(), cur, n_out, hp.n_embd, hp.rms_eps);
  be.matmul(output, cur, n_out, s.logits.data());  // [n_out, n_vocab]
  if (bias != nullptr && bias->data() != nullptr) be.add_row_vector(s.logits.data(), bias->data(), n_out, hp.n_vocab);
  be.download(logits, s.logits.data(), n_logits);
}

}  // namespace spindle
