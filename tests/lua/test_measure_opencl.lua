-- Measuring AutoTVM configs of "opencl" tasks on the local OpenCL device
-- (tunelua.autotvm.measure_opencl; docs/measure_opencl.md). Skips without an OpenCL device.
local autotvm = require "tunelua.autotvm"
local measure = require "tunelua.autotvm.measure"
local record = require "tunelua.autotvm.record"
local te = require "tunelua.te"
local mo = require "tunelua.autotvm.measure_opencl"
local ffi = require "ffi"

local E = measure.MeasureErrorNo
local t_start = os.time()

assert(measure.device_hooks.opencl and measure.device_hooks.opencl.build_one == mo.build_one,
       "requiring measure_opencl registers measure.device_hooks.opencl")

-- pure helpers, no device needed: the limits check reads every kernel's work-group and __local
-- bytes from the manifest and names the limit a kernel exceeds
local man = [[{"name": "f", "kernels": [
  {"name": "f_kernel0", "grid": [1, 1, 1], "block": [7, 2, 4], "local_bytes": 320, "slots": [0]},
  {"name": "f_kernel1", "grid": [1, 1, 1], "block": [256, 1, 1], "local_bytes": 0, "slots": [0]}]}]]
local function dev(wi, wg, lm)
  return string.format('{"name": "D", "max_work_item_sizes": [%d, 2, 4], "max_work_group_size": %d, ' ..
                       '"local_mem_bytes": %d}', wi, wg, lm)
end
assert(mo.fits(man, dev(256, 256, 320)) == nil, "fits")
local why = mo.fits(man, dev(6, 256, 320))
assert(why and why:find("kernel 'f_kernel0': invalid work-group size 7x2x4: dimension 0 (7) exceeds " ..
                        "the device's max work-item size 6 (D)", 1, true), tostring(why))
why = mo.fits(man, dev(256, 55, 320))
assert(why and why:find("7x2x4 = 56 work-items exceeds the device's max work-group size 55", 1, true), why)
why = mo.fits(man, dev(256, 255, 320))
assert(why and why:find("kernel 'f_kernel1': invalid work-group size 256x1x1", 1, true), why)
why = mo.fits(man, dev(256, 256, 319))
assert(why and why:find("kernel 'f_kernel0' uses 320 bytes of __local memory, more than the device's 319", 1, true), why)
assert(mo.device_of_target("opencl") == 0 and mo.device_of_target("opencl -device=mali -device_id=1") == 1)

-- The device query runs in a child: this process must never initialize OpenCL.
local info, why = mo.device_info(0)
if not info then
  print("SKIP test_measure_opencl: no OpenCL device (" .. tostring(why) .. ")")
  return
end
print(string.format("device: %s, max work-group %d", info.name, info.max_work_group_size))
local maxwg = tonumber(info.max_work_group_size)

-- Lua templates: an elementwise add with a tiled thread binding, and a kernel that never ends
-- in practice (a reduction of 2^34 steps per work-item).
autotvm.task.register("oclm_add.test", require("tests.lua.lib.util").gpu_add)
autotvm.task.register("oclm_slow.test", function(cfg, n, k1, k2)
  local A = te.placeholder({ n }, "float32", "A")
  local r1, r2 = te.reduce_axis({ 0, k1 }, "r1"), te.reduce_axis({ 0, k2 }, "r2")
  local Cc = te.compute({ n }, function(i) return te.sum(A(i) * 1.0001, { r1, r2 }) end, "C")
  local s = te.create_schedule(Cc.op)
  cfg:define_split("tile_x", n, { num_outputs = 2 })
  local bx, tx = cfg.tile_x:apply(s, Cc, Cc.op.axis[1])
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  return s, { A, Cc }
end)

