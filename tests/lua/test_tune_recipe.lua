-- test_tune_recipe.lua: seed 000's tune_tasks with every one of the sixteen tuner names on a
-- tiny host-CPU conv2d task (real builds and runs), valid records, and resume from a log
-- (dense task).
local autotvm = require "tunelua.autotvm"
local tuner = require "tunelua.autotvm.tuner"
local record = require "tunelua.autotvm.record"

local task = autotvm.task.create("dense_nopack.x86",
  { { "TENSOR", { 1, 32 }, "float32" }, { "TENSOR", { 16, 32 }, "float32" }, "None", "float32" }, "llvm")
local space_len = #task.config_space
assert(space_len > 8, space_len)

-- every log under a fresh directory of this run, removed at the end
local util = require "tests.lua.lib.util"
local dir = util.tmpdir("tune-recipe")
assert(dir:match("^/[%w/._-]+$"), dir)
local base = dir .. "/tune_recipe"

-- measured config indices, seen through a wrapped runner
local measured = {}
local function option(n_parallel)
  local mo = autotvm.measure_option({
    builder = autotvm.LocalBuilder({ n_parallel = n_parallel, timeout = 20 }),
    runner = autotvm.LocalRunner({ number = 1, repeats = 1, timeout = 10, cooldown_interval = 0 }),
  })
  local run = mo.runner.run
  mo.runner.run = function(self, inputs, brs)
    for _, inp in ipairs(inputs) do measured[#measured + 1] = inp.config.index end
    return run(self, inputs, brs)
  end
  return mo
end

local function count_lines(path)
  local n = 0
  for _ in io.lines(path) do n = n + 1 end
  return n
end

-- all sixteen names on a (tiny) host-CPU conv2d task: one trial each, one valid best record
-- in the final log
local conv = autotvm.task.create("conv2d_NCHWc.x86",
  { { "TENSOR", { 1, 8, 8, 8 }, "float32" }, { "TENSOR", { 8, 8, 3, 3 }, "float32" }, { 1, 1 },
    { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }, "llvm")
assert(#tuner.NAMES == 16)
local mo1 = option(1)
for _, name in ipairs(tuner.NAMES) do
  local log = base .. "_" .. name .. ".log"
  local sum = autotvm.tune_tasks({ conv }, mo1, { tuner = name, n_trial = 1, log_filename = log,
                                                  quiet = true, seed = 1 })
  assert(sum[1].trials == 1, name .. ": " .. tostring(sum[1].trials))
  assert(sum[1].best_flops > 0, name .. ": no successful trial")
  local recs = record.load_from_file(log)
  assert(#recs == 1, name .. ": " .. #recs .. " records after pick_best")
  assert(recs[1].inp.task_name == "conv2d_NCHWc.x86" and recs[1].res.error_no == 0)
  assert(recs[1].inp.config.index >= 0 and recs[1].inp.config.index < #conv.config_space)
  assert(io.open(log .. ".tmp") == nil, name .. ": tmp log left behind")
  os.remove(log)
end

-- resume: a killed run left 3 trials in the tmp log; re-running measures only new configs
local mo = option(2)
do
  local log = base .. "_resume.log"
  measured = {}
  local t = tuner.RandomTuner(task, { seed = 3 })
  t:tune({ n_trial = 3, measure_option = mo,
           callbacks = { autotvm.callback.log_to_file(log .. ".tmp") } })
  assert(count_lines(log .. ".tmp") == 3)
  local first = {}
  for _, i in ipairs(measured) do first[i] = true end
  measured = {}
  local sum = autotvm.tune_tasks({ task }, mo, { tuner = "gridsearch", n_trial = 6,
                                                 log_filename = log, quiet = true })
  assert(sum[1].resumed == 3 and sum[1].trials == 3, sum[1].resumed .. " " .. sum[1].trials)
  assert(#measured == 3)
  for _, i in ipairs(measured) do assert(not first[i], "re-measured config " .. i) end
  local recs = record.load_from_file(log)
  assert(#recs == 1)
  -- a complete re-run with the final log: everything asked for is there, nothing measured
  measured = {}
  sum = autotvm.tune_tasks({ task }, mo, { tuner = "random", n_trial = 1, log_filename = log,
                                           quiet = true })
  assert(sum[1].resumed == 1 and sum[1].trials == 0 and #measured == 0)
  os.remove(log)
end

-- verify_top: a config that measured fast once (a lucky moment) does not win once the top 3
-- are measured again. Real builds and runs; the runner's costs are replaced by a known
-- table (config i costs (1 + i) ms) in which config 5's first measurement is 100x too fast.
do
  local function lucky_option()
    local m = option(2)
    local run, seen = m.runner.run, false
    m.runner.run = function(self, inputs, brs)
      local res = run(self, inputs, brs)
      for i, r in ipairs(res) do
        local idx = inputs[i].config.index
        if r.error_no == 0 then
          r.costs = { (idx == 5 and not seen) and 1e-5 or 1e-3 * (1 + idx) }
          if idx == 5 then seen = true end
        end
      end
      return res
    end
    return m
  end
  for _, verify in ipairs({ 0, 3 }) do
    local log = base .. "_verify" .. verify .. ".log"
    measured = {}
    local out = { lines = {}, write = function(self, s) self.lines[#self.lines + 1] = s end,
                  flush = function() end }
    local sum = autotvm.tune_tasks({ task }, lucky_option(), { tuner = "gridsearch", n_trial = 6,
      log_filename = log, verify_top = verify, verify_rounds = 3, out = out })
    local recs = record.load_from_file(log)
    assert(#recs == 1, #recs)
    if verify == 0 then
      assert(#measured == 6 and recs[1].inp.config.index == 5, recs[1].inp.config.index)
    else
      -- 6 trials, then 3 rounds of the 3 best by first measurement (5, 0, 1)
      assert(#measured == 6 + 9, #measured)
      assert(recs[1].inp.config.index == 0, recs[1].inp.config.index)
      assert(#recs[1].res.costs == 3 and math.abs(recs[1].res.costs[2] - 1e-3) < 1e-9)
      assert(sum[1].verified.index == 0 and math.abs(sum[1].verified.cost - 1e-3) < 1e-9)
      local said = table.concat(out.lines)
      assert(said:match("verified the best 3 over 3 rounds: config 0, median 1 ms .*; before, " ..
        "config 5 led with 0%.01 ms"), said)
    end
    assert(io.open(log .. ".tmp") == nil)
    os.remove(log)
  end
end

-- baseline: the untuned config (dense_nopack's fallback: tile_k's inner part 2 vectors of the
-- host's lanes, config 20 of 30 with 8 lanes, 25 with 16) is measured first with the same
-- runner, logged, and kept unless a tuned config beats it when both are measured again.
-- Real builds and runs, costs replaced by a known table.
do
  local recipe = require "tunelua.autotvm.recipe"
  local b, source = recipe.baseline_index(task)
  local want = ({ [4] = 15, [8] = 20, [16] = 25 })[require("tunelua.target").parse("llvm").lanes]
  assert(b == want and source == "fallback", tostring(b) .. " " .. tostring(source))
  local function costed(cost_of)
    local m = option(2)
    local run = m.runner.run
    m.runner.run = function(self, inputs, brs)
      local res = run(self, inputs, brs)
      for i, r in ipairs(res) do
        local e, c = cost_of(inputs[i].config.index)
        if e then r.error_no, r.costs = e, { 1e9 } elseif r.error_no == 0 then r.costs = { c } end
      end
      return res
    end
    return m
  end
  local function run_case(name, cost_of, extra)
    local log = base .. "_baseline_" .. name .. ".log"
    measured = {}
    local out = { lines = {}, write = function(self, s) self.lines[#self.lines + 1] = s end,
                  flush = function() end }
    local o = { tuner = "gridsearch", n_trial = 6, log_filename = log, baseline = true, out = out }
    for k, v in pairs(extra or {}) do o[k] = v end
    local sum = autotvm.tune_tasks({ task }, costed(cost_of), o)
    local recs = record.load_from_file(log)
    os.remove(log)
    assert(io.open(log .. ".tmp") == nil)
    return sum[1], recs, table.concat(out.lines)
  end
  -- configs 0..5 cost (1 + i) ms, the baseline 1 + b ms (21 with 8 lanes): config 0 wins
  local s1, recs, said = run_case("beaten", function(i) return nil, 1e-3 * (1 + i) end)
  assert(measured[1] == b, "the baseline is measured first")
  -- 1 baseline + 6 trials (the baseline is not one of them) + 3 rounds of {baseline, best}
  assert(#measured == 1 + 6 + 3 * 2, #measured)
  assert(s1.trials == 6 and s1.baseline.index == b, s1.trials)
  assert(math.abs(s1.untuned_cost - (1 + b) * 1e-3) < 1e-9 and math.abs(s1.tuned_cost - 1e-3) < 1e-9)
  assert(#recs == 1 and recs[1].inp.config.index == 0, recs[1].inp.config.index)
  assert(said:match(string.format("untuned %d ms, tuned 1 ms %%(config 0%%): %d%%.00x", 1 + b, 1 + b)), said)
  -- the baseline is the fastest: it stays, and so does a tie
  for _, bc in ipairs({ 0.5e-3, 1e-3 }) do
    local s2, recs2, said2 = run_case("kept", function(i) return nil, i == b and bc or 1e-3 * (1 + i) end)
    assert(#recs2 == 1 and recs2[1].inp.config.index == b, recs2[1].inp.config.index)
    assert(s2.tuned_cost == s2.untuned_cost)
    assert(said2:match("no tuned config beat it; keeping the untuned config"), said2)
  end
  -- a baseline that times out on the device: the task is not tuned at all
  local s3, _, said3 = run_case("timeout", function(i)
    if i == b then return autotvm.measure.MeasureErrorNo.RUN_TIMEOUT end
    return nil, 1e-3
  end)
  assert(#measured == 1 and s3.skipped == "untuned config timed out" and s3.trials == 0, #measured)
  -- skip_slower: a template whose baseline is F times slower than another template's for the
  -- same operator and arguments (dense_nopack next to dense_pack) is not tuned
  do
    local pack = autotvm.task.create("dense_pack.x86",
      { { "TENSOR", { 1, 32 }, "float32" }, { "TENSOR", { 16, 32 }, "float32" }, "None", "float32" }, "llvm")
    local bp = recipe.baseline_index(pack)
    local m2 = option(2)
    local run2 = m2.runner.run
    m2.runner.run = function(self, inputs, brs)
      local res = run2(self, inputs, brs)
      for i, r in ipairs(res) do
        local slow = inputs[i].task.name == "dense_nopack.x86"
        if r.error_no == 0 then r.costs = { slow and 10e-3 or 1e-3 } end
      end
      return res
    end
    local log = base .. "_skip_slower.log"
    local out = { lines = {}, write = function(self, x) self.lines[#self.lines + 1] = x end,
                  flush = function() end }
    measured = {}
    local sum = autotvm.tune_tasks({ task, pack }, m2, { tuner = "gridsearch", n_trial = 2,
      log_filename = log, baseline = true, skip_slower = 3, out = out })
    os.remove(log)
    -- reverse order: pack is task 1 (tuned), nopack task 2 (not tuned)
    assert(sum[1].name == "dense_pack.x86" and not sum[1].skipped and sum[1].trials == 2)
    assert(sum[2].name == "dense_nopack.x86" and sum[2].skipped == "untuned 10.0x slower than dense_pack.x86"
           and sum[2].trials == 0, tostring(sum[2].skipped))
    assert(table.concat(out.lines):match("dense_nopack%.x86: not tuned: its untuned config %(10 ms%) is " ..
      "10%.0x slower than dense_pack%.x86's %(1 ms%) on the same workload"), table.concat(out.lines))
    assert(bp >= 0)
  end
  assert(said3:match("not tuned: the untuned fallback config timed out on the device %(RUN_TIMEOUT%)"), said3)
  -- timeout_factor: the candidates' runs are cut at F times the baseline's time (at least 1 s)
  local m = costed(function(i) return nil, i == b and 0.2 or 1e-3 end)
  local seen_timeouts, run = {}, m.runner.run
  m.runner.run = function(self, inputs, brs)
    seen_timeouts[#seen_timeouts + 1] = self.timeout
    return run(self, inputs, brs)
  end
  local log = base .. "_baseline_cut.log"
  autotvm.tune_tasks({ task }, m, { tuner = "gridsearch", n_trial = 2, log_filename = log,
                                    baseline = true, timeout_factor = 2, quiet = true })
  os.remove(log)
  -- baseline at 10 s; trials at 2 * 0.2 s * (1 run x 1 repeat + 2) = 1.2 s; verification at 10 s
  assert(seen_timeouts[1] == 10 and math.abs(seen_timeouts[2] - 1.2) < 1e-9 and
         seen_timeouts[#seen_timeouts] == 10, table.concat(seen_timeouts, ","))
end

-- tuner names: case and '-' do not matter (xgb-rank is xgb_rank); unknown names are refused
do
  local recipe = require "tunelua.autotvm.recipe"
  assert(recipe.tuner_name("xgb-rank") == "xgb_rank" and recipe.tuner_name("XGB-Rank-Curve") == "xgb_rank_curve")
  assert(recipe.tuner_name("xgboost") == nil)
  local log = base .. "_alias.log"
  local sum = autotvm.tune_tasks({ task }, mo, { tuner = "xgb-rank", n_trial = 1, log_filename = log,
                                                 quiet = true, seed = 1 })
  assert(sum[1].trials == 1)
  os.remove(log)
  local ok, err = pcall(autotvm.tune_tasks, { task }, mo, { tuner = "xgb-rnak" })
  assert(not ok and err:match("Invalid tuner: xgb%-rnak"), err)
  ok, err = pcall(autotvm.tune_tasks, { task }, mo, { tuner = 42 })
  assert(not ok and err:match("Invalid tuner: a number"), err)
end

-- a tuner written in Lua: a constructor, a class with .new, or (one task) an object; the loop,
-- the log, resume and pick_best are tune_tasks' as for the built-in tuners
do
  local made = {}
  local function Ascending(tsk, opts)       -- proposes 29, 28, ... ; learns what it is told
    local t = { next_i = 29, told = {} }
    function t:next_batch(n)
      local b = {}
      while #b < n and self.next_i >= 0 do
        if not self.told[self.next_i] then b[#b + 1] = self.next_i end
        self.next_i = self.next_i - 1
      end
      return b
    end
    function t:update(inputs, results)
      for k in ipairs(inputs) do self.told[inputs[k].config.index] = results[k].error_no end
    end
    made[#made + 1] = { task = tsk, opts = opts, t = t }
    return t
  end
  local log = base .. "_custom.log"
  measured = {}
  local sum = autotvm.tune_tasks({ task }, mo, { tuner = Ascending, n_trial = 4, log_filename = log,
                                                 quiet = true })
  assert(#made == 1 and made[1].task == task and made[1].t.task == task)
  assert(sum[1].trials == 4 and #measured == 4, #measured)
  table.sort(measured)
  assert(table.concat(measured, ",") == "26,27,28,29", table.concat(measured, ","))
  local recs = record.load_from_file(log)
  assert(#recs == 1 and recs[1].inp.config.index >= 26, "pick_best: one record, one of the measured")
  -- resume with a class table: the 4 logged configs are handed to update(), 2 new ones measured
  measured = {}
  local sum2 = autotvm.tune_tasks({ task }, mo, { tuner = { new = Ascending }, n_trial = 6,
                                                  log_filename = log, quiet = true })
  assert(sum2[1].resumed == 1 and #measured == 5, sum2[1].resumed .. " " .. #measured)
  assert(made[2].t.told[recs[1].inp.config.index] == 0, "the resumed record reached update()")
  os.remove(log)
  -- an object for one task; refused for several
  local obj = Ascending(task)
  measured = {}
  sum = autotvm.tune_tasks({ task }, mo, { tuner = obj, n_trial = 2, log_filename = log, quiet = true })
  assert(sum[1].trials == 2 and obj.task == task and #measured == 2)
  os.remove(log)
  local ok, err = pcall(autotvm.tune_tasks, { task, conv }, mo, { tuner = obj, log_filename = log })
  assert(not ok and err:match("one tuner object cannot tune 2 tasks"), err)
end

-- nothing left behind
local left = io.popen("ls -A " .. dir):read("*a")
assert(left == "", "left behind in " .. dir .. ": " .. left)
util.cleanup(dir)

print("test_tune_recipe: ok")
