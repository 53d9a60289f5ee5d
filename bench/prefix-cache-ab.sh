#!/usr/bin/env bash
# A/B of the shared-prefix workload: spindle serve with the prefix cache on, then off, on one model, 2 threads,
# port 18123; `spindle bench serve` sends 6 prompts (after 1 warm-up) that share a 1000-token prefix, one at a
# time. Needs `npm run build:ts`. Prints the TTFT lines and the prefix-cache counters of /metrics.
#   bash bench/prefix-cache-ab.sh bench/.models/llama1b-q4_k_m-*.gguf
set -u
cli="$(dirname "$0")/../dist/cli/main.js"
M="${1:?usage: prefix-cache-ab.sh model.gguf}"
for mode in on off; do
  flag=""; [ $mode = off ] && flag="--no-enable-prefix-caching"
  node "$cli" serve "$M" --port 18123 --threads 2 --max-model-len 2048 $flag > /tmp/serve-$mode.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do curl -sf http://127.0.0.1:18123/health > /dev/null && break; sleep 1; done
  node "$cli" bench serve --port 18123 --random-prefix-len 1000 --random-input-len 24 \
    --random-output-len 16 --ignore-eos --num-prompts 6 --max-concurrency 1 --warmup-requests 1 --temperature 0 \
    --output-json /tmp/prefix-$mode.json 2>&1 | grep -iE "TTFT|throughput|Successful" | head -8
  curl -s http://127.0.0.1:18123/metrics | grep prefix_cache | grep -v "^#"
  kill $pid; wait $pid 2>/dev/null
done
