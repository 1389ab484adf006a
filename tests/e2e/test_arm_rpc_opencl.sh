#!/usr/bin/env bash
# OpenCL through tunelua-rpc, the plain-C device server (device/ocl.c): the host build (dynamically
# linked: it loads the OpenCL driver with dlopen in each measurement child) registers with a
# loopback tracker; a tuning job of Mali templates (conv2d_nchw_spatial_pack.mali and
# depthwise_conv2d_nchw.mali, "opencl -device=mali") ships OpenCL C + manifests through RPCRunner
# with check_correctness; every trial is measured and checked against the reference on the
# device, and the log holds TVM-shaped records. By hand on a session: a kernel that computes the
# wrong thing is WRONG_ANSWER, an oversized work-group INSTANTIATION_ERROR naming the limit, a
# malformed manifest refused with the reason, load of an OpenCL module refused (measure only).
# Without a driver the device says so: the dynamic build pointed at a missing driver library,
# and the static aarch64 build under qemu-aarch64 (no dlopen of a driver at all). The server
# process never maps the driver. Prints SKIP for the pocl part without an OpenCL device.
#   bash tests/e2e/test_arm_rpc_opencl.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init armocl 12 "${1:-}"
B=$(dirname "$T")
HOSTDEV=$B/tunelua-rpc
ARMDEV=$B/aarch64/tunelua-rpc
QEMU=${TUNELUA_QEMU_AARCH64:-qemu-aarch64}
SYSROOT=${TUNELUA_AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}
[ -x "$HOSTDEV" ] || fail "$HOSTDEV not built"
KEY=maliphone

cat > "$W/kernels.lua" <<'LUA'
-- kernels.lua DIR: an OpenCL add kernel (C = A + B, 256 elements, 64 work-items per group), its
-- manifest, a wrong variant (C = A - B) and an oversized work-group variant, written to DIR
local ffi = require "ffi"
local core = require "tunelua.core"
local autotvm = require "tunelua.autotvm"
local C, ctx = core.C, core.ctx
local W = arg[1]
autotvm.task.register("armocl_add.test", require("tests.lua.lib.util").gpu_add)
local t = autotvm.task.create("armocl_add.test", { 256 }, "opencl")
local function emit(tx, name)
  for i = 0, #t.config_space - 1 do
    local c = t.config_space:get(i)
    if c:entity()[1][3][2] == tx then
      local l = t:lower(c.index)
      local sp, mp = ffi.new("char *[1]"), ffi.new("char *[1]")
      core.check(C.tl_opencl_source_manifest(ctx, l.handle, sp, mp))
      local src, man = ffi.string(sp[0]), ffi.string(mp[0])
      C.tl_opencl_str_free(sp[0]); C.tl_opencl_str_free(mp[0])
      local f = assert(io.open(W .. "/" .. name .. ".cl", "wb")); f:write(src); f:close()
      f = assert(io.open(W .. "/" .. name .. ".json", "wb")); f:write(man); f:close()
      return src, man
    end
  end
  error("no config with " .. tx .. " threads")
end
local src, man = emit(64, "add")
local wrong = src:gsub("%] %+ ", "] - ", 1)
assert(wrong ~= src, "the add kernel's source: " .. src)
local f = assert(io.open(W .. "/sub.cl", "wb")); f:write(wrong); f:close()
emit(256, "big")
f = assert(io.open(W .. "/big.json")); local big = f:read("*a"); f:close()
big = big:gsub('"block": %[256, 1, 1%]', '"block": [1048576, 1, 1]'):gsub('"grid": %[1, 1, 1%]', '"grid": [1, 1, 1]')
f = assert(io.open(W .. "/huge.json", "wb")); f:write(big); f:close()
f = assert(io.open(W .. "/bad.json", "wb")); f:write((man:gsub('"block": %[64, 1, 1%]', '"block": [64, 1]'))); f:close()
print("kernels written")
LUA
"$T" "$W/kernels.lua" "$W" > "$W/kernels.out" 2>&1 || fail "kernels: $(cat "$W/kernels.out")"

