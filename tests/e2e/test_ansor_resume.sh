#!/bin/bash
# The auto-scheduler's search survives SIGKILL: a tuning run is killed midway (after its
# first records are in the log), a second run with the same log resumes: it loads what was
# measured, never measures a state twice, and the log ends with the requested trial count
# of distinct, readable records.
set -euo pipefail
TL=${1:?usage: test_ansor_resume.sh path/to/tunelua}
cd "$(dirname "$0")/../.."
. tests/e2e/lib_kill.sh
dir=$(mktemp -d "${TMPDIR:-/tmp}/tunelua-ansor-resume.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# the killed run cannot remove its build directories: keep them inside $dir
export TUNELUA_MEASURE_DIR="$dir"
cat > "$dir/tune.lua" <<'LUA'
local auto_scheduler = require "tunelua.auto_scheduler"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local x = te.placeholder({ 1, 8, 12, 12 }, "float32", "data")
local w = te.placeholder({ 16, 8, 3, 3 }, "float32", "kernel")
local y = topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
local task = auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
local policy = auto_scheduler.SketchPolicy(task, { seed = tonumber(arg[3]),
  program_cost_model = auto_scheduler.RandomModel(),
  params = { evolutionary_search_population = 64, sample_init_min_population = 16 } })
local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = tonumber(arg[2]),
  num_measures_per_round = 2, verbose = 0,
  measure_callbacks = { auto_scheduler.RecordToFile(arg[1]) } }, policy)
print("trials " .. r.trials)
LUA
log="$dir/log.json"
kill_after_lines "$log" 4 600 "$dir/first.out" "$TL" "$dir/tune.lua" "$log" 400 1
n1=$(wc -l < "$log")
[ "$n1" -ge 4 ] || { echo "FAIL: $n1 records before the kill"; exit 1; }
want=$((n1 + 4))
"$TL" "$dir/tune.lua" "$log" "$want" 2 > "$dir/second.out" 2>&1 || { cat "$dir/second.out"; exit 1; }
grep -q "trials $want" "$dir/second.out" || { echo "FAIL: second run"; cat "$dir/second.out"; exit 1; }
cat > "$dir/check.lua" <<'LUA'
local json = require "tunelua.json"
local seen, n, bad = {}, 0, 0
for l in io.lines(arg[1]) do
  local ok, r = pcall(json.decode, l)
  if ok then
    local s = json.encode(r.i[2][2])
    assert(not seen[s], "a state measured twice")
    seen[s] = true
    n = n + 1
  else
    bad = bad + 1
  end
end
-- a line cut by the kill is skipped (with a warning) by the resumed run
assert(bad <= 1, bad .. " broken lines")
assert(n == tonumber(arg[2]) - bad, "distinct records " .. n .. ", want " .. arg[2])
LUA
"$TL" "$dir/check.lua" "$log" "$want" || { echo "FAIL: log check"; exit 1; }
echo "ok: killed after $n1 records, resumed to $want"
