// Stop strings matched over a text stream that arrives in arbitrary pieces (token boundaries).
// Invariant: no byte of a stop string is ever returned by push()/flush(): text that could still be the start
// of a stop string is held back until it either completes a match (dropped with everything after it) or can
// no longer match (released). Held text always starts at a UTF-8 character boundary because stop strings are
// matched from their first byte.
#pragma once
#include <string>
#include <vector>

namespace spindle {

class stop_checker {
 public:
  explicit stop_checker(std::vector<std::string> stops);

  // Adds `text`; returns the part that is safe to emit now. After a match, stopped() is true, the text
  // before the match has been returned and later calls return "".
  std::string push(const std::string& text);
  // Releases held text at the end of the stream (no match can complete any more).
  std::string flush();

  bool stopped() const { return matched_ >= 0; }
  const std::string& matched_string() const;  // "" until stopped()
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;  // bytes that may begin a stop string
  int matched_ = -1;  // index into stops_
};

}  // namespace spindle
