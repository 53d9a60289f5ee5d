// Vision model (see vision_model.h).
#include "vision/vision_model.h"

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "vision/siglip_encoder.h"

namespace spindle {

namespace {

const char* const k_gemma3_markers[] = {"\n\n", "<start_of_image>", "<end_of_image>"};

// Every marker text a plan with these limits can use.
std::vector<std::string> marker_texts(const mmproj_hparams& hp, const lfm2_vision_params& p) {
  if (hp.gemma3()) return {std::begin(k_gemma3_markers), std::end(k_gemma3_markers)};
  std::vector<std::string> out = {"<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"};
  for (int r = 1; r <= p.max_tiles; ++r)
    for (int c = 1; r * c <= p.max_tiles; ++c)
      out.push_back("<|img_row_" + std::to_string(r) + "_col_" + std::to_string(c) + "|>");
  return out;
}

}  // namespace

vision_model::vision_model(const std::string& path, backend& be, const tokenizer& tok, int32_t text_n_embd,
                           const vision_options& options)
    : path_(path) {
  try {
    file_ = gguf_file::open(path);
    m_ = load_mmproj(*file_, uint32_t(text_n_embd));
    params_.patch_size = int(m_.hp.patch_size);
    params_.scale_factor = int(m_.hp.scale_factor);
    if (options.min_tokens < 0 || options.max_tokens < 0) throw error("image token limits must be positive");
    if (m_.hp.gemma3() && (options.min_tokens > 0 || options.max_tokens > 0)) {
      throw error("image_min_tokens / image_max_tokens apply to lfm2 projectors; a gemma3 image is always " +
                  std::to_string(m_.hp.fixed_tokens()) + " tokens");
    }
    if (options.min_tokens > 0) params_.min_tokens = options.min_tokens;
    if (options.max_tokens > 0) params_.max_tokens = options.max_tokens;
    if (params_.min_tokens > params_.max_tokens) {
      throw error("image_min_tokens (" + std::to_string(params_.min_tokens) + ") is above image_max_tokens (" +
                  std::to_string(params_.max_tokens) + ")");
    }
    const std::vector<std::string> wanted = marker_texts(m_.hp, params_);
    for (const std::string& w : wanted) markers_[w] = -1;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      auto it = markers_.find(tok.token_text(id));
      if (it != markers_.end() && it->second < 0) it->second = id;
    }
    for (const auto& [text, id] : markers_) {
      if (id < 0) {
        throw error("the text model's vocabulary has no token '" + text + "', which " + m_.hp.projector +
                    " images need");
      }
    }
    encoder_ = std::make_unique<siglip_encoder>(m_, be);
  } catch (const std::exception& e) {
    throw error("mmproj " + path + ": " + e.what());
  }
}

vision_model::~vision_model() = default;

int32_t vision_model::marker_id(const std::string& text) const {
  auto it = markers_.find(text);
  if (it == markers_.end()) throw error("no marker token '" + text + "'");
  return it->second;
}

image_plan plan_image(const mmproj_hparams& hp, const lfm2_vision_params& p, int width, int height) {
  if (hp.gemma3()) {
    const int markers = 4;  // vision_model::layout: "\n\n", <start_of_image>, <end_of_image>, "\n\n"
    return plan_fixed_image(width, height, int(hp.image_size), hp.fixed_tokens(), markers);
  }
  return plan_lfm2_image(width, height, p);
}

image_plan vision_model::plan(int width, int height) const { return plan_image(m_.hp, params_, width, height); }

std::vector<int32_t> vision_model::layout(const image_plan& plan) const {
  std::vector<int32_t> ids;
  if (m_.hp.gemma3()) {
    const int32_t gap = marker_id("\n\n");
    ids = {gap, marker_id("<start_of_image>")};
    ids.insert(ids.end(), size_t(plan.embeddings), -1);
    ids.insert(ids.end(), {marker_id("<end_of_image>"), gap});
    return ids;
  }
  ids.reserve(size_t(plan.positions));
  ids.push_back(marker_id("<|image_start|>"));
  for (const image_crop& c : plan.crops) {
    if (!c.marker.empty()) ids.push_back(marker_id(c.marker));
    ids.insert(ids.end(), size_t(c.tokens), -1);
  }
  ids.push_back(marker_id("<|image_end|>"));
  return ids;
}

std::vector<float> vision_model::encode(const rgb_image& image, const image_plan& plan) {
  return siglip_encode_image(*encoder_, m_.hp, image, plan);
}

}  // namespace spindle
