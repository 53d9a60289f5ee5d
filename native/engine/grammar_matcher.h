// Pushdown matcher for a compiled grammar: a set of parse stacks advanced one code point at a time, fed bytes.
// Invariant: every stack top is a char_class element (or the empty stack, meaning root is complete), so the
// next code point is accepted exactly when some top's class contains it; a byte run that cannot continue the
// grammar leaves the state untouched. Stacks are linked lists in an arena whose parents always precede their
// children, and nodes are hash-consed (one node per (pos, parent)), so equal stacks have equal top indices;
// a walker can undo work by truncating the arena, newest nodes first.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar.h"

namespace spindle {

constexpr uint32_t grammar_stack_empty = UINT32_MAX;  // a top (or parent) meaning "nothing left to match"

struct grammar_stack_node {
  uint32_t pos;        // index into grammar::elems of the next element to match (never alt_end / rule_end)
  uint32_t parent;     // node index below this one, or grammar_stack_empty
  uint32_t next_same;  // older node in the same hash bucket, or grammar_stack_empty
};

// Stack nodes, hash-consed: intern returns the existing node for (pos, parent) if there is one.
struct grammar_stack_arena {
  std::vector<grammar_stack_node> nodes;
  std::vector<uint32_t> buckets = std::vector<uint32_t>(1024, grammar_stack_empty);  // newest node per hash
  std::vector<uint32_t> expanded_in;  // [nodes.size()] last step that expanded the node (skip repeats)
  uint32_t step = 0;

  uint32_t next_step();

  uint32_t intern(uint32_t pos, uint32_t parent);
  void truncate(size_t n);  // drops nodes [n, size()), restoring the buckets
  void rehash();            // rebuilds the buckets after nodes were rewritten
};

// Bytes of a UTF-8 character seen so far.
struct utf8_partial {
  uint32_t value = 0;   // bits decoded so far
  uint8_t left = 0;     // continuation bytes still expected; 0 = at a character boundary
  uint8_t len = 0;      // total length of the character in bytes
  uint8_t next_lo = 0x80, next_hi = 0xBF;  // allowed range of the next continuation byte
};

enum class utf8_step { bad, more, done };
// Feeds one byte; on `done`, cp holds the code point. Rejects overlong forms, surrogates and > U+10FFFF.
utf8_step utf8_feed(utf8_partial& p, uint8_t byte, uint32_t& cp);

struct grammar_state {
  grammar_stack_arena arena;
  std::vector<uint32_t> tops;             // one per live stack: node index or grammar_stack_empty
  utf8_partial partial;
};

// Appends to tops the stacks reached by matching cp on tops[begin, end); duplicates are skipped.
void grammar_accept_cp(const grammar& g, grammar_stack_arena& arena, std::vector<uint32_t>& tops,
                       size_t begin, size_t end, uint32_t cp);
// True if some stack in tops[begin, end) accepts a code point that the partial character can still become.
bool grammar_partial_viable(const grammar& g, const std::vector<grammar_stack_node>& nodes,
                            const std::vector<uint32_t>& tops, size_t begin, size_t end, const utf8_partial& p);

class grammar_matcher {
 public:
  explicit grammar_matcher(std::shared_ptr<const grammar> g);

  // Consumes bytes if all of them can continue the grammar (a trailing partial UTF-8 character is kept for
  // the next call); otherwise returns false and changes nothing.
  bool accept_bytes(const char* data, size_t n);
  bool accept_string(const std::string& s) { return accept_bytes(s.data(), s.size()); }
  // Whether accept_bytes would succeed; changes nothing.
  bool can_accept(const std::string& s) const;
  // The input so far is a complete `root` (and does not end inside a UTF-8 character).
  bool is_complete() const;

  const grammar& rules() const { return *g_; }
  const grammar_state& state() const { return st_; }

 private:
  std::shared_ptr<const grammar> g_;
  grammar_state st_;
};

}  // namespace spindle
