-- The auto-scheduler's search from Lua (tunelua.auto_scheduler over core/ansor/search.c):
-- sketches of network tasks lower and verify under the CPU and the GPU rules, a small real
-- search writes records in the auto-scheduler format and replays its best, a rerun with
-- the same log resumes, and bad input gives clear errors (unknown target, hardware params
-- that allow no threads, a DAG with no reduction, a malformed record line).
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local json = require "tunelua.json"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local networks = require "networks"
local util = require "tests.lua.lib.util"

local dir = util.tmpdir("ansor-search")

-- ---- every sketch of every resnet-18, mobilenet and inception_v3 task lowers ------------------
local nsk, ntasks = 0, 0
for _, net in ipairs({ { "resnet-18", "NHWC" }, { "mobilenet", "NCHW" }, { "inception_v3", "NCHW" } }) do
  local mod, params = networks.get_network(net[1], { layout = net[2], batch_size = 1 })
  local cpu_tasks = auto_scheduler.extract_tasks(mod, params, "llvm")
  assert(#cpu_tasks > 0, net[1] .. ": no tasks")
  for _, tgt in ipairs({ "llvm", "opencl -device=mali" }) do
    local tasks = cpu_tasks
    if tgt ~= "llvm" then   -- the same DAGs under the GPU rules
      tasks = {}
      for i, t in ipairs(cpu_tasks) do
        tasks[i] = auto_scheduler.SearchTask{ compute_dag = t.compute_dag, target = tgt }
      end
    end
    for _, t in ipairs(tasks) do
      local sk = t:sketches()
      assert(#sk >= 1, net[1] .. ": task " .. t.workload_key .. " has no sketch")
      for _, s in ipairs(sk) do
        local ok, err = pcall(s.lower, s)
        if not ok then error(net[1] .. " " .. tgt .. ": a sketch does not lower: " .. tostring(err) .. "\n" .. s:steps()) end
        nsk = nsk + 1
      end
      ntasks = ntasks + 1
    end
  end
end

-- GPU sketches tile in shared memory and CPU ones cache-write or fuse the consumer
local function conv_task(tgt, hp)
  local x = te.placeholder({ 1, 8, 10, 10 }, "float32", "data")
  local w = te.placeholder({ 16, 8, 3, 3 }, "float32", "kernel")
  local y = topi.nn.relu(topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 }))
  return auto_scheduler.SearchTask{ compute_dag = y, target = tgt, hardware_params = hp }
