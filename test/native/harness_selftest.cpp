#include "common/checked_math.h"
#include "harness.h"

TEST_CASE("checked_math: add/mul/align detect overflow") {
  CHECK_EQ(spindle::checked_add(1, 2, "x"), 3u);
  CHECK_EQ(spindle::checked_align(33, 32, "x"), 64u);
  CHECK_EQ(spindle::checked_align(64, 32, "x"), 64u);
  CHECK_THROWS_WITH(spindle::checked_add(UINT64_MAX, 1, "tensor size"), "tensor size");
  CHECK_THROWS_WITH(spindle::checked_mul(UINT64_MAX / 2, 3, "n_elements"), "n_elements");
  CHECK_THROWS_WITH(spindle::checked_align(UINT64_MAX - 3, 32, "offset"), "offset");
}
