#!/bin/bash
# End-to-end checks of `tunelua log best|distill|summary|plot` on a small auto-scheduler log
# (two workloads, one in both key forms, two targets, errors, a malformed and a torn line).
. "$(dirname "$0")/lib_check.sh" "${1:-build/tunelua}"

K1='[\"3a2d9e60f94b9fd9ffaff77467df71d5\", [1, 16, 16, 32], [1, 1, 32, 64], [1, 1, 1, 64], [1, 16, 16, 64]]'
K1F='[\"3a2d9e60f94b9fd9ffaff77467df71d5\", 1, 16, 16, 32, 1, 1, 32, 64, 1, 1, 1, 64, 1, 16, 16, 64]'
K2='[\"c7f08a68cf7ead94292b33b309ce3b73\", [1, 10], [1, 10]]'
rec() {  # rec KEY TARGET STEPS COST ERR
  echo "{\"i\": [[\"$1\", \"$2\", [2, 64, 64, 0, 0, 0, 0, 0], \"\", 0, []], [[], $3]], \"r\": [[$4], $5, 0.2, 1700000000], \"v\": \"v0.6\"}"
}
S1='[["SP", 2, 3, 64, [4], 1]]'
S2='[["SP", 2, 3, 64, [8], 1]]'
S3='[["CI", 4]]'
{
  rec "$K1" llvm "$S1" 0.002 0
  rec "$K1F" llvm "$S2" 0.001 0
  rec "$K1" llvm "$S3" 1e+10 4
  echo "{broken"
  rec "$K2" llvm "$S3" 4e-06 0
  rec "$K1" "opencl -device=mali" "$S3" 0.0005 0
  printf '%s' '{"i": [["x'
  rec "$K2" llvm "$S1" 3e-06 0
} > "$tmp/a.json"

out=$("$TL" log summary "$tmp/a.json" 2>&1); rc=$?
check "summary status" 0 "6 auto-scheduler records, 3 tasks" "$rc" "$out"
check "summary warns with file:line" 0 "a.json:4: skipped a malformed record line" "$rc" "$out"
check "summary torn line" 0 "a.json:7: skipped a torn record before column" "$rc" "$out"
check "summary row 1 (both key forms, best 1 ms)" 0 "1  3a2d9e60 (1x16x16x32) (1x1x32x64) (1x1x1x64) (1x16x16x64)  llvm                      3       1   1.0000" "$rc" "$out"
check "summary row 2" 0 "2  c7f08a68 (1x10) (1x10)" "$rc" "$out"
check "summary row 3 (another target)" 0 "opencl -device=mali       1       0   0.5000" "$rc" "$out"
lens=$("$TL" log summary "$tmp/a.json" 2>/dev/null | tail -n +2 | awk '{ print length($0) }' | sort -u | wc -l)
[ "$lens" -eq 1 ]; check "summary columns aligned" 0 "" $? "$("$TL" log summary "$tmp/a.json" 2>/dev/null)"

# distill: one record per (target key, workload): cpu x 2 workloads, mali/opencl/gpu share one
out=$("$TL" log distill "$tmp/a.json" 2>&1); rc=$?
check "distill default output" 0 "wrote 3 records to $tmp/a.json.best.json" "$rc" "$out"
out=$(cat "$tmp/a.json.best.json")
check "distill keeps the lowest cost of both key forms" 0 '[["SP", 2, 3, 64, [8], 1]]]], "r": [[0.001], 0' 0 "$out"
check "distill keeps the later, cheaper record" 0 '"r": [[3e-06], 0' 0 "$out"
[[ "$out" != *'1e+10'* ]]; check "distill drops errors" 0 "" $? "$out"
n=$(wc -l < "$tmp/a.json.best.json"); [ "$n" -eq 3 ]; check "distill count" 0 "" $? "$n"
out=$("$TL" log best "$tmp/a.json" "$tmp/b.json" 2>&1); rc=$?
check "best on an auto-scheduler log" 0 "wrote 3 records to $tmp/b.json" "$rc" "$out"
# distilling again (the output exists and is read too) changes nothing
out=$("$TL" log distill "$tmp/a.json" "$tmp/b.json" 2>&1); rc=$?
check "distill again" 0 "wrote 3 records to $tmp/b.json" "$rc" "$out"
cmp -s "$tmp/b.json" "$tmp/a.json.best.json"; check "distill is stable" 0 "" $? "$(diff "$tmp/b.json" "$tmp/a.json.best.json")"

out=$("$TL" log plot "$tmp/a.json" -o "$tmp/a.svg" 2>&1); rc=$?
check "plot an auto-scheduler log" 0 "wrote $tmp/a.svg" "$rc" "$out"
grep -q "3a2d9e60" "$tmp/a.svg"; check "plot legend names the workload" 0 "" $? "$(head -c 300 "$tmp/a.svg")"

: > "$tmp/e.json"
echo '{"i": [["k", "llvm"], [[], []]], "r": [[1e+10], 4, 0, 0], "v": "v0.6"}' > "$tmp/e.json"
out=$("$TL" log best "$tmp/e.json" "$tmp/eb.json" 2>&1); rc=$?
check "best of errors only" 0 "wrote 0 records to $tmp/eb.json" "$rc" "$out"
check_done test_log_cli_ansor
