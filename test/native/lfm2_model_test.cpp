// The lfm2 model (native/model/lfm2_*.cpp): forward against a double-precision reference written from the
// formulas; forward_batch with many sequences in mixed chunks and decodes, each with its own state slot,
// bitwise equal to each sequence alone (state carried between chunks); a reused slot starts afresh at
// position 0; state checkpoints (save at position p, restore into another slot, continue) equal an
// uninterrupted run; wrong slots / positions throw without changing anything; load errors name the problem.
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "harness.h"
#include "lfm2_test_gguf.h"
#include "model/lfm2_model.h"
#include "model/model.h"

using namespace spindle;

namespace {

std::unique_ptr<model_test::loaded_model> load(const lfm2_test::spec& s, const model_test::built& b, int threads = 2,
                                               kv_type kv = kv_type::f32) {
  return model_test::load_built(b, "lfm2", threads, kv);
}

std::vector<int32_t> seq_tokens(int n, int n_vocab, int salt) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (int32_t)((i * 37 + salt * 11 + 5) % n_vocab);
  return t;
}

std::vector<float> alone(model& m, const std::vector<int32_t>& tokens) {
  std::vector<float> out(tokens.size() * (size_t)m.hparams().n_vocab);
  auto st = m.new_sequence((int64_t)tokens.size());
  m.forward(*st, tokens.data(), (int64_t)tokens.size(), out.data(), true);
  return out;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

batch_sequence chunk_of(const std::vector<int32_t>& toks, int first, int n, const std::vector<int32_t>& table, int slot) {
  batch_sequence b;
  b.tokens = toks.data() + first;
  b.n_tokens = n;
  b.first_pos = first;
  b.block_table = table.data();
  b.n_table = (int32_t)table.size();
  b.n_logits = n;
  b.state_slot = slot;
  return b;
}

}  // namespace

TEST_CASE("lfm2: load reads layer kinds from head_count_kv and the conv length") {
  lfm2_test::spec s;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  const auto* m = dynamic_cast<const lfm2_model*>(l->m.get());
  REQUIRE(m != nullptr);
  CHECK_EQ(m->hparams().arch, std::string("lfm2"));
  CHECK_EQ(m->hparams().n_layer_kv, 2);
  CHECK_EQ(m->hparams().n_head_kv, 2);
  CHECK(m->hparams().rope_neox);
  CHECK_EQ(m->weights().l_cache, 3);
  CHECK_EQ(m->weights().n_conv, 2);
  CHECK(!m->weights().layers[0].attention && m->weights().layers[1].attention);
  CHECK_EQ(m->state_bytes_per_slot(), uint64_t(2 * 2 * 32 * sizeof(float)));
}

TEST_CASE("lfm2: forward equals the double-precision reference (F32, F16; l_cache 3 and 5)") {
  for (ggml_type type : {ggml_type::F32, ggml_type::F16}) {
    for (int l_cache : {3, 5}) {
      lfm2_test::spec s;
      s.weight_type = type;
      s.l_cache = l_cache;
      const model_test::built b = lfm2_test::build(s);
      auto l = load(s, b);
      const std::vector<int32_t> toks = seq_tokens(12, b.n_vocab, l_cache);
      const std::vector<float> got = alone(*l->m, toks);
      const std::vector<model_test::dvec> want = lfm2_test::reference_forward(b, s, toks);
      double max_err = 0, max_abs = 0;
      for (size_t t = 0; t < toks.size(); ++t)
        for (int v = 0; v < b.n_vocab; ++v) {
          max_err = std::max(max_err, std::fabs(got[t * b.n_vocab + v] - want[t][v]));
          max_abs = std::max(max_abs, std::fabs(want[t][v]));
        }
      CHECK(max_abs > 0.5);  // non-trivial logits
      // F16: activations are rounded to f16 before each dot, as llama.cpp does (dense tests: same bounds)
      CHECK(max_err < (type == ggml_type::F32 ? 2e-4 : 2e-2));
    }
  }
}

