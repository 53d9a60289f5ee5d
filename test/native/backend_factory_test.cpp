// make_backend's device names (backend/backend.h): "cpu", "auto" (CUDA when usable, else CPU), "cuda" (a clear
// error naming what is missing when no GPU, driver or CUDA build is there), anything else refused.
#include <string>

#include "backend/backend.h"
#include "harness.h"

using namespace spindle;

TEST_CASE("make_backend: device names") {
  CHECK_EQ(std::string(make_backend("cpu", 1)->name()), std::string("cpu"));
  CHECK_THROWS_WITH(make_backend("gpu", 1), "unknown device 'gpu' (allowed: auto, cpu, cuda)");
  std::string why;
  if (cuda_usable(&why)) {
    CHECK_EQ(std::string(make_backend("auto", 1)->name()), std::string("cuda"));
  } else {
    CHECK(!why.empty());
    CHECK_EQ(std::string(make_backend("auto", 1)->name()), std::string("cpu"));
    CHECK_THROWS_WITH(make_backend("cuda", 1), "device 'cuda' is not available: ");
  }
}
