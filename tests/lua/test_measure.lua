-- Measurement (tunelua.autotvm.measure): LocalBuilder + LocalRunner on hand-made kernels. A good kernel,
-- an instantiation error, a compile error, a segfault, a hang and a wrong answer each give
-- the right error_no and message, and this (the tuning) process lives on.
local te = require "tunelua.te"
local schedule = require "tunelua.schedule"
local tl = require "tunelua.build"
local measure = require "tunelua.autotvm.measure"
local E = measure.MeasureErrorNo

local create_schedule = te.create_schedule or schedule.create
local N = 4096

local function vadd(kind)
  local A = te.placeholder({N}, "float32", "A")
  local B = te.placeholder({N}, "float32", "B")
  local Cc = te.compute({N}, function(i)
    if kind == "wrong" then return A(i) - B(i) end
    return A(i) + B(i)
  end, "C")
  local s = create_schedule(Cc.op)
  if kind == "split" then
    local io, ii = s[Cc]:split(Cc.op.axis[1], {factor = 8})
    s[Cc]:vectorize(ii)
  end
  return tl.lower(s, {A, B, Cc}, {name = "f"})
end

local SIG = string.format('{"name": "f", "args": [{"name": "A", "dtype": "float32", "shape": [%d]}, ' ..
  '{"name": "B", "dtype": "float32", "shape": [%d]}, {"name": "C", "dtype": "float32", "shape": [%d]}]}', N, N, N)
local PRE = "#include <stdint.h>\n"
local raw = {
  segv = PRE .. "int32_t f(void **a, int32_t n) { volatile int *p = (int *)0; *p = 1; return 0; }\n",
  hang = PRE .. "int32_t f(void **a, int32_t n) { for (;;) { __asm__ volatile(\"\"); } return 0; }\n",
  bad = PRE .. "int32_t f(void **a, int32_t n) { return this is not C; }\n",
}

-- config index -> kernel
local configs = { [0] = "plain", "split", "segv", "hang", "bad", "inst", "wrong" }
local task = { name = "vadd_test", target = "llvm", args = {}, flop = N }
function task:lower(index)
  local k = configs[index]
  if k == "inst" then error("invalid config: tile factor 3 does not divide 4096") end
  if raw[k] then return { source = raw[k], sig = SIG } end
  return vadd(k)
end
function task:lower_reference() return vadd("plain") end

local function inputs(list)
  local r = {}
  for i, idx in ipairs(list) do r[i] = measure.MeasureInput(task, {index = idx}) end
  return r
end

local option = measure.measure_option({
  builder = measure.LocalBuilder({n_parallel = 2, timeout = 20}),
  runner = measure.LocalRunner({number = 2, ["repeat"] = 4, timeout = 1.5,
                                cooldown_interval = 0, check_correctness = true}),
})
local batch = measure.create_measure_batch(task, option)

