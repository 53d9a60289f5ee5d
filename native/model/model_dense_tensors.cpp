// The tensor table shared by the dense architectures (llama-model.cpp's create_tensor calls for LLAMA, QWEN2,
// QWEN3, GEMMA3, and QWEN3MOE with its experts), parameterized by dense_layout. Invariant: every tensor forward() reads is present after this returns.
#include "common/error.h"
#include "gguf/gguf_file.h"
#include "model/dense_model.h"
#include "model/model_tensors.h"

namespace spindle {

namespace {

dense_layer load_layer(tensor_table& t, const model_hparams& hp, const dense_layout& lay, int il) {
  const int64_t n_embd = hp.n_embd, hd = hp.head_dim_k;
  const int64_t n_embd_k = hd * hp.n_head_kv, n_embd_v = (int64_t)hp.head_dim_v * hp.n_head_kv;
  dense_layer l;
  l.attn_norm = t.vector(tensor_table::blk(il, "attn_norm.weight"), n_embd, true);
  if (t.has(tensor_table::blk(il, "attn_qkv.weight"))) {
    throw error(t.file().path() + ": tensor '" + tensor_table::blk(il, "attn_qkv.weight") +
                "': fused QKV weights are not supported (expected separate attn_q / attn_k / attn_v)");
  }
  l.wq = t.matrix(tensor_table::blk(il, "attn_q.weight"), n_embd, lay.n_embd_q, true);
  l.wk = t.matrix(tensor_table::blk(il, "attn_k.weight"), n_embd, n_embd_k, true);
  l.wv = t.matrix(tensor_table::blk(il, "attn_v.weight"), n_embd, n_embd_v, true);
  l.bq = t.vector(tensor_table::blk(il, "attn_q.bias"), lay.n_embd_q, false);
  l.bk = t.vector(tensor_table::blk(il, "attn_k.bias"), n_embd_k, false);
  l.bv = t.vector(tensor_table::blk(il, "attn_v.bias"), n_embd_v, false);
  if (lay.qk_norm) {
    l.q_norm = t.vector(tensor_table::blk(il, "attn_q_norm.weight"), hd, true);
    l.k_norm = t.vector(tensor_table::blk(il, "attn_k_norm.weight"), hd, true);
  }
  l.wo = t.matrix(tensor_table::blk(il, "attn_output.weight"), lay.n_embd_q, n_embd, true);
  if (lay.attn_out_bias) l.bo = t.vector(tensor_table::blk(il, "attn_output.bias"), n_embd, false);
  l.ffn_norm = t.vector(tensor_table::blk(il, "ffn_norm.weight"), n_embd, true);
  if (lay.post_norms) {
    l.attn_post_norm = t.vector(tensor_table::blk(il, "post_attention_norm.weight"), n_embd, true);
    l.ffn_post_norm = t.vector(tensor_table::blk(il, "post_ffw_norm.weight"), n_embd, true);
  }
  if (lay.moe) {
    l.moe = load_moe_layer(t, il, n_embd, *lay.moe, false);
    return l;
  }
  // llama.cpp takes optional FFN biases (llama, granite with mlp_bias); left out here they would change the logits
  // without a word, so a file with them is refused
  for (const char* b : {"ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"}) {
    if (t.has(tensor_table::blk(il, b))) {
      throw error(t.file().path() + ": tensor '" + tensor_table::blk(il, b) + "': FFN biases are not supported");
    }
  }
  l.ffn_gate = t.matrix(tensor_table::blk(il, "ffn_gate.weight"), n_embd, hp.n_ff, true);
  l.ffn_up = t.matrix(tensor_table::blk(il, "ffn_up.weight"), n_embd, hp.n_ff, true);
  l.ffn_down = t.matrix(tensor_table::blk(il, "ffn_down.weight"), hp.n_ff, n_embd, true);
  return l;
}

}  // namespace

dense_weights load_dense_weights(tensor_table& t, const model_hparams& hp, const dense_layout& lay) {
  if (lay.n_embd_q != (int64_t)hp.n_head * hp.head_dim_k) {
    throw error(t.file().path() + ": architecture " + hp.arch + " needs n_head * key_length (" +
                std::to_string((int64_t)hp.n_head * hp.head_dim_k) + ") == " + std::to_string(lay.n_embd_q));
  }
  dense_weights w;
  w.tok_embd = t.matrix("token_embd.weight", hp.n_embd, hp.n_vocab, true);
  w.output_norm = t.vector("output_norm.weight", hp.n_embd, true);
  w.output = t.matrix("output.weight", hp.n_embd, hp.n_vocab, false);
  if (w.output.data == nullptr) w.output = w.tok_embd;  // tied embeddings
  if (lay.out_bias) w.output_b = t.vector("output.bias", hp.n_vocab, false);
  if (lay.rope_freqs) w.rope_freqs = t.vector("rope_freqs.weight", hp.n_rot / 2, false);
  if (lay.moe) w.moe = *lay.moe;
  w.layers.reserve((size_t)hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) w.layers.push_back(load_layer(t, hp, lay, il));
  return w;
}

}  // namespace spindle
