// A vision model ready to serve beside a text model: the mmproj file (LFM2-VL, projector "lfm2"; Gemma 3, projector
// "gemma3"), its encoder on the text model's compute backend, the image plan parameters and the marker token ids of
// the text vocabulary.
// Invariant: construction either yields a model whose every marker token resolves and whose projector width
// equals the text model's embedding width, or throws spindle::error naming the file and the problem. plan() and
// layout() are const and thread-safe; encode() uses scratch buffers (one thread at a time: the engine thread).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vision/image_resize.h"
#include "vision/image_plan.h"
#include "vision/lfm2_plan.h"
#include "vision/mmproj.h"

namespace spindle {

class backend;
class gguf_file;
class siglip_encoder;
class tokenizer;

struct vision_options {
  int min_tokens = 0;  // image_min_tokens; 0 = the projector's default (lfm2: 64; gemma3 has no other count)
  int max_tokens = 0;  // image_max_tokens; 0 = the projector's default (lfm2: 256)
};

// The plan of a w x h image for the projector hp describes (lfm2: p's tiling rules; gemma3: one fixed square).
image_plan plan_image(const mmproj_hparams& hp, const lfm2_vision_params& p, int width, int height);

class vision_model {
 public:
  vision_model(const std::string& path, backend& be, const tokenizer& tok, int32_t text_n_embd,
               const vision_options& options);
  ~vision_model();

  const std::string& path() const { return path_; }
  const mmproj_hparams& hparams() const { return m_.hp; }
  const lfm2_vision_params& params() const { return params_; }
  int32_t n_embd() const { return int32_t(m_.hp.n_embd_out); }

  // Throws spindle::error on a non-positive size.
  image_plan plan(int width, int height) const;
  // The prompt positions of an image: marker ids, and -1 for each embedding, in prompt order. gemma3: "\n\n",
  // <start_of_image>, the embeddings, <end_of_image>, "\n\n" (as Hugging Face's processor and Ollama put them).
  std::vector<int32_t> layout(const image_plan& plan) const;
  // True when an image's embeddings attend to each other both ways in the text model (gemma3, as llama.cpp's
  // mtmd_decode_use_non_causal and Hugging Face's token_type_ids mask): the engine runs each image's run of
  // embeddings in one step, as one non-causal attention segment.
  bool bidirectional() const { return m_.hp.gemma3(); }
  // Embeddings of every crop of `image` in prompt order: host [plan.embeddings][n_embd()].
  std::vector<float> encode(const rgb_image& image, const image_plan& plan);

 private:
  int32_t marker_id(const std::string& text) const;

  std::string path_;
  std::unique_ptr<gguf_file> file_;
  mmproj_model m_;
  lfm2_vision_params params_;
  std::map<std::string, int32_t> markers_;  // marker text -> id
  std::unique_ptr<siglip_encoder> encoder_;
};

}  // namespace spindle
