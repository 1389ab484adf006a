-- Cold weights: what scripts/bench/ansor_network.lua --cache-flush auto is made of.
-- 1. task:constant_bytes(): resnet-18's extracted tasks weigh their constant arguments (the
--    7x7x512 3x3 conv with its bias and relu: a weight of 3 x 3 x 512 x 512 floats, 9 MiB, and
--    512 floats of bias; a pool has none; a task made from tensors has none).
-- 2. TuningOptions' runner as a function of the task: the task scheduler measures each task
--    with the runner the function returns for it (a flushed one and a warm one here), the
--    search's single-task tune too; a function that returns no runner is an error naming the
--    task; a runner of another type is refused.
-- 3. A time evaluator with cache_flush evicts the kernel's arguments after the first from the
--    caches before each measurement: the kernel still computes what it should (the evicted
--    lines are written back, not dropped).
local tl = require "tunelua"
local te = require "tunelua.te"
local nd = require "tunelua.nd"
local auto_scheduler = require "tunelua.auto_scheduler"
local ameasure = require "tunelua.autotvm.measure"
local records = require "tunelua.auto_scheduler.records"
local networks = require "networks"
local util = require "tests.lua.lib.util"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

-- 1. constant bytes of a network's tasks
local mod, params = networks.get_network("resnet-18", { batch_size = 1, layout = "NHWC" })
local tasks = auto_scheduler.extract_tasks(mod, params, "llvm", { winograd = "never" })
local big, pool = 0, nil
for _, t in ipairs(tasks) do
  local key = t.workload_key
  if key:find("[3, 3, 512, 512]", 1, true) and t.desc[1] == "fused_nn_conv2d_add_nn_relu" then
    eq(t:constant_bytes(), (3 * 3 * 512 * 512 + 512) * 4, "the 7x7x512 conv's weight and bias bytes")
    big = big + 1
  end
  if t.desc[1] == "fused_nn_global_avg_pool2d" then pool = t end
end
eq(big, 1, "resnet-18's 3x3 512 -> 512 conv + bias + relu tasks")
assert(pool, "resnet-18 has a global average pool task")
eq(pool:constant_bytes(), 0, "the global pool's constant bytes")

-- 2. a runner per task
local small = util.small_search_tasks()
eq(small[1]:constant_bytes(), 0, "a task made from tensors has no constants")

-- a runner that counts the trials it measured for each task, then measures them for real
local function counting(o)
  local real = ameasure.LocalRunner(o)
  local r = { seen = {} }
  function r:set_task(t) if real.set_task then real:set_task(t) end end
  function r:run(inputs, brs)
    self.seen[#self.seen + 1] = #inputs
    return real:run(inputs, brs)
  end
  return r
end
local flushed = counting({ number = 1, ["repeat"] = 3, min_repeat_ms = 0, timeout = 10,
                          enable_cpu_cache_flush = true })
local warm = counting({ number = 1, ["repeat"] = 1, min_repeat_ms = 0, timeout = 10 })
local asked = {}
local function per_task(task)
  asked[#asked + 1] = task.workload_key
  return task == small[1] and flushed or warm
end
local dir = util.tmpdir("cold_weights")
local log = dir .. "/log.json"
local tuner = auto_scheduler.TaskScheduler(small, { 1, 1 }, { verbose = 0 })
tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = 8, num_measures_per_round = 2,
  builder = ameasure.LocalBuilder({ timeout = 30 }), runner = per_task, verbose = 0,
  measure_callbacks = { auto_scheduler.RecordToFile(log) } },
  { program_cost_model = "random", seed = 1, params = { evolutionary_search_population = 32,
                                                        sample_init_min_population = 8 } })
eq(#asked, 2, "the runner function asked once per task")
local n1, n2 = 0, 0
for _, k in ipairs(flushed.seen) do n1 = n1 + k end
for _, k in ipairs(warm.seen) do n2 = n2 + k end
eq(n1 + n2, 8, "every trial measured by one of the two runners")
local per_key = {}
for _, r in ipairs(records.load(log, { warn = function() end })) do
  per_key[r.workload_key] = (per_key[r.workload_key] or 0) + 1
end
eq(n1, per_key[small[1].workload_key], "the conv's trials all went to the flushed runner")
eq(n2, per_key[small[2].workload_key], "the dense's trials all went to the warm runner")
assert(n1 > 0 and n2 > 0, string.format("both runners measured: %d and %d trials", n1, n2))
for _, r in ipairs(records.load(log, { warn = function() end })) do
  eq(r.error_no, 0, "trial of " .. r.workload_key .. " measured")
end

-- the single-task search takes a function too
local before = #flushed.seen
local st = dir .. "/single.json"
local res = small[2]:tune(auto_scheduler.TuningOptions{ num_measure_trials = 2, num_measures_per_round = 2,
  builder = ameasure.LocalBuilder({ timeout = 30 }), runner = function() return flushed end, verbose = 0,
  measure_callbacks = { auto_scheduler.RecordToFile(st) } },
  auto_scheduler.SketchPolicy(small[2], { program_cost_model = auto_scheduler.RandomModel(), seed = 3,
                                          params = { evolutionary_search_population = 16,
                                                     sample_init_min_population = 4 } }))
eq(res.trials, 2, "single task: trials")
eq(#flushed.seen, before + 1, "single task: its round measured by the runner the function gave")

-- errors: a function that returns no runner names the task; a runner of another type is refused
util.raises(function()
  tuner = auto_scheduler.TaskScheduler(small, { 1, 1 }, { verbose = 0 })
  tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = 2, num_measures_per_round = 1,
    runner = function() return 42 end }, { program_cost_model = "random", seed = 1 })
end, "the runner function returned number for task " .. small[1].workload_key .. ", expected a runner")
util.raises(function() auto_scheduler.TuningOptions{ runner = 5 } end,
            "runner must be a runner or a function(task) -> runner, got number")

-- 3. the cache flush evicts the arguments and the kernel's results stay right
local A = te.placeholder({ 4096 }, "float32", "A")
local B = te.placeholder({ 4096 }, "float32", "B")
local Cc = te.compute({ 4096 }, function(i) return A(i) * 2 + B(i) end, "C")
local s = te.create_schedule(Cc)
local f = tl.build(s, { A, B, Cc }, "llvm")
local av = nd.random_uniform({ 4096 }, { low = -1, high = 1, seed = 11 })
local bv = nd.random_uniform({ 4096 }, { low = -1, high = 1, seed = 12 })
local cv = nd.zeros({ 4096 })
local r = f:time_evaluator({ number = 1, repeats = 4, cache_flush = true })(av, bv, cv)
assert(r.mean > 0, "flushed timing: " .. tostring(r.mean))
local pa, pb, pc = util.f32(av), util.f32(bv), util.f32(cv)
for i = 0, 4095 do
  local want = pa[i] * 2 + pb[i]
  assert(math.abs(pc[i] - want) <= 1e-6 * (1 + math.abs(want)), string.format("C[%d] = %g, expected %g", i, pc[i], want))
end
util.cleanup(dir)
print("test_cold_weights: ok")
