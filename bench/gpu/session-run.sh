#!/usr/bin/env bash
# One GPU session's checks in one command, for the lent GPU machine (no Node.js, no network there): the GPU
# suite, the op timings, Spindle's forward-pass benchmark on the two benchmark shapes (and the step-graph / PDL
# A/B, the small MoEs with grouped and per-expert experts, a 16-bit KV cache), an Nsight Compute profile of decode
# steps, and llama.cpp CUDA on the same files in the same run.
# Here (the CPU machine), from the repository root:
#   cmake -S . -B /tmp/bc -G Ninja -DSPINDLE_BUILD_TESTS=ON -DSPINDLE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/bc
#   mkdir -p .gpu && echo /.gpu/ >> .git/info/exclude
#   for b in spindle_{gpu_tests,cuda_membw,gen_bench_model,decode_bench,op_bench}; do xz -9 -c /tmp/bc/$b > .gpu/$b.xz; done
#   bash bench/gpu/build-llama-cuda.sh .gpu/llama      # optional, ~30 min: the llama.cpp comparison
# Optional: .gpu/old/spindle_decode_bench(.xz) of an earlier commit (its figures beside the new ones, same run);
# .gpu/serve (bench/gpu/pack-serve.sh): the serving workload against llama-server (serve-run.sh).
# Then with the device tool: `bash bench/gpu/session-run.sh .gpu` carrying [".gpu"] (2-5 minutes plus the
# machine's start; the carry holds 64 MiB with the repository); logs go to $OUT. Results of past sessions:
# bench/gpu/results/. QUICK=1: the suite, the two models' benchmarks, llama.cpp and the serving run only (no op
# timings, A/B runs or profiles).
set -uo pipefail
bin="${1:-.gpu}"
out="${OUT:-/tmp/spindle-gpu-out}"
mkdir -p "$out"
for f in "$bin"/spindle_*.xz "$bin"/old/spindle_*.xz; do [ -f "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
"$bin/spindle_gpu_tests" 2>&1 | tee "$out/gpu_tests.log" | grep -v "^ok \|^  matmul \|^  llama \|^  qwen\|^  lfm2  \|step graphs: 0" | tail -40
quick="${QUICK:-0}"
# (the op timings only when packed: with the serving runtime and llama.cpp the carry has no room for them)
if [ "$quick" != 1 ] && [ -x "$bin/spindle_op_bench" ]; then
  "$bin/spindle_op_bench" cuda 200 2>&1 | tee "$out/op_bench.log" | grep -v "^  q8_0\|^  q4_0\|^  f16"
fi
for shape in llama1b-q4_k_m lfm2-1.2b-q4_k_m llama1b-q5_k_m; do
  "$bin/spindle_gen_bench_model" "$shape" "/tmp/$shape.gguf" > /dev/null
  echo "== $shape" | tee -a "$out/bench.log"
  # the first shape also decodes 64 sequences after 1024-token prompts (the c64 serving workload's steps)
  ctx_batch=0; [ "$shape" = llama1b-q4_k_m ] && ctx_batch=1
  SPINDLE_BENCH_CONTEXT_BATCH=$ctx_batch "$bin/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  if [ -x "$bin/old/spindle_decode_bench" ]; then
    echo "== $shape, $bin/old" | tee -a "$out/bench.log"
    "$bin/old/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  fi
done
if [ "$quick" != 1 ]; then
  echo "== llama1b-q4_k_m, the one-lane-per-row k-quant matvec (SPINDLE_CUDA_MMV=x32)" | tee -a "$out/bench.log"
  SPINDLE_CUDA_MMV=x32 "$bin/spindle_decode_bench" /tmp/llama1b-q4_k_m.gguf 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  echo "== llama1b-q4_k_m, programmatic dependent launches off / step graphs off" | tee -a "$out/bench.log"
  SPINDLE_CUDA_PDL=0 "$bin/spindle_decode_bench" /tmp/llama1b-q4_k_m.gguf 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  SPINDLE_CUDA_GRAPHS=0 "$bin/spindle_decode_bench" /tmp/llama1b-q4_k_m.gguf 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  # MoE: the grouped path (routing on the GPU, grouped expert launches, decode steps as step graphs) and the
  # per-expert one; softmax routing (qwen3moe) and sigmoid routing with a selection bias (lfm2moe)
  for shape in qwen3moe-small-q4_k_m lfm2moe-small-q4_k_m; do
    "$bin/spindle_gen_bench_model" "$shape" "/tmp/$shape.gguf" | tee -a "$out/bench.log"
    echo "== $shape (grouped experts)" | tee -a "$out/bench.log"
    "$bin/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
    echo "== $shape (SPINDLE_CUDA_MOE=per-expert)" | tee -a "$out/bench.log"
    SPINDLE_CUDA_MOE=per-expert "$bin/spindle_decode_bench" "/tmp/$shape.gguf" 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  done
  echo "== llama1b-q4_k_m, a 16-bit KV cache (SPINDLE_BENCH_KV=f16: --dtype float16)" | tee -a "$out/bench.log"
  SPINDLE_BENCH_KV=f16 "$bin/spindle_decode_bench" /tmp/llama1b-q4_k_m.gguf 1024 128 2 64 3 cuda 2>&1 | tee -a "$out/bench.log"
  echo "== kernels of llama1b-q4_k_m decode steps (ncu)" | tee -a "$out/bench.log"
  bash "$(dirname "$0")/profile-decode.sh" "$bin" /tmp/llama1b-q4_k_m.gguf "$out" 2>&1 | tee -a "$out/bench.log"
  echo "== kernels of a llama1b-q4_k_m 1024-token prompt (ncu)" | tee -a "$out/bench.log"
  bash "$(dirname "$0")/profile-decode.sh" "$bin" /tmp/llama1b-q4_k_m.gguf "$out" prefill 2>&1 | tee -a "$out/bench.log"
  echo "== kernels of llama1b-q4_k_m steps of 64 sequences (ncu)" | tee -a "$out/bench.log"
  bash "$(dirname "$0")/profile-decode.sh" "$bin" /tmp/llama1b-q4_k_m.gguf "$out" batch 2>&1 | tee -a "$out/bench.log"
fi
if [ -x "$bin/llama/llama-bench" ]; then
  # the libraries travel xz-compressed (the lent machine takes 64 MiB with the repository)
  . "$(dirname "$0")/llama-env.sh"
  llama_cuda_env "$bin/llama" "$out/llama.log"
  for shape in llama1b-q4_k_m lfm2-1.2b-q4_k_m llama1b-q5_k_m qwen3moe-small-q4_k_m lfm2moe-small-q4_k_m; do
    [ -f "/tmp/$shape.gguf" ] || continue
    echo "== $shape" | tee -a "$out/llama.log"
    timeout 100 "$bin/llama/llama-bench" -m "/tmp/$shape.gguf" -p 1024 -n 128 -ngl 99 -fa 1 -r 3 2>&1 | grep -v "^ggml_cuda_init\|^  Device" | tee -a "$out/llama.log"
    # decode_bench's batch figure: 64 sequences of 8 prompt tokens, 128 generated each
    timeout 100 "$bin/llama/llama-batched-bench" -m "/tmp/$shape.gguf" -c 9000 -b 2048 -ub 512 -npp 8 -ntg 128 \
      -npl 1,64 -ngl 99 -fa on 2>&1 | grep "^|" | tee -a "$out/llama.log"
  done
fi
if [ -f "$bin/serve/node.xz" ]; then
  unset LD_PRELOAD  # node does not need llama.cpp's preloaded cuBLAS (serve-run sets what llama-server needs)
  echo "== serving workload, llama1b-q4_k_m (spindle serve vs llama-server)" | tee -a "$out/bench.log"
  OUT="$out/serve" bash "$(dirname "$0")/serve-run.sh" "$bin/serve" llama1b-q4_k_m > "$out/serve.txt" 2>&1
  grep -A4 "^engine" "$out/serve.txt" | tee -a "$out/bench.log"
fi
