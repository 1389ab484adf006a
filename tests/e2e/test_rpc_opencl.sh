#!/usr/bin/env bash
# OpenCL on a loopback device farm: a tracker and two servers with one key, an RPCRunner tuning
# job of an "opencl -device=mali" AutoTVM task (conv2d_nchw_spatial_pack.mali, 1x4x8x8 with 8
# 3x3 filters) whose builder ships OpenCL C + a manifest that the servers build and time on their
# OpenCL device; a config with an oversized work-group (an error record naming the limit); a
# session that loads OpenCL modules by hand: a malformed manifest refused with the reason (the
# session and the server live on), a good module called and timed, an oversized one refused at
# load. The tuning process never initializes OpenCL. Only 127.0.0.1 and ports the OS hands out
# are used. Prints SKIP and passes without an OpenCL device.
#   bash tests/e2e/test_rpc_opencl.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init rpcocl 12 "${1:-}"
T0=$(date +%s.%N)

# An OpenCL device? (queried in a child: never in this process's tunelua either)
DEV=$("$T" -e 'local i, why = require("tunelua.autotvm.measure_opencl").device_info(0)
print(i and ("device " .. i.name .. " " .. i.max_work_group_size) or ("none " .. tostring(why)))' 2>&1)
case "$DEV" in
  device*) echo "$DEV" ;;
  *) echo "SKIP test_rpc_opencl: no OpenCL device ($DEV)"; exit 0 ;;
esac

KEY=oclkey
start_tracker tracker --port 0; TPID=$LPID; PORT=$LPORT
start_server 1; S1=$SPID
start_server 2; S2=$SPID
free_is() { query_until "$KEY 2 $1 0" "$2"; }  # free_is N SECONDS: the tracker has N free servers of KEY
free_is 2 10 || fail "servers not registered: $(cat "$W/query.txt")"

cat > "$W/job.lua" <<EOF
local ffi = require "ffi"
local core = require "tunelua.core"
local autotvm = require "tunelua.autotvm"
local measure = require "tunelua.autotvm.measure"
local record = require "tunelua.autotvm.record"
local rpc = require "tunelua.rpc"
local mo = require "tunelua.autotvm.measure_opencl"
local C, ctx = core.C, core.ctx
local E = measure.MeasureErrorNo
local PORT, KEY, W = $PORT, "$KEY", "$W"
local function mapped_opencl()
  local f = io.open("/proc/self/maps")
  local m = f:read("*a")
  f:close()
  return m:find("libpocl", 1, true) or m:find("libnvidia%-opencl")
end
local info = assert(mo.device_info(0))
local maxwg = tonumber(info.max_work_group_size)

