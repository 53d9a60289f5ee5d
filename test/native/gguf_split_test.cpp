// Split GGUF models (llama.cpp's gguf-split naming, <prefix>-0000k-of-0000N.gguf): opened from the first file, the
// others found beside it, their tensors joined to the first file's table with their own data; and every way a split
// can be wrong gives an error naming the file and what is wrong (a later file opened first, a first file not named as
// a split, a missing file, a file of another split, a tensor in two files, a wrong split.tensors.count).
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "harness.h"

using namespace spindle;
using gguf_test::tensor_spec;

namespace {

namespace fs = std::filesystem;

// A directory of its own under the temp directory, removed with the object.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("spindle_split_test_" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// File `no` of a split into `count`: general.architecture in the first only (as gguf-split writes metadata),
// split.no / split.count in each (u16, as llama.cpp writes them), split.tensors.count (i32) in the first.
gguf_test::built_file split_file(uint16_t no, uint16_t count, int32_t tensors_count, const std::vector<tensor_spec>& tensors) {
  const uint64_t n_kv = no == 0 ? 4 : 2;
  return gguf_test::build_file(3, n_kv, [&](gguf_test::writer& w) {
    if (no == 0) w.kv_str("general.architecture", "llama");
    w.kv<uint16_t>("split.no", gguf_value_type::UINT16, no);
    w.kv<uint16_t>("split.count", gguf_value_type::UINT16, count);
    if (no == 0) w.kv<int32_t>("split.tensors.count", gguf_value_type::INT32, tensors_count);
  }, tensors);
}

void write(const fs::path& p, const gguf_test::built_file& f) {
  FILE* out = std::fopen(p.string().c_str(), "wb");
  std::fwrite(f.bytes.data(), 1, f.bytes.size(), out);
  std::fclose(out);
}

const std::vector<std::vector<tensor_spec>> k_parts = {
    {{"a", {8, 2}, ggml_type::F32}, {"b", {16}, ggml_type::F16}},
    {{"c", {32, 3}, ggml_type::Q8_0}},
    {{"d", {4}, ggml_type::F32}},
};

// Writes the three files of k_parts as <dir>/m-0000k-of-00003.gguf (file `broken_no` with split.no `wrong_no`).
void write_split(const fs::path& dir, int32_t tensors_count = 4, int broken_no = -1, uint16_t wrong_no = 0) {
  for (uint16_t k = 0; k < 3; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "m-%05d-of-00003.gguf", k + 1);
    write(dir / name, split_file(k == broken_no ? wrong_no : k, 3, tensors_count, k_parts[k]));
  }
}

}  // namespace

TEST_CASE("gguf split: opened from the first file, every file's tensors are in the table with their own data") {
  temp_dir d;
  write_split(d.path);
  auto f = gguf_file::open((d.path / "m-00001-of-00003.gguf").string());
  CHECK_EQ(f->n_files(), 3u);
  CHECK_EQ(f->tensors().size(), 4u);
  CHECK_EQ(f->get_string("general.architecture"), "llama");  // the first file's metadata
  bool data_ok = true;
  for (size_t part = 0; part < k_parts.size(); ++part) {
    for (size_t i = 0; i < k_parts[part].size(); ++i) {
      const gguf_tensor* t = f->find_tensor(k_parts[part][i].name);
      REQUIRE(t != nullptr);
      CHECK_EQ(t->n_bytes, gguf_test::tensor_bytes(k_parts[part][i]));
      // each file's tensor i holds pattern_byte(i, k): the data is its own file's
      for (uint64_t k = 0; k < t->n_bytes; ++k) data_ok = data_ok && t->data[k] == gguf_test::pattern_byte(i, k);
    }
  }
  CHECK(data_ok);
  // a file that is not split opens as before
  write(d.path / "whole.gguf", split_file(0, 1, 2, k_parts[0]));
  CHECK_EQ(gguf_file::open((d.path / "whole.gguf").string())->n_files(), 1u);
}

TEST_CASE("gguf split: a later file, a first file not named as a split, a missing or foreign file are errors naming them") {
  temp_dir d;
  write_split(d.path);
  const std::string first = (d.path / "m-00001-of-00003.gguf").string();
  CHECK_THROWS_WITH(gguf_file::open((d.path / "m-00002-of-00003.gguf").string()),
                    "this is file 2 of a model split into 3 files: load the first one, " + first);
  fs::copy_file(first, d.path / "renamed.gguf");
  CHECK_THROWS_WITH(gguf_file::open((d.path / "renamed.gguf").string()),
                    "must be named <name>-00001-of-00003.gguf (llama.cpp's split naming)");
  fs::remove(d.path / "m-00003-of-00003.gguf");
  CHECK_THROWS_WITH(gguf_file::open(first), "m-00003-of-00003.gguf: cannot open");
  write_split(d.path, 4, 2, 1);  // the third file says it is the second
  CHECK_THROWS_WITH(gguf_file::open(first), "m-00003-of-00003.gguf: split.no / split.count say 2 of 3, where this name says 3 of 3");
}

TEST_CASE("gguf split: a tensor in two files and a wrong split.tensors.count are errors") {
  temp_dir d;
  write_split(d.path, 5);
  CHECK_THROWS_WITH(gguf_file::open((d.path / "m-00001-of-00003.gguf").string()),
                    "split.tensors.count is 5 but the 3 files hold 4 tensors");
  write_split(d.path);
  write(d.path / "m-00003-of-00003.gguf", split_file(2, 3, 0, {{"a", {8, 2}, ggml_type::F32}}));
  CHECK_THROWS_WITH(gguf_file::open((d.path / "m-00001-of-00003.gguf").string()),
                    "tensor 'a' is in more than one file of the split model");
}
