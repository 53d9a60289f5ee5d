// Stop-string matching with hold-back (see stop_checker.h).
// Invariant: held_ is the longest suffix of the unreleased text that is a proper prefix of some stop string.
#include "engine/stop_checker.h"

#include <algorithm>
#include <cstring>

namespace spindle {

stop_checker::stop_checker(std::vector<std::string> stops) : stops_(std::move(stops)) {}

const std::string& stop_checker::matched_string() const {
  static const std::string none;
  return matched_ >= 0 ? stops_[size_t(matched_)] : none;
}

// Length of the longest suffix of `buf` that equals a proper prefix of `stop`.
static size_t partial_suffix(const std::string& buf, const std::string& stop) {
  size_t max_len = std::min(buf.size(), stop.size() - 1);
  for (size_t len = max_len; len > 0; --len) {
    if (std::memcmp(buf.data() + buf.size() - len, stop.data(), len) == 0) return len;
  }
  return 0;
}

std::string stop_checker::push(const std::string& text) {
  if (stopped()) return "";
  std::string buf = held_ + text;
  held_.clear();
  // Earliest full occurrence wins; at the same position the first listed stop string wins.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    size_t pos = buf.find(stops_[i]);
    if (pos != std::string::npos && pos < best_pos) {
      best_pos = pos;
      matched_ = int(i);
    }
  }
  if (stopped()) return buf.substr(0, best_pos);
  size_t hold = 0;
  for (const std::string& stop : stops_) hold = std::max(hold, partial_suffix(buf, stop));
  held_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  return buf;
}

std::string stop_checker::flush() {
  if (stopped()) return "";
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace spindle
