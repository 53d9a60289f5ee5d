// mmproj loading (LFM2-VL, and Gemma 3 further down): a small generated mmproj (D 8, 2 heads, 2 layers, patch 4, grid 4x4, scale 2) loads
// with its hyperparameters and tensors; optional tensors may be absent; every problem llama.cpp would assert or
// crash on is an error naming the key or tensor (missing scale factor, wrong shape, wrong projector, a
// position grid that is not square, an output width that does not match the text model).
#include <functional>
#include <set>
#include <string>

#include "common/error.h"
#include "gguf_test_writer.h"
#include "harness.h"
#include "vision/mmproj.h"

using namespace spindle;
using namespace gguf_test;

namespace {

struct mmproj_spec {
  std::string projector = "lfm2";
  bool scale_factor = true;
  std::set<std::string> drop;           // tensors left out
  std::string bad_shape;                // a tensor written with its first dim + 1
  int64_t pos_rows = 16;                // G*G
  uint32_t image_size = 256;            // gemma3: 16 (4 patches of 4 a side)
  int64_t pool = 0;                     // gemma3: scale_factor written when > 0 (else the default 4)
};

built_file make_mmproj(const mmproj_spec& s) {
  const int64_t D = 8, F = 16, P = 4, L = 2, S = 2, H = 12, E = 10;
  std::vector<tensor_spec> t;
  auto add = [&](const std::string& name, std::vector<int64_t> ne) {
    if (s.drop.count(name)) return;
    if (name == s.bad_shape) ne[0] += 1;
    t.push_back({name, ne, ggml_type::F32});
  };
  add("v.patch_embd.weight", {P, P, 3, D});
  add("v.patch_embd.bias", {D});
  add("v.position_embd.weight", {D, s.pos_rows});
  for (int i = 0; i < L; ++i) {
    const std::string b = "v.blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) { add(b + n + ".weight", {D, D}); add(b + n + ".bias", {D}); }
    for (const char* n : {"ln1", "ln2"}) { add(b + n + ".weight", {D}); add(b + n + ".bias", {D}); }
    add(b + "ffn_up.weight", {D, F}); add(b + "ffn_up.bias", {F});
    add(b + "ffn_down.weight", {F, D}); add(b + "ffn_down.bias", {D});
  }
  add("v.post_ln.weight", {D}); add("v.post_ln.bias", {D});
  const bool gemma3 = s.projector == "gemma3";
  if (gemma3) {
    add("mm.soft_emb_norm.weight", {D});
    add("mm.input_projection.weight", {E, D});
  } else {
    add("mm.input_norm.weight", {D * S * S}); add("mm.input_norm.bias", {D * S * S});
    add("mm.1.weight", {D * S * S, H}); add("mm.1.bias", {H});
    add("mm.2.weight", {H, E}); add("mm.2.bias", {E});
  }
  const bool write_scale = gemma3 ? s.pool > 0 : s.scale_factor;
  const uint64_t n_kv = 13 + (write_scale ? 1 : 0);
  return build_file(3, n_kv, [&](writer& w) {
    w.kv_str("general.architecture", "clip");
    w.kv<uint8_t>("clip.has_vision_encoder", gguf_value_type::BOOL, 1);
    w.kv_str("clip.projector_type", s.projector);
    w.kv<uint32_t>("clip.vision.embedding_length", gguf_value_type::UINT32, uint32_t(D));
    w.kv<uint32_t>("clip.vision.attention.head_count", gguf_value_type::UINT32, 2);
    w.kv<uint32_t>("clip.vision.feed_forward_length", gguf_value_type::UINT32, uint32_t(F));
    w.kv<uint32_t>("clip.vision.block_count", gguf_value_type::UINT32, uint32_t(L));
    w.kv<uint32_t>("clip.vision.patch_size", gguf_value_type::UINT32, uint32_t(P));
    w.kv<uint32_t>("clip.vision.image_size", gguf_value_type::UINT32, s.image_size);
    w.kv<float>("clip.vision.attention.layer_norm_epsilon", gguf_value_type::FLOAT32, 1e-6f);
    w.kv<uint8_t>("clip.use_gelu", gguf_value_type::BOOL, 1);
    w.arr_of<float>("clip.vision.image_mean", gguf_value_type::FLOAT32, {0.5f, 0.5f, 0.5f});
    w.arr_of<float>("clip.vision.image_std", gguf_value_type::FLOAT32, {0.5f, 0.5f, 0.5f});
    if (write_scale) w.kv<uint32_t>("clip.vision.projector.scale_factor", gguf_value_type::UINT32, uint32_t(gemma3 ? s.pool : S));
  }, t);
}

std::string load_error(const mmproj_spec& s, uint32_t text_n_embd = 0) {
  built_file b = make_mmproj(s);
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "mm.gguf");
  try {
    load_mmproj(*f, text_n_embd);
  } catch (const spindle::error& e) {
    return e.what();
  }
  return "";
}

