#!/bin/sh
# scripts/device/ansor_network_cpu.sh SECONDS [table]   (on the accelerator machine; rerun to continue)
#
# The CPU table of docs/performance.md "Auto-scheduled networks" on the 16-core host:
# scripts/bench/ansor_network.lua tunes resnet-18 and mobilenet (NHWC, the task scheduler, its
# logs resumed) for about SECONDS in all (shared by the two networks; 0: no tuning), timing six
# trials at once, one measurement child on each pair of cores 2,3 4,5 6,7 8,9 10,11 12,13
# (TUNELUA_MEASURE_CPUS groups); between the rounds' measurements the compiles use every core
# (the search and the features run on every core too; each trial on ansor_network.lua's --threads, 2). With
# "table", the networks are then built and timed, against the TopHub-tuned AutoTVM build and
# PyTorch, pinned to cores 2,3 with nothing else running.
# Logs persist in build-device/ansor-net-logs (copied in) and come back as $OUT/logs.tgz:
# unpack it into build-device/ansor-net-logs before the next call. Every call ends within
# about 590 s (a tuning round in flight when the limit strikes is lost, nothing else).
#
#   sh scripts/device/ansor_network_cpu.sh 450          (repeat: about 2 x 225 s of tuning a call)
#   sh scripts/device/ansor_network_cpu.sh 0 table      (the table of what the logs hold)
#
# Environment: POPULATION (2048, TVM's: the evolutionary search's population a round), PER_ROUND (64
# trials a round: at least one per group, and the search, the compiles and the retraining
# of a round amortised over many), TRIALS (30000 per network: the budget tuning stops at; the time
# limit is what ends a call),
# REPEAT (30 timed runs of each build in the table), NETWORKS (resnet-18,mobilenet),
# MIN_TASK_TRIALS (64) and TASK_PATIENCE (384): ansor_network.lua's --min-task-trials and
# --task-patience, PROFILE (0; N: the table's columns profiled per step, the least and the median
# of N runs), CACHE_FLUSH (auto: the tasks whose weights take 8 MiB or more timed on flushed
# caches, the others warm; yes: every task; no: none; ansor_network.lua's --cache-flush; keep one
# setting per log), LAYOUT_REWRITE (yes; no or both: ansor_network.lua's --layout-rewrite),
# TASKS (every task; e.g. 18-20: ansor_network.lua's --tasks, tune only those task IDs).
set -u
secs=${1:?usage: ansor_network_cpu.sh SECONDS [table]}
table=no
[ "${2:-}" = table ] && table=yes
export TUNELUA_PYTHON=${TUNELUA_PYTHON:-python3} TUNELUA_NUM_THREADS=2
export TUNELUA_MEASURE_CPUS="2,3;4,5;6,7;8,9;10,11;12,13"
out=${OUT:-/tmp/ansor-net-out}
logs=/tmp/ansor-net-logs
mkdir -p "$logs" "$out"
[ -d build-device/ansor-net-logs ] && cp -r build-device/ansor-net-logs/. "$logs/"
trials=${TRIALS:-30000}
[ "$secs" -gt 0 ] || trials=0
timeout 590 sh scripts/device/run_h200.sh scripts/bench/ansor_network.lua \
  --networks "${NETWORKS:-resnet-18,mobilenet}" --trials "$trials" --tune-seconds "$((secs > 0 ? secs : 1))" \
  --per-round "${PER_ROUND:-64}" --population "${POPULATION:-2048}" --log-dir "$logs" \
  --python "$TUNELUA_PYTHON" --repeat "${REPEAT:-30}" --table "$table" \
  --min-task-trials "${MIN_TASK_TRIALS:-64}" --task-patience "${TASK_PATIENCE:-384}" \
  --cache-flush "${CACHE_FLUSH:-auto}" --layout-rewrite "${LAYOUT_REWRITE:-yes}" \
  $([ -n "${TASKS:-}" ] && echo --tasks "$TASKS") \
  $([ "${PROFILE:-0}" -gt 0 ] && echo --profile "$PROFILE") > "$out/ansor_network_cpu.txt" 2>&1
echo "exit status $?" >> "$out/ansor_network_cpu.txt"
tar czf "$out/logs.tgz" -C "$logs" .
grep -v '^|  *[0-9]' "$out/ansor_network_cpu.txt" | tail -n 40
