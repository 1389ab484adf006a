#!/bin/bash
# scripts/tune_custom_tuner.lua end to end: a tuner written in Lua runs the whole flow (dense
# tasks of resnet-18 at 32x32 on this CPU), untuned vs tuned printed, one record per task in the
# log; a second run with the same log resumes and measures no new trial.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$tmp"
args=(--ops nn.dense --n-trial 2 --repeat 2 --log "$tmp/walk.log")
out=$("$TL" "$SRC/scripts/tune_custom_tuner.lua" "${args[@]}" 2>&1); rc=$?
check first_run 0 "Untuned network: " $rc "$out"
check task_table 0 "dense_nopack.x86" 0 "$out"
check progress 0 "Progress: (2/2)" 0 "$out"
n=$(wc -l < "$tmp/walk.log"); [ "$n" -eq 2 ]; check one_record_per_task 0 "" $? "records: $n"
out=$("$TL" "$SRC/scripts/tune_custom_tuner.lua" "${args[@]}" 2>&1); rc=$?
check second_run 0 "Untuned network: " $rc "$out"
# progress lines of measured batches (not the final "Done." line of each task): none on resume
n=$(grep "Progress:" <<< "$out" | grep -vc "Done\.")
[ "$n" -eq 0 ]; check resumed_nothing_new 0 "" $? "measured batches: $n"
check_done test_custom_tuner
