# shellcheck shell=bash
# Sourced by session-run.sh and serve-run.sh on the GPU machine: unpacks llama.cpp's CUDA libraries in DIR (the
# build ships them xz-compressed: bench/gpu/build-llama-cuda.sh) and exports what its binaries need to run there.
# cuBLAS and the CUDA runtime come from the machine's CUDA install (the build linked a stand-in: preload the real
# ones).   llama_cuda_env DIR [LOG]   (LOG: where the libraries found are noted; default stdout)
llama_cuda_env() {
  local dir="$1" log="${2:-/dev/stdout}" f
  for f in "$dir"/*.xz; do [ -f "$f" ] && xz -dkf "$f"; done
  local cublas cublaslt cudart
  cublas="$(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | head -1)"
  cublaslt="$(find /usr /opt -name 'libcublasLt.so.13' 2>/dev/null | head -1)"
  cudart="$(find /usr /opt -name 'libcudart.so.13' 2>/dev/null | head -1)"
  echo "cublas: $cublas $cublaslt, cudart: $cudart" | tee -a "$log"
  local paths
  paths="$(dirname "$cudart"):$(dirname "$cublas"):$(cd "$dir" && pwd)"
  export LD_LIBRARY_PATH="$paths:${LD_LIBRARY_PATH:-}"
  export LD_PRELOAD="$cublaslt:$cublas"
}
