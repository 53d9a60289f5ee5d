#!/usr/bin/env bash
# Issue 17's serving benchmarks, Spindle against llama.cpp's own server in the same invocation, on one model file.
# Each engine is started, waited for on /health, warmed up (a few tiny requests of another seed, not measured),
# run through its workloads back to back with `spindle bench serve` (same client, same --backend, same prompts,
# same output lengths, greedy, --ignore-eos), and stopped:
#   spindle          `spindle serve MODEL --threads 2 --max-model-len CTX` (prefix cache on, the default): a, b, c
#   spindle-nocache  the same with --no-enable-prefix-caching: b only
#   llama            `llama-server -m MODEL -t 2 -tb 2 -np 16 -c 16*CTX --cont-batching --jinja` (its defaults
#                    otherwise: slot prompt reuse, host prompt cache): a, b, c
# Workloads (each a separate --output-json in the output folder, NAME-ENGINE.json; seeds 1, 2, 3, so that no
# workload's prompts start like another's: the random dataset of one seed draws every prompt from one word stream):
#   a  16 concurrent streams: random prompts of SC_A_IN words (1 word = 1 token), SC_A_OUT output tokens,
#      SC_A_PROMPTS requests at --max-concurrency SC_A_CONC: total output tok/s and TPOT p50
#   b  multi-turn chat: SC_B_CONVS conversations x SC_B_TURNS turns sharing a SC_B_SYS-token system prompt,
#      SC_B_USER-token user messages, SC_B_OUT-token answers, all conversations at once: mean TTFT per turn
#   c  prefill-heavy: SC_C_PROMPTS prompts of SC_C_IN words at --max-concurrency SC_C_CONC, SC_C_OUT output
#      tokens: TTFT p50
# CTX (the context of one llama-server slot, and Spindle's --max-model-len) is SC_CTX, or by default the longest
# workload request (prompt + output) plus 25% and 128 tokens, rounded up to 256.
# Then prints the summary tables (bench/serve-compare-report.mjs OUT_DIR; add --markdown for Markdown).
#
#   bash bench/serve-compare.sh bench/.models/llama1b-q4_k_m-*.gguf
#   SC_WORKLOADS=b bash bench/serve-compare.sh bench/.models/lfm2-1.2b-q4_k_m-*.gguf
#   bash bench/serve-compare.sh --quick MODEL       (smoke sizes: a couple of minutes)
# Environment: SC_OUT (output folder; default /tmp/serve-compare-DATE), SC_WORKLOADS (a,b,c), SC_ENGINES
# (spindle,spindle-nocache,llama), SC_THREADS (2), SC_PORT / SC_LLAMA_PORT (18140 / 18141), SC_BACKEND
# (openai-chat), SC_SLOTS (llama-server -np, 16), SC_SPINDLE_ARGS / SC_LLAMA_ARGS (extra server flags),
# SC_BENCH_ARGS (extra `spindle bench serve` flags for every workload, e.g. --random-token-ids 32000),
# SC_KEEPALIVE=1 (let the client reuse connections; see bench/serve-compare-no-keepalive.mjs for why it does not),
# LLAMA_SERVER (the binary; default: bench/llama-server/build.sh, which builds it once), the SC_A_* / SC_B_* /
# SC_C_* sizes above. Needs `npm run build:ts` (dist/).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
cli="$root/dist/cli/main.js"
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
M="${1:?usage: serve-compare.sh [--quick] model.gguf}"
[ -f "$M" ] || { echo "no model file $M" >&2; exit 1; }
[ -f "$cli" ] || { echo "no $cli: run npm run build:ts" >&2; exit 1; }

if [ $quick = 1 ]; then
  : "${SC_A_PROMPTS:=16}" "${SC_A_OUT:=16}" "${SC_B_CONVS:=2}" "${SC_B_TURNS:=3}" "${SC_B_SYS:=200}" \
    "${SC_B_USER:=16}" "${SC_B_OUT:=8}" "${SC_C_PROMPTS:=4}" "${SC_C_CONC:=4}" "${SC_C_IN:=128}" "${SC_C_OUT:=4}"
fi
A_PROMPTS=${SC_A_PROMPTS:-64}; A_CONC=${SC_A_CONC:-16}; A_IN=${SC_A_IN:-32}; A_OUT=${SC_A_OUT:-64}
B_CONVS=${SC_B_CONVS:-8}; B_TURNS=${SC_B_TURNS:-6}; B_SYS=${SC_B_SYS:-1000}; B_USER=${SC_B_USER:-64}; B_OUT=${SC_B_OUT:-32}
C_PROMPTS=${SC_C_PROMPTS:-32}; C_CONC=${SC_C_CONC:-16}; C_IN=${SC_C_IN:-512}; C_OUT=${SC_C_OUT:-16}
WORKLOADS=${SC_WORKLOADS:-a,b,c}
ENGINES=${SC_ENGINES:-spindle,spindle-nocache,llama}
THREADS=${SC_THREADS:-2}
PORT=${SC_PORT:-18140}
LPORT=${SC_LLAMA_PORT:-18141}
BACKEND=${SC_BACKEND:-openai-chat}
SLOTS=${SC_SLOTS:-16}
OUT=${SC_OUT:-/tmp/serve-compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"

has() { case ",$1," in *",$2,"*) return 0 ;; *) return 1 ;; esac; }

