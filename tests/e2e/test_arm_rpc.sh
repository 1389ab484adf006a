#!/usr/bin/env bash
# tunelua-rpc, the plain-C device server, cross compiled for aarch64 and run under qemu-aarch64
# (invoked explicitly, never through binfmt_misc) as the "phone" of a loopback device farm: it
# registers with a tracker under a key; a tuning job of arm_cpu configs (LocalBuilder cross
# compiling, RPCRunner with check_correctness) measures on it and writes TVM-shaped records. The
# device server is then killed with SIGKILL while it measures and started again: with
# lost_retries = 1 the job completes with every trial measured (none lost, none an error). The
# tracker link dropping (the tracker restarted on its port) is survived by reconnection.
#   bash tests/e2e/test_arm_rpc.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init armrpc 12 "${1:-}"
B=$(dirname "$T")
DEV=$B/aarch64/tunelua-rpc
QEMU=${TUNELUA_QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${TUNELUA_AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
[ -x "$DEV" ] || fail "$DEV not built (scripts/bootstrap installs gcc-aarch64-linux-gnu)"
command -v "$QEMU" > /dev/null || fail "$QEMU not found (scripts/bootstrap installs qemu-user)"
KEY=rk3399
N=4

start_tracker tracker --port 0; TPID=$LPID; PORT=$LPORT
start_device() {  # start_device N: tunelua-rpc under qemu, logging to $W/deviceN.out
  TMPDIR=$W "$QEMU" -L "$SYSROOT" "$DEV" --tracker 127.0.0.1:$PORT --key $KEY --host 127.0.0.1 --port 0 -v \
    > "$W/device$1.out" 2>&1 &
  DPID=$!; disown $DPID; PIDS+=($DPID)
  wait_for "$W/device$1.out" "registered with the tracker" 20 || fail "device $1 did not register"
}
start_device 1; D1=$DPID
query_until "$KEY 1 1 0" 10 || { cat "$W/query.txt"; fail "the device is not in the tracker's queue"; }

cat > "$W/tune.lua" <<'LUA'
local autotvm = require "tunelua.autotvm"
local port, key, n_trial, log, retries = tonumber(arg[1]), arg[2], tonumber(arg[3]), arg[4], tonumber(arg[5])
local function T(s) return {"TENSOR", s, "float32"} end
local task = autotvm.task.create("conv2d_nchw_spatial_pack.arm_cpu",
  {T{1, 8, 8, 8}, T{16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, "float32"},
  "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon")
local tuner = autotvm.tuner.RandomTuner(task, {seed = 5})
local option = autotvm.measure_option({
  builder = autotvm.LocalBuilder({n_parallel = 2, timeout = 60}),
  runner = autotvm.RPCRunner(key, "127.0.0.1", port, {n_parallel = 1, number = 2, ["repeat"] = 2,
    min_repeat_ms = 100, timeout = 30, cooldown_interval = 0, check_correctness = true,
    wait_limit = 60, wait_report_interval = 5, lost_retries = retries}),
})
local function reasons(_, inputs, results)
  for k, r in ipairs(results) do
    print(string.format("trial config %d error_no %d %s", inputs[k].config.index, r.error_no,
                        r.error_no ~= 0 and tostring(r.error_msg) or ""))
  end
  io.stdout:flush()
end
print("tuning"); io.stdout:flush()
local r = tuner:tune({n_trial = n_trial, measure_option = option,
                      callbacks = {autotvm.callback.log_to_file(log), reasons}})
print(string.format("tuned %d trials, %d errors", r.trials, r.n_errors))
LUA

cat > "$W/check_log.lua" <<'LUA'
-- check_log.lua LOG N: N TVM-shaped records of distinct configs, every one measured
local json = require "tunelua.json"
local record = require "tunelua.autotvm.record"
local log, n = arg[1], tonumber(arg[2])
local seen, count = {}, 0
for line in io.lines(log) do
  local j = json.decode(line)
  assert(j.input and j.config and j.result and j.version == 0.2, "not a TVM record: " .. line)
  assert(j.input[1] == "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon", line)
  assert(j.input[2] == "conv2d_nchw_spatial_pack.arm_cpu", line)
  assert(#j.config.entity == 6 and j.config.entity[1][1] == "tile_co", line)
  local inp, res = record.decode(line)
  assert(inp and not seen[inp.config.index], "config twice or undecodable: " .. line)
  seen[inp.config.index] = true
  assert(res.error_no == 0 and #res.costs >= 1 and res.costs[1] > 0, "not measured: " .. line)
  count = count + 1
end
assert(count == n, string.format("%d records, expected %d", count, n))
print("log ok: " .. count .. " records")
LUA

# ---- a job of N trials on the qemu device; the device killed mid-measurement and restarted ----
LOG=$W/tune.log
"$T" "$W/tune.lua" $PORT $KEY $N "$LOG" 1 > "$W/job.out" 2>&1 &
JOB=$!; PIDS+=($JOB)
wait_for "$W/job.out" tuning 30 || fail "job did not start"
# a session is a child of the device server, a measurement a child of the session
wait_measuring $D1 $JOB 3000 "the device"
kill -9 $D1
echo "killed the device server (pid $D1) during a measurement"
sleep 0.5
start_device 2; D2=$DPID
wait $JOB || fail "the job failed: $(cat "$W/job.out")"
cat "$W/job.out"
grep -q "^tuned $N trials, 0 errors$" "$W/job.out" || fail "expected $N trials, 0 errors"
grep -q "lost with their device; measuring again" "$W/job.out" || fail "no trial was measured again"
"$T" "$W/check_log.lua" "$LOG" $N > "$W/log.out" 2>&1 || fail "log check: $(cat "$W/log.out")"
cat "$W/log.out"

# ---- the tracker link drops: the device reconnects and serves again ---------------------------
kill $TPID; wait_for "$W/device2.out" "tracker link dropped" 10 || fail "the device did not notice the tracker leave"
"$T" rpc tracker --host 127.0.0.1 --port $PORT > "$W/tracker2.out" 2>&1 &
TPID=$!; disown $TPID; PIDS+=($TPID)
wait_for "$W/tracker2.out" "bind to" 5 || fail "the tracker did not restart on port $PORT"
query_until "$KEY 1 1 0" 20 || { cat "$W/query.txt"; fail "the device did not register again"; }
"$T" "$W/tune.lua" $PORT $KEY 2 "$W/tune2.log" 0 > "$W/job2.out" 2>&1 || fail "job after reconnect: $(cat "$W/job2.out")"
grep -q "^tuned 2 trials, 0 errors$" "$W/job2.out" || fail "job after reconnect: $(cat "$W/job2.out")"
kill -0 $D2 || fail "the device server died"

# ---- the session ops on a standalone device (no tracker), and bad requests ----------------------
TMPDIR=$W "$QEMU" -L "$SYSROOT" "$DEV" --key solo --host 127.0.0.1 --port 0 > "$W/solo.out" 2>&1 &
SOLO=$!; disown $SOLO; PIDS+=($SOLO)
wait_for "$W/solo.out" "bind to" 20 || fail "the standalone device did not start"
SPORT=$(bound_port "$W/solo.out")
cat > "$W/ops.lua" <<'LUA'
local rpc = require "tunelua.rpc"
local autotvm = require "tunelua.autotvm"
local measure = require "tunelua.autotvm.measure"
local tl = require "tunelua"
local te, topi, testing = require "tunelua.te", require "tunelua.topi", require "tunelua.testing"
local s = rpc.connect("127.0.0.1", tonumber(arg[1]), { key = "solo" })
local h = s:hello()
assert(h.version == 4 and h.server == "tunelua-rpc" and h.key == "server:solo", require("tunelua.json").encode(h))
-- a depthwise kernel cross compiled for aarch64, uploaded, loaded, called on uploaded arrays
local function T(x) return { "TENSOR", x, "float32" } end
local task = autotvm.task.create("depthwise_conv2d_nchw.arm_cpu", { T{1, 8, 9, 9}, T{8, 1, 3, 3}, {1, 1},
  {1, 1, 1, 1}, {1, 1}, "float32" }, "llvm -device=arm_cpu -mtriple=aarch64-linux-gnu")
local br = measure.LocalBuilder({ n_parallel = 1 }):build({ measure.MeasureInput(task, -1) })
assert(br[1].error_no == 0, br[1].error_msg)
s:upload(br[1].so_path, "dw.so")
local m = s:load_module("dw.so")
local a = tl.nd.random_uniform({ 1, 8, 9, 9 }, { seed = 1 })
local w = tl.nd.random_uniform({ 8, 1, 3, 3 }, { seed = 2 })
local ra, rw, ro = s:empty({ 1, 8, 9, 9 }):copyfrom(a), s:empty({ 8, 1, 3, 3 }):copyfrom(w), s:empty({ 1, 8, 9, 9 })
m:call(br[1].fname, ra, rw, ro)
local got = ro:copyto(tl.nd.empty({ 1, 8, 9, 9 }, "float32"))
local A, W = te.placeholder({ 1, 8, 9, 9 }, "float32", "A"), te.placeholder({ 8, 1, 3, 3 }, "float32", "W")
local O = topi.op("depthwise_conv2d", { A, W }, { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } })
O = O[#O]
local ref = tl.build(te.create_schedule(O.op), { A, W, O }, "c")
local want = tl.nd.empty({ 1, 8, 9, 9 }, "float32")
ref(a, w, want)
testing.assert_allclose(got, want, { rtol = 1e-4, atol = 1e-5 })
local c = m:time_evaluator(br[1].fname, { number = 2, ["repeat"] = 3 })(ra, rw, ro)
assert(#c == 3 and c[1] > 0, "time")
-- bad requests: errors naming what was wrong; the session goes on
local function refused(h2, blob, want_text)
  local ok, err = pcall(s.call, s, h2, blob)
  assert(not ok and tostring(err):find(want_text, 1, true), tostring(err))
end
refused({ op = "warp_drive" }, nil, "unknown op 'warp_drive'")
refused({ op = "upload", name = "x.so", size = 10 }, "not zlib at all", "not a zlib stream of 10 bytes")
refused({ op = "upload", name = "../x.so", size = 1 }, nil, "upload: bad name")
refused({ op = "load", name = "missing.so" }, nil, "load: ")
refused({ op = "graph_load", name = "g", params = "p" }, nil, "not served by tunelua-rpc")
refused({ op = "call", module = "dw.so", func = br[1].fname, args = { 0, 1, 99 } }, nil, "argument 2 is not an allocated array")
refused({ op = "alloc", shape = { 2, -1 } }, nil, "extent 1 is not a non-negative integer")
-- a wrong shape is the kernel's own error, reported
local bad = s:empty({ 1, 8, 9, 8 })
refused({ op = "call", module = "dw.so", func = br[1].fname, args = { ra.id, rw.id, bad.id } }, nil, "call: kernel")
assert(s:hello().version == 4)
s:close()
measure.cleanup(br)
print("session ops ok")
LUA
"$T" "$W/ops.lua" $SPORT > "$W/ops.out" 2>&1 || fail "session ops: $(cat "$W/ops.out")"
kill -0 $SOLO || fail "the standalone device died"
echo "test_arm_rpc: ok"