-- 1. a tuning job: RandomTuner on the Mali conv2d template through RPCRunner (2 devices)
local conv_args = { { "TENSOR", { 1, 4, 8, 8 }, "float32" }, { "TENSOR", { 8, 4, 3, 3 }, "float32" },
                    { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "float32" }
local task = autotvm.task.create("conv2d_nchw_spatial_pack.mali", conv_args, "opencl -device=mali")
local runner = autotvm.RPCRunner(KEY, "127.0.0.1", PORT, { n_parallel = 2, number = 2, ["repeat"] = 2,
  timeout = 30, cooldown_interval = 0, check_correctness = true, wait_limit = 30 })
local option = autotvm.measure_option({ builder = autotvm.LocalBuilder({ n_parallel = 2, timeout = 20 }),
                                        runner = runner })
local log = W .. "/mali.log"
local t0 = C.tl_now()
local tuner = autotvm.tuner.RandomTuner(task)
local seen = {}
tuner:tune({ n_trial = 6, measure_option = option, callbacks = { autotvm.callback.log_to_file(log),
  function(_, ins, res) for i, r in ipairs(res) do seen[#seen + 1] = { ins[i].config.index, r } end end } })
local tune_s = C.tl_now() - t0
local recs = record.load_from_file(log)
assert(#recs == 6, "6 records in the log, got " .. #recs)
local good = 0
for _, rc in ipairs(recs) do
  assert(rc.inp.task_name == "conv2d_nchw_spatial_pack.mali" and rc.inp.target:match("^opencl"), "an OpenCL record")
  if rc.res.error_no == 0 then
    good = good + 1
    assert(rc.res.costs[1] > 0 and rc.res.costs[1] < 1, "a plausible cost")
  end
end
for _, s in ipairs(seen) do
  if s[2].error_no ~= 0 then print("trial " .. s[1] .. ": " .. measure.error_name(s[2].error_no) .. ": " .. tostring(s[2].error_msg)) end
end
assert(good == 6, "every Mali config measured with error_no 0 (check_correctness), got " .. good)
print(string.format("tuning: 6 trials on 2 remote OpenCL devices in %.1f s, all error_no 0", tune_s))

-- 2. an oversized work-group through RPCRunner: an error record naming the limit
autotvm.task.register("rpcocl_add.test", require("tests.lua.lib.util").gpu_add)
local t = autotvm.task.create("rpcocl_add.test", { 2 * maxwg }, "opencl")
local big, small
for i = 0, #t.config_space - 1 do
  local c = t.config_space:get(i)
  local tx = c:entity()[1][3][2]
  if tx > maxwg and not big then big = c end
  if tx == 64 and not small then small = c end
end
local r2 = autotvm.RPCRunner(KEY, "127.0.0.1", PORT, { n_parallel = 1, number = 1, ["repeat"] = 1,
  cooldown_interval = 0 })
local batch = measure.create_measure_batch(t, autotvm.measure_option({
  builder = autotvm.LocalBuilder({ n_parallel = 1 }), runner = r2 }))
local ins = { measure.MeasureInput(t, big), measure.MeasureInput(t, small) }
local res = batch(ins)
assert(res[1].error_no == E.INSTANTIATION_ERROR, "oversized: " .. measure.error_name(res[1].error_no)
       .. ": " .. tostring(res[1].error_msg))
assert(res[1].error_msg:find("invalid work%-group size") and res[1].error_msg:find("exceed", 1, true),
       res[1].error_msg)
assert(res[2].error_no == 0 and res[2].costs[1] > 0, "the 64-thread config: " .. tostring(res[2].error_msg))
local line = record.encode(ins[1], res[1])
local di, dr = record.decode(line)
assert(di and dr.error_no == 1, "the oversized trial's record decodes with error_no 1")
print("oversized: " .. res[1].error_msg)

-- 3. a session by hand: OpenCL C + manifest uploaded, a malformed manifest refused
local l = t:lower(small.index)
local sp, mp = ffi.new("char *[1]"), ffi.new("char *[1]")
core.check(C.tl_opencl_source_manifest(ctx, l.handle, sp, mp))
local src, man = ffi.string(sp[0]), ffi.string(mp[0])
C.tl_opencl_str_free(sp[0]); C.tl_opencl_str_free(mp[0])
local function put(name, text) local f = assert(io.open(W .. "/" .. name, "wb")); f:write(text); f:close(); return W .. "/" .. name end
local bads = {
  { "{\"format\": ", "not JSON" },
  { (man:gsub('"block": %[64, 1, 1%]', '"block": [64, 1]')), "kernels[0].block: 2 entries, expected exactly 3" },
  { (man:gsub('"slots": %[0, 1, 2%]', '"slots": [0, 1, 7]')), "kernels[0].slots[2]: 7 is out of bounds" },
  { (man:gsub('"fp64": false', '"fp64": false, "extra": 1')), "unknown key 'extra'" },
  { (man:gsub('"name": "default_function_kernel0"', '"name": "no_such_kernel"')), "the source defines no kernel 'no_such_kernel'" },
  { (man:gsub('"shape": %[' .. 2 * maxwg .. '%]', '"shape": [1099511627776]', 1)), "bytes (at most" },
}
local sess = rpc.request_remote(KEY, "127.0.0.1", PORT, { timeout = 20 })
assert(sess:hello().version == 4, "session protocol version 4")
sess:upload(put("k.cl", src), "k.cl")
for i, b in ipairs(bads) do
  sess:upload(put("bad.json", b[1]), "bad" .. i .. ".json")
  local ok, err = pcall(sess.load_opencl, sess, "k.cl", "bad" .. i .. ".json")
  assert(not ok and tostring(err):find("opencl manifest: ", 1, true) and tostring(err):find(b[2], 1, true),
         "malformed manifest " .. i .. ": " .. tostring(err))
  if i == 1 then print("malformed manifest refused: " .. tostring(err):gsub("^.-rpc ", "rpc ")) end
end
-- a measure with a malformed manifest: refused the same way, before any child
local ok, err = pcall(sess.measure_opencl, sess, "k.cl", "bad2.json", { number = 1, ["repeat"] = 1 })
assert(not ok and tostring(err):find("expected exactly 3", 1, true), tostring(err))
-- the same session goes on: the good manifest loads, and the module runs and is timed
sess:upload(put("k.json", man), "k.json")
local n = 2 * maxwg
local m = sess:load_opencl("k.cl", "k.json")
assert(m.kernels == 1)
local a, b, c = sess:empty({ n }, "float32"), sess:empty({ n }, "float32"), sess:empty({ n }, "float32")
a:random(1); b:random(2)
m:call(nil, a, b, c)
local function floats(s) local p = ffi.cast("const float *", s); local t = {}; for i = 0, #s / 4 - 1 do t[i + 1] = p[i] end; return t end
local fa, fb, fc = floats(a:bytes()), floats(b:bytes()), floats(c:bytes())
for i = 1, n do assert(math.abs(fc[i] - (fa[i] + fb[i])) < 1e-6, "C = A + B on the device at " .. i) end
local costs = m:time_evaluator(nil, { number = 3, ["repeat"] = 2 })(a, b, c)
assert(#costs == 2 and costs[1] > 0 and costs[2] > 0, "time on the device")
-- an oversized work-group at load: refused with the reason, the session still answers
local lb = t:lower(big.index)
core.check(C.tl_opencl_source_manifest(ctx, lb.handle, sp, mp))
sess:upload(put("big.cl", ffi.string(sp[0])), "big.cl")
sess:upload(put("big.json", ffi.string(mp[0])), "big.json")
C.tl_opencl_str_free(sp[0]); C.tl_opencl_str_free(mp[0])
ok, err = pcall(sess.load_opencl, sess, "big.cl", "big.json")
assert(not ok and tostring(err):find("invalid work%-group size"), tostring(err))
-- measure after OpenCL was used in this session: refused, with the reason
ok, err = pcall(sess.measure_opencl, sess, "k.cl", "k.json", { number = 1, ["repeat"] = 1 })
assert(not ok and tostring(err):find("fresh session", 1, true), tostring(err))
assert(sess:hello().version == 4)
sess:close()
-- measure in a fresh session, with the reference module
local s2 = rpc.request_remote(KEY, "127.0.0.1", PORT, { timeout = 20 })
s2:upload(put("k.cl", src), "k.cl"); s2:upload(put("k.json", man), "k.json")
local r = s2:measure_opencl("k.cl", "k.json", { number = 2, ["repeat"] = 3, ref_module = "k.cl", ref_manifest = "k.json" })
assert(r.error_no == 0 and #r.costs == 3 and r.costs[1] > 0, "measure: " .. tostring(r.error))
s2:close()
print(string.format("session: malformed manifests refused (%d kinds), C = A + B checked on the device, " ..
                    "time %.3g s per call", #bads, costs[1]))
assert(not mapped_opencl(), "the tuning process never initializes OpenCL")
print("no OpenCL driver in the tuning process")
print("JOB OK")
EOF
"$T" "$W/job.lua" > "$W/job.out" 2>&1
RC=$?
cat "$W/job.out"
[ $RC = 0 ] && grep -q "JOB OK" "$W/job.out" || fail "the job failed (status $RC)"

# the servers are alive and free again
kill -0 $S1 && kill -0 $S2 || fail "a server died"
free_is 2 10 || fail "servers not free after the job: $(cat "$W/query.txt")"
grep -q "session ended" "$W/server1.out" "$W/server2.out" && fail "a session ended abnormally"
# OpenCL only in session and measurement children: never in the long-lived server processes
for p in $S1 $S2; do
  grep -qE "libpocl|libnvidia-opencl" /proc/$p/maps && fail "server $p has an OpenCL driver mapped"
done
# an orderly shutdown: no sanitizer report from the servers (ASan builds)
kill -TERM $S1 $S2
for i in $(seq 1 50); do kill -0 $S1 2>/dev/null || kill -0 $S2 2>/dev/null || break; sleep 0.1; done
grep -l "Sanitizer" "$W"/*.out && fail "a sanitizer report"
awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "PASS test_rpc_opencl (%.1f s)\n", b - a }'
