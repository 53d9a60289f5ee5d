#!/usr/bin/env bash
# Builds llama.cpp's own OpenAI-compatible server, `llama-server`, CPU only, from the llama.cpp source that the
# devDependency node-llama-cpp carries as a git bundle (node_modules/node-llama-cpp/llama/gitRelease.bundle), for
# bench/serve-compare.sh. Everything lives outside the repository (never commit the binary):
#   ${SPINDLE_BENCH_BUILD:-$HOME/.cache/spindle-bench}/llama-src           the clone
#   ${SPINDLE_BENCH_BUILD:-$HOME/.cache/spindle-bench}/llama-server-build  the build; bin/llama-server
# Release, GGML_NATIVE=ON (the build machine's CPU flags, as node-llama-cpp's prebuilt picks its CPU variant at run
# time), static libraries, no CURL / OpenSSL, no tests or examples, and no web UI: the bundle does not carry the
# UI's built assets (tools/ui/dist) and would otherwise try npm or a Hugging Face download at build time, so
# LLAMA_BUILD_UI=OFF and LLAMA_USE_PREBUILT_UI=OFF make scripts/ui-assets.cmake embed an empty asset table (the
# API routes are unaffected). Skips all work when the binary is already there; prints its path last.
#   bash bench/llama-server/build.sh            (JOBS=2 by default; about 15-25 minutes on 2 busy cores)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
base="${SPINDLE_BENCH_BUILD:-$HOME/.cache/spindle-bench}"
src="$base/llama-src"
build="$base/llama-server-build"
bin="$build/bin/llama-server"
bundle="$root/node_modules/node-llama-cpp/llama/gitRelease.bundle"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
[ -f "$bundle" ] || { echo "no $bundle: run npm install first" >&2; exit 1; }
mkdir -p "$base"
if [ ! -f "$src/CMakeLists.txt" ]; then
  rm -rf "$src"
  git clone -q "$bundle" "$src"
fi
echo "llama.cpp source: $(git -C "$src" rev-parse HEAD) (node-llama-cpp $(node -p "require('$root/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || echo '?'))" >&2
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF >&2
cmake --build "$build" --target llama-server -j "${JOBS:-2}" >&2
[ -x "$bin" ] || { echo "build finished but $bin is missing" >&2; exit 1; }
echo "$bin"
