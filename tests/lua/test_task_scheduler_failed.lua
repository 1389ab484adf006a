-- The task scheduler over the real search (sketch policies, LocalBuilder, a runner) when a
-- task's first round fails: the runner times out every trial of the first round it is given
-- (the warm-up round of task 0, a conv), then measures normally. Task 0 is retried after the
-- other task had a round, gets a valid schedule, and is tuned further; the log holds the
-- failed round's error records and the later valid ones; the table listed the failed round.
local auto_scheduler = require "tunelua.auto_scheduler"
local ameasure = require "tunelua.autotvm.measure"
local records = require "tunelua.auto_scheduler.records"
local util = require "tests.lua.lib.util"

local dir = util.tmpdir("task_scheduler_failed")
local tasks = util.small_search_tasks()

-- a runner whose first run call times out every trial, then a LocalRunner's
local real = ameasure.LocalRunner({ number = 1, ["repeat"] = 1, min_repeat_ms = 0, timeout = 10 })
local calls = 0
local runner = {}
function runner:set_task(t) if real.set_task then real:set_task(t) end end
function runner:run(inputs, brs)
  calls = calls + 1
  if calls > 1 then return real:run(inputs, brs) end
  local out = {}
  for i = 1, #inputs do
    out[i] = ameasure.MeasureResult({ 1e10 }, ameasure.MeasureErrorNo.RUN_TIMEOUT, 10, os.time(), "timed out (test)")
  end
  return out
end

local log = dir .. "/log.json"
local lines = {}
local table_cb = { pre_tune = function(_, tuner, idx)
  tuner:print_table(idx, { write = function(_, ...) for _, s in ipairs({ ... }) do lines[#lines + 1] = s end end,
                           flush = function() end })
end }
local tuner = auto_scheduler.TaskScheduler(tasks, { 1, 1 }, { callbacks = { table_cb }, verbose = 0 })
local order = {}
local policies = require("tunelua.auto_scheduler.sketch_rounds").policies(tasks,
  { builder = ameasure.LocalBuilder({ timeout = 30 }), runner = runner },
  { program_cost_model = "random", seed = 1,
    params = { evolutionary_search_population = 32, sample_init_min_population = 8 } })
for i, p in ipairs(policies) do
  local f = p.continue_search_one_round
  p.continue_search_one_round = function(self, n)
    order[#order + 1] = i
    return f(self, n)
  end
end
tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = 8, num_measures_per_round = 2,
  measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policies)

assert(order[1] == 1 and order[2] == 2, "warm-up order: " .. table.concat(order, ","))
assert(order[3] == 1, "task 0 retried right after task 1's round: " .. table.concat(order, ","))
assert(not tuner.dead_tasks[1], "task 0 alive: " .. tostring(tuner.dead_tasks[1]))
assert(tuner.best_costs[1] < 1e9, "task 0 tuned after its failed first round")
assert(tuner.best_costs[2] < 1e9, "task 1 tuned")
assert(tuner.ct == 8, "the whole budget: " .. tuner.ct)
local recs = records.load(log, { warn = function() end })
local failed, valid = 0, 0
for _, r in ipairs(recs) do
  if r.workload_key == tasks[1].workload_key then
    if r.error_no ~= 0 then failed = failed + 1 else valid = valid + 1 end
  end
end
assert(failed == 2 and valid >= 2, string.format("task 0's records: %d failed, %d valid", failed, valid))
local text = table.concat(lines)
assert(text:find("Task 0: no valid trial in its last 1 round (retried; done after 3)", 1, true), text)

-- max_seconds: a run out of time starts no round (task scheduler and single task); the log
-- gains nothing; a non-positive value is an error naming the option
local ok, err = pcall(auto_scheduler.TuningOptions, { num_measure_trials = 8, max_seconds = 0 })
assert(not ok and err:find("max_seconds must be a positive number", 1, true), tostring(err))
local log2 = dir .. "/log2.json"
local t2 = auto_scheduler.TaskScheduler(tasks, { 1, 1 }, { callbacks = {}, verbose = 0 })
t2:tune(auto_scheduler.TuningOptions{ num_measure_trials = 8, num_measures_per_round = 2, max_seconds = 1e-9,
  builder = ameasure.LocalBuilder({ timeout = 30 }), runner = real,
  measure_callbacks = { auto_scheduler.RecordToFile(log2) } },
  { program_cost_model = "random", seed = 1,
    params = { evolutionary_search_population = 32, sample_init_min_population = 8 } })
assert(t2.ct == 0, "no trial after max_seconds: " .. t2.ct)
local f2 = io.open(log2, "r")
assert(not f2 or f2:read("*a") == "", "the log gained records")
if f2 then f2:close() end
local r1 = tasks[2]:tune(auto_scheduler.TuningOptions{ num_measure_trials = 4, num_measures_per_round = 2,
  max_seconds = 1e-9, runner = real, verbose = 0 })
assert(r1.trials == 0 and r1.rounds == 0, "single task: " .. r1.trials .. " trials")
-- with time to spare the limit does not cut the run short
local r2 = tasks[2]:tune(auto_scheduler.TuningOptions{ num_measure_trials = 4, num_measures_per_round = 2,
  max_seconds = 3600, runner = real, verbose = 0 })
assert(r2.trials == 4, "single task with time to spare: " .. r2.trials .. " trials")

util.cleanup(dir)
print("ok: task 0 failed its first round, then tuned (" .. table.concat(order, ",") .. ")")
