#!/usr/bin/env bash
# A real tuning job on a loopback device farm: a tracker, three servers with one key, and, in a
# separate tunelua process, RandomTuner on autotvm.task.create("dense_nopack.x86", ...) with
# LocalBuilder and RPCRunner(n_parallel = 3, check_correctness = true), logging to a file. One
# server is killed with SIGKILL during a measurement and another is started later. The job
# completes with every trial in the log (the lost one an error record with error_no 4, its reason
# reported), and `tunelua rpc query` shows the right table before and after. Then a job for a key
# without devices: it waits, says so every wait_report_interval (1 s here), and stops at its
# limit with the resume line, leaving the log intact. Only 127.0.0.1 and ports the OS hands out
# are used.
#   bash tests/e2e/test_rpc_tune.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init rpctune 8 "${1:-}"
KEY=tunekey
N=9
T0=$(date +%s.%N)

start_tracker tracker --port 0; TPID=$LPID; PORT=$LPORT

sport() { bound_port "$W/server$1.out"; }
start_server 1; S1=$SPID
start_server 2; S2=$SPID
start_server 3; S3=$SPID

# The query, checked as text: the Queue Status table exactly, and one Server List row
# ("host:port" right-aligned to 21 columns, then the key) for each live server, nothing else.
EXPECT_QUEUE="Queue Status
-------------------------------
key       total  free  pending
-------------------------------
tunekey   3      3     0      
-------------------------------"
# After a request for "nodevkey" the tracker keeps that (empty, so hidden) queue; as in TVM, the
# key column is as wide as the longest queue name.
EXPECT_QUEUE2="Queue Status
--------------------------------
key        total  free  pending
--------------------------------
tunekey    3      3     0      
--------------------------------"
query_is() {  # query_is "SERVER NUMBERS" SECONDS [QUEUE TEXT]: exactly these servers, all free
  local want_queue=${3:-$EXPECT_QUEUE}
  local want_rows="" i=0
  for s in $1; do want_rows+="$(printf '%21s    server:%s' "127.0.0.1:$(sport $s)" $KEY)"$'\n'; done
  want_rows=$(printf '%s' "$want_rows" | sort)
  while true; do
    "$T" rpc query --host 127.0.0.1 --port $PORT > "$W/query.txt" 2>&1
    local rows queue
    rows=$(grep "server:" "$W/query.txt" | sort)
    queue=$(sed -n '/^Queue Status$/,$p' "$W/query.txt")
    [ "$rows" = "$want_rows" ] && [ "$queue" = "$want_queue" ] && return 0
    sleep 0.2; i=$((i + 1)); [ $i -gt $(($2 * 5)) ] && return 1
  done
}
query_is "1 2 3" 5 || { cat "$W/query.txt"; fail "query before the job"; }
echo "before the job:"; cat "$W/query.txt"

cat > "$W/tune.lua" <<'EOF'
local autotvm = require "tunelua.autotvm"
local port, key, n_trial, log = tonumber(arg[1]), arg[2], tonumber(arg[3]), arg[4]
local wait_limit, say = tonumber(arg[5]), tonumber(arg[6])
local function T(s) return {"TENSOR", s, "float32"} end
local task = autotvm.task.create("dense_nopack.x86", {T{4, 64}, T{32, 64}, nil, "float32"}, "llvm")
local tuner = autotvm.tuner.RandomTuner(task, {seed = 3})
local option = autotvm.measure_option({
  builder = autotvm.LocalBuilder({n_parallel = 3, timeout = 30}),
  runner = autotvm.RPCRunner(key, "127.0.0.1", port, {n_parallel = 3, number = 1, ["repeat"] = 2,
    min_repeat_ms = 100, timeout = 10, cooldown_interval = 0, check_correctness = true,
    wait_limit = wait_limit, wait_report_interval = say}),
})
-- reports each failed trial's reason (the log's record has error_no, not the text)
local function reasons(_, inputs, results)
  for k, r in ipairs(results) do
    if r.error_no ~= 0 then
      print(string.format("trial error: config %d error_no %d: %s", inputs[k].config.index, r.error_no,
                          tostring(r.error_msg)))
    end
  end
  io.stdout:flush()
end
print("tuning"); io.stdout:flush()
local r = tuner:tune({n_trial = n_trial, measure_option = option,
                      callbacks = {autotvm.callback.log_to_file(log), reasons}})
print(string.format("tuned %d trials, %d errors", r.trials, r.n_errors))
EOF