local t0 = os.time()
local res = batch(inputs({0, 1, 2, 3, 4, 5, 6}))
assert(#res == 7)
for i, r in ipairs(res) do
  print(i - 1, configs[i - 1], measure.error_name(r.error_no), r.costs[1],
        r.error_msg and r.error_msg:sub(1, 90):gsub("\n", " ") or "")
  assert(type(r.timestamp) == "number" and r.timestamp >= t0 - 1)
  assert(type(r.all_cost) == "number" and r.all_cost >= 0)
end
-- good kernels: 4 repeats, min and max dropped -> 2 costs, each a plausible time
for _, k in ipairs({1, 2}) do
  local r = res[k]
  assert(r.error_no == E.NO_ERROR, r.error_msg)
  assert(#r.costs == 2, #r.costs)
  assert(r.costs[1] > 0 and r.costs[1] < 1e-2 and r.costs[1] <= r.costs[2])
  assert(r.error_msg == nil)
end
assert(res[3].error_no == E.RUNTIME_DEVICE)
assert(res[3].error_msg:find("signal 11", 1, true), res[3].error_msg)
assert(res[4].error_no == E.RUN_TIMEOUT)
assert(res[4].error_msg:find("timed out after 1.5 s", 1, true), res[4].error_msg)
assert(res[5].error_no == E.COMPILE_HOST)
assert(res[5].error_msg:find("error", 1, true), res[5].error_msg)
assert(res[6].error_no == E.INSTANTIATION_ERROR)
assert(res[6].error_msg:find("tile factor 3 does not divide 4096", 1, true), res[6].error_msg)
assert(res[7].error_no == E.WRONG_ANSWER)
assert(res[7].error_msg:find("wrong answer: argument 2", 1, true), res[7].error_msg)
for _, k in ipairs({3, 4, 5, 6, 7}) do assert(res[k].costs[1] == 1e9) end

-- a build that runs past its time limit: BUILD_TIMEOUT
local slow = measure.LocalBuilder({n_parallel = 1, timeout = 0.001})
local br = slow:build(inputs({0}))
assert(br[1].error_no == E.BUILD_TIMEOUT, measure.error_name(br[1].error_no))
assert(br[1].error_msg:find("timed out", 1, true))
measure.cleanup(br)

-- the tuning process is still alive and measures again; per-trial overhead
local fast = measure.measure_option({
  builder = measure.LocalBuilder({n_parallel = 2}),
  runner = measure.LocalRunner({number = 1, ["repeat"] = 1, cooldown_interval = 0}),
})
local b2 = measure.create_measure_batch(task, fast)
local clock = require("tunelua.core").C.tl_now
local w0 = clock()
local list = {}
for i = 1, 8 do list[i] = i % 2 end
local r2 = b2(inputs(list))
local dt = clock() - w0
for _, r in ipairs(r2) do assert(r.error_no == 0, r.error_msg) end
print(string.format("overhead: %.1f ms per trial (build + run of a tiny kernel, 8 trials)", dt / 8 * 1e3))

-- option checking
local ok, err = pcall(measure.LocalRunner, {number = "x"})
assert(not ok and err:find("number: expected a number", 1, true), err)
ok, err = pcall(measure.measure_option, {builder = 3})
assert(not ok and err:find("builder must be", 1, true), err)
print("test_measure: ok")

-- a C task (tunelua_autotvm.h): configs are instantiated and lowered in forked children
local autotvm = require "tunelua.autotvm"
local ok_t, dtask = pcall(autotvm.task.create, "dense_nopack.x86",
  {{"TENSOR", {1, 64}, "float32"}, {"TENSOR", {32, 64}, "float32"}, "None", "float32"}, "llvm")
if ok_t then
  local n = #dtask.config_space
  local copt = measure.measure_option({
    builder = measure.LocalBuilder({n_parallel = 2, timeout = 30}),
    runner = measure.LocalRunner({number = 2, cooldown_interval = 0, check_correctness = true}),
  })
  local cb = measure.create_measure_batch(dtask, copt)
  local cin = {measure.MeasureInput(dtask, dtask.config_space:get(1)),
               measure.MeasureInput(dtask, {index = n - 1}),
               measure.MeasureInput(dtask, {index = n + 5})}
  local cr = cb(cin)
  assert(cr[1].error_no == 0 and cr[1].costs[1] > 0 and cr[1].costs[1] < 0.01, cr[1].error_msg)
  assert(cr[2].error_no == 0, cr[2].error_msg)
  assert(cr[3].error_no == E.INSTANTIATION_ERROR, measure.error_name(cr[3].error_no))
  print("C task, bad index: " .. cr[3].error_msg)
  local tb = measure.LocalBuilder({n_parallel = 1, timeout = 0.001}):build({cin[1]})
  assert(tb[1].error_no == E.BUILD_TIMEOUT, measure.error_name(tb[1].error_no))
  measure.cleanup(tb)
else
  error("the C task could not be created: " .. tostring(dtask))
end
print("test_measure: C task ok")

-- an OpenCL task without the OpenCL runtime's hook: a clear error record, not a host build
local cl_task = {name = "cl", target = "opencl -device=mali", lower = function() return vadd("plain") end}
if not measure.device_hooks.opencl then
  local clr = measure.LocalBuilder({n_parallel = 1}):build({measure.MeasureInput(cl_task, 0)})
  assert(clr[1].error_no == E.COMPILE_DEVICE, measure.error_name(clr[1].error_no))
  assert(clr[1].error_msg:find("measure.device_hooks.opencl", 1, true), clr[1].error_msg)
end
-- dispatch follows the target's backend and device type, not its kind string
assert(measure.hook_of(cl_task) == measure.device_hooks.opencl, "an OpenCL task: the opencl hook")
assert(measure.hook_of({ target = "opencl" }) == measure.device_hooks.opencl, "generic OpenCL")
assert(measure.hook_of({ target = "llvm -mcpu=core-avx2" }) == nil, "a CPU task: host C")
assert(measure.hook_of({ target = "c" }) == nil and measure.hook_of({}) == nil, "c, none: host C")
local cu = measure.LocalBuilder({n_parallel = 1}):build({measure.MeasureInput(
  {name = "cu", target = "cuda", lower = function() return vadd("plain") end}, 0)})
assert(cu[1].error_no == E.COMPILE_DEVICE, measure.error_name(cu[1].error_no))
assert(cu[1].error_msg:find("measure.device_hooks.cuda", 1, true), cu[1].error_msg)
print("test_measure: hooks ok")
