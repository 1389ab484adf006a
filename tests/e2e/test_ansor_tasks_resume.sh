#!/bin/bash
# The task scheduler survives SIGKILL: a run over two search tasks sharing one log is killed
# midway (after its first records are in the log); a second run of the same script with
# load_log_file resumes: it restores the trial counts and the measured states of both tasks,
# never measures a state twice, continues to the trial budget, and every line it wrote is a
# readable record (a line torn by the kill is skipped by the reader).
set -euo pipefail
TL=${1:?usage: test_ansor_tasks_resume.sh path/to/tunelua}
cd "$(dirname "$0")/../.."
. tests/e2e/lib_kill.sh
dir=$(mktemp -d "${TMPDIR:-/tmp}/tunelua-ansor-tasks-resume.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# the killed run cannot remove its build directories: keep them inside $dir
export TUNELUA_MEASURE_DIR="$dir"
cat > "$dir/tune.lua" <<'LUA'
local auto_scheduler = require "tunelua.auto_scheduler"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local x = te.placeholder({ 1, 8, 10, 10 }, "float32", "data")
local w = te.placeholder({ 8, 8, 3, 3 }, "float32", "kernel")
local conv = topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
local a = te.placeholder({ 4, 32 }, "float32", "a")
local b = te.placeholder({ 16, 32 }, "float32", "b")
local dense = topi.nn.dense(a, b)
local tasks = { auto_scheduler.SearchTask{ compute_dag = conv, target = "llvm" },
                auto_scheduler.SearchTask{ compute_dag = dense, target = "llvm" } }
local log = arg[1]
local tuner = auto_scheduler.TaskScheduler(tasks, { 1, 2 }, { load_log_file = log, strategy = "round-robin" })
tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = tonumber(arg[2]), num_measures_per_round = 2,
  measure_callbacks = { auto_scheduler.RecordToFile(log) } },
  { program_cost_model = "random", seed = tonumber(arg[3]),
    params = { evolutionary_search_population = 64, sample_init_min_population = 16 } })
print("trials " .. tuner.ct)
LUA
log="$dir/log.json"
kill_after_lines "$log" 5 900 "$dir/first.out" "$TL" "$dir/tune.lua" "$log" 400 1
n1=$(wc -l < "$log")
[ "$n1" -ge 5 ] || { echo "FAIL: $n1 records before the kill"; exit 1; }
grep -q "Task Scheduler" "$dir/first.out" || { echo "FAIL: no task table"; cat "$dir/first.out"; exit 1; }
want=$((n1 + 4))
"$TL" "$dir/tune.lua" "$log" "$want" 2 > "$dir/second.out" 2>&1 || { cat "$dir/second.out"; exit 1; }
grep -q "Resumed from $log: " "$dir/second.out" || { echo "FAIL: no resume"; cat "$dir/second.out"; exit 1; }
grep -q "trials $want" "$dir/second.out" || { echo "FAIL: second run"; cat "$dir/second.out"; exit 1; }
cat > "$dir/check.lua" <<'LUA'
local records = require "tunelua.auto_scheduler.records"
local seen, keys = {}, {}
local list = records.load(arg[1], { warn = function() end })
for _, r in ipairs(list) do
  local id = r.workload_key .. "|" .. r.steps
  assert(not seen[id], "a state measured twice")
  seen[id] = true
  keys[r.workload_key] = (keys[r.workload_key] or 0) + 1
end
local nk = 0
for _ in pairs(keys) do nk = nk + 1 end
assert(nk == 2, "both tasks in the log")
-- every trial the runs counted is a readable record (a line torn by the kill is lost)
assert(#list >= tonumber(arg[2]) - 1 and #list <= tonumber(arg[2]), "records " .. #list .. ", want " .. arg[2])
LUA
"$TL" "$dir/check.lua" "$log" "$want" || { echo "FAIL: log check"; exit 1; }
echo "ok: killed after $n1 records, resumed to $want"