-- The task to tune: Mali's conv2d template when it exists, else the Lua add.
local conv_args = { { "TENSOR", { 1, 4, 8, 8 }, "float32" }, { "TENSOR", { 8, 4, 3, 3 }, "float32" },
                    { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "float32" }
local ok, task = pcall(autotvm.task.create, "conv2d_nchw_spatial_pack.mali", conv_args,
                       "opencl -device=mali")
if ok then
  print("task: " .. tostring(task))
else
  print("no Mali template (" .. tostring(task) .. "), using a Lua template")
  task = autotvm.task.create("oclm_add.test", { 1024 }, "opencl")
end

local function opt(b, r)
  return autotvm.measure_option({ builder = autotvm.LocalBuilder(b), runner = autotvm.LocalRunner(r) })
end

-- 1. good configs (fallback-like small tiles and a random valid one), with check_correctness
do
  local option = opt({ n_parallel = 2, timeout = 20 },
                     { number = 2, ["repeat"] = 3, cooldown_interval = 0, timeout = 10,
                       check_correctness = true })
  local batch = measure.create_measure_batch(task, option)
  local ins = { measure.MeasureInput(task, task.config_space:get(0)),
                measure.MeasureInput(task, task.config_space:get(#task.config_space - 1)) }
  local res = batch(ins)
  for i, r in ipairs(res) do
    assert(r.error_no == 0, string.format("config %d: error %s: %s", ins[i].config.index,
                                          measure.error_name(r.error_no), tostring(r.error_msg)))
    assert(#r.costs == 1 and r.costs[1] > 0 and r.costs[1] < 1, "costs: trimmed repeat 3 -> 1, > 0")
    assert(r.all_cost > 0 and r.timestamp > 0)
  end
  print(string.format("good configs: %.3g s and %.3g s per call", res[1].costs[1], res[2].costs[1]))
end

-- 2. an oversized work-group: refused before compiling, naming the limit
do
  local n = 2 * maxwg
  local t = autotvm.task.create("oclm_add.test", { n }, "opencl")
  local big
  for i = 0, #t.config_space - 1 do
    local c = t.config_space:get(i)
    if c:entity()[1][3][2] > maxwg then big = c break end
  end
  assert(big, "a config with more than max_work_group_size threads")
  local ok_small
  for i = 0, #t.config_space - 1 do
    local c = t.config_space:get(i)
    if c:entity()[1][3][2] == 64 then ok_small = c break end
  end
  local batch = measure.create_measure_batch(t, opt({ n_parallel = 2 }, { number = 1, ["repeat"] = 1,
                                                                           cooldown_interval = 0 }))
  local t0 = os.clock()
  local res = batch({ measure.MeasureInput(t, big) })
  assert(res[1].error_no == E.INSTANTIATION_ERROR, "oversized: " .. measure.error_name(res[1].error_no))
  assert(res[1].error_msg:find("invalid work%-group size") and res[1].error_msg:find("max work",
         1, true), res[1].error_msg)
  assert(res[1].costs[1] == 1e9 and os.clock() - t0 < 0.5, "refused without compiling")
  print("oversized: " .. res[1].error_msg)

  -- past the builder's pre-check (as when the device limits are unknown), the check in the
  -- child refuses the launch before compiling
  local inp = measure.MeasureInput(t, ok_small)
  local br = mo.build_one({ timeout = 10 }, inp)
  assert(br.error_no == 0)
  br.lowered = t:lower(big.index)
  local r = mo.run_one(autotvm.LocalRunner({ number = 1, ["repeat"] = 1, cooldown_interval = 0 }),
                       inp, br)
  assert(r.error_no == E.INSTANTIATION_ERROR and r.error_msg:find("work%-group size"),
         measure.error_name(r.error_no) .. ": " .. tostring(r.error_msg))
  print("oversized (driver check): " .. r.error_msg)
end

-- 3. a kernel that runs past the runner's timeout: RUN_TIMEOUT, and the process measures again
do
  local t = autotvm.task.create("oclm_slow.test", { 64, 2 ^ 20, 2 ^ 14 }, "opencl")
  -- the first launch may take the builder's 6 s on top of the runner's 1 s (pocl generates
  -- code then); the kernel runs far longer, so the trial ends by the limits
  local batch = measure.create_measure_batch(t, opt({ n_parallel = 1, timeout = 6 },
    { number = 1, ["repeat"] = 1, timeout = 1, cooldown_interval = 0 }))
  local t0 = os.time()
  local res = batch({ measure.MeasureInput(t, t.config_space:get(0)) })
  assert(res[1].error_no == E.RUN_TIMEOUT, measure.error_name(res[1].error_no) .. ": " ..
         tostring(res[1].error_msg))
  assert(res[1].error_msg:find("timed out"), res[1].error_msg)
  assert(os.time() - t0 < 20)
  print("hang: " .. res[1].error_msg)
end

-- 3b. a device compile past the builder's timeout: BUILD_TIMEOUT (a fresh constant in the
-- kernel keeps the driver's program cache from answering)
autotvm.task.register("oclm_scale.test", function(cfg, n, c)
  local A = te.placeholder({ n }, "float32", "A")
  local Cc = te.compute({ n }, function(i) return A(i) * c end, "C")
  local s = te.create_schedule(Cc.op)
  cfg:define_split("tile_x", n, { num_outputs = 2 })
  local bx, tx = cfg.tile_x:apply(s, Cc, Cc.op.axis[1])
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  return s, { A, Cc }
end)
do
  math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  local c = 1 + math.random(1, 1000000) / 1048576
  local t = autotvm.task.create("oclm_scale.test", { 64, c }, "opencl")
  local batch = measure.create_measure_batch(t, opt({ n_parallel = 1, timeout = 0.02 },
    { number = 1, ["repeat"] = 1, timeout = 5, cooldown_interval = 0 }))
  local res = batch({ measure.MeasureInput(t, t.config_space:get(1)) })
  assert(res[1].error_no == E.BUILD_TIMEOUT and res[1].error_msg:find("compiling for the device timed out"),
         measure.error_name(res[1].error_no) .. ": " .. tostring(res[1].error_msg))
  print("build timeout: " .. res[1].error_msg)
end

-- 4. a crash in the child (here: the driver handed a bad pointer) is RUNTIME_DEVICE. The bad
-- pointer reaches the code generator, which runs in the child only on the child-per-trial path
-- (the worker gets OpenCL C generated in this process; its crashes are
-- test_measure_opencl_worker.lua's)
do
  mo.use_worker(false)
  local t = autotvm.task.create("oclm_add.test", { 256 }, "opencl")
  local inp = measure.MeasureInput(t, t.config_space:get(0))
  local br = mo.build_one({ timeout = 10 }, inp)
  assert(br.error_no == 0)
  br.lowered = { handle = ffi.cast("tl_lowered *", 16) }
  local r = mo.run_one(autotvm.LocalRunner({ number = 1, ["repeat"] = 1, cooldown_interval = 0 }), inp, br)
  assert(r.error_no == E.RUNTIME_DEVICE and r.error_msg:find("crashed while compiling: signal 11"),
         measure.error_name(r.error_no) .. ": " .. tostring(r.error_msg))
  print("crash: " .. r.error_msg)
  mo.use_worker(nil)
end

-- 5. check_correctness: a config that computes something else than the fallback config
autotvm.task.register("oclm_addsub.test", function(cfg, n)
  local A = te.placeholder({ n }, "float32", "A")
  local B = te.placeholder({ n }, "float32", "B")
  cfg:define_split("tile_x", n, { num_outputs = 2 })
  cfg:define_knob("wrong", { false, true })
  local Cc = te.compute({ n }, function(i)
    if cfg.wrong.val then return A(i) - B(i) end
    return A(i) + B(i)
  end, "C")
  local s = te.create_schedule(Cc.op)
  local bx, tx = cfg.tile_x:apply(s, Cc, Cc.op.axis[1])
  s[Cc]:bind(bx, "blockIdx.x")
  s[Cc]:bind(tx, "threadIdx.x")
  return s, { A, B, Cc }
end)
do
  local t = autotvm.task.create("oclm_addsub.test", { 256 }, "opencl")
  local good, bad
  for i = 0, #t.config_space - 1 do
    local e = t.config_space:get(i):entity()
    if e[1][3][2] == 32 then
      if e[2][3] == false then good = i else bad = i end
    end
  end
  local batch = measure.create_measure_batch(t, opt({ n_parallel = 2 },
    { number = 1, ["repeat"] = 1, cooldown_interval = 0, check_correctness = true }))
  local res = batch({ measure.MeasureInput(t, good), measure.MeasureInput(t, bad) })
  assert(res[1].error_no == 0, tostring(res[1].error_msg))
  assert(res[2].error_no == E.WRONG_ANSWER and res[2].error_msg:find("argument 3 %('C'%) differs"),
         measure.error_name(res[2].error_no) .. ": " .. tostring(res[2].error_msg))
  print("WRONG_ANSWER: " .. res[2].error_msg)
end

-- 6. a short tune writing valid log records
do
  local log = os.tmpname()
  os.remove(log)
  local option = opt({ n_parallel = 4, timeout = 20 }, { number = 2, ["repeat"] = 1, cooldown_interval = 0 })
  local tuner = autotvm.tuner.RandomTuner(task, { seed = 7 })
  tuner:tune({ n_trial = 8, measure_option = option,
               callbacks = { autotvm.callback.log_to_file(log) } })
  local n, good = 0, 0
  for line in io.lines(log) do
    local inp, res = record.decode(line)
    assert(inp, "log line decodes: " .. tostring(res))
    assert(inp.task_name == task.name and inp.target:match("^opencl"), "task in the record")
    assert(inp.config.index >= 0 and inp.config.index < #task.config_space)
    n = n + 1
    if res.error_no == 0 then
      good = good + 1
      assert(res.costs[1] > 0 and res.costs[1] < 1e9)
    end
  end
  os.remove(log)
  assert(n == 8, "8 records, got " .. n)
  assert(good >= 1, "at least one good trial")
  assert(tuner.best_flops > 0)
  print(string.format("tune: %d records, %d good, best %.3g GFLOPS", n, good, tuner.best_flops / 1e9))
end

-- OpenCL was only ever initialized in children: no driver is mapped into this process.
do
  local f = assert(io.open("/proc/self/maps"))
  local maps = f:read("*a")
  f:close()
  assert(not maps:find("libpocl", 1, true) and not maps:find("nvidia-opencl", 1, true),
         "an OpenCL driver was loaded in the tuner's process")
end

local st = mo.stats
print(string.format("per trial: build %.4f s, waiting for compile-ahead %.3f s, run child %.3f s " ..
                    "(driver compile in it %.3f s); total %d s", st.build_s / math.max(1, st.builds),
                    st.wait_s / math.max(1, st.runs), st.child_s / math.max(1, st.runs),
                    st.compile_s / math.max(1, st.runs), os.time() - t_start))
print("test_measure_opencl: OK")
