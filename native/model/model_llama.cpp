// Architecture "llama": rope on adjacent pairs, optional q/k/v and attn_output biases, optional rope_freqs
// (llama 3 frequency factors), output tied to token_embd when absent (llama-model.cpp, llama_model_llama).
#include "model/dense_model.h"

namespace spindle {

dense_weights load_llama_weights(tensor_table& table, const model_hparams& hp) {
  dense_layout lay;
  lay.n_embd_q = (int64_t)hp.head_dim_k * hp.n_head;
  lay.attn_out_bias = true;
  lay.rope_freqs = true;
  return load_dense_weights(table, hp, lay);
}

}  // namespace spindle
