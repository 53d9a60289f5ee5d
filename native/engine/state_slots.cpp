// state_slot_pool (see state_slots.h). Invariant: free_ is kept sorted descending, so acquire() always takes
// the lowest free id (deterministic slot assignment for a given schedule).
#include "engine/state_slots.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace spindle {

state_slot_pool::state_slot_pool(int32_t n_slots) {
  if (n_slots <= 0) throw error("state slots: need at least one slot, got " + std::to_string(n_slots));
  owner_.assign(size_t(n_slots), 0);
  in_use_.assign(size_t(n_slots), false);
  free_.reserve(size_t(n_slots));
  for (int32_t i = n_slots - 1; i >= 0; --i) free_.push_back(i);
}

int32_t state_slot_pool::slot_of(uint64_t seq_id) const {
  auto it = held_.find(seq_id);
  return it == held_.end() ? -1 : it->second;
}

int32_t state_slot_pool::acquire(uint64_t seq_id) {
  if (held_.count(seq_id) != 0) {
    throw error("state slots: sequence " + std::to_string(seq_id) + " already holds slot " +
                std::to_string(held_.at(seq_id)));
  }
  if (free_.empty()) throw error("state slots: all " + std::to_string(size()) + " slots are held");
  const int32_t slot = free_.back();
  held_.emplace(seq_id, slot);  // may throw (allocation): nothing changed yet
  free_.pop_back();
  in_use_[size_t(slot)] = true;
  owner_[size_t(slot)] = seq_id;
  return slot;
}

bool state_slot_pool::release(uint64_t seq_id) {
  auto it = held_.find(seq_id);
  if (it == held_.end()) return false;
  const int32_t slot = it->second;
  held_.erase(it);
  in_use_[size_t(slot)] = false;
  // keep free_ descending; capacity was reserved for every slot, so this never reallocates
  free_.insert(std::upper_bound(free_.begin(), free_.end(), slot, [](int32_t a, int32_t b) { return a > b; }), slot);
  return true;
}

void state_slot_pool::check_invariants() const {
  auto broken = [](const std::string& what) { return error("state slot invariant: " + what); };
  if (num_free() + num_held() != size()) throw broken("free + held != size");
  for (size_t i = 0; i < free_.size(); ++i) {
    const int32_t s = free_[i];
    if (s < 0 || s >= size() || in_use_[size_t(s)]) throw broken("free slot " + std::to_string(s) + " is in use");
    if (i > 0 && free_[i - 1] <= s) throw broken("free list not strictly descending");
  }
  for (const auto& [seq, slot] : held_) {
    if (slot < 0 || slot >= size() || !in_use_[size_t(slot)] || owner_[size_t(slot)] != seq) {
      throw broken("slot " + std::to_string(slot) + " of sequence " + std::to_string(seq) + " is not recorded as held");
    }
  }
}

}  // namespace spindle
