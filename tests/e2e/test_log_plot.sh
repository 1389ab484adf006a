#!/bin/bash
# End-to-end checks of `tunelua log plot`: a small log (two tasks, failed trials, a malformed
# line) drawn as PNG and SVG; bad input named in the error; and the flow (tune_relay_x86.lua on
# the dense tasks, 2 trials) writing LOG.png beside its log.
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

D='[["TENSOR", [4, 32], "float32"], ["TENSOR", [24, 32], "float32"], null, "float32"]'
C='[["TENSOR", [1, 64, 56, 56], "float32"], ["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1], "NCHW", "NCHW", "float32"]'
rec() {  # rec TASK ARGS COST ERR
  echo "{\"input\": [\"llvm\", \"$1\", $2, {}], \"config\": {\"index\": 0, \"code_hash\": null, \"entity\": [[\"tile_y\", \"sp\", [-1, 1]]]}, \"result\": [[$3], $4, 0.5, 1700000000.0], \"version\": 0.2, \"tvm_version\": \"0.8.dev0\"}"
}
{
  rec dense_nopack.x86 "$D" 2e-05 0
  rec conv2d_NCHWc.x86 "$C" 0.002 0
  rec dense_nopack.x86 "$D" 1000000000.0 1
  echo "{broken"
  rec dense_nopack.x86 "$D" 1e-05 0
  rec conv2d_NCHWc.x86 "$C" 1000000000.0 6
  rec conv2d_NCHWc.x86 "$C" 0.001 0
} > "$tmp/t.log"

png_ok() {  # png_ok FILE: the PNG signature, an IHDR 1000 pixels wide
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
  [ "$(head -c 24 "$1" | tail -c 8 | od -An -tu1 | awk '{ print $1*16777216+$2*65536+$3*256+$4 }')" = 1000 ]
}

out=$(cd "$tmp" && "$TL" log plot t.log 2>&1); rc=$?
check "plot default output" 0 "wrote t.log.png" "$rc" "$out"
check "plot warns of the malformed line" 0 "t.log:4: skipped a malformed record" "$rc" "$out"
png_ok "$tmp/t.log.png"; check "plot: a PNG 1000 pixels wide" 0 "" $? "$(head -c 32 "$tmp/t.log.png" | od -c)"

out=$("$TL" log plot -o "$tmp/run.svg" "$tmp/t.log" 2>&1); rc=$?
check "plot -o svg" 0 "wrote $tmp/run.svg" "$rc" "$out"
svg=$(cat "$tmp/run.svg")
check "svg: XML" 0 '<?xml version="1.0"' 0 "$(head -1 "$tmp/run.svg")"
check "svg: one svg element, closed" 0 "1 1" 0 "$(grep -c '<svg' <<< "$svg") $(grep -c '</svg>' <<< "$svg")"
check "svg: the title" 0 "<title>Tuning run: t.log</title>" 0 "$svg"
check "svg: task 1" 0 "T1  dense_nopack.x86 (4x32) (24x32): best 0.61 GFLOPS, 3 trials, 1 failed" 0 "$svg"
check "svg: task 2" 0 "T2  conv2d_NCHWc.x86 (1x64x56x56) (64x64x3x3): best 231.21 GFLOPS, 3 trials, 1 failed" 0 "$svg"
ls "$tmp"/*.tmp > /dev/null 2>&1; check "no temporary file left" 2 "" $? "$(ls "$tmp")"

out=$("$TL" log plot "$tmp/missing.log" 2>&1); rc=$?
check "plot missing file" 1 "tunelua log: plot: cannot read '$tmp/missing.log'" "$rc" "$out"
: > "$tmp/empty.log"
out=$("$TL" log plot "$tmp/empty.log" 2>&1); rc=$?
check "plot empty log" 1 "tunelua log: plot: '$tmp/empty.log' is empty: no tuning records to plot" "$rc" "$out"
printf '{broken\n[1, 2]\n' > "$tmp/junk.log"
out=$("$TL" log plot "$tmp/junk.log" 2>&1); rc=$?
check "plot no valid record" 1 "tunelua log: plot: '$tmp/junk.log' holds no valid AutoTVM record to plot" "$rc" "$out"
out=$("$TL" log plot "$tmp/t.log" -o "$tmp/t.gif" 2>&1); rc=$?
check "plot bad extension" 1 "cannot write '$tmp/t.gif': the picture's name must end in .png or .svg" "$rc" "$out"
out=$("$TL" log plot "$tmp/t.log" -o 2>&1); rc=$?
check "plot -o without a name" 1 "tunelua log: plot: -o needs a file name" "$rc" "$out"
out=$("$TL" log plot 2>&1); rc=$?
check "plot without a log" 1 "tunelua log: plot: missing the log" "$rc" "$out"
out=$("$TL" log --help 2>&1); rc=$?
check "usage lists plot" 0 "tunelua log plot LOG [-o OUT]" "$rc" "$out"
out=$("$TL" --help 2>&1); rc=$?
check "tunelua --help lists plot" 0 "tuning logs: best, distill, summary, plot" "$rc" "$out"

# the flow writes LOG.png from every trial (LOG.trials) at the end
out=$(cd "$tmp" && "$TL" "$SRC/scripts/tune_relay_x86.lua" --ops nn.dense --n-trial 2 --repeat 1 \
      --log "$tmp/flow.log" 2>&1); rc=$?
check "flow prints the plot's path" 0 "Plot: $tmp/flow.log.png" "$rc" "$out"
png_ok "$tmp/flow.log.png"; check "flow: a PNG" 0 "" $? "$(ls -l "$tmp")"

check_done test_log_plot
