#!/usr/bin/env bash
# Builds llama.cpp's CUDA benchmarks (llama-bench, llama-batched-bench) from the source node-llama-cpp bundles,
# on the CPU machine, for the GPU session's comparison (bench/gpu/session-run.sh runs them on the GPU machine).
#   bash bench/gpu/build-llama-cuda.sh OUT_DIR [CUDA_ARCH=90-real]      (LLAMA_SERVER_TOO=ON: llama-server too)
# The CPU machines have nvcc and the CUDA runtime but no cuBLAS. ggml-cuda needs cuBLAS's headers to compile and
# links against libcublas.so.13: point CUBLAS_INCLUDE at a folder holding cublas_v2.h / cublas_api.h of CUDA 13
# (the GPU machine's toolkit has them); the link uses an empty stand-in library carrying the soname
# libcublas.so.13, and the GPU machine's real library is preloaded at run time (session-run.sh).
# Takes about 30 minutes on 2 cores; the result (about 22 MB) travels to the GPU machine in .gpu/llama.
set -euo pipefail
out="${1:?usage: build-llama-cuda.sh OUT_DIR [CUDA_ARCH]}"
arch="${2:-90-real}"
server="${LLAMA_SERVER_TOO:-OFF}"  # ON: llama-server as well (bench/gpu/serve-run.sh), about 10 more minutes
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${LLAMA_CUDA_WORK:-/tmp/llama-cuda-work}"
cublas_include="${CUBLAS_INCLUDE:-/usr/local/cuda/include}"
[ -f "$cublas_include/cublas_v2.h" ] || { echo "no cublas_v2.h in $cublas_include (set CUBLAS_INCLUDE)"; exit 1; }
mkdir -p "$work" "$out"
[ -d "$work/src" ] || git clone -q "$root/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$work/src"
mkdir -p "$work/stub"
echo 'void spindle_cublas_stand_in(void) {}' > "$work/stub/s.c"
gcc -shared -fPIC -Wl,-soname,libcublas.so.13 -o "$work/stub/libcublas.so" "$work/stub/s.c"
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DGGML_CUDA_NO_VMM=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER="$server" \
  -DCMAKE_INSTALL_RPATH='$ORIGIN' -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
  -DCUDA_cublas_LIBRARY="$work/stub/libcublas.so" -DCMAKE_CUDA_FLAGS="-I$cublas_include" \
  -DCMAKE_CXX_FLAGS="-I$cublas_include" -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
targets="llama-bench llama-batched-bench"
[ "$server" = ON ] && targets="$targets llama-server"
cmake --build "$work/build" --target $targets
for t in $targets; do cp "$work/build/bin/$t" "$out/"; done
# each library once, as a plain file under its soname (the device tool does not carry symbolic links)
for lib in "$work"/build/bin/lib*.so; do
  soname="$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
  cp -L "$lib" "$out/${soname:-$(basename "$lib")}"
done
strip --strip-unneeded "$out"/*.so* 2>/dev/null || true
# every library xz-compressed (libggml-cuda about 19 MB of the whole): session-run.sh / serve-run.sh unpack them on
# the GPU machine
for f in "$out"/lib*; do case "$f" in *.xz) ;; *) xz -T0 -f "$f" ;; esac; done
du -sh "$out"
