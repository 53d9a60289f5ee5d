// Split GGUF models (llama.cpp's gguf-split / llama_split_path naming): a model of N files, each holding some of the
// tensors; the first holds the metadata too. Each file has split.no (0-based) and split.count; the first may have
// split.tensors.count. The model is opened from its first file, <prefix>-00001-of-0000N.gguf, and its other files
// are <prefix>-0000k-of-0000N.gguf beside it, as llama.cpp loads them.
// Invariant: after join_shards() the first file's tensor table holds every file's tensors, each name once, each
// pointing into the mapping of the file it came from (kept alive in shards_), or it threw naming the file and the
// problem; a file that is not split is left as it was.
#include <cstdio>
#include <string>

#include "common/error.h"
#include "gguf/gguf_file.h"

namespace spindle {

namespace {

// "-0000k-of-0000N.gguf" for file no (0-based) of count, as llama.cpp's llama_split_path formats it.
std::string split_suffix(uint64_t no, uint64_t count) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "-%05llu-of-%05llu.gguf", (unsigned long long)(no + 1), (unsigned long long)count);
  return buf;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void gguf_file::join_shards() {
  const uint64_t count = get_u64_or("split.count", 1);
  if (count <= 1) return;
  if (count > 99999) throw error(path_ + ": split.count " + std::to_string(count) + " is more than the 99999 files split names count");
  const uint64_t no = get_u64_or("split.no", 0);
  if (no != 0) {
    const std::string mine = split_suffix(no, count);
    const std::string hint = ends_with(path_, mine)
                                 ? "load the first one, " + path_.substr(0, path_.size() - mine.size()) + split_suffix(0, count)
                                 : "load its first file";
    throw error(path_ + ": this is file " + std::to_string(no + 1) + " of a model split into " + std::to_string(count) +
                " files: " + hint);
  }
  const std::string first = split_suffix(0, count);
  if (!ends_with(path_, first)) {
    throw error(path_ + ": the first file of a model split into " + std::to_string(count) +
                " files must be named <name>" + first + " (llama.cpp's split naming), so that its other files, <name>" +
                split_suffix(1, count) + " ..., can be found beside it");
  }
  const std::string prefix = path_.substr(0, path_.size() - first.size());
  for (uint64_t k = 1; k < count; ++k) {
    const std::string part = prefix + split_suffix(k, count);
    std::unique_ptr<gguf_file> s = open_one(part);  // throws naming the missing or broken file
    if (s->get_u64_or("split.count", 1) != count || s->get_u64_or("split.no", 0) != k) {
      throw error(part + ": split.no / split.count say " + std::to_string(s->get_u64_or("split.no", 0) + 1) + " of " +
                  std::to_string(s->get_u64_or("split.count", 1)) + ", where this name says " + std::to_string(k + 1) +
                  " of " + std::to_string(count) + " (a file of another split model?)");
    }
    s->tensor_index_.clear();  // views into the names about to move
    for (gguf_tensor& t : s->tensors_) tensors_.push_back(std::move(t));
    s->tensors_.clear();
    shards_.push_back(std::move(s));
  }
  // names: views into tensors_, which moved as it grew
  tensor_index_.clear();
  tensor_index_.reserve(tensors_.size());
  for (size_t k = 0; k < tensors_.size(); ++k) {
    if (!tensor_index_.emplace(tensors_[k].name, k).second) {
      throw error(path_ + ": tensor '" + tensors_[k].name + "' is in more than one file of the split model");
    }
  }
  const uint64_t want = get_u64_or("split.tensors.count", tensors_.size());
  if (want != tensors_.size()) {
    throw error(path_ + ": split.tensors.count is " + std::to_string(want) + " but the " + std::to_string(count) +
                " files hold " + std::to_string(tensors_.size()) + " tensors");
  }
}

}  // namespace spindle
