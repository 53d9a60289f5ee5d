// The tensor table of a model file: looks tensors up by name and checks shape and type before the model uses
// them, mirroring llama.cpp's create_tensor (shape compared on all four dims, unused dims 1).
// Invariant: a returned weight has exactly the expected shape and a type the backend computes with; a returned
// vector is f32 in backend memory. Every failure throws spindle::error naming the file and the tensor, with the
// expected and actual shape or type.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace spindle {

class gguf_file;
struct gguf_tensor;

class tensor_table {
 public:
  tensor_table(const gguf_file& file, backend& be, const std::string& arch) : file_(file), be_(be), arch_(arch) {}

  // "blk.<il>.<name>"
  static std::string blk(int il, const char* name);

  // A matrix of n_out rows of n_in elements (ne = [n_in, n_out]). Absent and !required: n_in == 0 in the result.
  backend_weight matrix(const std::string& name, int64_t n_in, int64_t n_out, bool required);
  // A vector of n elements (F32, F16 or BF16 in the file), converted to f32. Absent and !required: empty buffer.
  backend_buffer vector(const std::string& name, int64_t n, bool required);
  // A required tensor of shape [n_in, n_out] read on the host (data inside the file mapping, not uploaded),
  // for weights the loader rearranges before uploading.
  const gguf_tensor& host_matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  bool has(const std::string& name) const;
  const gguf_file& file() const { return file_; }
  backend& compute_backend() const { return be_; }  // the backend weights are uploaded to

 private:
  const gguf_tensor* find_checked(const std::string& name, const std::vector<int64_t>& ne, bool required) const;
  const gguf_file& file_;
  backend& be_;
  std::string arch_;
};

// "[n0, n1, ...]": a tensor shape (ne, n dims) for load errors.
std::string shape_str(const int64_t* ne, int n);
// A weight type's GGUF name ("q4_K"), "unknown" for an id with none (for load errors).
const char* type_name(ggml_type t);

// "f32, f16, q4_0, ...": the weight types `be` computes with, in GGUF id order (for load errors).
std::string supported_type_names(const backend& be);

// The backend a model file loads on (make_backend_for_types with the types of the file's tensors).
std::unique_ptr<backend> make_backend_for_file(const gguf_file& file, const std::string& device, int n_threads);

}  // namespace spindle
