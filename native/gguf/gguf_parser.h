// The GGUF parser (internal to the reader): fills a gguf_file from the image at f.base_ / f.size_.
// Invariant: parse() either leaves f fully validated (see gguf_file.h) or throws spindle::error whose message
// starts with "<f.path()>: ".
#pragma once

#include "gguf/gguf_file.h"

namespace spindle {

struct gguf_parser {
  static void parse(gguf_file& f);
};

}  // namespace spindle
