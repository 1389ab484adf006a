#!/bin/bash
# scripts/tune_onnx.lua end to end on a small ONNX model with a weight initializer
# (libonnx-testdata's pytorch-converted Conv2d): import, AutoTVM tasks, one trial, compile,
# untuned vs tuned latency, a record in the log; --auto-scheduler tunes its search task (two
# trials), logs auto-scheduler records and times the network built from them; bad options and
# a missing model are named.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=/usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d/model.onnx
[ -n "${TUNELUA_ONNX_TESTDATA:-}" ] && MODEL="$TUNELUA_ONNX_TESTDATA/../pytorch-converted/test_Conv2d/model.onnx"
cd "$tmp"
out=$("$TL" "$SRC/scripts/tune_onnx.lua" "$MODEL" --n-trial 1 --repeat 1 --log "$tmp/conv.log" 2>&1); rc=$?
check imported 0 "Imported $MODEL: input 0 (2, 3, 7, 5), 2 params" $rc "$out"
check task_table 0 "conv2d_NCHWc.x86" $rc "$out"
check evaluated 0 "Untuned network: " $rc "$out"
n=$(wc -l < "$tmp/conv.log"); [ "$n" -ge 1 ]; check logged 0 "" $? "records: $n"
out=$("$TL" "$SRC/scripts/tune_onnx.lua" "$MODEL" --auto-scheduler --n-trial 2 --repeat 2 \
  --log "$tmp/ansor.json" 2>&1); rc=$?
check ansor_tasks 0 "conv2d" $rc "$out"
check ansor_tuned 0 "Task Scheduler" $rc "$out"
check ansor_timed 0 "Mean inference time" $rc "$out"
grep -q '"v": "v0.6"' "$tmp/ansor.json"; check ansor_logged 0 "" $? "$(head -c 300 "$tmp/ansor.json")"
out=$("$TL" "$SRC/scripts/tune_onnx.lua" 2>&1); rc=$?
check no_model 2 "tune_onnx: no model given" $rc "$out"
out=$("$TL" "$SRC/scripts/tune_onnx.lua" "$MODEL" --input 0:2by3 2>&1); rc=$?
check bad_input 2 "--input: expected NAME:DIMS" $rc "$out"
out=$("$TL" "$SRC/scripts/tune_onnx.lua" "$MODEL" --input 0:2x4x7x5 --n-trial 1 2>&1); rc=$?
check contradicting_shape 1 "the shape option gives dimension 1 as 4, the model fixes it to 3" $rc "$out"
check_done test_tune_onnx