namespace {

// Many sequences in mixed chunks and decodes, each in its own slot, batched == each alone, bitwise.
void check_batch_invariance(const lfm2_test::spec& s, kv_type kv_dtype = kv_type::f32) {
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b, 2, kv_dtype);
  CHECK(l->m->kv_dtype() == kv_dtype);
  model& m = *l->m;
  const int64_t V = b.n_vocab;
  const int n_seq = 5, block = 4;
  std::vector<std::vector<int32_t>> seqs, tables;
  for (int i = 0; i < n_seq; ++i) seqs.push_back(seq_tokens(7 + 4 * i, b.n_vocab, i));
  auto kv = m.new_kv_cache(64, block, 8);
  int next_block = 63;  // scattered, descending block ids
  for (int i = 0; i < n_seq; ++i) {
    tables.emplace_back();
    for (size_t p = 0; p < seqs[i].size(); p += block) tables.back().push_back(next_block--);
  }
  std::vector<std::vector<float>> got(n_seq);
  for (int i = 0; i < n_seq; ++i) got[i].resize(seqs[i].size() * V);
  std::vector<int> done(n_seq, 0);
  for (int step = 0;; ++step) {  // sequence i takes chunks of (i + step) % 4 + 1 tokens: prefills and decodes mix
    std::vector<batch_sequence> batch;
    std::vector<int> who;
    for (int i = n_seq - 1; i >= 0; --i) {  // reverse order: batch position differs from slot order
      const int left = (int)seqs[i].size() - done[i];
      if (left == 0) continue;
      const int n = std::min(left, (i + step) % 4 + 1);
      batch.push_back(chunk_of(seqs[i], done[i], n, tables[i], 7 - i));
      who.push_back(i);
    }
    if (batch.empty()) break;
    int64_t rows = 0;
    for (const batch_sequence& x : batch) rows += x.n_logits;
    std::vector<float> lg((size_t)(rows * V));
    m.forward_batch(batch, *kv, lg.data());
    int64_t at = 0;
    for (size_t k = 0; k < batch.size(); ++k) {
      std::memcpy(got[who[k]].data() + (size_t)done[who[k]] * V, lg.data() + at * V, (size_t)batch[k].n_tokens * V * sizeof(float));
      at += batch[k].n_tokens;
      done[who[k]] += batch[k].n_tokens;
    }
  }
  for (int i = 0; i < n_seq; ++i) {
    const std::vector<float> want = alone(m, seqs[i]);
    CHECK(same_bits(got[i].data(), want.data(), want.size()));
    CHECK_EQ(dynamic_cast<lfm2_kv_cache&>(*kv).state_pos(7 - i), (int32_t)seqs[i].size());
  }
}

}  // namespace

TEST_CASE("lfm2: forward_batch of many sequences (chunks, decodes, own slots) equals each alone, bitwise") {
  check_batch_invariance(lfm2_test::spec{});
}

TEST_CASE("lfm2: with 16-bit KV caches (f16, bf16) too, batched equals alone, bitwise") {
  check_batch_invariance(lfm2_test::spec{}, kv_type::f16);
  check_batch_invariance(lfm2_test::spec{}, kv_type::bf16);
}

TEST_CASE("lfm2: with a q8_0 KV cache (head dim 32) too, batched equals alone, bitwise") {
  lfm2_test::spec s;
  s.n_embd = s.n_head * 32;
  check_batch_invariance(s, kv_type::q8_0);
}

