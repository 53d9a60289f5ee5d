// SigLIP encoder on a backend (see siglip_encoder.h). Shapes: n = patches (gh*gw), D = n_embd, F = n_ff,
// s = scale_factor, m = n / s^2 merged (lfm2) or pooled (gemma3) tokens, Dm = D*s^2, H = projector hidden,
// E = n_embd_out.
#include "vision/siglip_encoder.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "vision/siglip_encoder_ref.h"
#include "vision/image_preprocess.h"

namespace spindle {

siglip_encoder::siglip_encoder(const mmproj_model& m, backend& be) : m_(m), be_(be) {
  patch_ = weight(*m.patch_embd);
  patch_b_ = vec(m.patch_embd_b);
  for (const mmproj_layer& L : m.layers) {
    layer l;
    l.q = weight(*L.q); l.k = weight(*L.k); l.v = weight(*L.v); l.out = weight(*L.out);
    l.up = weight(*L.up); l.down = weight(*L.down);
    l.q_b = vec(L.q_b); l.k_b = vec(L.k_b); l.v_b = vec(L.v_b); l.out_b = vec(L.out_b);
    l.up_b = vec(L.up_b); l.down_b = vec(L.down_b);
    l.ln1 = vec(L.ln1); l.ln1_b = vec(L.ln1_b); l.ln2 = vec(L.ln2); l.ln2_b = vec(L.ln2_b);
    layers_.push_back(std::move(l));
  }
  post_ln_ = vec(m.post_ln); post_ln_b_ = vec(m.post_ln_b);
  if (m.hp.gemma3()) {
    soft_emb_norm_ = vec(m.soft_emb_norm);
    const std::vector<float> stored = tensor_floats(*m.input_proj);  // [D][E]: row i holds input i's weights
    const int64_t D = m.hp.n_embd, E = m.hp.n_embd_out;
    input_proj_rows_.resize(size_t(D * E));  // [E][D]: one output's weights per row, as upload_weight takes them
    for (int64_t i = 0; i < D; ++i)
      for (int64_t o = 0; o < E; ++o) input_proj_rows_[size_t(o * D + i)] = stored[size_t(i * E + o)];
    input_proj_ = be_.upload_weight(ggml_type::F32, input_proj_rows_.data(), D, E);
  } else {
    proj_norm_ = vec(m.proj_norm); proj_norm_b_ = vec(m.proj_norm_b);
    proj1_ = weight(*m.proj1); proj1_b_ = vec(m.proj1_b);
    proj2_ = weight(*m.proj2); proj2_b_ = vec(m.proj2_b);
  }
  pos_host_ = tensor_floats(*m.pos_embd);
}

siglip_encoder::~siglip_encoder() {
  be_.release_weight(patch_);
  for (layer& l : layers_) {
    for (backend_weight* w : {&l.q, &l.k, &l.v, &l.out, &l.up, &l.down}) be_.release_weight(*w);
  }
  for (backend_weight* w : {&proj1_, &proj2_, &input_proj_}) {
    if (w->data) be_.release_weight(*w);
  }
}

backend_weight siglip_encoder::weight(const gguf_tensor& t) {
  if (!be_.supports_type(t.type)) {
    const ggml_type_traits* info = ggml_type_info(uint32_t(t.type));
    throw error("mmproj tensor '" + t.name + "' has type " + (info ? info->name : "?") + ", which the " +
                be_.name() + " backend cannot multiply");
  }
  // GGUF ne: [in, out(, ...)]: the patch embedding [P, P, 3, D] is D rows of 3*P*P.
  const int64_t n_in = t.ne[0], n_out = t.n_elements() / t.ne[0];
  if (&t == m_.patch_embd) return be_.upload_weight(t.type, t.data, n_in * t.ne[1] * t.ne[2], t.ne[3]);
  return be_.upload_weight(t.type, t.data, n_in, n_out);
}

backend_buffer siglip_encoder::vec(const gguf_tensor* t) {
  if (!t) return {};
  const std::vector<float> host = tensor_floats(*t);
  backend_buffer b(be_, int64_t(host.size()));
  be_.upload(b.data(), host.data(), int64_t(host.size()));
  return b;
}

void siglip_encoder::linear(const backend_weight& w, const backend_buffer& b, const float* x, int64_t n, float* y) {
  be_.matmul(w, x, n, y);
  if (b.data()) be_.add_row_vector(y, b.data(), n, w.n_out);
}

const backend_buffer& siglip_encoder::pos_table(int gw, int gh) {
  auto it = pos_cache_.find({gw, gh});
  if (it != pos_cache_.end()) return it->second;
  const int D = int(m_.hp.n_embd);
  const std::vector<float> host = resize_pos_embd(pos_host_, int(m_.hp.pos_grid), gw, gh, D);
  backend_buffer b(be_, int64_t(host.size()));
  be_.upload(b.data(), host.data(), int64_t(host.size()));
  return pos_cache_.emplace(std::make_pair(gw, gh), std::move(b)).first->second;
}

void siglip_encoder::reserve(int64_t n) {
  if (n <= capacity_) return;
  const mmproj_hparams& hp = m_.hp;
  const int64_t D = hp.n_embd, P = hp.patch_size, s2 = int64_t(hp.scale_factor) * hp.scale_factor;
  patches_ = backend_buffer(be_, n * 3 * P * P);
  x_ = backend_buffer(be_, n * D);
  cur_ = backend_buffer(be_, n * D);
  q_ = backend_buffer(be_, n * D);
  k_ = backend_buffer(be_, n * D);
  v_ = backend_buffer(be_, n * D);
  att_ = backend_buffer(be_, n * D);
  ff_ = backend_buffer(be_, n * int64_t(hp.n_ff));
  merged_ = backend_buffer(be_, n * D);
  if (hp.proj_hidden > 0) hidden_ = backend_buffer(be_, (n / s2) * int64_t(hp.proj_hidden));
  emb_ = backend_buffer(be_, (n / s2) * int64_t(hp.n_embd_out));
  capacity_ = n;
}

void siglip_encoder::encode(const float* pixels, int width, int height, float* out) {
  const mmproj_hparams& hp = m_.hp;
  const int P = int(hp.patch_size), S = int(hp.scale_factor), D = int(hp.n_embd);
  if (width <= 0 || height <= 0 || width % (P * S) || height % (P * S)) {
    throw error("image entry " + std::to_string(width) + "x" + std::to_string(height) + " is not a multiple of " +
                std::to_string(P * S) + " pixels per side");
  }
  const int gw = width / P, gh = height / P;
  if (hp.gemma3() && (gw != int(hp.pos_grid) || gh != int(hp.pos_grid))) {
    throw error("image entry " + std::to_string(width) + "x" + std::to_string(height) + " is not the gemma3 encoder's " +
                std::to_string(hp.image_size) + "x" + std::to_string(hp.image_size));
  }
  const int64_t n = int64_t(gw) * gh, K = int64_t(3) * P * P;
  reserve(n);

  // Patch embedding as a matmul over im2col rows: element kx + P*ky + P*P*c of patch (py, px).
  patches_host_.resize(size_t(n * K));
  for (int py = 0; py < gh; ++py)
    for (int px = 0; px < gw; ++px) {
      float* row = patches_host_.data() + (int64_t(py) * gw + px) * K;
      for (int c = 0; c < 3; ++c)
        for (int ky = 0; ky < P; ++ky) {
          const float* src = pixels + (int64_t(c) * height + py * P + ky) * width + px * P;
          std::copy(src, src + P, row + (c * P + ky) * P);
        }
    }
  be_.upload(patches_.data(), patches_host_.data(), n * K);
  float* x = x_.data();
  linear(patch_, patch_b_, patches_.data(), n, x);
  be_.add(x, pos_table(gw, gh).data(), x, n * D);

  attention_params ap;
  ap.n_tokens = n;
  ap.n_past = 0;
  ap.n_head = int32_t(hp.n_head);
  ap.n_head_kv = int32_t(hp.n_head);
  ap.head_dim_k = ap.head_dim_v = D / int32_t(hp.n_head);
  ap.k_row_stride = ap.v_row_stride = D;
  ap.scale = 1.0f / std::sqrt(float(ap.head_dim_k));
  ap.causal = false;
  for (const layer& l : layers_) {
    be_.layer_norm(x, l.ln1.data(), l.ln1_b.data(), cur_.data(), n, D, hp.eps);
    linear(l.q, l.q_b, cur_.data(), n, q_.data());
    linear(l.k, l.k_b, cur_.data(), n, k_.data());
    linear(l.v, l.v_b, cur_.data(), n, v_.data());
    be_.attention(ap, q_.data(), k_.data(), v_.data(), att_.data());
    linear(l.out, l.out_b, att_.data(), n, cur_.data());
    be_.add(x, cur_.data(), x, n * D);
    be_.layer_norm(x, l.ln2.data(), l.ln2_b.data(), cur_.data(), n, D, hp.eps);
    linear(l.up, l.up_b, cur_.data(), n, ff_.data());
    if (hp.use_gelu) be_.gelu(ff_.data(), ff_.data(), n * int64_t(hp.n_ff));
    else be_.gelu_quick(ff_.data(), ff_.data(), n * int64_t(hp.n_ff));
    linear(l.down, l.down_b, ff_.data(), n, cur_.data());
    be_.add(x, cur_.data(), x, n * D);
  }
  if (post_ln_.data()) be_.layer_norm(x, post_ln_.data(), post_ln_b_.data(), x, n, D, hp.eps);

  if (hp.gemma3()) project_gemma3(x, gw, gh);
  else project_lfm2(x, gw, gh);
  be_.download(out, emb_.data(), int64_t(gw / S) * (gh / S) * int64_t(hp.n_embd_out));
  be_.sync();
}

void siglip_encoder::project_lfm2(float* x, int gw, int gh) {
  const mmproj_hparams& hp = m_.hp;
  const int S = int(hp.scale_factor), D = int(hp.n_embd);
  const int64_t n = int64_t(gw) * gh;
  // Pixel unshuffle: merged token (oy, ox) is the s*s patch rows (oy*s + dy, ox*s + dx), dx fastest.
  const int ow = gw / S, oh = gh / S;
  const int64_t m = int64_t(ow) * oh, Dm = int64_t(D) * S * S;
  std::vector<int64_t> src_rows(static_cast<size_t>(n));
  for (int oy = 0, i = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox)
      for (int dy = 0; dy < S; ++dy)
        for (int dx = 0; dx < S; ++dx) src_rows[size_t(i++)] = int64_t(oy * S + dy) * gw + ox * S + dx;
  be_.copy_rows(merged_.data(), nullptr, x, src_rows.data(), n, D);
  if (proj_norm_.data()) {  // eps fixed at 1e-5, as llama.cpp
    be_.layer_norm(merged_.data(), proj_norm_.data(), proj_norm_b_.data(), merged_.data(), m, Dm, 1e-5f);
  }
  linear(proj1_, proj1_b_, merged_.data(), m, hidden_.data());
  be_.gelu(hidden_.data(), hidden_.data(), m * int64_t(hp.proj_hidden));  // the projector always uses GELU
  linear(proj2_, proj2_b_, hidden_.data(), m, emb_.data());
}

// Average pooling on the host (avg_pool: ggml's float sums in its order; a few MB for Gemma 3's 64x64 patches),
// then RMSNorm times soft_emb_norm and the projection on the backend.
void siglip_encoder::project_gemma3(float* x, int gw, int gh) {
  const mmproj_hparams& hp = m_.hp;
  const int S = int(hp.scale_factor), D = int(hp.n_embd);
  const int64_t n = int64_t(gw) * gh, m = int64_t(gw / S) * (gh / S);
  std::vector<float> patches(size_t(n * D));
  be_.download(patches.data(), x, n * D);
  be_.sync();
  pooled_host_ = avg_pool(patches, gw, gh, D, S);
  be_.upload(merged_.data(), pooled_host_.data(), m * D);
  be_.rms_norm(merged_.data(), soft_emb_norm_.data(), merged_.data(), m, D, hp.eps);
  be_.matmul(input_proj_, merged_.data(), m, emb_.data());
}

std::vector<float> siglip_encode_image(siglip_encoder& enc, const mmproj_hparams& hp, const rgb_image& image,
                                     const image_plan& plan) {
  const size_t E = size_t(enc.n_embd_out());
  std::vector<float> out(size_t(plan.embeddings) * E);
  image_cropper cropper(image, plan);
  size_t row = 0;
  for (size_t i = 0; i < plan.crops.size(); ++i) {
    const rgb_image c = cropper.crop(i);
    const std::vector<float> pixels = normalize_planar(c, hp.mean, hp.stddev);
    enc.encode(pixels.data(), c.width, c.height, out.data() + row * E);
    row += size_t(plan.crops[i].tokens);
  }
  return out;
}

}  // namespace spindle
