// Drafts for speculative decoding (engine/drafter.h): n-gram lookup finds the latest, longest earlier occurrence;
// a prediction is followed position by position and re-found after an edit; misses back off; drafts never
// exceed max_draft.
#include <cstdint>
#include <vector>

#include "engine/drafter.h"
#include "harness.h"

using namespace spindle;

namespace {

std::vector<int32_t> propose(drafter& d, const std::vector<int32_t>& toks, int64_t n_prompt, int32_t max_draft) {
  std::vector<int32_t> out;
  d.propose(toks.data(), int64_t(toks.size()), n_prompt, max_draft, out);
  return out;
}

}  // namespace

TEST_CASE("drafter: ngram_find takes the longest suffix, then its latest earlier occurrence") {
  //                         0  1  2  3  4  5  6  7  8  9 10
  const std::vector<int32_t> t = {5, 6, 7, 1, 5, 6, 8, 2, 9, 5, 6};
  int32_t m = 0;
  CHECK_EQ(ngram_find(t.data(), int64_t(t.size()), 1, 4, &m), int64_t(6));  // "5 6" latest at 4, followed by 8
  CHECK_EQ(m, 2);
  const std::vector<int32_t> u = {1, 2, 3, 9, 2, 3, 7, 1, 2, 3};
  CHECK_EQ(ngram_find(u.data(), int64_t(u.size()), 1, 4, &m), int64_t(3));  // "1 2 3" at 0 beats "2 3" at 4
  CHECK_EQ(m, 3);
  CHECK_EQ(ngram_find(u.data(), int64_t(u.size()), 4, 4, &m), int64_t(-1));
  const std::vector<int32_t> none = {1, 2, 3, 4};
  CHECK_EQ(ngram_find(none.data(), 4, 1, 3, &m), int64_t(-1));
  CHECK_EQ(ngram_find(none.data(), 1, 1, 3, &m), int64_t(-1));  // nothing before the tail
}

TEST_CASE("drafter: n-gram drafts continue the earlier occurrence, capped by max_draft and the sequence") {
  speculative_config cfg;
  cfg.num_speculative_tokens = 3;
  drafter d(cfg, /*ngram=*/true, {});
  CHECK(d.active());
  const std::vector<int32_t> t = {4, 5, 6, 7, 8, 9, 4, 5};
  CHECK(propose(d, t, 6, 8) == std::vector<int32_t>({6, 7, 8}));  // k = 3
  CHECK(propose(d, t, 6, 2) == std::vector<int32_t>({6, 7}));
  const std::vector<int32_t> near_end = {1, 2, 3, 1, 2};
  CHECK(propose(d, near_end, 3, 8) == std::vector<int32_t>({3, 1, 2}));
  drafter off(cfg, /*ngram=*/false, {});
  CHECK(!off.active());
  CHECK(propose(off, t, 6, 8).empty());
  // k = 16: 4 drafts at first, 8 after a fully accepted one, then 16
  cfg.num_speculative_tokens = 16;
  std::vector<int32_t> run;
  for (int32_t i = 0; i < 40; ++i) run.push_back(i);
  run.push_back(0);  // "0" again: the lookup continues with 1 2 3 ...
  drafter ramp(cfg, /*ngram=*/true, {});
  cfg.prompt_lookup_min = 1;
  drafter ramp1(cfg, /*ngram=*/true, {});
  CHECK(propose(ramp1, run, 41, 64).size() == size_t(4));
  ramp1.record(4, 4);
  CHECK(propose(ramp1, run, 41, 64).size() == size_t(8));
  ramp1.record(8, 8);
  CHECK(propose(ramp1, run, 41, 64).size() == size_t(16));
  CHECK(propose(ramp, run, 41, 64).empty());  // n-gram sizes from 2: "39 0" is nowhere earlier
}

TEST_CASE("drafter: a prediction is followed in step, past a substitution, re-found after an insertion") {
  speculative_config cfg;
  cfg.num_speculative_tokens = 4;
  const std::vector<int32_t> pred = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  drafter d(cfg, /*ngram=*/false, pred);
  std::vector<int32_t> seq = {1, 2};  // the prompt; no output yet
  CHECK(propose(d, seq, 2, 8) == std::vector<int32_t>({10, 11, 12, 13}));
  seq.insert(seq.end(), {10, 11, 12, 13, 14});  // all 4 accepted + the token after them
  d.record(4, 4);
  CHECK(propose(d, seq, 2, 8) == std::vector<int32_t>({15, 16, 17, 18}));
  seq.insert(seq.end(), {15, 16, 99});  // 15 16 accepted, then 99 instead of 17
  d.record(4, 2);
  CHECK(propose(d, seq, 2, 8) == std::vector<int32_t>({18, 19}));  // taken as a substitution: on after 17
  seq.push_back(17);  // it was an insertion: 17 follows; nothing accepted
  d.record(2, 0);
  CHECK(propose(d, seq, 2, 8).empty());  // waits one decode after the miss
  d.record(0, 0);
  seq.push_back(18);
  CHECK(propose(d, seq, 2, 8) == std::vector<int32_t>({19}));  // "17 18" found again; limit 1 after the miss
  d.record(1, 1);
  seq.insert(seq.end(), {19, 7});
  CHECK(propose(d, seq, 2, 8).empty());  // the prediction is used up
  drafter lost(cfg, /*ngram=*/false, pred);
  CHECK(propose(lost, {1, 2, 50, 51, 52}, 2, 8).empty());  // output nowhere in the prediction
  drafter off(cfg, /*ngram=*/false, {});
  CHECK(!off.active());
}

TEST_CASE("drafter: repeated misses back off 1, 2, 4 .. decodes; an accepted draft resets it") {
  speculative_config cfg;
  cfg.num_speculative_tokens = 2;
  drafter d(cfg, /*ngram=*/true, {});
  const std::vector<int32_t> t = {3, 4, 5, 3, 4};
  int32_t drafted = 0;
  for (int step = 0; step < 15; ++step) {
    if (!propose(d, t, 3, 8).empty()) {
      ++drafted;
      d.record(1, 0);
    } else {
      d.record(0, 0);
    }
  }
  CHECK_EQ(drafted, 4);  // steps 0, 2, 5, 10 (waits 1, 2, 4, then 8)
  CHECK(propose(d, t, 3, 8).empty());
  drafter e(cfg, /*ngram=*/true, {});
  CHECK(propose(e, t, 3, 8) == std::vector<int32_t>({5, 3}));  // a fresh drafter: the full k
  e.record(2, 2);
  CHECK(propose(e, t, 3, 1) == std::vector<int32_t>({5}));  // max_draft caps it
}