TEST_CASE("lfm2moe test model: a leading dense layer, MoE layers with a selection bias; batched == alone, bitwise") {
  lfm2_test::spec s;
  s.n_expert = 6;
  s.n_used = 2;
  s.n_ff_exp = 24;
  s.n_dense_lead = 1;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  const auto* m = dynamic_cast<const lfm2_model*>(l->m.get());
  REQUIRE(m != nullptr);
  CHECK_EQ(m->hparams().arch, std::string("lfm2moe"));
  CHECK(!m->weights().layers[0].d.moe.present());
  for (size_t il = 1; il < m->weights().layers.size(); ++il) {
    const moe_layer_weights& w = m->weights().layers[il].d.moe;
    CHECK(w.present());
    CHECK_EQ(w.exp_probs_b.size(), size_t(6));
    CHECK_EQ(w.exp_probs_b_dev.size(), int64_t(6));
  }
  check_batch_invariance(s);
}

TEST_CASE("lfm2: a reused slot starts afresh at position 0; checkpoints restore the exact state") {
  lfm2_test::spec s;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  model& m = *l->m;
  const int64_t V = b.n_vocab;
  const std::vector<int32_t> a = seq_tokens(10, b.n_vocab, 1), c = seq_tokens(9, b.n_vocab, 2);
  const std::vector<float> want_c = alone(m, c);
  auto kv_base = m.new_kv_cache(16, 4, 2);
  auto& kv = dynamic_cast<lfm2_kv_cache&>(*kv_base);
  const std::vector<int32_t> ta = {0, 1, 2}, tc = {5, 6, 7};
  std::vector<float> lg(10 * V);
  m.forward_batch({chunk_of(a, 0, 10, ta, 0)}, kv, lg.data());  // slot 0 now holds a's state
  std::vector<float> got(9 * V);
  m.forward_batch({chunk_of(c, 0, 4, tc, 0)}, kv, got.data());   // slot 0 reused by c: starts from zeros
  std::vector<float> saved((size_t)kv.state_floats());
  kv.save_state(0, saved.data());                                 // c's state at position 4
  kv.restore_state(1, saved.data(), 4);
  m.forward_batch({chunk_of(c, 4, 5, tc, 1)}, kv, got.data() + 4 * V);  // continue c in slot 1
  CHECK(same_bits(got.data(), want_c.data(), want_c.size()));
  CHECK_EQ(kv.state_pos(1), 9);
  CHECK_EQ(kv.state_pos(0), 4);
  CHECK_THROWS_WITH(kv.restore_state(1, saved.data(), 0), "position > 0");
  CHECK_THROWS_WITH(kv.state_pos(2), "out of range");
}

TEST_CASE("lfm2: block checkpoints hold the state recomputation gives, bit for bit, and continue exactly") {
  lfm2_test::spec s;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  model& m = *l->m;
  const int64_t V = b.n_vocab;
  const std::vector<int32_t> a = seq_tokens(15, b.n_vocab, 3);
  auto kv_base = m.new_kv_cache(16, 4, 3);
  auto& kv = dynamic_cast<lfm2_kv_cache&>(*kv_base);
  CHECK(m.checkpoint_bytes_per_block(4) == m.state_bytes_per_slot());
  m.enable_block_checkpoints(kv);
  REQUIRE(kv.checkpoints());
  // sequence a in slot 0, chunks [0, 7) and [7, 15): boundaries 4 (inside the first chunk), 8 (its first row
  // from the slot's state, the second from the chunk) and 12
  const std::vector<int32_t> ta = {9, 2, 14, 5};
  std::vector<float> la(15 * V);
  m.forward_batch({chunk_of(a, 0, 7, ta, 0)}, kv, la.data());
  m.forward_batch({chunk_of(a, 7, 8, ta, 0)}, kv, la.data() + 7 * V);
  std::vector<float> want((size_t)kv.state_floats()), got((size_t)kv.state_floats());
  for (int p : {4, 8, 12}) {
    // recompute a's first p tokens in slot 1 from scratch: the state there is the one the checkpoint must hold
    const std::vector<int32_t> tr = {0, 1, 3, 4};
    std::vector<float> lr(p * V);
    m.forward_batch({chunk_of(a, 0, p, tr, 1)}, kv, lr.data());
    kv.save_state(1, want.data());
    m.restore_from_block(kv, 2, ta[(size_t)(p / 4 - 1)], p);  // the checkpoint of a's block ending at p
    CHECK_EQ(kv.state_pos(2), p);
    kv.save_state(2, got.data());
    CHECK(same_bits(got.data(), want.data(), want.size()));
    // continue from the checkpoint over a's own blocks (a prefix-cache hit): a's logits, bit for bit
    std::vector<float> lc((15 - p) * V);
    std::vector<int32_t> table(ta.begin(), ta.begin() + p / 4);
    for (int k = p / 4; k < 4; ++k) table.push_back(10 + k);  // fresh blocks after the shared prefix
    m.forward_batch({chunk_of(a, p, 15 - p, table, 2)}, kv, lc.data());
    CHECK(same_bits(lc.data(), la.data() + (size_t)p * V, lc.size()));
  }
  CHECK_THROWS_WITH(m.restore_from_block(kv, 3, 0, 4), "out of range");
  CHECK_THROWS_WITH(m.restore_from_block(kv, 0, 16, 4), "out of range");
  auto plain = m.new_kv_cache(4, 4, 1);
  CHECK_THROWS_WITH(m.restore_from_block(*plain, 0, 0, 4), "no block checkpoints");
}