if [ -z "${SC_CTX:-}" ]; then
  need=0
  has "$WORKLOADS" a && [ $((A_IN + A_OUT)) -gt $need ] && need=$((A_IN + A_OUT))
  has "$WORKLOADS" b && [ $((B_SYS + B_TURNS * (B_USER + B_OUT))) -gt $need ] && need=$((B_SYS + B_TURNS * (B_USER + B_OUT)))
  has "$WORKLOADS" c && [ $((C_IN + C_OUT)) -gt $need ] && need=$((C_IN + C_OUT))
  CTX=$(( ((need * 5 / 4 + 128) + 255) / 256 * 256 ))
else
  CTX=$SC_CTX
fi

if has "$ENGINES" llama; then
  LLAMA_SERVER=${LLAMA_SERVER:-$(bash "$here/llama-server/build.sh" | tail -1)}
  [ -x "$LLAMA_SERVER" ] || { echo "no llama-server binary ($LLAMA_SERVER)" >&2; exit 1; }
fi

# Spindle's addon: a copy of build/Release/spindle.node taken now (SPINDLE_NATIVE_PATH), so that a rebuild of the
# working tree during the run cannot change the engine between its servers
if has "$ENGINES" spindle || has "$ENGINES" spindle-nocache; then
  if [ -z "${SPINDLE_NATIVE_PATH:-}" ] && [ -f "$root/build/Release/spindle.node" ]; then
    cp "$root/build/Release/spindle.node" "$OUT/spindle.node"
    export SPINDLE_NATIVE_PATH="$OUT/spindle.node"
  fi
fi

# what the report prints as the run's header
{
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- native lib 2>/dev/null || echo " + uncommitted changes in $(git -C "$root" diff --name-only HEAD -- native lib | tr '\n' ' ')")"
  echo "model=$(basename "$M")"
  [ -n "${SPINDLE_NATIVE_PATH:-}" ] && echo "spindle_addon=$SPINDLE_NATIVE_PATH (copied from build/Release/spindle.node of $(date -u -r "$root/build/Release/spindle.node" +%H:%M:%SZ), sha256 $(sha256sum "$SPINDLE_NATIVE_PATH" | cut -c1-12))"
  echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
  echo "threads=$THREADS ctx_per_slot=$CTX slots=$SLOTS backend=$BACKEND"
  echo "a=prompts $A_PROMPTS conc $A_CONC in $A_IN out $A_OUT"
  echo "b=convs $B_CONVS turns $B_TURNS sys $B_SYS user $B_USER out $B_OUT"
  echo "c=prompts $C_PROMPTS conc $C_CONC in $C_IN out $C_OUT"
  [ -n "${LLAMA_SERVER:-}" ] && echo "llama_server=$LLAMA_SERVER ($("$LLAMA_SERVER" --version 2>&1 | grep -m1 -i version))"
} > "$OUT/meta.txt"
cat "$OUT/meta.txt"

# one connection per request for both engines (see bench/serve-compare-no-keepalive.mjs: llama-server closes the
# connection after every streamed response, and reusing it fails the next request)
preload="--import $here/serve-compare-no-keepalive.mjs"
[ "${SC_KEEPALIVE:-0}" = 1 ] && preload=""
echo "client_keepalive=$([ -n "$preload" ] && echo off || echo on)" >> "$OUT/meta.txt"

# the machine's load during the run, every 15 s: load average and the processes above 5% CPU over 1 s (load.txt)
( while true; do
    echo "$(date +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) | busiest over 1 s (%CPU): $(top -bn2 -d 1 -w 200 |
      awk '/^top -/ { n++ } n == 2 && $1 ~ /^[0-9]+$/ && $9 + 0 > 5 { printf "%s %s; ", $12, $9 }')"
    sleep 14
  done ) >> "$OUT/load.txt" 2>&1 &
sampler=$!

pid=""
stop() {
  [ -n "$pid" ] || return 0
  kill "$pid" 2> /dev/null
  for _ in $(seq 1 60); do kill -0 "$pid" 2> /dev/null || break; sleep 1; done
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  pid=""
}
trap 'stop; kill $sampler 2> /dev/null' EXIT

