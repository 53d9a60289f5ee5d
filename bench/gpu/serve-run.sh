#!/usr/bin/env bash
# The issue-19 serving workload through the HTTP servers on the lent GPU machine: random prompts of 1024 tokens,
# 128 output tokens, greedy with --ignore-eos, at concurrency 1 and 64, `spindle serve --device cuda` against
# llama.cpp's CUDA llama-server (when .gpu/llama has one: LLAMA_SERVER_TOO=ON bash bench/gpu/build-llama-cuda.sh),
# each measured by `spindle bench serve --backend openai --random-token-ids 32000` (completions of prompts of
# exactly 1024 random token ids, as `vllm bench serve` samples its random dataset; the benchmark models have no
# chat template, and their vocabularies do not make one word one token) through bench/serve-compare.sh. Run from the
# repository root with the packed runtime (bench/gpu/pack-serve.sh .gpu/serve) and spindle_gen_bench_model in .gpu:
#   bash bench/gpu/serve-run.sh [.gpu/serve] [model shape, default llama1b-q4_k_m]      (logs and JSON to $OUT)
# SR_C1_PROMPTS / SR_C64_PROMPTS: requests per run (16 / 256); SR_CONCURRENCY: which runs ("1 64"); SR_CPU=1: the
# same on the CPU with small sizes (a check of the packing on a machine without a GPU).
set -uo pipefail
pk="${1:-.gpu/serve}"
shape="${2:-llama1b-q4_k_m}"
out="${OUT:-/tmp/serve-run}"
mkdir -p "$out" /tmp/serve-node
# node printed "pthread_create: Invalid argument" on the lent machine (its stack limit); an 8 MiB one, as usual
ulimit -s 8192 2>/dev/null || true
xz -dc "$pk/node.xz" > /tmp/serve-node/node && chmod +x /tmp/serve-node/node
export PATH="/tmp/serve-node:$PATH"
xz -dc "$pk/runtime.tar.xz" | tar -xf - -C .  # dist/, node_modules/, build/Release/spindle.node
gen=.gpu/spindle_gen_bench_model
[ -x "$gen" ] || { [ -f "$gen.xz" ] && xz -dkf "$gen.xz" && chmod +x "$gen"; }
model="/tmp/$shape.gguf"
[ -f "$model" ] || "$gen" "$shape" "$model" > /dev/null
engines=spindle
device=cuda
if [ "${SR_CPU:-0}" = 1 ]; then
  device=cpu
  export SC_A_IN=64 SC_A_OUT=8
  c1=2 c64=4
else
  export SC_A_IN=1024 SC_A_OUT=128
  c1="${SR_C1_PROMPTS:-16}" c64="${SR_C64_PROMPTS:-256}"
  if [ -x .gpu/llama/llama-server ]; then
    . "$(dirname "$0")/llama-env.sh"
    llama_cuda_env .gpu/llama "$out/llama-env.txt"
    export LLAMA_SERVER="$PWD/.gpu/llama/llama-server"
    engines=spindle,llama
  fi
fi
for conc in ${SR_CONCURRENCY:-1 64}; do
  n=$c1; [ "$conc" = 64 ] && n=$c64
  SC_OUT="$out/c$conc" SC_WORKLOADS=a SC_ENGINES="$engines" SC_A_CONC="$conc" SC_A_PROMPTS="$n" SC_SLOTS="$conc" \
    SC_BACKEND=openai SC_BENCH_ARGS="--random-token-ids ${SR_TOKEN_IDS:-32000}" SC_SPINDLE_ARGS="--device $device" SC_LLAMA_ARGS="-ngl 99 -fa on" bash bench/serve-compare.sh "$model" 2>&1 |
    tail -25 | tee "$out/c$conc.txt"
done
