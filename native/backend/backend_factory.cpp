// make_backend: the device name -> backend choice (see backend.h). The CUDA backend exists only in builds made
// with SPINDLE_CUDA; such a build still runs where no driver or GPU is present (the CUDA runtime is linked
// statically and finds the driver at run time), where "auto" then means the CPU.
#include <string>
#include <vector>

#include "backend/backend.h"
#include "common/error.h"

namespace spindle {

bool cuda_usable(std::string* why) {
#ifdef SPINDLE_CUDA
  std::string reason;
  if (cuda_device_count(&reason) > 0) return true;
  if (why) *why = "no usable CUDA GPU (" + reason + ")";
  return false;
#else
  if (why) *why = "this build of Spindle has no CUDA backend (built without nvcc)";
  return false;
#endif
}

std::unique_ptr<backend> make_backend(const std::string& device, int n_threads) {
  if (device == "cpu") return make_cpu_backend(n_threads);
  if (device == "cuda" || device == "auto") {
    std::string why;
    if (cuda_usable(&why)) {
#ifdef SPINDLE_CUDA
      return make_cuda_backend(0);
#endif
    }
    if (device == "auto") return make_cpu_backend(n_threads);
    throw error("device 'cuda' is not available: " + why);
  }
  throw error("unknown device '" + device + "' (allowed: auto, cpu, cuda)");
}

std::unique_ptr<backend> make_backend_for_types(const std::string& device, int n_threads,
                                                const std::vector<ggml_type>& types) {
  std::unique_ptr<backend> be = make_backend(device, n_threads);
  if (device != "auto" || std::string(be->name()) == "cpu") return be;
  for (ggml_type t : types) {
    if (!be->supports_type(t)) return make_cpu_backend(n_threads);
  }
  return be;
}

}  // namespace spindle
