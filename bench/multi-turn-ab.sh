#!/usr/bin/env bash
# Issue 17's chat workload, A/B: spindle serve with the prefix cache on, then off (2 threads, port 18124), and
# `spindle bench serve --dataset-name multi-turn`: 4 conversations x 4 turns sharing a 1000-token system prompt
# (32-token user messages, 16-token answers), all conversations at once. Needs `npm run build:ts`.
#   bash bench/multi-turn-ab.sh bench/.models/llama1b-q4_k_m-*.gguf
set -u
M="${1:?usage: multi-turn-ab.sh model.gguf}"
cli="$(dirname "$0")/../dist/cli/main.js"
for mode in on off; do
  flag=""; [ $mode = off ] && flag="--no-enable-prefix-caching"
  node "$cli" serve "$M" --port 18124 --threads 2 --max-model-len 2048 $flag > /tmp/serve-mt-$mode.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do curl -sf http://127.0.0.1:18124/health > /dev/null && break; sleep 1; done
  echo "== cache $mode"
  node "$cli" bench serve --port 18124 --backend openai-chat --dataset-name multi-turn --multi-turn-conversations 4 \
    --multi-turn-turns 4 --multi-turn-system-len 1000 --multi-turn-user-len 32 --random-output-len 16 --ignore-eos \
    --temperature 0 --output-json /tmp/mt-$mode.json 2>&1 | grep -iE "TTFT|throughput|Successful|duration" | head -14
  curl -s http://127.0.0.1:18124/metrics | grep prefix_cache | grep -v "^#"
  kill $pid; wait $pid 2>/dev/null
done
