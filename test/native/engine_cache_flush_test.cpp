// Prefix-cache flush (SGLang's /flush_cache, vLLM's reset_prefix_cache) through the engine on a small real model:
// after a flush, a prompt that hit the cache computes its whole KV again (cached_tokens 0) and gives the same tokens;
// a flush while a request runs or waits does nothing and says why; the block manager's drop_cached forgets only
// blocks no table holds.
#include <numeric>
#include <vector>

#include "engine/block_manager.h"
#include "engine/engine.h"
#include "engine_outputs.h"
#include "harness.h"
#include "model_test_gguf.h"

using namespace spindle;

namespace {

request greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  request r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

std::vector<int32_t> tokens_of(const std::vector<request_output>& steps) {
  std::vector<int32_t> t;
  for (const request_output& o : steps) t.insert(t.end(), o.tokens.begin(), o.tokens.end());
  return t;
}

}  // namespace

TEST_CASE("block_manager: drop_cached forgets the free cached blocks and keeps the ones in use") {
  block_manager bm(8, 4);
  bm.set_prefix_caching(true);
  std::vector<int32_t> a(8), b(8);
  std::iota(a.begin(), a.end(), 10);
  std::iota(b.begin(), b.end(), 50);
  bm.allocate(1, 8);
  bm.commit_full_blocks(1, a.data(), 8);
  bm.allocate(2, 8);
  bm.commit_full_blocks(2, b.data(), 8);
  bm.deallocate(1);  // a's two blocks: cached and free; b's: cached and in use
  CHECK_EQ(bm.num_cached_blocks(), 4);
  CHECK_EQ(bm.drop_cached(), 2);
  bm.check_invariants();
  CHECK_EQ(bm.num_cached_blocks(), 2);
  CHECK_EQ(bm.num_free_blocks(), 6);
  CHECK(bm.cached_prefix(a.data(), 2).empty());
  CHECK_EQ(bm.cached_prefix(b.data(), 2).size(), size_t(2));
  CHECK_EQ(bm.drop_cached(), 0);
  bm.deallocate(2);
  CHECK_EQ(bm.drop_cached(), 2);
  CHECK_EQ(bm.num_cached_blocks(), 0);
  CHECK_EQ(bm.num_free_blocks(), 8);
  bm.check_invariants();
}

TEST_CASE("engine: a prefix-cache flush makes the next prompt compute again; refused while requests run") {
  model_test::temp_llama f("llama-cache-flush", 4096);
  engine_test::outputs outs;
  engine_options o;
  o.max_model_len = 4096;
  o.block_size = 8;
  engine e([&] { return f.load(); }, o, outs.sink());
  REQUIRE(outs.wait_ready());
  std::vector<int32_t> prompt(40);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 7 + 3) % 50);
  const std::vector<request_output> first = outs.wait(e.submit(greedy(prompt, 4)));
  const std::vector<request_output> hit = outs.wait(e.submit(greedy(prompt, 4)));
  CHECK(hit.front().cached_tokens == 32);
  e.flush_prefix_cache();
  const auto done = outs.wait_flush(1);
  CHECK_EQ(done.first, std::string(""));
  CHECK(done.second >= 5);  // the prompt's 5 full blocks (and any full ones of the outputs)
  CHECK_EQ(e.stats().kv_blocks_cached, 0);
  const std::vector<request_output> after = outs.wait(e.submit(greedy(prompt, 4)));
  CHECK(after.front().cached_tokens == 0);
  CHECK(tokens_of(after) == tokens_of(first));
  CHECK(tokens_of(hit) == tokens_of(first));
  // a long request keeps the engine busy (4000 tokens: seconds, so the flush cannot miss it however the threads are
  // scheduled; a 150-token one once finished first on a loaded CI machine): the flush is refused, naming why, and
  // changes nothing; the request is then aborted rather than waited for
  const uint64_t busy = e.submit(greedy(prompt, 4000));
  e.flush_prefix_cache();
  const auto refused = outs.wait_flush(2);
  CHECK_EQ(refused.first, std::string("the prefix cache was not flushed: 1 request is running or waiting"));
  CHECK_EQ(refused.second, 0);
  e.abort(busy);
  outs.wait(busy);
  CHECK(e.stats().kv_blocks_cached > 0);
}