TEST_CASE("lfm2: speculative rollback restores the state recomputation gives, bit for bit, with or without checkpoints") {
  lfm2_test::spec s;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  model& m = *l->m;
  const int64_t V = b.n_vocab;
  const std::vector<int32_t> a = seq_tokens(14, b.n_vocab, 5);
  for (bool checkpoints : {false, true}) {
    auto kv_base = m.new_kv_cache(16, 4, 3);
    auto& kv = dynamic_cast<lfm2_kv_cache&>(*kv_base);
    if (checkpoints) m.enable_block_checkpoints(kv);
    const std::vector<int32_t> ta = {9, 2, 14, 5}, tr = {0, 1, 3, 4}, tother = {6, 7, 8, 10};
    std::vector<std::vector<float>> want(13);  // the state recomputation gives after a's first p tokens
    for (int p = 8; p <= 12; ++p) {
      std::vector<float> lr(p * V);
      m.forward_batch({chunk_of(a, 0, p, tr, 1)}, kv, lr.data());
      want[(size_t)p].resize((size_t)kv.state_floats());
      kv.save_state(1, want[(size_t)p].data());
    }
    // a's first 7 tokens, then a "verify" chunk [7, 13) keeping the states after positions 8 .. 12 (the
    // first one's rows partly from the slot's old state, the rest from the chunk), with another sequence in
    // the same batch keeping its own
    std::vector<float> la(7 * V), lv(9 * V);
    m.forward_batch({chunk_of(a, 0, 7, ta, 0)}, kv, la.data());
    batch_sequence verify = chunk_of(a, 7, 6, ta, 0);
    verify.n_rollback = 5;
    batch_sequence other = chunk_of(a, 0, 3, tother, 2);
    other.n_rollback = 2;
    m.forward_batch({other, verify}, kv, lv.data());
    std::vector<float> got((size_t)kv.state_floats());
    for (int p = 12; p >= 8; --p) {
      m.rollback_state(kv, 0, p);
      CHECK_EQ(kv.state_pos(0), p);
      kv.save_state(0, got.data());
      CHECK(same_bits(got.data(), want[(size_t)p].data(), got.size()));
    }
    m.rollback_state(kv, 2, 1);
    CHECK_EQ(kv.state_pos(2), 1);
    // continuing after the rollback to 8 gives a's own logits, bit for bit
    std::vector<float> lc(6 * V), lw(14 * V);
    m.forward_batch({chunk_of(a, 8, 6, ta, 0)}, kv, lc.data());
    auto fresh = m.new_kv_cache(16, 4, 1);
    m.forward_batch({chunk_of(a, 0, 14, ta, 0)}, *fresh, lw.data());
    CHECK(same_bits(lc.data(), lw.data() + 8 * V, lc.size()));
    // only what the last pass kept
    CHECK_THROWS_WITH(m.rollback_state(kv, 0, 9), "kept no state");
    CHECK_THROWS_WITH(m.rollback_state(kv, 2, 1), "kept no state");
  }
}

