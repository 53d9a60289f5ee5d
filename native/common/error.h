// spindle::error: the one exception type the core throws for anything a model file, a request or the
// environment can cause. The Node-API layer turns it into a JS Error; nothing in the core aborts.
#pragma once
#include <stdexcept>
#include <string>

namespace spindle {

struct error : std::runtime_error {
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace spindle