cat > "$W/nodriver.lua" <<'LUA'
-- nodriver.lua PORT WANT_OPENCL WANT_TEXT: hello says how the build reaches OpenCL; a measure of
-- an OpenCL module is COMPILE_DEVICE (3) with a message naming why there is no driver
local rpc = require "tunelua.rpc"
local s = rpc.connect("127.0.0.1", tonumber(arg[1]), { key = "solo" })
local h = s:hello()
assert(h.server == "tunelua-rpc" and h.opencl == arg[2], require("tunelua.json").encode(h))
local W = arg[4]
s:upload(W .. "/add.cl", "add.cl"); s:upload(W .. "/add.json", "add.json")
local r = s:measure_opencl("add.cl", "add.json", { number = 1, ["repeat"] = 1 })
assert(r.error_no == 3 and tostring(r.error):find(arg[3], 1, true), "no driver: " .. tostring(r.error_no) .. " " .. tostring(r.error))
print("no driver: " .. r.error)
s:close()
LUA
standalone() {  # standalone OUT CMD...: a device server without tracker; sets SOLO and SPORT
  local out=$1; shift
  TMPDIR=$W "$@" --key solo --host 127.0.0.1 --port 0 > "$W/$out.out" 2>&1 &
  SOLO=$!; disown $SOLO; PIDS+=($SOLO)
  wait_for "$W/$out.out" "bind to" 20 || fail "the standalone device ($out) did not start"
  SPORT=$(bound_port "$W/$out.out")
}
# ---- no driver: the dynamic build pointed at a missing library; the static aarch64 build -------
TUNELUA_OPENCL_LIB=$W/no/libOpenCL.so.1 standalone nolib "$HOSTDEV"
"$T" "$W/nodriver.lua" $SPORT dlopen "no OpenCL driver on this device: cannot load $W/no/libOpenCL.so.1" "$W" \
  > "$W/nolib.txt" 2>&1 || fail "missing driver: $(cat "$W/nolib.txt")"
cat "$W/nolib.txt"
if [ -x "$ARMDEV" ] && command -v "$QEMU" > /dev/null; then
  standalone static "$QEMU" -L "$SYSROOT" "$ARMDEV"
  "$T" "$W/nodriver.lua" $SPORT none "linked statically and cannot load an OpenCL driver" "$W" \
    > "$W/static.txt" 2>&1 || fail "static build: $(cat "$W/static.txt")"
  cat "$W/static.txt"
fi

# ---- with a driver (pocl): a tuning job through the tracker, then a session by hand -------------
DEV=$("$T" -e 'local i, why = require("tunelua.autotvm.measure_opencl").device_info(0)
print(i and ("device " .. i.name .. " " .. i.max_work_group_size) or ("none " .. tostring(why)))' 2>&1)
case "$DEV" in
  device*) echo "$DEV" ;;
  *) echo "SKIP test_arm_rpc_opencl (tuning part): no OpenCL device ($DEV)"; echo "test_arm_rpc_opencl: ok"; exit 0 ;;
esac
start_tracker tracker --port 0; PORT=$LPORT
TMPDIR=$W "$HOSTDEV" --tracker 127.0.0.1:$PORT --key $KEY --host 127.0.0.1 --port 0 -v > "$W/device.out" 2>&1 &
DPID=$!; disown $DPID; PIDS+=($DPID)
wait_for "$W/device.out" "registered with the tracker" 20 || fail "the device did not register"
query_until "$KEY 1 1 0" 10 || fail "the device is not in the tracker's queue: $(cat "$W/query.txt")"

