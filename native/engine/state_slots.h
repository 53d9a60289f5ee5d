// The pool of recurrent-state slots: a fixed number of slot ids (max_num_seqs), one held by each running
// sequence while it runs, handed out from a free list. The scheduler takes a slot when it admits a sequence and
// gives it back when the sequence is preempted, finishes or is aborted; the model keeps the state memory of
// slot i (model.h, batch_sequence::state_slot). Models without recurrent layers ignore the ids.
// Invariants (check_invariants() verifies them): every slot is either free (on the free list exactly once) or
// held by exactly one sequence; num_free() + num_held() == size(); acquire / release are all-or-nothing.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace spindle {

class state_slot_pool {
 public:
  // Throws spindle::error unless n_slots > 0.
  explicit state_slot_pool(int32_t n_slots);

  int32_t size() const { return int32_t(owner_.size()); }
  int32_t num_free() const { return int32_t(free_.size()); }
  int32_t num_held() const { return int32_t(held_.size()); }
  // The slot seq_id holds, or -1.
  int32_t slot_of(uint64_t seq_id) const;
  // Gives seq_id the lowest-numbered free slot and returns it. Throws if seq_id already holds one or none is free.
  int32_t acquire(uint64_t seq_id);
  // Frees the slot of seq_id; false when it holds none.
  bool release(uint64_t seq_id);
  // Throws spindle::error naming the first broken invariant.
  void check_invariants() const;

 private:
  std::vector<int32_t> free_;                    // free slot ids, highest first (back() is the lowest)
  std::vector<uint64_t> owner_;                  // [n_slots] holder of each slot (meaningful while held)
  std::vector<bool> in_use_;                     // [n_slots]
  std::unordered_map<uint64_t, int32_t> held_;   // seq_id -> slot
};

}  // namespace spindle
