// Architecture "qwen2": NEOX rope, q/k/v biases (optional as in llama.cpp), attn_q / attn_output square
// [n_embd, n_embd], optional output.bias (llama-model.cpp, llama_model_qwen2).
#include "model/dense_model.h"

namespace spindle {

dense_weights load_qwen2_weights(tensor_table& table, const model_hparams& hp) {
  dense_layout lay;
  lay.n_embd_q = hp.n_embd;
  lay.out_bias = true;
  return load_dense_weights(table, hp, lay);
}

}  // namespace spindle
