// mmproj loading and checks (see mmproj.h). Keys and tensor names are llama.cpp's (clip-impl.h TN_*,
// clip.cpp load_hparams / load_tensors for PROJECTOR_TYPE_LFM2 and PROJECTOR_TYPE_GEMMA3).
// Invariant: every failure names the file, and the key or tensor with what was expected and found.
#include "vision/mmproj.h"

#include <cmath>

#include "common/error.h"

namespace spindle {

namespace {

struct reader {
  const gguf_file& f;

  [[noreturn]] void fail(const std::string& what) const { throw error("mmproj " + f.path() + ": " + what); }

  uint32_t u32(const char* key) const {
    if (!f.find(key)) fail("missing key '" + std::string(key) + "'");
    const uint64_t v = f.get_u64(key);
    if (v > 0x7fffffffu) fail("key '" + std::string(key) + "' is out of range");
    return uint32_t(v);
  }
  uint32_t u32_or(const char* key, uint32_t fallback) const { return f.find(key) ? u32(key) : fallback; }

  std::array<float, 3> rgb(const char* key) const {
    const gguf_kv* kv = f.find(key);
    if (!kv || kv->type != gguf_value_type::ARRAY || kv->array_type != gguf_value_type::FLOAT32 || kv->floats.size() < 3) {
      fail("key '" + std::string(key) + "' must be an array of at least 3 float32 values");
    }
    return {float(kv->floats[0]), float(kv->floats[1]), float(kv->floats[2])};
  }

  std::string shape(const gguf_tensor& t) const {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
  }

