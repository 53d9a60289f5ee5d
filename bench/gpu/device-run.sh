#!/usr/bin/env bash
# The GPU session's one command, for the lent GPU machine (no Node.js, no network there): the GPU test suite,
# device bandwidth, Spindle's forward-pass benchmark on the benchmark shapes, then llama.cpp CUDA built there
# from node-llama-cpp's bundled source and run on the same GGUF files (same GPU, same session).
#
# Here (the CPU machine), from the repository root:
#   cmake -S . -B build-gpu -DSPINDLE_BUILD_TESTS=ON -DSPINDLE_CUDA_ARCHITECTURES=90 && cmake --build build-gpu -j2
#   mkdir -p .gpu && echo /.gpu/ >> .git/info/exclude
#   cp build-gpu/spindle_{gpu_tests,cuda_membw,gen_bench_model,decode_bench,op_bench} .gpu/
#   bash bench/gpu/build-llama-cuda.sh .gpu/llama    # optional: llama.cpp CUDA built here for the comparison
# Then with the device tool: run `bash bench/gpu/device-run.sh .gpu` carrying [".gpu"]; logs go to $OUT.
# Status: the Spindle part ran on an H100 on 2026-11-25 (BENCHMARKS.md); the llama.cpp part has not run yet.
set -uo pipefail
bin="${1:-.gpu}"
out="${OUT:-/tmp/spindle-gpu-out}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$bin/spindle_gpu_tests" 2>&1 | tee "$out/gpu_tests.log" | grep -v '^ok '
"$bin/spindle_cuda_membw" | tee "$out/membw.log"
"$bin/spindle_op_bench" cuda 200 2>&1 | tee "$out/op_bench.log"
for shape in llama1b-q4_k_m lfm2-1.2b-q4_k_m; do
  "$bin/spindle_gen_bench_model" "$shape" "/tmp/$shape.gguf" | tee -a "$out/bench.log"
  "$bin/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  SPINDLE_CUDA_GRAPHS=0 "$bin/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
done
# llama.cpp CUDA, built on the CPU machine by bench/gpu/build-llama-cuda.sh (cuBLAS comes from the GPU machine's
# CUDA install at run time).
if [ -x "$bin/llama/llama-bench" ]; then
  cublas="$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)"
  export LD_LIBRARY_PATH="$(dirname "$cublas"):$bin/llama:${LD_LIBRARY_PATH:-}"
  for shape in llama1b-q4_k_m lfm2-1.2b-q4_k_m; do
    "$bin/llama/llama-bench" -m "/tmp/$shape.gguf" -p 1024 -n 128 -ngl 99 -fa 1 2>&1 | tee -a "$out/llama.log"
    "$bin/llama/llama-batched-bench" -m "/tmp/$shape.gguf" -c 20480 -b 2048 -ub 512 -npp 1024 -ntg 128 \
      -npl 1,64 -ngl 99 -fa on 2>&1 | tail -5 | tee -a "$out/llama.log"
  done
fi
