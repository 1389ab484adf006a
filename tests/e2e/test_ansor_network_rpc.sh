#!/usr/bin/env bash
# scripts/tune_network_mali.lua through a loopback tracker whose server dies mid-run: a tracker
# and one server of a key (the OpenCL device of this machine, pocl); the script tunes two of
# mobilenet's tasks (32x32 input, NHWC, 6 trials, population 64) through --tracker. Server 1 is
# killed with SIGKILL while it measures, server 2 registers under the same key; the run
# completes: the task table, every trial a record in the log (the lost one an error record),
# the network compiled with the log and timed on server 2 ("Mean inference time (std dev)").
# Prints SKIP and passes without an OpenCL device. Only 127.0.0.1 and ports the OS hands out
# are used.
#   bash tests/e2e/test_ansor_network_rpc.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init ansornet 40 "${1:-}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
KEY=malikey
N=6
T0=$(date +%s)

cat > "$W/devices.lua" <<'LUA'
print(tonumber(require("tunelua.core").C.tl_opencl_device_count()))
LUA
if [ "$("$T" "$W/devices.lua" 2>/dev/null)" = "0" ]; then
  echo "SKIP test_ansor_network_rpc: no OpenCL device"
  exit 0
fi

start_tracker tracker --port 0; PORT=$LPORT
start_server 1; S1=$SPID
query_until "$KEY 1 1 0" 10 || { cat "$W/query.txt"; fail "server 1 not registered"; }

LOG=$W/mobilenet.json
cd "$W"
timeout 600 "$T" "$SRC/scripts/tune_network_mali.lua" --tracker 127.0.0.1:$PORT --key $KEY \
  --image-size 32 --tasks 0,1 --n-trial $N --per-round 2 --model random --population 64 \
  --repeat 2 --log "$LOG" > "$W/job.out" 2>&1 &
JOB=$!
PIDS+=($JOB)
# a trial of server 1 in flight: kill the server, another one registers under the key
wait_measuring $S1 $JOB 15000 "server 1"
kill -9 $S1
echo "killed server 1 (pid $S1) during a measurement"
start_server 2
wait $JOB || fail "the run failed: $(tail -30 "$W/job.out")"

grep -q "\[ Task Scheduler \]" "$W/job.out" || fail "no task table"
grep -q "^|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |$" "$W/job.out" || fail "no table header"
grep -q "^Estimated total latency: .*Trials: $N	Used time : [0-9]* s	Next ID: -1" "$W/job.out" \
  || fail "the last table does not show $N trials"
grep -q "^Mean inference time (std dev): [0-9.]* ms ([0-9.]* ms)$" "$W/job.out" || fail "no mean inference time"
grep -q "^20 of 22 tasks have no tuned schedule$" "$W/job.out" || fail "no summary of the tuned tasks"
grep -q "Request Remote" "$W/job.out" || fail "the network was not run through the tracker"

cat > "$W/check.lua" <<'LUA'
-- check.lua LOG N: N lines, each a record; at least one error record (the trial lost with
-- server 1), the others measured
local records = require "tunelua.auto_scheduler.records"
local log, n = arg[1], tonumber(arg[2])
local lines = 0
for _ in io.lines(log) do lines = lines + 1 end
assert(lines == n, string.format("%s: %d lines, expected %d", log, lines, n))
local warned = {}
local list = records.load(log, { warn = function(m) warned[#warned + 1] = m end })
assert(#warned == 0 and #list == n, "unreadable records: " .. table.concat(warned, "; "))
local errors, keys = 0, {}
for _, r in ipairs(list) do
  keys[r.workload_key] = true
  if r.error_no ~= 0 then errors = errors + 1; print("error record: error_no " .. r.error_no) end
end
local nk = 0
for _ in pairs(keys) do nk = nk + 1 end
assert(nk == 2, "records of both tasks")
assert(errors >= 1, "no error record for the trial lost with server 1")
assert(errors < n, "every trial failed")
print(string.format("log ok: %d records, %d errors", n, errors))
LUA
"$T" "$W/check.lua" "$LOG" $N > "$W/check.out" 2>&1 || fail "log check: $(cat "$W/check.out")"
cat "$W/check.out"
grep -E "^Tuning |^\[round|^Compile|tasks have no tuned|Request Remote|^Evaluate|^Mean inference|^Default schedules" "$W/job.out"
echo "test_ansor_network_rpc: ok ($(($(date +%s) - T0)) s)"