cat > "$W/tune.lua" <<'LUA'
local autotvm = require "tunelua.autotvm"
local json = require "tunelua.json"
local measure = require "tunelua.autotvm.measure"
local record = require "tunelua.autotvm.record"
local rpc = require "tunelua.rpc"
local port, key, W = tonumber(arg[1]), arg[2], arg[3]
local function T(s) return { "TENSOR", s, "float32" } end
local jobs = {
  { "conv2d_nchw_spatial_pack.mali", { T{1, 4, 8, 8}, T{8, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, "NCHW", "float32" }, 3 },
  { "depthwise_conv2d_nchw.mali", { T{1, 8, 8, 8}, T{8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, "float32" }, 2 },
}
for _, j in ipairs(jobs) do
  local task = autotvm.task.create(j[1], j[2], "opencl -device=mali")
  local log = W .. "/" .. j[1] .. ".log"
  local option = autotvm.measure_option({
    builder = autotvm.LocalBuilder({ n_parallel = 2, timeout = 30 }),
    runner = autotvm.RPCRunner(key, "127.0.0.1", port, { n_parallel = 1, number = 2, ["repeat"] = 2,
      timeout = 30, cooldown_interval = 0, check_correctness = true, wait_limit = 60 }) })
  local seen = {}
  local r = autotvm.tuner.RandomTuner(task, { seed = 3 }):tune({ n_trial = j[3], measure_option = option,
    callbacks = { autotvm.callback.log_to_file(log), function(_, ins, res)
      for k, x in ipairs(res) do
        if x.error_no ~= 0 then print(j[1] .. " config " .. ins[k].config.index .. ": " .. tostring(x.error_msg)) end
      end end } })
  assert(r.trials == j[3] and r.n_errors == 0, string.format("%s: %d trials, %d errors", j[1], r.trials, r.n_errors))
  local n = 0
  for line in io.lines(log) do
    local d = json.decode(line)
    assert(d.version == 0.2 and d.input[1] == "opencl -device=mali" and d.input[2] == j[1] and
           type(d.config.entity) == "table" and d.config.index and d.result[2] == 0, "a TVM record: " .. line)
    local inp, res = record.decode(line)
    assert(inp and not seen[inp.config.index] and res.error_no == 0 and res.costs[1] > 0 and res.costs[1] < 1, line)
    seen[inp.config.index] = true
    n = n + 1
  end
  assert(n == j[3], j[1] .. ": " .. n .. " records")
  print(string.format("%s: %d trials on tunelua-rpc, all measured and checked", j[1], n))
end
-- by hand: the numerical check can fail, the device's limits are checked, bad manifests refused
local E = measure.MeasureErrorNo
local s = rpc.request_remote(key, "127.0.0.1", port, { timeout = 20 })
assert(s:hello().opencl == "dlopen")
for _, f in ipairs({ "add.cl", "add.json", "sub.cl", "big.cl", "huge.json", "bad.json" }) do s:upload(W .. "/" .. f, f) end
local r = s:measure_opencl("add.cl", "add.json", { number = 2, ["repeat"] = 3, ref_module = "add.cl", ref_manifest = "add.json" })
assert(r.error_no == 0 and #r.costs == 3 and r.costs[1] > 0, "add against itself: " .. tostring(r.error))
r = s:measure_opencl("sub.cl", "add.json", { number = 1, ["repeat"] = 1, ref_module = "add.cl", ref_manifest = "add.json" })
assert(r.error_no == E.WRONG_ANSWER and r.error:find("wrong answer: argument 3 differs", 1, true), "sub: " .. tostring(r.error))
print("a wrong kernel: " .. r.error)
r = s:measure_opencl("big.cl", "huge.json", { number = 1, ["repeat"] = 1 })
assert(r.error_no == E.INSTANTIATION_ERROR and r.error:find("invalid work-group size", 1, true), "huge: " .. tostring(r.error))
print("an oversized work-group: " .. r.error)
r = s:measure_opencl("add.cl", "bad.json", { number = 1, ["repeat"] = 1 })
assert(r.error_no == E.INSTANTIATION_ERROR and r.error:find("kernels[0].block: 2 entries", 1, true), "bad: " .. tostring(r.error))
local ok, err = pcall(s.load_opencl, s, "add.cl", "add.json")
assert(not ok and tostring(err):find("only through 'measure'", 1, true), tostring(err))
s:close()
local f = io.open("/proc/self/maps"); local maps = f:read("*a"); f:close()
assert(not maps:find("libpocl", 1, true), "the tuning process never initializes OpenCL")
print("JOB OK")
LUA
"$T" "$W/tune.lua" $PORT $KEY "$W" > "$W/job.out" 2>&1; RC=$?
cat "$W/job.out"
[ $RC = 0 ] && grep -q "JOB OK" "$W/job.out" || fail "the job failed (status $RC)"
kill -0 $DPID || fail "the device server died"
grep -qE "libpocl|libOpenCL" /proc/$DPID/maps && fail "the device server process has the OpenCL driver mapped"
echo "test_arm_rpc_opencl: ok"
