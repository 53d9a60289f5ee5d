// A minimal native test harness: TEST_CASE registers a function; CHECK* record failures without stopping
// the test; REQUIRE* stop it. main() (harness_main.cpp) runs every case, or those whose name contains argv[1].
#pragma once
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace harness {

struct test_case {
  std::string name;
  std::function<void()> fn;
};

std::vector<test_case>& registry();
void fail(const char* file, int line, const std::string& message);

struct registrar {
  registrar(const char* name, std::function<void()> fn) { registry().push_back({name, std::move(fn)}); }
};

struct stop_test {};  // thrown by REQUIRE* to end the current case
struct skip_test {    // thrown by SKIP: the case cannot run here (a CPU feature or a GPU is missing)
  std::string why;
};

}  // namespace harness

#define HARNESS_CAT2(a, b) a##b
#define HARNESS_CAT(a, b) HARNESS_CAT2(a, b)
#define TEST_CASE(name)                                                                              \
  static void HARNESS_CAT(test_fn_, __LINE__)();                                                     \
  static harness::registrar HARNESS_CAT(test_reg_, __LINE__)(name, &HARNESS_CAT(test_fn_, __LINE__)); \
  static void HARNESS_CAT(test_fn_, __LINE__)()

#define CHECK(cond) \
  do { if (!(cond)) harness::fail(__FILE__, __LINE__, "CHECK(" #cond ") failed"); } while (0)

#define CHECK_EQ(a, b)                                                                     \
  do {                                                                                     \
    auto _va = (a); auto _vb = (b);                                                        \
    if (!(_va == _vb)) {                                                                   \
      std::ostringstream _os; _os << "CHECK_EQ(" #a ", " #b ") failed: " << _va << " != " << _vb; \
      harness::fail(__FILE__, __LINE__, _os.str());                                        \
    }                                                                                      \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                                              \
  do {                                                                                     \
    double _va = (a), _vb = (b);                                                           \
    if (!(std::fabs(_va - _vb) <= (tol))) {                                                \
      std::ostringstream _os; _os << "CHECK_NEAR(" #a ", " #b ") failed: " << _va << " vs " << _vb \
                                  << " (tol " << (tol) << ")";                             \
      harness::fail(__FILE__, __LINE__, _os.str());                                        \
    }                                                                                      \
  } while (0)

// Ends the current case as skipped (reported as SKIP with the reason, never as a pass).
#define SKIP(reason) throw harness::skip_test{(reason)}

#define REQUIRE(cond) \
  do { if (!(cond)) { harness::fail(__FILE__, __LINE__, "REQUIRE(" #cond ") failed"); throw harness::stop_test{}; } } while (0)

// Expects `expr` to throw spindle::error whose message contains `substr`.
#define CHECK_THROWS_WITH(expr, substr)                                                     \
  do {                                                                                      \
    bool _thrown = false;                                                                   \
    try { (void)(expr); } catch (const std::exception& _e) {                                \
      _thrown = true;                                                                       \
      if (std::string(_e.what()).find(substr) == std::string::npos)                         \
        harness::fail(__FILE__, __LINE__, std::string("exception message '") + _e.what() +  \
                      "' lacks '" + (substr) + "'");                                        \
    }                                                                                       \
    if (!_thrown) harness::fail(__FILE__, __LINE__, "expected an exception from " #expr);   \
  } while (0)