TEST_CASE("lfm2: wrong slots or positions throw before anything changes") {
  lfm2_test::spec s;
  const model_test::built b = lfm2_test::build(s);
  auto l = load(s, b);
  model& m = *l->m;
  const std::vector<int32_t> a = seq_tokens(8, b.n_vocab, 3), tab = {0, 1};
  auto kv_base = m.new_kv_cache(4, 4, 2);
  auto& kv = dynamic_cast<lfm2_kv_cache&>(*kv_base);
  std::vector<float> lg(8 * (size_t)b.n_vocab);
  m.forward_batch({chunk_of(a, 0, 5, tab, 1)}, kv, lg.data());
  CHECK_THROWS_WITH(m.forward_batch({chunk_of(a, 4, 2, tab, 1)}, kv, lg.data()), "holds the recurrent state at position 5");
  CHECK_THROWS_WITH(m.forward_batch({chunk_of(a, 5, 1, tab, 0)}, kv, lg.data()), "position -1");
  CHECK_THROWS_WITH(m.forward_batch({chunk_of(a, 5, 1, tab, 2)}, kv, lg.data()), "state slot 2 out of range");
  CHECK_THROWS_WITH(m.forward_batch({chunk_of(a, 5, 1, tab, -1)}, kv, lg.data()), "out of range");
  CHECK_THROWS_WITH(m.forward_batch({chunk_of(a, 0, 1, tab, 0), chunk_of(a, 5, 1, tab, 1), chunk_of(a, 0, 1, tab, 0)}, kv,
                                    lg.data()), "used twice");
  CHECK_EQ(kv.state_pos(1), 5);  // untouched by the failed calls
  CHECK_EQ(kv.state_pos(0), -1);
  m.forward_batch({chunk_of(a, 5, 3, tab, 1)}, kv, lg.data());  // still continues correctly
  const std::vector<float> want = alone(m, a);
  CHECK(same_bits(lg.data(), want.data() + 5 * (size_t)b.n_vocab, 3 * (size_t)b.n_vocab));
  CHECK_THROWS_WITH(m.new_kv_cache(4, 4, 0), "positive");
}

TEST_CASE("lfm2: load errors name the problem") {
  auto load_error = [](const lfm2_test::spec& s) -> std::string {
    const model_test::built b = lfm2_test::build(s);
    const std::string path = model_test::write_temp(b, "lfm2-bad");
    std::string msg;
    try {
      model::load(path, model_options{});
    } catch (const std::exception& e) {
      msg = e.what();
    }
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return msg;
  };
  lfm2_test::spec all_conv;
  all_conv.attention_layers = {};
  CHECK(load_error(all_conv).find("no attention layer") != std::string::npos);
  lfm2_test::spec no_l;
  no_l.write_l_cache = false;
  CHECK(load_error(no_l).find("lfm2.shortconv.l_cache") != std::string::npos);
  lfm2_test::spec swa;
  swa.sliding_window = 64;
  CHECK(load_error(swa).find("sliding-window") != std::string::npos);
  lfm2_test::spec bad_conv;
  bad_conv.edit_tensors = [](std::vector<gguf_test::tensor_spec>& t) {
    for (auto& x : t) if (x.name == "blk.0.shortconv.conv.weight") x.ne = {4, 32};
  };
  CHECK(load_error(bad_conv).find("blk.0.shortconv.conv.weight") != std::string::npos);
  lfm2_test::spec no_norm;
  no_norm.edit_tensors = [](std::vector<gguf_test::tensor_spec>& t) {
    for (auto& x : t) if (x.name == "token_embd_norm.weight") x.name = "output_norm.weight";
  };
  CHECK(load_error(no_norm).find("token_embd_norm.weight") != std::string::npos);
}
