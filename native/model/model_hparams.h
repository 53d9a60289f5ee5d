// Hyperparameters of the dense architectures read from GGUF metadata, with llama.cpp's defaults
// (llama-model.cpp: load_hparams + the per-architecture load_arch_hparams).
// Invariant: the returned hparams are positive, fit int32, satisfy n_head % n_head_kv == 0,
// head_dim_k == head_dim_v == n_rot, n_layer <= 512; anything else throws spindle::error naming file and key.
#pragma once
#include <string>

#include "model/model.h"

namespace spindle {

constexpr int32_t k_max_layers = 512;  // LLAMA_MAX_LAYERS

// arch: general.architecture; n_vocab: tokens of the model's vocabulary; rope_neox: the arch's rope mode.
model_hparams load_hparams(const gguf_file& file, const std::string& arch, int32_t n_vocab, bool rope_neox);

// The rope part of load_hparams alone (freq_base, linear scaling), for architectures with their own reader.
void load_rope_hparams(const gguf_file& file, const std::string& arch, model_hparams& hp);

}  // namespace spindle
