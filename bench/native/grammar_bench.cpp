// Token-mask cost on a real vocabulary: spindle_grammar_bench MODEL.gguf GRAMMAR.gbnf [walks] [seed]
// Runs random walks through the grammar with the model's tokenizer (each step: the mask, then a uniformly
// drawn allowed token; an end where the grammar is complete and nothing else is allowed) and prints the mask
// time per token: the first walk (the cache filling) and the later ones (steady state), p50 / p99 / max, and
// the plain trie walk (no cache) on the same states for comparison.
// Invariant: timing only; the masks themselves are tested in test/native/grammar_mask_test.cpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/grammar_token_cache.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

using namespace spindle;
using clock_type = std::chrono::steady_clock;

static double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

static void report(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
  std::printf("%-28s n=%-6zu p50 %.4f ms  p99 %.4f ms  max %.4f ms\n", what, v.size(), at(0.5), at(0.99), v.back());
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf GRAMMAR.gbnf [walks=8] [seed=1]\n", argv[0]);
    return 2;
  }
  try {
    const int walks = argc > 3 ? std::atoi(argv[3]) : 8;
    std::mt19937 rng(argc > 4 ? uint32_t(std::atoi(argv[4])) : 1u);
    auto file = gguf_file::open(argv[1]);
    auto tok = tokenizer::from_gguf(*file);
    std::ifstream in(argv[2]);
    std::stringstream text;
    text << in.rdbuf();
    auto g = std::make_shared<const grammar>(grammar_parse(text.str()));

    auto t0 = clock_type::now();
    auto tokens = std::make_shared<std::vector<std::string>>(size_t(tok->n_vocab()));
    for (int32_t id = 0; id < tok->n_vocab(); ++id) (*tokens)[size_t(id)] = tok->token_to_piece(id, false);
    auto trie = std::make_shared<const vocab_trie>(vocab_trie_build(*tokens));
    std::printf("vocabulary %d tokens, trie %zu nodes, built in %.1f ms\n", tok->n_vocab(), trie->nodes.size(), ms_since(t0));

    grammar_token_cache cache(g, trie, tokens);
    std::vector<double> first, steady, plain;
    std::vector<uint64_t> bits, plain_bits;
    size_t out_tokens = 0;
    for (int w = 0; w < walks; ++w) {
      grammar_matcher m(g);
      for (int step = 0; step < 2000; ++step) {
        auto t = clock_type::now();
        cache.mask(m.state(), bits);
        (w == 0 ? first : steady).push_back(ms_since(t));
        if (w > 0 && step % 4 == 0) {
          plain_bits.assign(bits.size(), 0);
          auto tp = clock_type::now();
          token_mask_into(*g, m.state(), *trie, plain_bits);
          plain.push_back(ms_since(tp));
        }
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < tok->n_vocab(); ++id)
          if (token_bitset_test(bits, id)) allowed.push_back(id);
        if (allowed.empty() || (m.is_complete() && rng() % 4 == 0)) break;
        const int32_t id = allowed[rng() % allowed.size()];
        if (!m.accept_string((*tokens)[size_t(id)])) {
          std::fprintf(stderr, "mask allowed token %d but the matcher refused it\n", id);
          return 1;
        }
        ++out_tokens;
      }
    }
    std::printf("%d walks, %zu tokens, %zu cache entries\n", walks, out_tokens, cache.positions_cached());
    report("cached mask, first walk", first);
    report("cached mask, later walks", steady);
    report("plain trie walk (no cache)", plain);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
