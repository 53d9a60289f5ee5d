// Robustness of the GGUF reader (docs/reliability.md items 3 and 5): a valid file truncated at every byte, 2,000
// random single-byte mutations (and 500 extreme 8-byte values) in its header/metadata/tensor-info region,
// open() on bad paths, and the parse time of a 150k-token vocabulary. Every failure must be a spindle::error,
// never a crash.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf_test_writer.h"
#include "harness.h"

using namespace spindle;
using gguf_test::tensor_spec;
using vt = spindle::gguf_value_type;

namespace {

// A small valid file with strings, arrays of every kind and tensors of block types.
gguf_test::built_file small_file() {
  return gguf_test::build_file(
      3, 7,
      [](gguf_test::writer& w) {
        w.kv_str("general.architecture", "llama");
        w.kv<uint32_t>("general.alignment", vt::UINT32, 32);
        w.kv<uint32_t>("llama.block_count", vt::UINT32, 1);
        w.kv<float>("llama.rope.freq_base", vt::FLOAT32, 10000.0f);
        w.arr_str("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
        w.arr_of<float>("tokenizer.ggml.scores", vt::FLOAT32, {0.0f, -1.0f, -2.0f});
        w.arr_of<int32_t>("tokenizer.ggml.token_type", vt::INT32, {3, 1, 1});
      },
      {{"token_embd.weight", {32, 3}, ggml_type::Q8_0},
       {"output_norm.weight", {32}, ggml_type::F32},
       {"blk.0.attn_q.weight", {256, 2}, ggml_type::Q4_K}});
}

enum class outcome { parsed, error, other };

// Parses an exact-size heap copy of bytes[0, n) (so ASan sees any over-read); on success checks that every
// tensor lies inside the image.
outcome parse_copy(const uint8_t* bytes, size_t n, std::string* message) {
  std::unique_ptr<uint8_t[]> exact(new uint8_t[n]);
  if (n) std::memcpy(exact.get(), bytes, n);
  try {
    auto f = gguf_file::from_memory(exact.get(), n, "t.gguf");
    for (const gguf_tensor& t : f->tensors()) {
      if (t.data < exact.get() || t.data + t.n_bytes > exact.get() + n) return outcome::other;
    }
    return outcome::parsed;
  } catch (const spindle::error& e) {
    if (message) *message = e.what();
    return outcome::error;
  } catch (...) {
    return outcome::other;
  }
}

std::string temp_dir() {
  char tmpl[] = "/tmp/spindle-gguf-test-XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

std::string open_error(const std::string& path) {
  try {
    gguf_file::open(path);
  } catch (const spindle::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("gguf robust: truncation at every byte throws, never crashes") {
  const auto b = small_file();
  REQUIRE(parse_copy(b.bytes.data(), b.bytes.size(), nullptr) == outcome::parsed);
  int bad = 0;
  for (size_t n = 0; n < b.bytes.size(); ++n) {
    std::string m;
    const outcome o = parse_copy(b.bytes.data(), n, &m);
    if (o != outcome::error || m.rfind("t.gguf: ", 0) != 0) {
      if (bad++ < 5) harness::fail(__FILE__, __LINE__, "length " + std::to_string(n) + ": did not throw spindle::error");
    }
  }
  CHECK_EQ(bad, 0);
  CHECK(b.info_end > 200);  // the region covered includes real metadata, not just the header
}

TEST_CASE("gguf robust: 2000 single-byte mutations of the header/tensor-info region parse or throw") {
  const auto b = small_file();
  std::mt19937_64 rng(20240917);
  int parsed = 0, errors = 0, other = 0;
  std::vector<uint8_t> img = b.bytes;
  for (int iter = 0; iter < 2000; ++iter) {
    const size_t pos = static_cast<size_t>(rng() % b.data_offset);
    const uint8_t old = img[pos];
    img[pos] = static_cast<uint8_t>(rng() % 256);
    switch (parse_copy(img.data(), img.size(), nullptr)) {
      case outcome::parsed: ++parsed; break;
      case outcome::error: ++errors; break;
      case outcome::other: ++other; break;
    }
    img[pos] = old;
  }
  std::printf("  mutations: %d parsed, %d rejected\n", parsed, errors);
  CHECK_EQ(other, 0);
  CHECK(parsed > 0);
  CHECK(errors > 0);
}

TEST_CASE("gguf robust: 500 extreme 8-byte values written over the header/tensor-info region parse or throw") {
  const auto b = small_file();
  const uint64_t extremes[] = {0, 1, 31, 32, 33, UINT32_MAX, 1ull << 32, INT64_MAX, 1ull << 63, UINT64_MAX - 7,
                               UINT64_MAX};
  std::mt19937_64 rng(7);
  int other = 0;
  std::vector<uint8_t> img = b.bytes;
  for (int iter = 0; iter < 500; ++iter) {
    const size_t pos = static_cast<size_t>(rng() % (b.data_offset - 8));
    const uint64_t v = extremes[rng() % (sizeof(extremes) / sizeof(extremes[0]))];
    std::memcpy(img.data() + pos, &v, 8);
    if (parse_copy(img.data(), img.size(), nullptr) == outcome::other) ++other;
    std::memcpy(img.data() + pos, b.bytes.data() + pos, 8);
  }
  CHECK_EQ(other, 0);
}

TEST_CASE("gguf robust: open() reports missing path, directory, empty file, non-regular file") {
  const std::string dir = temp_dir();
  const std::string missing = dir + "/missing.gguf";
  std::string m = open_error(missing);
  CHECK(m.rfind(missing + ": cannot open: ", 0) == 0);
  CHECK(m.find("No such file or directory") != std::string::npos);
  m = open_error(dir);
  CHECK_EQ(m, dir + ": is a directory, not a GGUF file");
  const std::string empty = dir + "/empty.gguf";
  write_file(empty, {});
  CHECK_EQ(open_error(empty), empty + ": the file is empty (0 bytes)");
  CHECK_EQ(open_error("/dev/null"), std::string("/dev/null: is not a regular file"));
  const std::string junk = dir + "/junk.gguf";
  write_file(junk, std::vector<uint8_t>(100, 'x'));
  CHECK(open_error(junk).rfind(junk + ": bad magic 'xxxx'", 0) == 0);
  // a FIFO with no writer: refused at once (a blocking open would wait for a writer forever)
  const std::string fifo = dir + "/fifo.gguf";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_EQ(open_error(fifo), fifo + ": is not a regular file");
  std::remove(fifo.c_str());
  std::remove(empty.c_str());
  std::remove(junk.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("gguf robust: open() maps a valid file and a truncated one fails naming the path") {
  const auto b = small_file();
  const std::string dir = temp_dir();
  const std::string path = dir + "/model.gguf";
  write_file(path, b.bytes);
  {
    auto f = gguf_file::open(path);
    CHECK_EQ(f->path(), path);
    CHECK_EQ(f->file_size(), uint64_t(b.bytes.size()));
    CHECK_EQ(f->get_string("general.architecture"), std::string("llama"));
    const gguf_tensor* t = f->find_tensor("blk.0.attn_q.weight");
    REQUIRE(t != nullptr);
    CHECK_EQ(t->n_bytes, uint64_t(288));
    bool same = t->n_bytes == b.sizes[2];
    for (uint64_t k = 0; same && k < t->n_bytes; ++k) same = t->data[k] == gguf_test::pattern_byte(2, k);
    CHECK(same);
  }
  const std::string cut = dir + "/cut.gguf";
  write_file(cut, std::vector<uint8_t>(b.bytes.begin(), b.bytes.end() - 1));
  const std::string m = open_error(cut);
  CHECK(m.rfind(cut + ": tensor 'blk.0.attn_q.weight': ", 0) == 0);
  CHECK(m.find("the file is truncated") != std::string::npos);
  std::remove(path.c_str());
  std::remove(cut.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("gguf robust: a 150k-token vocabulary parses fast") {
  const size_t n_vocab = 150000;
  std::vector<std::string> tokens;
  tokens.reserve(n_vocab);
  for (size_t k = 0; k < n_vocab; ++k) tokens.push_back("\xc4\xa0tok" + std::to_string(k));
  std::vector<float> scores(n_vocab, -1.0f);
  std::vector<int32_t> types(n_vocab, 1);
  std::vector<std::string> merges(n_vocab, "\xc4\xa0 t");
  const auto b = gguf_test::build_file(
      3, 4,
      [&](gguf_test::writer& w) {
        w.arr_str("tokenizer.ggml.tokens", tokens);
        w.arr_of<float>("tokenizer.ggml.scores", vt::FLOAT32, scores);
        w.arr_of<int32_t>("tokenizer.ggml.token_type", vt::INT32, types);
        w.arr_str("tokenizer.ggml.merges", merges);
      },
      {{"token_embd.weight", {32, 4}, ggml_type::F32}});
  const auto t0 = std::chrono::steady_clock::now();
  auto f = gguf_file::from_memory(b.bytes.data(), b.bytes.size(), "vocab.gguf");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  150k-token vocab (%zu bytes): parsed in %.1f ms\n", b.bytes.size(), ms);
  REQUIRE(f->find("tokenizer.ggml.tokens") != nullptr);
  CHECK_EQ(f->find("tokenizer.ggml.tokens")->strings.size(), n_vocab);
  CHECK_EQ(f->find("tokenizer.ggml.tokens")->strings[149999], std::string("\xc4\xa0tok149999"));
  CHECK_EQ(f->find("tokenizer.ggml.merges")->array_size(), uint64_t(n_vocab));
#if defined(__SANITIZE_ADDRESS__)
  CHECK(ms < 1000.0);  // instrumented build: only a sanity bound
#else
  CHECK(ms < 100.0);
#endif
}
