#!/bin/bash
# scripts/tune_vta.lua end to end at a small input: the 10 conv2d_packed.vta tasks tuned with
# one random trial each on the local simulator, the log picked (at most one record per task), the network compiled with its
# VTA-able groups on vta-sim (tuned configs) and run: per-layer cycles, the simulated mean
# inference time and the host wall time, labelled; bad options are named.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$tmp"
out=$("$TL" "$SRC/scripts/tune_vta.lua" --tuner random --n-trial 1 --image-size 32 --runs 1 --log "$tmp/vta.log" 2>&1); rc=$?
check tasks 0 "Extracted 10 conv2d tasks:" $rc "$out"
check compiled 0 "29 groups, 19 on VTA" $rc "$out"
check per_layer 0 "Per VTA layer (simulated cycles of one inference):" $rc "$out"
check simulated 0 "Mean inference time (std dev), VTA part from the cycle model at 100 MHz: " $rc "$out"
check top5 0 "Top-5 classes of a synthetic input" $rc "$out"
check host 0 "Host wall time of a whole run, simulator included" $rc "$out"
# one best record per task that had a valid trial (a random first trial may not fit the SRAMs)
n=$(grep -c conv2d_packed.vta "$tmp/vta.log"); [ "$n" -le 10 ]; check picked 0 "" $? "best records: $n"
[ ! -e "$tmp/vta.log.tmp" ]; check tmp_removed 0 "" $? "the .tmp log is removed"
out=$("$TL" "$SRC/scripts/tune_vta.lua" --n-trial zero 2>&1); rc=$?
check bad_trial 1 "--n-trial expects a positive integer, got 'zero'" $rc "$out"
out=$("$TL" "$SRC/scripts/tune_vta.lua" --tuner foo 2>&1); rc=$?
check bad_tuner 1 "--tuner expects one of" $rc "$out"
out=$("$TL" "$SRC/scripts/tune_vta.lua" --tracker nohost 2>&1); rc=$?
check bad_tracker 1 "--tracker expects HOST:PORT, got 'nohost'" $rc "$out"
check_done test_tune_vta