mmproj_spec with(const std::function<void(mmproj_spec&)>& change) {
  mmproj_spec s;
  change(s);
  return s;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("mmproj: a generated LFM2-VL mmproj loads with its hyperparameters and tensors") {
  built_file b = make_mmproj({});
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "mm.gguf");
  mmproj_model m = load_mmproj(*f, 10);
  CHECK_EQ(m.hp.projector, std::string("lfm2"));
  CHECK(m.hp.n_embd == 8 && m.hp.n_head == 2 && m.hp.n_ff == 16 && m.hp.n_layer == 2);
  CHECK(m.hp.patch_size == 4 && m.hp.scale_factor == 2 && m.hp.pos_grid == 4);
  CHECK(m.hp.proj_hidden == 12 && m.hp.n_embd_out == 10);
  CHECK(m.hp.use_gelu);
  CHECK(std::abs(m.hp.mean[1] - 0.5f) < 1e-7f && std::abs(m.hp.eps - 1e-6f) < 1e-12f);
  CHECK(m.layers.size() == 2 && m.layers[1].down != nullptr && m.proj_norm != nullptr);
}

TEST_CASE("mmproj: optional tensors may be absent") {
  CHECK_EQ(load_error(with([](mmproj_spec& s) { s.drop = {"mm.input_norm.weight", "mm.input_norm.bias", "v.post_ln.weight", "v.post_ln.bias",
                                "v.patch_embd.bias", "v.blk.0.attn_q.bias"}; })), std::string(""));
}

TEST_CASE("mmproj: problems are errors naming the key or tensor") {
  CHECK(has(load_error(with([](mmproj_spec& s) { s.scale_factor = false; })), "'clip.vision.projector.scale_factor' must be at least 2"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.projector = "idefics3"; })), "projector type 'idefics3' is not supported"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.drop = {"v.blk.1.ffn_up.weight"}; })), "missing tensor 'v.blk.1.ffn_up.weight'"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.bad_shape = "v.blk.0.attn_k.weight"; })), "tensor 'v.blk.0.attn_k.weight' has shape [9, 8], expected [8, 8]"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.bad_shape = "mm.1.weight"; })), "expected [32 (D*s*s), H]"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.pos_rows = 15; })), "'v.position_embd.weight' has shape [8, 15]"));
  CHECK(has(load_error({}, 2048), "10-wide embeddings but the text model's n_embd is 2048"));
  CHECK(has(load_error(with([](mmproj_spec& s) { s.scale_factor = false; })), "mmproj mm.gguf"));
}

TEST_CASE("mmproj: a generated Gemma 3 mmproj loads; its fixed size, pooling and projection are checked") {
  mmproj_spec g;
  g.projector = "gemma3";
  g.image_size = 16;
  g.pool = 2;
  built_file b = make_mmproj(g);
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "mm.gguf");
  mmproj_model m = load_mmproj(*f, 10);
  CHECK(m.hp.gemma3() && m.hp.scale_factor == 2 && m.hp.pos_grid == 4 && m.hp.image_size == 16);
  CHECK(m.hp.n_embd_out == 10 && m.hp.fixed_tokens() == 4);
  CHECK(m.soft_emb_norm != nullptr && m.input_proj != nullptr && m.proj1 == nullptr && m.proj_norm == nullptr);
  const auto gem = [&](const std::function<void(mmproj_spec&)>& change) {
    mmproj_spec s = g;
    change(s);
    return s;
  };
  // without the key the pooling kernel is 4 (llama.cpp's default): one token of the 4-patch side
  mmproj_spec d = gem([](mmproj_spec& s) { s.pool = 0; });
  built_file db = make_mmproj(d);
  auto df = gguf_file::from_memory(db.bytes.data(), db.bytes.size(), "mm.gguf");
  CHECK(load_mmproj(*df).hp.scale_factor == 4);
  CHECK(has(load_error(gem([](mmproj_spec& s) { s.pool = 3; })), "the pooling kernel 'clip.vision.projector.scale_factor' 3 does not divide the 4-patch side"));
  CHECK(has(load_error(gem([](mmproj_spec& s) { s.image_size = 20; })), "'clip.vision.image_size' 20 must be patch_size (4) times the position grid's side (4)"));
  CHECK(has(load_error(gem([](mmproj_spec& s) { s.drop = {"mm.soft_emb_norm.weight"}; })), "missing tensor 'mm.soft_emb_norm.weight'"));
  CHECK(has(load_error(gem([](mmproj_spec& s) { s.drop = {"mm.input_projection.weight"}; })), "missing tensor 'mm.input_projection.weight'"));
  CHECK(has(load_error(gem([](mmproj_spec& s) { s.bad_shape = "mm.soft_emb_norm.weight"; })), "tensor 'mm.soft_emb_norm.weight' has shape [9], expected [8]"));
  CHECK(has(load_error(gem([](mmproj_spec& s) {}), 12), "the projector writes 10-wide embeddings but the text model's n_embd is 12"));
}
