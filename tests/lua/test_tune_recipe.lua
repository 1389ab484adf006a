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

local dir = os.getenv("TMPDIR") or "/tmp"
local base = string.format("%s/tl_tune_recipe_%d", dir, math.random(1e9))

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

local ok, err = pcall(autotvm.tune_tasks, { task }, mo, { tuner = "xgb-rank" })
assert(not ok and err:match("Invalid tuner: xgb%-rank"), err)

print("test_tune_recipe: ok")
