#!/usr/bin/env bash
# Per-kernel GPU times of decode steps (Nsight Compute, base clocks, caches flushed per kernel: read the shares,
# not the absolute times): spindle_decode_bench on one model, past its warm-up and prompt, two decode steps' worth
# of kernels; with `prefill`, the kernels of a 1024-token prompt instead (grids with y > 1); with `batch`, about two
# steps of 64 sequences decoding together (SPINDLE_BENCH_ONLY=batch: past the warm-up and the 64 prompts). Prints the
# kernels by total time.
#   bash bench/gpu/profile-decode.sh BIN_DIR model.gguf OUT_DIR [decode|prefill|batch]
set -uo pipefail
bin="$1" model="$2" out="$3" mode="${4:-decode}"
if [ "$mode" = prefill ]; then
  log="$out/ncu-prefill.log"
  # past the warm-up (an 8-token prompt and two decode steps, ~600 kernels): the prompt, then one decode step
  timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-skip 600 --launch-count 400 \
    "$bin/spindle_decode_bench" "$model" 1024 1 2 0 1 cuda > "$log" 2>&1
elif [ "$mode" = batch ]; then
  log="$out/ncu-batch.log"
  env SPINDLE_BENCH_ONLY=batch timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel \
    --launch-skip 900 --launch-count 340 "$bin/spindle_decode_bench" "$model" 8 16 2 64 1 cuda > "$log" 2>&1
else
  log="$out/ncu.log"
  timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-skip 1400 --launch-count 560 \
    "$bin/spindle_decode_bench" "$model" 8 64 2 0 1 cuda > "$log" 2>&1
fi
python3 - "$log" <<'PY'
import re, sys
txt = open(sys.argv[1]).read()
rows = []
for b in re.split(r'\n  (?=\S)', txt):
    m = re.match(r'(.*?) \((\d+), (\d+), (\d+)\)x\((\d+), 1, 1\).*Invocations (\d+)', b)
    a = re.search(r'gpu__time_duration.sum\s+(\S+)\s+[\d.,]+\s+[\d.,]+\s+([\d.,]+)', b)
    if not m or not a: continue
    us = float(a.group(2).replace(',', '')) * {'ns': 1e-3, 'us': 1, 'ms': 1e3}.get(a.group(1), 1)
    n = int(m.group(6))
    rows.append((us * n, n, us, re.sub(r'unnamed>::|\(.*', '', m.group(1))[:48], ','.join(m.group(2, 3, 4))))
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
print(f"{sum(r[1] for r in rows)} kernels, {total:.0f} us")
for r in rows[:25]:
    print(f"{100 * r[0] / total:5.1f}%  {r[1]:4d} x {r[2]:7.2f} us  grid {r[4]:12s} {r[3]}")
PY
