// Lazy triggers and the logit mask (see output_constraint.h).
// Invariant: pending_ keeps, of the output seen while waiting, only what could still be part of a trigger
// match (the tail shorter than the longest trigger), so waiting costs O(trigger length) per token.
#include "engine/output_constraint.h"

#include <algorithm>
#include <limits>
#include <string_view>

namespace spindle {

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes of leading whitespace in `s` as JavaScript's trimStart() sees it (the TS reasoning parser's rule, so both decide
// alike where a block opens): ASCII \t \n \v \f \r and space, and U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000, U+FEFF in UTF-8. `partial`: s ends inside a UTF-8 sequence right after that whitespace
// (more bytes are needed to know).
static size_t leading_space(std::string_view s, bool& partial) {
  partial = false;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == ' ' || (c >= 0x09 && c <= 0x0D)) { ++i; continue; }
      return i;
    }
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len == 1) return i;  // a stray continuation byte: not whitespace
    if (i + len > s.size()) { partial = true; return i; }
    uint32_t cp = c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    const bool space = cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                       cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
    if (!space) return i;
    i += len;
  }
  return i;
}

output_constraint::output_constraint(std::shared_ptr<grammar_token_cache> cache, std::vector<grammar_trigger> triggers,
                                     reasoning_block reasoning)
    : cache_(std::move(cache)), triggers_(std::move(triggers)), reasoning_(std::move(reasoning)) {
  if (triggers_.empty()) matcher_ = std::make_unique<grammar_matcher>(cache_->rules_ptr());
  else if (!reasoning_.end_tag.empty()) gate_ = reasoning_.in_block ? gate::thinking : gate::undecided;
}

int32_t output_constraint::apply(float* logits, int32_t n_vocab, const std::vector<int32_t>& end_ids,
                                 const std::vector<int32_t>& forbidden) {
  cache_->mask(matcher_->state(), allowed_);
  const bool complete = matcher_->is_complete();
  for (int32_t id : forbidden) allowed_[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63));
  std::vector<std::pair<int32_t, float>> ends;  // end ids the grammar lets through, with their logits
  if (complete) {
    for (int32_t id : end_ids)
      if (id < n_vocab && std::find(forbidden.begin(), forbidden.end(), id) == forbidden.end()) ends.push_back({id, logits[id]});
  }
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  int32_t kept = 0;
  const size_t words = token_bitset_words(size_t(n_vocab));
  for (size_t w = 0; w < words; ++w) {
    const uint64_t bits = allowed_[w];
    const int32_t base = int32_t(w * 64), end = std::min(n_vocab, base + 64);
    if (bits == ~uint64_t(0) && end - base == 64) { kept += 64; continue; }
    for (int32_t id = base; id < end; ++id) {
      if ((bits >> (id - base)) & 1) ++kept;
      else logits[id] = neg_inf;
    }
  }
  for (const auto& [id, logit] : ends) {
    if (!token_bitset_test(allowed_, id)) ++kept;
    logits[id] = logit;
  }
  return kept;
}

bool output_constraint::allows(int32_t token, const std::vector<int32_t>& end_ids,
                                const std::vector<int32_t>& forbidden) const {
  if (std::find(forbidden.begin(), forbidden.end(), token) != forbidden.end()) return false;
  if (matcher_->is_complete() && std::find(end_ids.begin(), end_ids.end(), token) != end_ids.end()) return true;
  const std::string& bytes = cache_->token_bytes()[size_t(token)];
  return !bytes.empty() && matcher_->can_accept(bytes);
}

bool output_constraint::advance(int32_t token, bool is_end) {
  if (is_end) return true;  // the sequence ends here; apply() only allowed it where complete
  const std::string& bytes = cache_->token_bytes()[size_t(token)];
  if (matcher_) {
    if (matcher_->accept_string(bytes)) return true;
    error_ = "the grammar does not allow token " + std::to_string(token);
    return false;
  }
  if (gate_ != gate::answer) {
    std::string answer;
    if (!past_reasoning(bytes, answer)) return true;
    return look_for_triggers(answer);
  }
  return look_for_triggers(bytes);
}

bool output_constraint::past_reasoning(const std::string& bytes, std::string& answer) {
  gate_buf_ += bytes;
  if (gate_ == gate::undecided) {  // the output's own block: only when it begins (after whitespace) with the start tag
    bool partial = false;
    gate_buf_.erase(0, leading_space(gate_buf_, partial));  // leading whitespace decides nothing (and is not kept)
    if (gate_buf_.empty() || partial) return false;
    const std::string& tag = reasoning_.start_tag;
    if (gate_buf_.size() < tag.size() && tag.compare(0, gate_buf_.size(), gate_buf_) == 0) return false;  // maybe the tag, cut
    if (gate_buf_.compare(0, tag.size(), tag) != 0) {  // no block: all of it is the answer
      gate_ = gate::answer;
      answer.swap(gate_buf_);
      return true;
    }
    gate_ = gate::thinking;
    gate_buf_.erase(0, tag.size());
  }
  const std::string& end = reasoning_.end_tag;
  const size_t at = gate_buf_.find(end);
  if (at == std::string::npos) {  // keep what could be the start of the end tag
    if (gate_buf_.size() >= end.size()) gate_buf_.erase(0, gate_buf_.size() - (end.size() - 1));
    return false;
  }
  gate_ = gate::answer;
  answer = gate_buf_.substr(at + end.size());  // the answer so far (an at_start trigger is at its start)
  gate_buf_.clear();
  return true;
}

bool output_constraint::look_for_triggers(const std::string& bytes) {
  pending_ += bytes;
  if (start_at_trigger()) return error_.empty();
  size_t longest = 0;
  for (const grammar_trigger& t : triggers_) longest = std::max(longest, t.text.size());
  if (pending_.size() >= longest) {  // keep the last longest - 1 bytes: a match must end in a later token
    const size_t drop = pending_.size() - (longest - 1);
    for (size_t i = 0; i < drop; ++i) only_space_ = only_space_ && is_space(pending_[i]);
    pending_.erase(0, drop);
    searched_ = searched_ > drop ? searched_ - drop : 0;
  }
  return true;
}

bool output_constraint::start_at_trigger() {
  size_t best = std::string::npos;
  for (const grammar_trigger& t : triggers_) {
    for (size_t at = pending_.find(t.text, searched_); at != std::string::npos; at = pending_.find(t.text, at + 1)) {
      if (t.at_start) {
        bool space_before = only_space_;
        for (size_t i = 0; i < at && space_before; ++i) space_before = is_space(pending_[i]);
        if (!space_before) continue;
      }
      best = std::min(best, at);
      break;
    }
  }
  if (best == std::string::npos) {
    // A position whose every trigger fits in the bytes seen so far has been ruled out for good.
    size_t longest = 0;
    for (const grammar_trigger& t : triggers_) longest = std::max(longest, t.text.size());
    searched_ = pending_.size() >= longest ? pending_.size() - longest + 1 : 0;
    return false;
  }
  matcher_ = std::make_unique<grammar_matcher>(cache_->rules_ptr());
  if (!matcher_->accept_bytes(pending_.data() + best, pending_.size() - best)) {
    error_ = "the grammar does not accept the output from its trigger on: '" + pending_.substr(best) + "'";
  }
  pending_.clear();
  return true;
}

}  // namespace spindle
