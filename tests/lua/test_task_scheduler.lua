-- The task scheduler (tunelua.auto_scheduler.task_scheduler, algorithms B10) with scripted
-- search policies: each task's rounds give known costs, so the choices are checked exactly.
-- The warm-up round of every task, the gradient's pick (weight x expected improvement, the
-- backward window), round-robin, failed rounds (a task whose first rounds measure nothing
-- valid is retried after the others had a round each and tuned later; dead after
-- max_failed_rounds in a row; the table lists it), per-task and
-- global early stopping, the budget split (num_measure_trials / tasks per round), seed 003's
-- table, the records written per round, and load_log_file: a second scheduler over the same
-- log restores the best costs and trial counts, skips restored tasks in the warm-up, hands
-- the records to the policies and continues to the budget.
local auto_scheduler = require "tunelua.auto_scheduler"
local records = require "tunelua.auto_scheduler.records"
local util = require "tests.lua.lib.util"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

local dir = util.tmpdir("task_scheduler")

local function task(i, flop)
  return { workload_key = string.format('["t%d", [1, %d]]', i, i), target = "llvm", flop = flop,
           desc = { "task" .. i }, hardware_params = { 2, 64, 64, 0, 0, 0, 0, 0 } }
end

-- A policy whose round r gives costs[r] (a number: every state that cost; false: all fail).
local function scripted(costs, log)
  local p = { round = 0, restored = nil }
  function p:continue_search_one_round(n)
    self.round = self.round + 1
    local c = costs[math.min(self.round, #costs)]
    local out = {}
    for k = 1, n do
      out[k] = { steps = string.format('[["SP", 2, 0, 8, [%d], 1]]', self.round * 100 + k),
                 costs = c and { c } or { 1e10 }, error_no = c and 0 or 4, all_cost = 0.1, timestamp = 1 }
    end
    if log then log[#log + 1] = self.id end
    return out
  end
  function p:restore(recs) self.restored = recs end
  return p
end

local quiet = { verbose = 0, callbacks = {} }
local function sched(tasks, weights, o)
  o = o or {}
  for k, v in pairs(quiet) do if o[k] == nil then o[k] = v end end
  return auto_scheduler.TaskScheduler(tasks, weights, o)
end

-- ---- gradient: the warm-up, then the task with the largest weighted improvement --------------
do
  local order = {}
  local tasks = { task(1, 1e9), task(2, 1e9), task(3, 1e9) }
  -- task 1 improves steadily, task 2 is flat, task 3 is cheap but weighted 10x
  local ps = { scripted({ 4e-3, 3e-3, 2e-3, 1.5e-3, 1.2e-3, 1e-3 }, order),
               scripted({ 2e-3 }, order), scripted({ 1e-3, 0.9e-3, 0.8e-3 }, order) }
  for i, p in ipairs(ps) do p.id = i end
  local log = dir .. "/g.json"
  local s = sched(tasks, { 1, 1, 10 })
  s:tune({ num_measure_trials = 60, num_measures_per_round = 4,
           measure_callbacks = { records.RecordToFile(log) } }, ps)
  -- warm-up in order, then by gradient: w * (0.8 * (best / t - best) + 0.2 * backward)
  eq(table.concat(order, ",", 1, 3), "1,2,3", "warm-up order")
  -- after the warm-up: grads 1: -3.2e-3*... all t = 1 -> forward = -best; w*best: 4e-3, 2e-3, 1e-2
  eq(order[4], 3, "the heaviest weighted latency first")
  eq(s.ct, 60, "the whole budget")
  local n = 0
  for _, c in ipairs(s.task_trials) do n = n + c end
  eq(n, 60, "trials per task add up")
  eq(#records.load(log), 60, "one record per measurement")
  eq(s.best_costs[1] <= 4e-3, true, "task 1 improved")
  -- a round of task 2 (flat) comes after task 1's, as its expected gain is smaller
  local first2, first1 = nil, nil
  for k = 4, #order do
    if order[k] == 2 and not first2 then first2 = k end
    if order[k] == 1 and not first1 then first1 = k end
  end
  assert(first1 and (not first2 or first1 < first2), "task 1 before task 2: " .. table.concat(order, ","))
end

-- ---- the gradient's formula on known histories ------------------------------------------
do
  local s = sched({ task(1, 1e9), task(2, 1e9) }, { 2, 1 }, { alpha = 0.2, backward_window_size = 3 })
  s.best_costs = { 1e-3, 2e-3 }
  s.task_cts = { 5, 1 }
  s.task_costs_history = { { 5e-3, 4e-3, 3e-3, 2e-3, 1e-3 }, { 2e-3 } }
  -- task 1: backward = (h[5] - h[2]) / 3 = -1e-3; forward = (best - best / 5) - best
  local g1 = 2 * (0.2 * (-1e-3) + 0.8 * (-1e-3 / 5))
  assert(math.abs(s:gradient(1) - g1) < 1e-15, "gradient 1: " .. s:gradient(1) .. " vs " .. g1)
  -- task 2: t = 1, no backward window; forward = (best - best / 1) - best
  assert(math.abs(s:gradient(2) - 0.8 * -2e-3) < 1e-15, "gradient 2: " .. s:gradient(2))
  -- a custom objective: the chain rule is its numerical derivative
  local s2 = sched({ task(1, 1e9), task(2, 1e9) }, nil, { objective_func = function(c) return 3 * c[1] + c[2] end })
  s2.best_costs, s2.task_cts, s2.task_costs_history = { 1e-3, 2e-3 }, { 2, 2 }, { { 2e-3, 1e-3 }, { 2e-3, 2e-3 } }
  assert(math.abs(s2:gradient(1) - 3 * 0.8 * (-1e-3 / 2)) < 1e-9, "objective chain rule: " .. s2:gradient(1))
end

-- ---- round-robin, a task that never works, per-task early stopping ------------------------
do
  local order = {}
  local ps = { scripted({ 1e-3 }, order), scripted({ false }, order), scripted({ 2e-3 }, order) }
  for i, p in ipairs(ps) do p.id = i end
  local s = sched({ task(1, 1e9), task(2, 1e9), task(3, 1e9) }, nil, { strategy = "round-robin" })
  s:tune({ num_measure_trials = 60, num_measures_per_round = 5 }, ps, { per_task_early_stopping = 10 })
  -- task 2 fails every round: retried in its turn, dead after 3 failed rounds in a row (the
  -- default max_failed_rounds); tasks 1 and 3 never improve after their first round: dead
  -- once 15 trials (> 10) passed without improvement
  eq(table.concat(order, ","), "1,2,3,1,2,3,1,2,3,1,3", "round-robin over the alive tasks")
  assert(s.dead_tasks[2]:find("no valid trial in 3 rounds in a row", 1, true), tostring(s.dead_tasks[2]))
  assert(s.dead_tasks[1]:find("no improvement in 15 trials", 1, true), tostring(s.dead_tasks[1]))
  eq(s.ct, 55, "stopped when every task was dead")
end

-- ---- failed rounds: a task whose first rounds fail is retried and tuned later ----------------
do
  local order = {}
  -- task 2's first two rounds fail (every build or run), its third measures 2e-3, then 1e-3
  local ps = { scripted({ 4e-3, 3e-3, 2.5e-3, 2e-3 }, order), scripted({ false, false, 2e-3, 1e-3 }, order),
               scripted({ 1e-3, 0.9e-3 }, order) }
  for i, p in ipairs(ps) do p.id = i end
  local tables = {}
  local cb = { pre_tune = function(_, tuner, idx)
    local buf = {}
    tuner:print_table(idx, { write = function(_, ...) for _, x in ipairs({ ... }) do buf[#buf + 1] = x end end,
                             flush = function() end })
    tables[#tables + 1] = table.concat(buf)
  end }
  local s = sched({ task(1, 1e9), task(2, 1e9), task(3, 1e9) }, nil, { callbacks = { cb } })
  s:tune({ num_measure_trials = 60, num_measures_per_round = 4 }, ps)
  -- warm-up 1,2,3; task 2 (no valid schedule: gradient -inf) comes back as soon as the other
  -- two had a round each since its failure, fails again, waits two rounds, then succeeds
  eq(table.concat(order, ",", 1, 3), "1,2,3", "warm-up order")
  local rounds2 = {}
  for k, id in ipairs(order) do if id == 2 then rounds2[#rounds2 + 1] = k end end
  eq(rounds2[2], 5, "task 2 retried once the others had a round")
  eq(rounds2[3], 8, "task 2 retried again after two more rounds of the others")
  assert(#rounds2 >= 3 and not s.dead_tasks[2], "task 2 alive: " .. tostring(s.dead_tasks[2]))
  eq(s.best_costs[2] <= 2e-3, true, "task 2 tuned after its failed rounds")
  eq(s.failed_rounds[2], 0, "failed rounds reset by a valid one")
  eq(s.ct, 60, "the whole budget")
  -- the tables before rounds 4..7 list task 2's failed rounds
  assert(tables[4]:find("Task 1: no valid trial in its last 1 round (retried; done after 3)", 1, true), tables[4])
  assert(tables[6]:find("Task 1: no valid trial in its last 2 rounds", 1, true), tables[6])
  assert(not tables[#tables]:find("Task 1:", 1, true), tables[#tables])
  -- the gradient: -inf while a task has no valid schedule; a backward window over a failed
  -- round's cost counts as 0
  local g = sched({ task(1, 1e9), task(2, 1e9) }, nil)
  g.best_costs, g.task_cts = { 1e10, 1e-3 }, { 1, 4 }
  g.task_costs_history = { { 1e10 }, { 1e10, 2e-3, 1.5e-3, 1e-3 } }
  eq(g:gradient(1), -math.huge, "no valid schedule: first in line")
  assert(math.abs(g:gradient(2) - 0.8 * (-1e-3 / 4)) < 1e-15, "backward from a failed round is 0: " .. g:gradient(2))
end

-- ---- failed rounds: the cap (max_failed_rounds) ------------------------------------------
do
  local order = {}
  local ps = { scripted({ 2e-3, 1e-3 }, order), scripted({ false }, order) }
  for i, p in ipairs(ps) do p.id = i end
  local buf = {}
  local s = sched({ task(1, 1e9), task(2, 1e9) }, nil, { max_failed_rounds = 2 })
  s:tune({ num_measure_trials = 40, num_measures_per_round = 4 }, ps)
  local n2 = 0
  for _, id in ipairs(order) do if id == 2 then n2 = n2 + 1 end end
  eq(n2, 2, "task 2: two failed rounds, then dead")
  assert(s.dead_tasks[2]:find("no valid trial in 2 rounds in a row", 1, true), tostring(s.dead_tasks[2]))
  eq(s.ct, 40, "the budget went to task 1")
  s:print_table(nil, { write = function(_, ...) for _, x in ipairs({ ... }) do buf[#buf + 1] = x end end,
                       flush = function() end })
  assert(table.concat(buf):find("Task 1: done (no valid trial in 2 rounds in a row)", 1, true), table.concat(buf))
  local ok, err = pcall(auto_scheduler.TaskScheduler, { task(1, 1) }, nil, { max_failed_rounds = 0 })
  assert(not ok and err:find("max_failed_rounds must be an integer >= 1", 1, true), err)
  -- resumed from a log whose records of task 2 all failed: one more try (K - 1 = 1 counted)
  local log = dir .. "/f.json"
  local s1 = sched({ task(1, 1e9), task(2, 1e9) }, nil, { load_log_file = log, max_failed_rounds = 2 })
  s1:tune({ num_measure_trials = 16, num_measures_per_round = 4, measure_callbacks = { records.RecordToFile(log) } },
          { scripted({ 2e-3 }), scripted({ false }) })
  eq(s1.dead_tasks[2] ~= nil, true, "task 2 dead in the first run")
  local order2 = {}
  local ps2 = { scripted({ 1e-3 }, order2), scripted({ 3e-3 }, order2) }
  for i, p in ipairs(ps2) do p.id = i end
  local s2 = sched({ task(1, 1e9), task(2, 1e9) }, nil, { load_log_file = log, max_failed_rounds = 2 })
  eq(s2.failed_rounds[2], 0, "nothing restored before tune")
  s2:tune({ num_measure_trials = 32, num_measures_per_round = 4, measure_callbacks = { records.RecordToFile(log) } }, ps2)
  eq(order2[1], 2, "the resumed run tries task 2 first")
  eq(s2.best_costs[2], 3e-3, "task 2 tuned in the resumed run")
end

-- ---- global early stopping --------------------------------------------------------------
do
  local ps = { scripted({ 1e-3 }), scripted({ 2e-3 }) }
  local s = sched({ task(1, 1e9), task(2, 1e9) }, nil)
  s:tune({ num_measure_trials = 400, num_measures_per_round = 10, early_stopping = 30 }, ps)
  eq(s.ct, 50, "stopped 30 trials after the last improvement (20 warm-up + 30)")
end

-- ---- the budget split and bad options ----------------------------------------------------
do
  local s = sched({ task(1, 1e9), task(2, 1e9), task(3, 1e9) }, nil)
  local ps = { scripted({ 1e-3 }), scripted({ 1e-3 }), scripted({ 1e-3 }) }
  s:tune({ num_measure_trials = 9, num_measures_per_round = 64 }, ps)
  eq(s.per_round, 3, "per round = min(64, 9 // 3)")
  local ok, err = pcall(s.tune, sched({ task(1, 1) , task(2, 1) }, nil), { num_measure_trials = 1 }, { scripted({ 1 }), scripted({ 1 }) })
  assert(not ok and err:find("at least the number of tasks", 1, true), err)
  ok, err = pcall(auto_scheduler.TaskScheduler, { task(1, 1) }, nil, { strategy = "greedy" })
  assert(not ok and err:find('strategy must be "gradient" or "round-robin"', 1, true), err)
  ok, err = pcall(auto_scheduler.TaskScheduler, { task(1, 1) }, nil, { colour = 1 })
  assert(not ok and err:find("unknown option 'colour'", 1, true), err)
  ok, err = pcall(s.tune, s, { num_measure_trials = 9 }, { scripted({ 1 }) })
  assert(not ok and err:find("one search policy per task (3)", 1, true), err)
end

-- ---- the table (seed 003's format) --------------------------------------------------------
do
  local s = sched({ task(1, 2e9), task(2, 1e9) }, { 1, 2 })
  s.best_costs = { 1e-3, 1e10 }
  s.task_trials = { 64, 0 }
  s.ct = 64
  local buf = {}
  s:print_table(2, { write = function(_, ...) for _, x in ipairs({ ... }) do buf[#buf + 1] = x end end,
                     flush = function() end })
  local text = table.concat(buf)
  local want = table.concat({
    string.rep("-", 70), string.rep("-", 30) .. "  [ Task Scheduler ]", string.rep("-", 70),
    "|  ID  | Latency (ms) | Speed (GFLOPS) | Trials |", string.rep("-", 49),
    "|    0 |        1.000 |        2000.00 |     64 |",
    "|    1 |            - |              - |      0 |", string.rep("-", 49),
    "Estimated total latency: - ms\tTrials: 64\tUsed time : 0 s\tNext ID: 1\t", "" }, "\n")
  eq(text, want, "the table")
  s.best_costs[2] = 2e-3
  buf = {}
  s:print_table(1, { write = function(_, ...) for _, x in ipairs({ ... }) do buf[#buf + 1] = x end end,
                     flush = function() end })
  assert(table.concat(buf):find("Estimated total latency: 5.000 ms\tTrials: 64", 1, true), table.concat(buf))
end

-- ---- load_log_file: resume ---------------------------------------------------------------
do
  local log = dir .. "/r.json"
  local tasks = { task(1, 1e9), task(2, 1e9), task(3, 1e9) }
  local s = sched(tasks, nil, { load_log_file = log })
  local ps = { scripted({ 3e-3, 2e-3 }), scripted({ 5e-3 }), scripted({ 1e-3 }) }
  s:tune({ num_measure_trials = 30, num_measures_per_round = 5, measure_callbacks = { records.RecordToFile(log) } }, ps)
  eq(s.ct, 30, "first run")
  local trials1 = { unpack(s.task_trials) }
  -- a second run over the same log: counts and bests restored, the budget continues
  local order = {}
  local ps2 = { scripted({ 1.5e-3 }, order), scripted({ 4e-3 }, order), scripted({ 0.9e-3 }, order) }
  for i, p in ipairs(ps2) do p.id = i end
  local s2 = sched(tasks, nil, { load_log_file = log })
  s2:tune({ num_measure_trials = 45, num_measures_per_round = 5, measure_callbacks = { records.RecordToFile(log) } }, ps2)
  for i = 1, 3 do
    assert(ps2[i].restored and #ps2[i].restored == trials1[i], "policy " .. i .. " restored its records")
  end
  eq(order[1] ~= nil, true, "the second run tuned")
  eq(s2.ct, 45, "the budget counts the restored trials")
  eq(#records.load(log), 45, "the log holds every measurement")
  assert(s2.best_costs[1] <= 2e-3 and s2.best_costs[3] <= 1e-3, "bests restored")
  -- nothing left: a third run measures nothing
  local ps3 = { scripted({ 1 }), scripted({ 1 }), scripted({ 1 }) }
  local s3 = sched(tasks, nil, { load_log_file = log })
  s3:tune({ num_measure_trials = 45, num_measures_per_round = 5, measure_callbacks = { records.RecordToFile(log) } }, ps3)
  eq(ps3[1].round + ps3[2].round + ps3[3].round, 0, "a finished run measures nothing more")
end

-- ---- min_task_trials: the warm-up tops every task up, restored ones too ---------------------
do
  local tasks = { task(1, 1e9), task(2, 1e9), task(3, 1e9) }
  local log = dir .. "/min.json"
  local order, sizes = {}, {}
  local function sized(costs)
    local p = scripted(costs, order)
    local inner = p.continue_search_one_round
    function p:continue_search_one_round(n) sizes[#sizes + 1] = n; return inner(self, n) end
    return p
  end
  local ps = { sized({ 3e-3 }), sized({ 2e-3 }), sized({ 1e-3 }) }
  for i, p in ipairs(ps) do p.id = i end
  local s = sched(tasks, nil)
  -- rounds of at most 4 (the per-round size), one a task per pass: 4 + 2 trials a task
  s:tune({ num_measure_trials = 18, num_measures_per_round = 4, measure_callbacks = { records.RecordToFile(log) } },
         ps, { min_task_trials = 6 })
  eq(table.concat(order, ","), "1,2,3,1,2,3", "warm-up order with min_task_trials")
  eq(table.concat(sizes, ","), "4,4,4,2,2,2", "warm-up round sizes")
  eq(table.concat(s.task_trials, ","), "6,6,6", "trials per task")
  -- a resumed run: the restored tasks (6 trials each) are topped up to 10 before any gradient pick
  order, sizes = {}, {}
  local ps2 = { sized({ 3e-3 }), sized({ 2e-3 }), sized({ 1e-3 }) }
  for i, p in ipairs(ps2) do p.id = i end
  local s2 = sched(tasks, nil, { load_log_file = log })
  s2:tune({ num_measure_trials = 36, num_measures_per_round = 4, measure_callbacks = { records.RecordToFile(log) } },
          ps2, { min_task_trials = 10 })
  eq(table.concat(order, ",", 1, 3), "1,2,3", "restored tasks topped up in order")
  eq(table.concat(sizes, ",", 1, 3), "4,4,4", "top-up round sizes")
  eq(s2.ct, 36, "then the gradient spends the rest of the budget")
  eq(#records.load(log), 36, "every measurement logged")
  -- a budget too small for the top-up reaches every task, not just the first ones
  order, sizes = {}, {}
  local ps3 = { sized({ 3e-3 }), sized({ 2e-3 }), sized({ 1e-3 }) }
  for i, p in ipairs(ps3) do p.id = i end
  local s3 = sched(tasks, nil)
  s3:tune({ num_measure_trials = 6, num_measures_per_round = 64 }, ps3, { min_task_trials = 64 })
  eq(table.concat(order, ","), "1,2,3", "a small budget shared by the top-up")
  eq(table.concat(s3.task_trials, ","), "2,2,2", "two trials a task (6 / 3 a round)")
  local ok, err = pcall(s2.tune, s2, { num_measure_trials = 40, num_measures_per_round = 4 }, ps2,
                        { min_task_trials = -1 })
  assert(not ok and tostring(err):find("min_task_trials must be a non-negative integer", 1, true), tostring(err))
end

util.cleanup(dir)
print("ok")
