// Runs every registered native test case (or those whose name contains argv[1]) and prints
// "N passed, N failed, N skipped" as its last line. Exit code 1 if any case failed.
#include <cstdio>
#include <exception>

#include "harness.h"

namespace harness {

static int g_failures_in_case = 0;

std::vector<test_case>& registry() {
  static std::vector<test_case> cases;
  return cases;
}

void fail(const char* file, int line, const std::string& message) {
  ++g_failures_in_case;
  std::fprintf(stderr, "  %s:%d: %s\n", file, line, message.c_str());
}

}  // namespace harness

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a pipe even if a case crashes the process
  std::string filter = argc > 1 ? argv[1] : "";
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& tc : harness::registry()) {
    if (!filter.empty() && tc.name.find(filter) == std::string::npos) continue;
    harness::g_failures_in_case = 0;
    std::string skip_reason;
    try {
      tc.fn();
    } catch (const harness::skip_test& s) {
      skip_reason = s.why;
    } catch (const harness::stop_test&) {
    } catch (const std::exception& e) {
      harness::fail(__FILE__, __LINE__, std::string("unexpected exception: ") + e.what());
    }
    if (harness::g_failures_in_case == 0 && !skip_reason.empty()) {
      ++skipped;
      std::printf("SKIP %s: %s\n", tc.name.c_str(), skip_reason.c_str());
    } else if (harness::g_failures_in_case == 0) {
      ++passed;
      std::printf("ok   %s\n", tc.name.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s\n", tc.name.c_str());
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed == 0 ? 0 : 1;
}
