// Architecture "qwen3": NEOX rope, per-head RMSNorm of q and k before rope (attn_q_norm / attn_k_norm,
// [head_dim]), no biases required (llama-model.cpp, llama_model_qwen3).
#include "model/dense_model.h"

namespace spindle {

dense_weights load_qwen3_weights(tensor_table& table, const model_hparams& hp) {
  dense_layout lay;
  lay.n_embd_q = (int64_t)hp.head_dim_k * hp.n_head;
  lay.qk_norm = true;
  return load_dense_weights(table, hp, lay);
}

}  // namespace spindle
