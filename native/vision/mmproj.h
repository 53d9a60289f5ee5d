// A SigLIP mmproj GGUF (llama.cpp's clip conventions): projector type "lfm2" (LFM2-VL: pixel unshuffle + a
// two-layer MLP, docs/design/lfm2-vl.md sections 1-2) or "gemma3" (Gemma 3: average pooling + RMSNorm + one
// projection matrix). The vision hyperparameters and the encoder + projector tensors are checked up front.
// llama.cpp asserts or crashes on several of these problems; here each is a spindle::error naming the key or tensor.
// Invariant: a loaded mmproj has every tensor its projector's graph needs, with the shapes the table fixes; optional
// tensors (biases, post LayerNorm, projector LayerNorm) are null when absent; the other projector's are null;
// lfm2: scale_factor >= 2; gemma3: the position grid is image_size / patch_size a side and divisible by
// scale_factor (the pooling kernel).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace spindle {

struct mmproj_hparams {
  std::string projector;    // "lfm2" or "gemma3"
  uint32_t n_embd = 0;      // D, clip.vision.embedding_length
  uint32_t n_head = 0;
  uint32_t n_ff = 0;
  uint32_t n_layer = 0;
  uint32_t patch_size = 0;  // P
  uint32_t image_size = 0;  // gemma3: the encoder's fixed input side in pixels; unused by LFM2 preprocessing
  // s: lfm2: the pixel-unshuffle factor (clip.vision.projector.scale_factor, required >= 2); gemma3: the average
  // pooling kernel per side (4 unless the file says otherwise, as llama.cpp)
  uint32_t scale_factor = 0;
  float eps = 0;            // ViT LayerNorm epsilon
  bool use_gelu = false;    // FFN activation: GELU (tanh) when true, else gelu_quick (llama.cpp's default)
  std::array<float, 3> mean{}, stddev{};
  uint32_t pos_grid = 0;    // G: the learned position grid is G x G
  uint32_t proj_hidden = 0; // lfm2: H, ne1 of mm.1.weight
  uint32_t n_embd_out = 0;  // E: lfm2: ne1 of mm.2.weight; gemma3: ne0 of mm.input_projection.weight; must equal
                            // the text model's n_embd
  bool gemma3() const { return projector == "gemma3"; }
  // Embeddings of one image (gemma3, fixed size): (image_size / patch_size / scale_factor)^2.
  int fixed_tokens() const {
    const int side = int(image_size / patch_size / scale_factor);
    return side * side;
  }
};

struct mmproj_layer {
  const gguf_tensor *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;          // [D, D]
  const gguf_tensor *q_b = nullptr, *k_b = nullptr, *v_b = nullptr, *out_b = nullptr;  // [D], optional
  const gguf_tensor *ln1 = nullptr, *ln1_b = nullptr, *ln2 = nullptr, *ln2_b = nullptr;  // [D]
  const gguf_tensor *up = nullptr, *up_b = nullptr;      // [D, n_ff], [n_ff]
  const gguf_tensor *down = nullptr, *down_b = nullptr;  // [n_ff, D], [D]
};

struct mmproj_model {
  mmproj_hparams hp;
  const gguf_tensor* patch_embd = nullptr;    // [P, P, 3, D]
  const gguf_tensor* patch_embd_b = nullptr;  // [D], optional
  const gguf_tensor* pos_embd = nullptr;      // [D, G*G], F32
  std::vector<mmproj_layer> layers;
  const gguf_tensor *post_ln = nullptr, *post_ln_b = nullptr;      // [D], optional
  const gguf_tensor *proj_norm = nullptr, *proj_norm_b = nullptr;  // [D*s*s], optional
  const gguf_tensor *proj1 = nullptr, *proj1_b = nullptr;          // [D*s*s, H], [H]
  const gguf_tensor *proj2 = nullptr, *proj2_b = nullptr;          // [H, E], [E]
  // gemma3: rms_norm(pooled) * soft_emb_norm (the converter stored 1 + Gemma's weight), then @ input_proj, whose
  // GGUF shape [E, D] is HF's (vision width, text width) matrix as it is: input-major, so it is transposed to load
  const gguf_tensor* soft_emb_norm = nullptr;  // [D]
  const gguf_tensor* input_proj = nullptr;     // [E, D]
};

// Reads and checks `file` (which must outlive the result). text_n_embd > 0 also checks the projector's
// output width against the text model's embedding width.
mmproj_model load_mmproj(const gguf_file& file, uint32_t text_n_embd = 0);

}  // namespace spindle
