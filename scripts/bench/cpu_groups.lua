--- Trials per second of an auto-scheduler search measured on one CPU group against several at
--- once (TUNELUA_MEASURE_CPUS with ';', tl_measure_run_batch), in the same run.
--
--   tunelua scripts/bench/cpu_groups.lua                         -- "0" against "0;1"
--   tunelua scripts/bench/cpu_groups.lua --specs "2,3|2,3;4,5;6,7" --trials 128 --per-round 64
--
-- Each spec ('|'-separated) is a TUNELUA_MEASURE_CPUS value: one group is the serial runner (each
-- child pins itself), several are timed concurrently. A small conv2d + relu task (1x8x28x28 ->
-- 32, 3x3) is tuned from scratch --trials trials in rounds of --per-round (random cost model,
-- population 64, the seed fixed), once per spec in each of --rounds rounds (interleaved, so a
-- load change hits every spec alike); the runner is ansor_network.lua's (number 3, repeat 1,
-- min_repeat_ms 50, cooldown 0.1 s). Printed: medians of the runner's seconds (the
-- measurement phase of every round), its trials/s, the whole search's trials/s, and the
-- ratios to the first spec.
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local ameasure = require "tunelua.autotvm.measure"
local file = require "tunelua.file"
local median = require("tunelua.stats").median
local now = function() return require("tunelua.core").C.tl_now() end

local opts = { specs = "0|0;1", trials = 32, per_round = 16, rounds = 3 }
do
  local keys = { ["--specs"] = "specs", ["--trials"] = "trials", ["--per-round"] = "per_round",
                 ["--rounds"] = "rounds" }
  local i = 1
  while i <= #arg do
    local k, v = keys[arg[i]], arg[i + 1]
    if not k then error("cpu_groups: unknown option " .. tostring(arg[i]) .. " (see the header of this script)", 0) end
    if v == nil then error("cpu_groups: " .. arg[i] .. " expects a value", 0) end
    if k ~= "specs" then
      local n = tonumber(v)
      if not n or n % 1 ~= 0 or n < 1 then error("cpu_groups: " .. arg[i] .. " expects a positive integer, got " .. v, 0) end
      v = n
    end
    opts[k] = v
    i = i + 2
  end
end
local specs = {}
for s in opts.specs:gmatch("[^|]+") do
  ameasure.parse_cpu_groups(s)      -- a malformed spec fails here, naming it
  specs[#specs + 1] = s
end

ffi.cdef [[ int setenv(const char *name, const char *value, int overwrite); ]]
local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-cpu-groups")

local function one(spec, round)
  ffi.C.setenv("TUNELUA_MEASURE_CPUS", spec, 1)
  local x = te.placeholder({ 1, 8, 28, 28 }, "float32", "data")
  local w = te.placeholder({ 32, 8, 3, 3 }, "float32", "kernel")
  local y = topi.nn.relu(topi.nn.conv2d(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 }))
  local task = auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
  local runner = ameasure.LocalRunner({ number = 3, ["repeat"] = 1, min_repeat_ms = 50, timeout = 10 })
  local run, run_s = runner.run, 0
  runner.run = function(self, inputs, brs)
    local t0 = now()
    local res = run(self, inputs, brs)
    run_s = run_s + (now() - t0)
    return res
  end
  local policy = auto_scheduler.SketchPolicy(task, { seed = 7, program_cost_model = auto_scheduler.RandomModel(),
    params = { evolutionary_search_population = 64, sample_init_min_population = 16 } })
  local log = string.format("%s/r%d-%s.json", dir, round, spec:gsub("[^%w]", "_"))
  local t0 = now()
  local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = opts.trials,
    num_measures_per_round = opts.per_round, verbose = 0, builder = auto_scheduler.LocalBuilder({ timeout = 30 }),
    runner = runner, measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policy)
  return { run_s = run_s, all_s = now() - t0, trials = r.trials }
end

local got = {}
for _, s in ipairs(specs) do got[s] = { run = {}, all = {}, trials = 0 } end
for round = 1, opts.rounds do
  for _, s in ipairs(specs) do
    local r = one(s, round)
    local g = got[s]
    g.run[#g.run + 1] = r.run_s
    g.all[#g.all + 1] = r.all_s
    g.trials = r.trials
  end
end
file.remove(dir)

print(string.format("\n%d trials in rounds of %d, %d rounds interleaved; medians", opts.trials, opts.per_round, opts.rounds))
print("| TUNELUA_MEASURE_CPUS | runner s | runner trials/s | search trials/s | runner speed-up | search speed-up |")
print("|---|---|---|---|---|---|")
local base
for _, s in ipairs(specs) do
  local g = got[s]
  local run, all = median(g.run), median(g.all)
  base = base or { run = run, all = all }
  print(string.format("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |", s, run, g.trials / run, g.trials / all,
                      base.run / run, base.all / all))
end
