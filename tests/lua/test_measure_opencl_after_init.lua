-- Measuring OpenCL trials after the calling process has initialized OpenCL itself
-- (docs/measure_opencl.md, "OpenCL in the tuner's process"): a script (or a REPL user) runs a
-- kernel on the device in-process, then tunes. A forked child would inherit the initialized
-- driver, which is not fork-safe; the local runner then measures in a freshly exec'd
-- tunelua-measure-opencl instead. Checked on pocl: a kernel run in this process, then a few
-- trials of a small auto-scheduler task with check_correctness, every one valid (a wrong
-- answer would be WRONG_ANSWER), then the device query and the reference run after init.
local tl = require "tunelua"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local nd = require "tunelua.nd"
local auto_scheduler = require "tunelua.auto_scheduler"
local am = require "tunelua.autotvm.measure"
local mo = require "tunelua.autotvm.measure_opencl"

-- asked in a child: this process has not touched OpenCL yet
local info, why = mo.device_info(0)
if not info then
  print("SKIP test_measure_opencl_after_init: no OpenCL device (" .. tostring(why) .. ")")
  return
end

-- 1. a kernel built and run in this process: the driver is initialized here now
local A = te.placeholder({ 64 }, "float32", "A")
local B = te.compute({ 64 }, function(i) return A(i) * 2 + 1 end, "B")
local s = te.create_schedule(B.op)
local xo, xi = s[B]:split(B.op.axis[1], { factor = 16 })
s[B]:bind(xo, "blockIdx.x")
s[B]:bind(xi, "threadIdx.x")
local f = tl.build(s, { A, B }, "opencl")
local a = nd.random_uniform({ 64 }, { seed = 3 })
local b = nd.zeros({ 64 })
local da, db = a:copyto("opencl:0"), b:copyto("opencl:0")
f(da, db)
local fa, fb = a:flat(), db:copyto("cpu"):flat()
for i = 1, 64 do assert(math.abs(fb[i] - (fa[i] * 2 + 1)) < 1e-5, "in-process kernel: element " .. i) end
local mf = assert(io.open("/proc/self/maps"))
local maps = mf:read("*a")
mf:close()
assert(maps:find("libpocl", 1, true) or maps:find("nvidia", 1, true) or maps:find("OpenCL", 1, true),
       "the test's premise: an OpenCL driver is loaded in this process")

-- 2. tuning a small task afterwards: all trials valid and checked against the unscheduled DAG
local x = te.placeholder({ 1, 6, 6, 8 }, "float32", "x")
local w = te.placeholder({ 3, 3, 8, 8 }, "float32", "w")
local y = topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
local task = auto_scheduler.SearchTask{ compute_dag = y, target = "opencl" }
local results = {}
local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = 3, num_measures_per_round = 3,
  verbose = 0, builder = am.LocalBuilder({ timeout = 60, n_parallel = 2 }),
  runner = am.LocalRunner({ number = 1, repeats = 1, timeout = 60, check_correctness = true }),
  measure_callbacks = { function(_, st, res) results[#results + 1] = { st = st, res = res } end } },
  auto_scheduler.SketchPolicy(task, { seed = 4, program_cost_model = auto_scheduler.RandomModel() }))
assert(#results == 3 and r.trials == 3, "3 trials measured, got " .. #results)
for i, t in ipairs(results) do
  if t.res.error_no ~= 0 then
    error(string.format("trial %d after in-process OpenCL: %s: %s\nsteps: %s", i,
      am.error_name(t.res.error_no), tostring(t.res.error_msg), t.st:steps()))
  end
  assert(t.res.costs[1] > 0 and t.res.costs[1] < 1, "trial " .. i .. ": cost " .. tostring(t.res.costs[1]))
end

-- 3. a wrong answer is still caught on this path: a trial of the conv checked against the
-- reference of conv + 1 (same arguments) differs
local search = require "tunelua.auto_scheduler.search"
local y1 = te.compute({ 1, 6, 6, 8 }, function(n, h, ww, c) return y(n, h, ww, c) + 1 end, "y1")
local other = search.measure_task(auto_scheduler.SearchTask{ compute_dag = y1, target = "opencl" })
local mt = search.measure_task(task)
mt.states[1] = results[1].st
mt.lower_reference = function() return other:lower_reference() end
local res = am.create_measure_batch(mt, am.measure_option({ builder = am.LocalBuilder({ timeout = 60 }),
  runner = am.LocalRunner({ number = 1, repeats = 1, timeout = 60, check_correctness = true }) }))({ am.MeasureInput(mt, 1) })
assert(res[1].error_no == am.MeasureErrorNo.WRONG_ANSWER,
       "the conv checked against conv + 1: " .. am.error_name(res[1].error_no) .. ": " .. tostring(res[1].error_msg))

-- 4. the device query after init answers in this process, and agrees with the child's answer
local c2 = require("tunelua.core")
local out = require("ffi").new("char *[1]")
assert(c2.C.tl_measure_opencl_device_info(c2.ctx, 0, out) == 0, c2.errmsg())
local again = require("tunelua.json").decode(require("ffi").string(out[0]))
c2.C.tl_measure_str_free(out[0])
assert(again.name == info.name and again.max_work_group_size == info.max_work_group_size, "device info after init")
print(string.format("test_measure_opencl_after_init: %d trials valid after in-process OpenCL on '%s'",
                    #results, tostring(info.name)))