end
local cpu_sk = conv_task("llvm"):sketches()
assert(#cpu_sk == 3, "conv2d + relu: CPU sketches " .. #cpu_sk)
assert(cpu_sk[1]:steps():find('"FSP"') and cpu_sk[3]:steps():find('"RE"'), "CPU sketches tile and fuse")
local gpu_sk = conv_task("opencl -device=mali"):sketches()
assert(#gpu_sk == 1 and gpu_sk[1]:steps():find('"CHR", %d+, "shared"'), "GPU sketch caches reads in shared memory")

-- an NHWC max pool (a reduction with no reuse) has a CPU sketch with the window's reduction outside
-- the channel axis (reduce-outside), beside the one in the DAG's order, and its states vectorize
-- the channels
do
  local x = te.placeholder({ 1, 12, 12, 32 }, "float32", "data")
  local y = topi.nn.pool2d(x, { pool_type = "max", kernel = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1, 1, 1 },
                               layout = "NHWC" })
  local t = auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
  local sks, outside = t:sketches(), 0
  for _, sk in ipairs(sks) do
    if tostring(sk):find("%(3%) reduce\n[^\n]*%(3%) reduce\n      %d+ ax3 %(32%)") then outside = outside + 1 end
  end
  assert(#sks == 2 and outside == 1, string.format("max pool NHWC: %d CPU sketches, %d with the reduction outside",
                                                    #sks, outside))
  local vec = 0
  for _, st in ipairs(t:sample(8)) do
    if tostring(st):find("ax3[%w%.]* %(%d+%)[^\n]*vectorize") then vec = vec + 1 end
  end
  assert(vec >= 1, "no sampled max-pool state vectorizes its channels")
end

-- ---- a small search: records, best replay, resume ----------------------------------------------
local task = conv_task("llvm")
local log = dir .. "/conv.json"
local function tune(n, seed)
  local policy = auto_scheduler.SketchPolicy(task, { seed = seed, program_cost_model = auto_scheduler.RandomModel(),
    params = { evolutionary_search_population = 64, sample_init_min_population = 16 } })
  return task:tune(auto_scheduler.TuningOptions{ num_measure_trials = n, num_measures_per_round = 4, verbose = 0,
    builder = auto_scheduler.LocalBuilder({ timeout = 60 }),
    runner = auto_scheduler.LocalRunner({ number = 1, timeout = 60, check_correctness = true }),
    measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policy)
end
local r1 = tune(8, 1)
assert(r1.trials == 8 and r1.best_cost < math.huge, "first run")
local lines = {}
for l in io.lines(log) do lines[#lines + 1] = l end
assert(#lines == 8, "8 record lines, got " .. #lines)
local rec = json.decode(lines[1])
assert(rec.v == "v0.6" and #rec.i[1] == 6 and rec.i[1][1] == task.workload_key and rec.i[1][2] == "llvm",
       "record task fields: " .. lines[1])
assert(lines[1]:find('^{"i": %[%["') and lines[1]:find('"r": %[%[') , "record layout")
local r2 = tune(16, 2)
assert(r2.trials == 16, "resumed run counts the log: " .. r2.trials)
local seen, n, nok = {}, 0, 0
for l in io.lines(log) do
  local rr = json.decode(l)
  -- measured with check_correctness: evolved (mutated) states compute what the DAG does
  -- (a build may time out on a loaded machine; a wrong answer never passes)
  assert(rr.r[2] ~= 5, "a measured state computes something else: " .. l)
  nok = nok + (rr.r[2] == 0 and 1 or 0)
  local s = json.encode(rr.i[2][2])
  assert(not seen[s], "a state was measured twice")
  seen[s] = true
  n = n + 1
end
assert(n == 16, "resume appended 8 lines, log has " .. n)
assert(nok >= 12, nok .. " of 16 states measured without error")
-- (the log holds costs to 6 significant digits)
assert(r2.best_cost <= r1.best_cost * (1 + 1e-5), "resume keeps the best")
local best = task:apply_best(log)
local args = search.random_args(task, nil, 3)
local init = ffi.cast("tl_sched *", require("tunelua.core").C.tl_ansor_policy_init_state(task:policy_handle()))
local ref_args = search.random_args(task, nil, 3)
setmetatable({ handle = init, task = task }, search.State_mt):build()(unpack(ref_args))
best:build()(unpack(args))
local a, b = args[#args]:flat(), ref_args[#ref_args]:flat()
for i = 1, #a do assert(math.abs(a[i] - b[i]) < 1e-3, "best state matches the reference") end
assert(task:print_best(log, "c"):find("default_function"), "print_best C")
assert(task:print_best(log, "opencl"):find("__kernel"), "print_best OpenCL")

-- ---- a real search with the XGBoost model improves on its random initial population ------------
-- The states are judged after the search by timing them again in this process, every state once
-- per pass over all of them, the fastest of 7 passes each: a load that comes and goes then hits
-- the random round and the model-guided rounds alike (the search's own timings, minutes apart,
-- made this check fail on a loaded machine). The search's own trials time each state for at least
-- 20 ms per repeat: with 5 ms, a suite running beside it on the other core (CI) sent one search
-- down another path (best 36.90 GFLOPS after the first round against 70-90 undisturbed). Even so,
-- a test beside it once left rounds 4-5's upper quartile under the random round's (17.74 against
-- 19.37 GFLOPS, the best 67.44): the suite runs this test alone (CMakeLists.txt, RUN_SERIAL).
do
  local x = te.placeholder({ 1, 16, 14, 14 }, "float32", "data")
  local w = te.placeholder({ 32, 16, 3, 3 }, "float32", "kernel")
  local y = topi.nn.relu(topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 }))
  local t = auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
  local states, valid = {}, {}
  t:tune(auto_scheduler.TuningOptions{ num_measure_trials = 40, num_measures_per_round = 8, verbose = 0,
    runner = auto_scheduler.LocalRunner({ number = 2, ["repeat"] = 3, min_repeat_ms = 20 }),
    measure_callbacks = { function(_, st, res)
      states[#states + 1] = st
      valid[#valid + 1] = res.error_no == 0
    end } }, auto_scheduler.SketchPolicy(t, { seed = 1,
      program_cost_model = auto_scheduler.XGBModel{ seed = 1, num_warmup_sample = 8 },
      params = { evolutionary_search_population = 256 } }))
  assert(#states == 40, "40 measurements, got " .. #states)
  local targs = search.random_args(t, nil, 5)
  local fns, gf = {}, {}
  for i, st in ipairs(states) do
    if valid[i] then fns[i] = st:build() end
    gf[i] = 0
  end
  local now = require("tunelua.core").C.tl_now
  for _ = 1, 7 do
    for i = 1, 40 do
      local f = fns[i]
      if f then
        f(unpack(targs))
        local t0, n = now(), 0
        repeat f(unpack(targs)); n = n + 1 until now() - t0 > 2e-3
        gf[i] = math.max(gf[i], t.flop * n / (now() - t0) / 1e9)
      end
    end
  end
  -- the upper quartile of rounds a..b (GFLOPS of the state a quarter of the way down from the
  -- fastest): the states the model ranks high, not the eps-greedy random picks every round keeps
  local function upper_quartile(a, b)
    local v = {}
    for i = a, b do v[#v + 1] = gf[i] end
    table.sort(v, function(x, y) return x > y end)
    return v[math.max(1, math.floor(#v / 4))]
  end
  local function best(a, b)
    local m = 0
    for i = a, b do m = math.max(m, gf[i]) end
    return m
  end
  -- round 1 is the random initial population (the model has nothing to learn from yet); the
  -- model-guided rounds 4 and 5 propose faster states, and the best improves by a clear margin
  local q1, q45 = upper_quartile(1, 8), upper_quartile(25, 40)
  print(string.format("search: re-timed, the random round's upper quartile %.2f GFLOPS, rounds 4-5 %.2f; " ..
                      "best %.2f, then %.2f", q1, q45, best(1, 8), best(9, 40)))
  assert(q45 > q1, string.format("model-guided upper quartile %.2f GFLOPS not above the random round's %.2f",
                                 q45, q1))
  assert(best(9, 40) > 1.3 * best(1, 8), string.format("best %.2f GFLOPS after the first round, %.2f in it",
                                                        best(9, 40), best(1, 8)))
end

-- ---- bad input ---------------------------------------------------------------------------------
local function fails(fn, pat, what)
  local ok, err = pcall(fn)
  assert(not ok, what .. ": no error")
  assert(tostring(err):find(pat), what .. ": " .. tostring(err))
end
fails(function() conv_task("nosuchtarget") end, "nosuchtarget", "unknown target")
local hp0 = auto_scheduler.HardwareParams{ target = "opencl -device=mali", max_threads_per_block = 0 }
fails(function() auto_scheduler.SketchPolicy(conv_task("opencl -device=mali", hp0), {}) end,
      "allow no threads %(max_threads_per_block 0", "hardware params allowing nothing")
fails(function() auto_scheduler.SketchPolicy(task, { params = { nope = 1 } }) end, "unknown parameter 'nope'", "param")
fails(function() auto_scheduler.SketchPolicy(task, { params = { max_vectorize_size = 0 } }) end,
      "max_vectorize_size = 0 is out of range", "param range")
-- a DAG with no reduction: no tiling rule applies, and the one sketch samples fine
local x = te.placeholder({ 4, 33 }, "float32", "x")
local ew = auto_scheduler.SearchTask{ compute_dag = topi.nn.relu(x), target = "llvm" }
local esk = ew:sketches()
assert(#esk == 1 and not esk[1]:steps():find('"SP"'), "element-wise DAG: one untiled sketch")
assert(#ew:sample(4) == 4, "element-wise DAG samples")
-- a malformed line in a resumed log is skipped with a warning naming it; the rest load
local bad = dir .. "/bad.json"
local f = assert(io.open(bad, "w"))
f:write(lines[1], "\n", "{\"i\": [garbage\n", lines[2], "\n", '{"i": [], "r": [], "x": 1}', "\n")
f:close()
local warnings = {}
local recs = search.load_records(bad, { warn = function(m) warnings[#warnings + 1] = m end })
assert(#recs == 2, "two good records, got " .. #recs)
assert(#warnings == 2 and warnings[1]:find(bad .. ":2: skipped a malformed record line", 1, true), tostring(warnings[1]))
assert(warnings[2]:find(":4:", 1, true), tostring(warnings[2]))

util.cleanup(dir)
print(string.format("test_ansor_search: %d sketches of %d tasks lower; search, records, resume and errors ok", nsk, ntasks))
