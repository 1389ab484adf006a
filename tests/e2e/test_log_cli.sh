#!/bin/bash
# End-to-end checks of `tunelua log best|distill` and `tunelua log summary` on a
# small AutoTVM log (two workloads, errors, a malformed line).
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"

D='[["TENSOR", [4, 32], "float32"], ["TENSOR", [24, 32], "float32"], null, "float32"]'
C='[["TENSOR", [1, 64, 56, 56], "float32"], ["TENSOR", [64, 64, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1], "NCHW", "NCHW", "float32"]'
rec() {  # rec TASK ARGS INDEX ENTITY COST ERR
  echo "{\"input\": [\"llvm -mcpu=core-avx2\", \"$1\", $2, {}], \"config\": {\"index\": $3, \"code_hash\": null, \"entity\": $4}, \"result\": [[$5], $6, 0.5, 1700000000.0], \"version\": 0.2, \"tvm_version\": \"0.8.dev0\"}"
}
E1='[["tile_y", "sp", [-1, 1]], ["tile_x", "sp", [-1, 1]], ["tile_k", "sp", [-1, 1]]]'
E2='[["tile_y", "sp", [-1, 2]], ["tile_x", "sp", [-1, 1]], ["tile_k", "sp", [-1, 1]]]'
E3='[["tile_ic", "sp", [1, 64]], ["tile_oc", "sp", [2, 32]], ["tile_ow", "sp", [8, 7]], ["unroll_kw", "ot", true]]'
{
  rec dense_nopack.x86 "$D" 0 "$E1" 2e-05 0
  rec dense_nopack.x86 "$D" 1 "$E2" 1e-05 0
  rec dense_nopack.x86 "$D" 1 "$E2" 1000000000.0 1
  echo "{broken"
  rec conv2d_NCHWc.x86 "$C" 188 "$E3" 0.001 0
  rec conv2d_NCHWc.x86 "$C" 188 "$E3" 1000000000.0 6
} > "$tmp/t.log"

out=$("$TL" log summary "$tmp/t.log" 2>&1); rc=$?
check "summary status" 0 "5 records, 2 tasks" "$rc" "$out"
check "summary warns with file:line" 0 "t.log:4: skipped a malformed record" "$rc" "$out"
# dense: 2*4*24*32 flop / 1e-05 s = 0.6144 GFLOPS; 3 trials, 1 error
check "summary dense row" 0 "1  dense_nopack.x86  (4x32) (24x32)                 3       1   0.0100         0.61" "$rc" "$out"
check "summary conv row" 0 "2  conv2d_NCHWc.x86  (1x64x56x56) (64x64x3x3)       2       1   1.0000       231.21" "$rc" "$out"
# the columns line up: the header and every row end at the same column
lens=$("$TL" log summary "$tmp/t.log" 2>/dev/null | tail -n +2 | awk '{ print length($0) }' | sort -u | wc -l)
[ "$lens" -eq 1 ]; check "summary columns aligned" 0 "" $? "$("$TL" log summary "$tmp/t.log" 2>/dev/null)"

# a task name and shapes wider than any fixed column
M='[["TENSOR", [1, 256, 14, 14], "float32"], ["TENSOR", [256, 256, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1], "float32"]'
{ rec conv2d_nchw_spatial_pack.mali "$M" 3 "$E1" 0.002 0; rec dense_nopack.x86 "$D" 0 "$E1" 2e-05 0; } > "$tmp/t2.log"
lens=$("$TL" log summary "$tmp/t2.log" 2>/dev/null | tail -n +2 | awk '{ print length($0) }' | sort -u | wc -l)
[ "$lens" -eq 1 ]; check "summary wide columns aligned" 0 "" $? "$("$TL" log summary "$tmp/t2.log" 2>/dev/null)"

# distill: TVM's name for the best record per workload
out=$("$TL" log distill "$tmp/t.log" "$tmp/distilled.log" 2>&1); rc=$?
check "distill status" 0 "wrote 2 records to $tmp/distilled.log" "$rc" "$out"
out=$(cat "$tmp/distilled.log")
check "distill keeps the lowest cost" 0 '"index": 1, "code_hash": null' 0 "$out"
n=$(wc -l < "$tmp/distilled.log"); [ "$n" -eq 2 ]; check "distill one per workload" 0 "" $? "$n"

out=$("$TL" log best "$tmp/t.log" "$tmp/best.log" 2>&1); rc=$?
check "best status" 0 "wrote 2 records to $tmp/best.log" "$rc" "$out"
out=$(cat "$tmp/best.log")
check "best keeps the lowest cost" 0 '"index": 1, "code_hash": null' 0 "$out"
n=$(wc -l < "$tmp/best.log")
check "best one per workload" 0 "2" 0 "$n"

out=$("$TL" log best "$tmp/t.log" 2>&1); rc=$?
check "best default output" 0 "wrote 2 records to $tmp/t.log.best.log" "$rc" "$out"

out=$("$TL" log summary "$tmp/missing.log" 2>&1); rc=$?
check "summary missing file" 1 "tunelua log: summary: cannot read '$tmp/missing.log'" "$rc" "$out"
out=$("$TL" log frobnicate 2>&1); rc=$?
check "unknown subcommand" 1 "tunelua log: unknown command 'frobnicate'" "$rc" "$out"
out=$("$TL" log 2>&1); rc=$?
check "usage" 1 "usage: tunelua log best IN [OUT]" "$rc" "$out"

# hostile lines skip only themselves: a 20,000-deep nesting, a tensor shape that is not a
# list, and a torn record with a whole one appended to it on the same line
{
  rec dense_nopack.x86 "$D" 0 "$E1" 2e-05 0
  printf '%.0s[' $(seq 20000); echo
  rec dense_nopack.x86 '[["TENSOR", 7, "float32"], ["TENSOR", [24, 32], "float32"], null, "float32"]' 2 "$E2" 1e-06 0
  printf '%s' '{"input": ["llvm", "dense_nopack.x86", [["TENS'
  rec dense_nopack.x86 "$D" 1 "$E2" 1e-05 0
} > "$tmp/h.log"
out=$("$TL" log summary "$tmp/h.log" 2>&1); rc=$?
check "summary: deep nesting skips its line" 0 "h.log:2: skipped a malformed record: invalid JSON: nested deeper than 512 levels" "$rc" "$out"
check "summary: a non-list shape skips its line" 0 'h.log:3: skipped a malformed record: bad "input" args: argument 1: the tensor'"'"'s shape is not a list' "$rc" "$out"
check "summary: a torn record keeps the next one" 0 "h.log:4: skipped a torn record before column" "$rc" "$out"
check "summary: the good records count" 0 "2 records, 1 tasks" "$rc" "$out"
out=$("$TL" log best "$tmp/h.log" "$tmp/hb.log" 2>&1); rc=$?
check "best: hostile lines skipped" 0 "wrote 1 records to $tmp/hb.log" "$rc" "$out"
check "best: the torn line's successor wins" 0 '"index": 1,' 0 "$(cat "$tmp/hb.log")"

check_done test_log_cli
