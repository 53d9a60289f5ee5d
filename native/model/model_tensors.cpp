// Tensor lookup with shape and type checks (see model_tensors.h).
// Invariant: nothing is read from a tensor's data before its shape and type were checked against the
// expected ones, so the byte size the reader validated covers every row the model touches.
#include "model/model_tensors.h"

#include <algorithm>
#include <sstream>

#include "backend/cpu/matmul.h"
#include "common/error.h"
#include "gguf/gguf_file.h"

namespace spindle {

std::string shape_str(const int64_t* ne, int n) {
  std::ostringstream os;
  os << "[";
  for (int i = 0; i < n; ++i) os << (i ? ", " : "") << ne[i];
  os << "]";
  return os.str();
}

const char* type_name(ggml_type t) {
  const ggml_type_traits* info = ggml_type_info((uint32_t)t);
  return info ? info->name : "unknown";
}

std::unique_ptr<backend> make_backend_for_file(const gguf_file& file, const std::string& device, int n_threads) {
  std::vector<ggml_type> types;
  for (const gguf_tensor& t : file.tensors()) {
    if (std::find(types.begin(), types.end(), t.type) == types.end()) types.push_back(t.type);
  }
  return make_backend_for_types(device, n_threads, types);
}

std::string supported_type_names(const backend& be) {
  std::string names;
  for (uint32_t id = 0; id < 64; ++id) {
    const ggml_type_traits* info = ggml_type_info(id);
    if (!info || !be.supports_type((ggml_type)id)) continue;
    names += (names.empty() ? "" : ", ") + std::string(info->name);
  }
  return names;
}

std::string tensor_table::blk(int il, const char* name) { return "blk." + std::to_string(il) + "." + name; }

bool tensor_table::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

const gguf_tensor* tensor_table::find_checked(const std::string& name, const std::vector<int64_t>& ne,
                                              bool required) const {
  const gguf_tensor* t = file_.find_tensor(name);
  if (!t) {
    if (!required) return nullptr;
    throw error(file_.path() + ": tensor '" + name + "' not found (required by architecture " + arch_ +
                ", expected shape " + shape_str(ne.data(), (int)ne.size()) + ")");
  }
  bool ok = true;
  for (int i = 0; i < 4; ++i) {
    const int64_t want = i < (int)ne.size() ? ne[i] : 1;
    if (t->ne[i] != want) ok = false;
  }
  if (!ok) {
    throw error(file_.path() + ": tensor '" + name + "' has wrong shape " + shape_str(t->ne, (int)t->n_dims) +
                ", expected " + shape_str(ne.data(), (int)ne.size()));
  }
  return t;
}

const gguf_tensor& tensor_table::host_matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  return *find_checked(name, {n_in, n_out}, true);
}

backend_weight tensor_table::matrix(const std::string& name, int64_t n_in, int64_t n_out, bool required) {
  const gguf_tensor* t = find_checked(name, {n_in, n_out}, required);
  if (!t) return backend_weight{};
  if (!be_.supports_type(t->type)) {
    throw error(file_.path() + ": tensor '" + name + "' has type " + type_name(t->type) +
                ", which the " + be_.name() + " backend does not support (supported: " + supported_type_names(be_) +
                ")");
  }
  return be_.upload_weight(t->type, t->data, n_in, n_out);
}

backend_buffer tensor_table::vector(const std::string& name, int64_t n, bool required) {
  const gguf_tensor* t = find_checked(name, {n}, required);
  if (!t) return backend_buffer{};
  if (t->type != ggml_type::F32 && t->type != ggml_type::F16 && t->type != ggml_type::BF16) {
    throw error(file_.path() + ": tensor '" + name + "' has type " + type_name(t->type) +
                ", expected f32, f16 or bf16");
  }
  std::vector<float> host((size_t)n);
  cpu_dequantize_row(t->type, t->data, host.data(), n);
  backend_buffer buf(be_, n);
  be_.upload(buf.data(), host.data(), n);
  return buf;
}

}  // namespace spindle
