// Architecture "qwen3moe": qwen3's attention (NEOX rope, per-head RMSNorm of q and k) with every layer's FFN a
// mixture of experts: softmax router over all experts, top-k, selected weights renormalized, no weight scale
// (llama-model.cpp / models/qwen3moe.cpp: build_moe_ffn(..., SILU, norm_w = true, expert_weights_scale (never
// loaded for this arch, so 0), SOFTMAX)). The expert width defaults to n_ff / n_expert_used.
#include "model/dense_model.h"
#include "model/model_tensors.h"

namespace spindle {

dense_weights load_qwen3moe_weights(tensor_table& table, const model_hparams& hp) {
  moe_config cfg = read_moe_config(table.file(), hp.arch, hp.n_layer, hp.n_ff);
  cfg.gating = moe_gating::softmax;
  cfg.norm_weights = true;
  cfg.weights_scale = 0.0f;
  dense_layout lay;
  lay.n_embd_q = (int64_t)hp.head_dim_k * hp.n_head;
  lay.qk_norm = true;
  lay.moe = &cfg;
  return load_dense_weights(table, hp, lay);
}

}  // namespace spindle
