// The SigLIP vision encoder and its projector (LFM2-VL's or Gemma 3's) on a compute backend (the same graph as
// siglip_encoder_ref.h, with the backend's matmul, layer_norm, gelu, rms_norm and non-causal attention; Gemma 3's
// average pooling on the host): one crop's normalized pixels in, one embedding per image token out.
// Invariant: weights are uploaded once at construction and released with the object; an encode's output
// depends only on its own pixels (no state carries over between calls except cached position tables).
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "vision/image_resize.h"
#include "vision/image_plan.h"
#include "vision/mmproj.h"

namespace spindle {

class siglip_encoder {
 public:
  // m (and the file it points into) must outlive the encoder. Throws spindle::error when the backend cannot
  // take a weight's type.
  siglip_encoder(const mmproj_model& m, backend& be);
  ~siglip_encoder();
  siglip_encoder(const siglip_encoder&) = delete;
  siglip_encoder& operator=(const siglip_encoder&) = delete;

  // pixels: host planar [3][height][width], normalized; sides multiples of P*s (gemma3: image_size a side).
  // out: host [(width / (P*s)) * (height / (P*s))][n_embd_out].
  void encode(const float* pixels, int width, int height, float* out);
  int n_embd_out() const { return int(m_.hp.n_embd_out); }

 private:
  struct layer {
    backend_weight q, k, v, out, up, down;
    backend_buffer q_b, k_b, v_b, out_b, up_b, down_b, ln1, ln1_b, ln2, ln2_b;
  };
  backend_weight weight(const gguf_tensor& t);
  backend_buffer vec(const gguf_tensor* t);  // empty when t is null
  void linear(const backend_weight& w, const backend_buffer& b, const float* x, int64_t n, float* y);
  const backend_buffer& pos_table(int gw, int gh);  // [gh*gw, D], resized once per grid size
  void reserve(int64_t n_patches);
  // The projectors: x [n patches, D] (backend, after the post LayerNorm) -> emb_ [m tokens, E].
  void project_lfm2(float* x, int gw, int gh);
  void project_gemma3(float* x, int gw, int gh);

  const mmproj_model& m_;
  backend& be_;
  backend_weight patch_;
  backend_buffer patch_b_, post_ln_, post_ln_b_, proj_norm_, proj_norm_b_, proj1_b_, proj2_b_;
  backend_weight proj1_, proj2_;
  backend_buffer soft_emb_norm_;  // gemma3: [D]
  backend_weight input_proj_;     // gemma3: the stored [E, D] transposed to [D in, E out], F32
  std::vector<float> input_proj_rows_;  // its host rows [E][D] (a CPU backend's weight points into them)
  std::vector<float> pooled_host_;
  std::vector<layer> layers_;
  std::vector<float> pos_host_;  // [G*G, D]
  std::map<std::pair<int, int>, backend_buffer> pos_cache_;
  int64_t capacity_ = 0;  // patches the scratch buffers hold
  backend_buffer patches_, x_, cur_, q_, k_, v_, att_, ff_, merged_, hidden_, emb_;
  std::vector<float> patches_host_;
};

// A whole image through `enc`: every crop of `plan` made from `image` (image_preprocess.h), normalized with the
// file's mean / std and encoded, in prompt order. Returns host [plan.embeddings][n_embd_out].
std::vector<float> siglip_encode_image(siglip_encoder& enc, const mmproj_hparams& hp, const rgb_image& image,
                                     const image_plan& plan);

}  // namespace spindle