cat > "$W/check_log.lua" <<'EOF'
-- check_log.lua LOG N: N decodable records of distinct configs; prints "error CONFIG ERRNO" lines
local record = require "tunelua.autotvm.record"
local log, n = arg[1], tonumber(arg[2])
local lines = 0
for _ in io.lines(log) do lines = lines + 1 end
assert(lines == n, string.format("%s: %d lines, expected %d", log, lines, n))
local seen, count = {}, 0
for line in io.lines(log) do
  local inp, res = record.decode(line)
  assert(inp, "undecodable line: " .. line)
  local idx = inp.config.index
  assert(not seen[idx], "config " .. idx .. " twice")
  seen[idx] = true
  count = count + 1
  assert(inp.task and inp.task.name == "dense_nopack.x86" or line:find('"dense_nopack.x86"', 1, true))
  if res.error_no == 0 then
    assert(#res.costs == 2 and res.costs[1] > 0 and res.costs[1] < 0.01, line)
  else
    print(string.format("error %d %d", idx, res.error_no))
  end
end
assert(count == n)
print("log ok: " .. count .. " records")
EOF

# ---- the job; SIGKILL server 1 while it holds a session, start server 4 --------------------------
LOG=$W/tune.log
"$T" "$W/tune.lua" $PORT $KEY $N "$LOG" 30 60 > "$W/job.out" 2>&1 &
JOB=$!
PIDS+=($JOB)
wait_for "$W/job.out" tuning 10 || fail "job did not start"
# A session runs in a child of the server, and each measurement in a child of the session: kill
# server 1 while one of its measurements runs, so that exactly that trial is lost.
wait_measuring $S1 $JOB 1500 "server 1"
kill -9 $S1
echo "killed server 1 (pid $S1) during a measurement"
start_server 4; S4=$SPID
wait $JOB || fail "the job failed: $(cat "$W/job.out")"
cat "$W/job.out"
grep -q "^tuned $N trials, 1 errors$" "$W/job.out" || fail "expected $N trials, 1 error"
grep -q "^trial error: config [0-9]* error_no 4: device lost (server:$KEY at 127.0.0.1:$(sport 1)): " "$W/job.out" \
  || fail "no device-lost reason"
LOST=$(sed -n 's/^trial error: config \([0-9]*\) error_no 4: device lost.*/\1/p' "$W/job.out")
"$T" "$W/check_log.lua" "$LOG" $N > "$W/log.out" 2>&1 || fail "log check: $(cat "$W/log.out")"
[ "$(grep '^error ' "$W/log.out")" = "error $LOST 4" ] || fail "log errors: $(cat "$W/log.out")"
echo "$N records in the log; config $LOST lost (error_no 4)"
query_is "2 3 4" 10 || { cat "$W/query.txt"; fail "query after the job"; }
echo "after the job:"; cat "$W/query.txt"

# ---- no device of a key: waits, reports every second, stops at the limit, log intact -------------
cp "$LOG" "$W/nodev.log"
"$T" "$W/tune.lua" $PORT nodevkey 3 "$W/nodev.log" 3 1 > "$W/nodev.out" 2>&1 && fail "the no-device job did not stop"
cat "$W/nodev.out"
NW=$(grep -c "^rpc: waiting for a free device of key 'nodevkey' at 127.0.0.1:$PORT (" "$W/nodev.out")
[ "$NW" -ge 2 ] && [ "$NW" -le 4 ] || fail "expected 2-4 waiting lines (one a second for 3 s), got $NW"
grep "^rpc: waiting" "$W/nodev.out" | grep -q "no free device" && fail "a waiting line says it twice"
grep -qx "tunelua: RPCRunner: no device of key 'nodevkey' at 127.0.0.1:$PORT for 3 s; tuning stopped. The log is intact: start devices ('tunelua rpc server --tracker 127.0.0.1:$PORT --key nodevkey') and re-run the same tuning command with the same log file to resume." "$W/nodev.out" \
  || fail "no stop line with the resume hint"
cmp -s "$LOG" "$W/nodev.log" || fail "the log changed"
grep -q "stack traceback" "$W/nodev.out" && fail "a traceback instead of a clean stop"
query_is "2 3 4" 5 "$EXPECT_QUEUE2" || { cat "$W/query.txt"; fail "query after the no-device job"; }
for p in $S2 $S3 $S4 $TPID; do kill -0 $p || fail "process $p died"; done
if grep -l "Sanitizer" "$W"/*.out; then fail "sanitizer reports"; fi
echo "test_rpc_tune: ok ($(awk -v a=$T0 -v b=$(date +%s.%N) 'BEGIN {printf "%.1f", b - a}') s)"
