#!/usr/bin/env bash
# Nsight Compute stall analysis of the two kernels that bound TTFT and TPOT (the 2026-11-26 H100 session's
# `ncu-stalls/`): the k-quant tensor-core matmul of a 1024-token prompt (the 5th mmq_kq launch of the first prompt:
# layer 0's ffn gate, 8192 x 2048) and the decode attention of one sequence. Prints speed of light, occupancy,
# warp stall reasons and pipe utilization; full reports go to OUT_DIR.
#   bash bench/gpu/profile-stalls.sh BIN_DIR model.gguf OUT_DIR
set -uo pipefail
bin="$1" model="$2" out="$3"
secs=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --print-details all)
timeout 150 ncu "${secs[@]}" -k regex:mmq_kq --launch-skip 4 --launch-count 1 \
  "$bin/spindle_decode_bench" "$model" 1024 1 2 0 1 cuda > "$out/ncu-mmq-kq.log" 2>&1
timeout 120 ncu "${secs[@]}" -k regex:attention_mma_splits --launch-skip 40 --launch-count 1 \
  "$bin/spindle_decode_bench" "$model" 8 64 2 0 1 cuda > "$out/ncu-attn-decode.log" 2>&1
grep -hE "^  [a-z_ ]*void|Duration|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Warp Cycles Per Issued|No Eligible|Stall (Wait|Short|Long|Barrier|Math|MIO|Not Sel|Dispatch)|Pipe (Tensor|Fmaheavy|Alu|Fma) Cycles" \
  "$out/ncu-mmq-kq.log" "$out/ncu-attn-decode.log"