  // The tensor `name` with exactly the dims `ne` (ne0 first); null when absent and optional.
  const gguf_tensor* tensor(const std::string& name, std::vector<int64_t> ne, bool required) const {
    const gguf_tensor* t = f.find_tensor(name);
    if (!t) {
      if (required) fail("missing tensor '" + name + "'");
      return nullptr;
    }
    bool ok = t->n_dims == ne.size();
    for (size_t d = 0; ok && d < ne.size(); ++d) ok = t->ne[d] == ne[d];
    if (!ok) {
      std::string want = "[";
      for (size_t d = 0; d < ne.size(); ++d) want += (d ? ", " : "") + std::to_string(ne[d]);
      fail("tensor '" + name + "' has shape " + shape(*t) + ", expected " + want + "]");
    }
    return t;
  }
};

void load_lfm2_projector(const reader& r, mmproj_model& m);
void load_gemma3_projector(const reader& r, mmproj_model& m);

}  // namespace

mmproj_model load_mmproj(const gguf_file& file, uint32_t text_n_embd) {
  reader r{file};
  mmproj_model m;
  mmproj_hparams& hp = m.hp;
  if (!file.get_bool_or("clip.has_vision_encoder", false)) r.fail("'clip.has_vision_encoder' is not true: no vision encoder");
  hp.projector = file.get_string_or("clip.projector_type", file.get_string_or("clip.vision.projector_type", ""));
  if (hp.projector != "lfm2" && hp.projector != "gemma3") {
    r.fail("projector type '" + hp.projector + "' is not supported (supported: lfm2, gemma3)");
  }
  hp.n_embd = r.u32("clip.vision.embedding_length");
  hp.n_head = r.u32("clip.vision.attention.head_count");
  hp.n_ff = r.u32("clip.vision.feed_forward_length");
  hp.n_layer = r.u32("clip.vision.block_count");
  hp.patch_size = r.u32("clip.vision.patch_size");
  hp.image_size = r.u32("clip.vision.image_size");
  if (!file.find("clip.vision.attention.layer_norm_epsilon")) r.fail("missing key 'clip.vision.attention.layer_norm_epsilon'");
  hp.eps = float(file.get_f64("clip.vision.attention.layer_norm_epsilon"));
  hp.scale_factor = r.u32_or("clip.vision.projector.scale_factor", hp.gemma3() ? 4 : 0);
  if (hp.gemma3() && hp.scale_factor == 0) r.fail("'clip.vision.projector.scale_factor' must be at least 1 (got 0)");
  if (!hp.gemma3() && hp.scale_factor < 2) {
    r.fail("'clip.vision.projector.scale_factor' must be at least 2 for the lfm2 projector (" +
           std::string(hp.scale_factor ? "got " + std::to_string(hp.scale_factor) : "missing") + ")");
  }
  if (hp.n_embd == 0 || hp.n_head == 0 || hp.n_embd % hp.n_head != 0) {
    r.fail("embedding_length " + std::to_string(hp.n_embd) + " must be a positive multiple of head_count " + std::to_string(hp.n_head));
  }
  if (hp.n_layer == 0 || hp.n_ff == 0) r.fail("block_count and feed_forward_length must be positive");
  if (hp.patch_size == 0 || hp.patch_size > 65535) r.fail("patch_size must be in [1, 65535]");
  const bool gelu = file.get_bool_or("clip.use_gelu", false), silu = file.get_bool_or("clip.use_silu", false);
  if (silu) r.fail("'clip.use_silu' is set: the " + hp.projector + " vision encoder uses GELU");
  hp.use_gelu = gelu;
  hp.mean = r.rgb("clip.vision.image_mean");
  hp.stddev = r.rgb("clip.vision.image_std");

  const int64_t D = hp.n_embd, P = hp.patch_size, F = hp.n_ff;
  m.patch_embd = r.tensor("v.patch_embd.weight", {P, P, 3, D}, true);
  m.patch_embd_b = r.tensor("v.patch_embd.bias", {D}, false);
  const gguf_tensor* pos = file.find_tensor("v.position_embd.weight");
  if (!pos) r.fail("missing tensor 'v.position_embd.weight'");
  const int64_t g = int64_t(std::llround(std::sqrt(double(pos->ne[1]))));
  if (pos->n_dims != 2 || pos->ne[0] != D || g * g != pos->ne[1]) {
    r.fail("tensor 'v.position_embd.weight' has shape " + r.shape(*pos) + ", expected [" + std::to_string(D) + ", G*G]");
  }
  if (pos->type != ggml_type::F32) r.fail("tensor 'v.position_embd.weight' must be F32");
  m.pos_embd = pos;
  hp.pos_grid = uint32_t(g);
  for (uint32_t i = 0; i < hp.n_layer; ++i) {
    const std::string b = "v.blk." + std::to_string(i) + ".";
    mmproj_layer L;
    L.q = r.tensor(b + "attn_q.weight", {D, D}, true);
    L.k = r.tensor(b + "attn_k.weight", {D, D}, true);
    L.v = r.tensor(b + "attn_v.weight", {D, D}, true);
    L.out = r.tensor(b + "attn_out.weight", {D, D}, true);
    L.q_b = r.tensor(b + "attn_q.bias", {D}, false);
    L.k_b = r.tensor(b + "attn_k.bias", {D}, false);
    L.v_b = r.tensor(b + "attn_v.bias", {D}, false);
    L.out_b = r.tensor(b + "attn_out.bias", {D}, false);
    L.ln1 = r.tensor(b + "ln1.weight", {D}, true);
    L.ln1_b = r.tensor(b + "ln1.bias", {D}, false);
    L.ln2 = r.tensor(b + "ln2.weight", {D}, true);
    L.ln2_b = r.tensor(b + "ln2.bias", {D}, false);
    L.up = r.tensor(b + "ffn_up.weight", {D, F}, true);
    L.up_b = r.tensor(b + "ffn_up.bias", {F}, false);
    L.down = r.tensor(b + "ffn_down.weight", {F, D}, true);
    L.down_b = r.tensor(b + "ffn_down.bias", {D}, false);
    m.layers.push_back(L);
  }
  m.post_ln = r.tensor("v.post_ln.weight", {D}, false);
  m.post_ln_b = r.tensor("v.post_ln.bias", {D}, false);
  if (hp.gemma3()) {
    load_gemma3_projector(r, m);
  } else {
    load_lfm2_projector(r, m);
  }
  if (text_n_embd > 0 && hp.n_embd_out != text_n_embd) {
    r.fail("the projector writes " + std::to_string(hp.n_embd_out) + "-wide embeddings but the text model's n_embd is " +
           std::to_string(text_n_embd) + ": this mmproj belongs to another model");
  }
  return m;
}

namespace {

void load_lfm2_projector(const reader& r, mmproj_model& m) {
  const gguf_file& file = r.f;
  mmproj_hparams& hp = m.hp;
  const int64_t D = hp.n_embd, S = hp.scale_factor;
  const int64_t Dm = D * S * S;
  m.proj_norm = r.tensor("mm.input_norm.weight", {Dm}, false);
  m.proj_norm_b = r.tensor("mm.input_norm.bias", {Dm}, false);
  const gguf_tensor* p1 = file.find_tensor("mm.1.weight");
  if (!p1) r.fail("missing tensor 'mm.1.weight'");
  if (p1->n_dims != 2 || p1->ne[0] != Dm) {
    r.fail("tensor 'mm.1.weight' has shape " + r.shape(*p1) + ", expected [" + std::to_string(Dm) + " (D*s*s), H]");
  }
  const int64_t H = p1->ne[1];
  m.proj1 = p1;
  m.proj1_b = r.tensor("mm.1.bias", {H}, true);
  const gguf_tensor* p2 = file.find_tensor("mm.2.weight");
  if (!p2) r.fail("missing tensor 'mm.2.weight'");
  if (p2->n_dims != 2 || p2->ne[0] != H) {
    r.fail("tensor 'mm.2.weight' has shape " + r.shape(*p2) + ", expected [" + std::to_string(H) + ", E]");
  }
  m.proj2 = p2;
  const int64_t E = p2->ne[1];
  m.proj2_b = r.tensor("mm.2.bias", {E}, true);
  hp.proj_hidden = uint32_t(H);
  hp.n_embd_out = uint32_t(E);
}

// Gemma 3 (clip_graph_siglip's PROJECTOR_TYPE_GEMMA3): the position grid is used as stored, so the encoder's
// fixed input (image_size) must cover it exactly, and the pooling kernel must divide it.
void load_gemma3_projector(const reader& r, mmproj_model& m) {
  const gguf_file& file = r.f;
  mmproj_hparams& hp = m.hp;
  const uint32_t grid = hp.patch_size ? hp.image_size / hp.patch_size : 0;
  if (hp.image_size == 0 || hp.image_size % hp.patch_size != 0 || grid != hp.pos_grid) {
    r.fail("'clip.vision.image_size' " + std::to_string(hp.image_size) + " must be patch_size (" +
           std::to_string(hp.patch_size) + ") times the position grid's side (" + std::to_string(hp.pos_grid) + ")");
  }
  if (grid % hp.scale_factor != 0) {
    r.fail("the pooling kernel 'clip.vision.projector.scale_factor' " + std::to_string(hp.scale_factor) +
           " does not divide the " + std::to_string(grid) + "-patch side");
  }
  const int64_t D = hp.n_embd;
  m.soft_emb_norm = r.tensor("mm.soft_emb_norm.weight", {D}, true);
  const gguf_tensor* proj = file.find_tensor("mm.input_projection.weight");
  if (!proj) r.fail("missing tensor 'mm.input_projection.weight'");
  if (proj->n_dims != 2 || proj->ne[1] != D) {
    r.fail("tensor 'mm.input_projection.weight' has shape " + r.shape(*proj) + ", expected [E, " + std::to_string(D) + "]");
  }
  m.input_proj = proj;
  hp.n_embd_out = uint32_t(proj->ne[0]);
}

}  // namespace
}  // namespace spindle