wait_health() { # port
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2> /dev/null || { echo "server exited before it was ready" >&2; return 1; }
    if curl -sf "http://127.0.0.1:$1/health" > /dev/null; then
      # the answer must come from the server started here, not from another one on the same port
      sleep 1
      kill -0 "$pid" 2> /dev/null || { echo "server exited (port $1 taken by another server?)" >&2; return 1; }
      return 0
    fi
    sleep 1
  done
  echo "server not healthy after 600 s" >&2
  return 1
}

bench() { # port json-file flags...
  local port=$1 json=$2
  shift 2
  node $preload "$cli" bench serve --port "$port" --backend "$BACKEND" --ignore-eos --temperature 0 \
    --metric-percentiles 50,90,99 --disable-progress --output-json "$json" "$@" ${SC_BENCH_ARGS:-} > "${json%.json}.txt" 2>&1
  local rc=$?
  grep -E "Successful|Failed req|duration|Output token throughput|Median TTFT|Median TPOT|turns 2" "${json%.json}.txt" | sed 's/^/    /'
  [ $rc = 0 ] || echo "    (bench serve exited $rc; see ${json%.json}.txt)"
}

run_engine() { # engine port
  local engine=$1 port=$2
  echo "== $engine: load $(cut -d' ' -f1-3 /proc/loadavg) before start ($(date +%H:%M:%S))"
  if curl -s -o /dev/null "http://127.0.0.1:$port/health"; then
    echo "port $port already answers: another server (another benchmark run?) is there; set SC_PORT / SC_LLAMA_PORT" >&2
    return 1
  fi
  echo "== $engine starts" >> "$OUT/load.txt"
  case $engine in
    spindle|spindle-nocache)
      local flag=""
      [ "$engine" = spindle-nocache ] && flag="--no-enable-prefix-caching"
      node "$cli" serve "$M" --port "$port" --threads "$THREADS" --max-model-len "$CTX" $flag ${SC_SPINDLE_ARGS:-} \
        > "$OUT/server-$engine.log" 2>&1 &
      pid=$! ;;
    llama)
      "$LLAMA_SERVER" -m "$M" --host 127.0.0.1 --port "$port" -t "$THREADS" -tb "$THREADS" -np "$SLOTS" \
        -c $((SLOTS * CTX)) --cont-batching --jinja --metrics --no-webui ${SC_LLAMA_ARGS:-} \
        > "$OUT/server-$engine.log" 2>&1 &
      pid=$! ;;
  esac
  wait_health "$port" || { tail -20 "$OUT/server-$engine.log"; stop; return 1; }
  echo "  warm-up (2 requests, another seed, not measured)"
  node $preload "$cli" bench serve --port "$port" --backend "$BACKEND" --ignore-eos --temperature 0 --disable-progress \
    --num-prompts 2 --random-input-len 16 --random-output-len 4 --seed 4242 > "$OUT/warmup-$engine.txt" 2>&1
  local w
  for w in a b c; do
    has "$WORKLOADS" $w || continue
    [ "$engine" = spindle-nocache ] && [ $w != b ] && continue
    echo "  workload $w ($(date +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
    echo "== $engine $w" >> "$OUT/load.txt"
    curl -s "http://127.0.0.1:$port/metrics" > "$OUT/metrics-before-$w-$engine.txt"
    case $w in
      a) bench "$port" "$OUT/a-$engine.json" --seed 1 --num-prompts "$A_PROMPTS" --max-concurrency "$A_CONC" \
           --random-input-len "$A_IN" --random-output-len "$A_OUT" ;;
      b) bench "$port" "$OUT/b-$engine.json" --seed 2 --dataset-name multi-turn --multi-turn-conversations "$B_CONVS" \
           --multi-turn-turns "$B_TURNS" --multi-turn-system-len "$B_SYS" --multi-turn-user-len "$B_USER" \
           --random-output-len "$B_OUT" ;;
      c) bench "$port" "$OUT/c-$engine.json" --seed 3 --num-prompts "$C_PROMPTS" --max-concurrency "$C_CONC" \
           --random-input-len "$C_IN" --random-output-len "$C_OUT" ;;
    esac
    curl -s "http://127.0.0.1:$port/metrics" > "$OUT/metrics-after-$w-$engine.txt"
  done
  stop
}

failed=0
for engine in spindle spindle-nocache llama; do
  has "$ENGINES" $engine || continue
  [ $engine = spindle-nocache ] && ! has "$WORKLOADS" b && continue
  port=$PORT
  [ $engine = llama ] && port=$LPORT
  run_engine $engine $port || failed=1
done

echo
node "$here/serve-compare-report.mjs" "$OUT"
echo "(results in $OUT)"
exit $failed
