#!/bin/bash
# Smoke test of scripts/bench/search_efficiency.lua: phase 1 measures a few configs of task 3
# for real (and resumes), measures a second pass over a table whose first pass is complete,
# and phase 2 replays a complete cost table (written here with known costs) through xgb and
# random, printing the table and the target.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
cd "$(dirname "$0")/../.."
SE=scripts/bench/search_efficiency.lua

out=$("$TL" $SE --tasks 3 --cache "$tmp/se" --limit 4 --passes 2 --measure_only 1 2>&1); rc=$?
check "phase 1, pass 1" 0 "phase 1, task 3, pass 1: measuring 4 of 360 configs (0 cached)" "$rc" "$out"
check "phase 1 throughput" 0 "phase 1 measurement throughput" "$rc" "$out"
out=$("$TL" $SE --tasks 3 --cache "$tmp/se" --limit 4 --passes 2 --measure_only 1 2>&1); rc=$?
check "phase 1 resumes" 0 "phase 1, task 3, pass 1: measuring 4 of 360 configs (4 cached)" "$rc" "$out"
table=$(basename "$(ls "$tmp"/se/conv2d_NCHWc.x86-360-*.tsv)")
n=$(grep -c '^C' "$tmp/se/$table")
check "cost lines" 0 "8" 0 "$n"

# a complete first pass with known costs: config i costs (1 + (i*37 mod 101)) * 10 us, so the
# best (10 us: 1284.5 GFLOPS for this task's 12.845 MFLOP) are the configs with i*37 = 0 mod 101
synth() {
  echo "# synthetic"
  echo "B	360	1.0	1.0"
  for ((i = 0; i < 360; i++)); do
    echo "C	$i	0	0.1	$(awk -v i=$i 'BEGIN { printf "%.9g", (1 + (i * 37) % 101) * 1e-5 }')	-"
  done
}
mkdir -p "$tmp/p2" "$tmp/full"
synth > "$tmp/p2/$table"
synth > "$tmp/full/$table"
out=$("$TL" $SE --tasks 3 --cache "$tmp/p2" --limit 4 --passes 2 --measure_only 1 2>&1); rc=$?
check "phase 1, pass 2" 0 "phase 1, task 3, pass 2: measuring 4 of 360 configs (0 cached)" "$rc" "$out"
check "pass spread" 0 "pass-to-pass spread of a config's median (slowest/fastest pass) over 4 configs" "$rc" "$out"

out=$("$TL" $SE --tasks 3 --cache "$tmp/full" --passes 1 --tuners xgb,random --seeds 1 \
      --checkpoints 32,64 2>&1); rc=$?
check "replay runs" 0 "phase 2: REPLAY of the phase-1 costs" "$rc" "$out"
check "space best" 0 "1284.5" "$rc" "$out"
check "target line" 0 "target: xgb after 64 trials >= 95% of random after 64" "$rc" "$out"
out=$("$TL" $SE --tasks 3 --cache "$tmp/full" --passes 2 --tuners xgb,random --seeds 1 \
      --checkpoints 32,64 --measure_only 0 --limit 0 2>&1); rc=$?
check "no replay of an incomplete pass" 0 "task 3: skipped: its cost table is incomplete (pass 2 has 0 of 360 configs)" "$rc" "$out"

check_done test_bench_search_efficiency
