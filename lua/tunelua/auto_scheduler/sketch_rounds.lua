--- tunelua.auto_scheduler.sketch_rounds: the task scheduler's per-task search policies over
--- the auto-scheduler's SketchPolicy (tunelua.auto_scheduler.search): one round proposes
--- n new states (evolutionary search scored by the cost model, eps-greedy random states),
--- builds and measures them with the TuningOptions' builder and runner (LocalBuilder and
--- LocalRunner, the OpenCL hook, RPCRunner: a failure is an error record), hands the
--- throughputs to the policy and retrains its model (TVM's continue_search_one_round:
--- measure first, then update).
--
--   local policies = sketch_rounds.policies(tasks, tune_option, {program_cost_model = "xgb", seed = 1})
--   tuner:tune(tune_option, policies)
--
-- Each task has its own policy and cost model (TVM shares one XGBModel across the tasks).
-- restore(recs) takes the task's records of a log (the task scheduler's load_log_file): the
-- states count as measured (never proposed again) and train the model.
local search = require "tunelua.auto_scheduler.search"
local cost_model = require "tunelua.auto_scheduler.cost_model"
local ameasure = require "tunelua.autotvm.measure"

local M = {}

local Round = {}
Round.__index = Round

local function mean(costs)
  local s = 0
  for _, c in ipairs(costs) do s = s + c end
  return s / #costs
end

local function flops_of(task, cost) return cost < math.huge and task.flop / cost or 0 end

function Round:continue_search_one_round(n)
  local states = self.policy:next_batch(n)
  if #states == 0 then return {} end
  local mt = self.mtask
  local inputs = {}
  for i, st in ipairs(states) do
    mt.states[i] = st
    inputs[i] = ameasure.MeasureInput(mt, i)
  end
  local res = self.batch(inputs)
  local out = {}
  for i, st in ipairs(states) do
    local r = res[i]
    local steps = st:steps()
    local cost = r.error_no == 0 and r.costs and #r.costs > 0 and mean(r.costs) or math.huge
    self.policy:add_measured(steps, flops_of(self.task, cost))
    out[i] = { steps = steps, costs = r.costs, error_no = r.error_no, all_cost = r.all_cost,
               timestamp = r.timestamp or os.time(), layout_rewrite = mt.layout_rewrite }
  end
  for i = 1, #states do mt.states[i] = nil end
  self.policy:update_model()
  return out
end

function Round:restore(recs)
  local n = 0
  for _, r in ipairs(recs) do
    local ok, err = pcall(self.policy.add_measured, self.policy, r.steps, flops_of(self.task, r.cost))
    if ok then n = n + 1
    else
      io.stderr:write(string.format("warning: %s:%d: skipped a record that does not replay on task %s (%s)\n",
                                    tostring(r.path), r.line or 0, self.task.workload_key, tostring(err)))
    end
  end
  if n > 0 then self.policy:update_model() end
end

--- policies(tasks, tune_option, {program_cost_model = "xgb" | "random", seed = 1, params = {...}})
--- -> one policy per task for TaskScheduler:tune
function M.policies(tasks, tune_option, opts)
  opts = opts or {}
  local builder = tune_option.builder or ameasure.LocalBuilder()
  local list = {}
  for i, task in ipairs(tasks) do
    -- the task's runner (TuningOptions' runner may be a function of the task)
    local option = ameasure.measure_option({ builder = builder,
                                             runner = search.task_runner(tune_option.runner, task) or ameasure.LocalRunner() })
    local model = (opts.program_cost_model or "xgb") == "xgb" and cost_model.XGBModel({ seed = (opts.seed or 1) + i })
                  or cost_model.RandomModel({ seed = (opts.seed or 1) + i })
    local policy = search.SketchPolicy(task, { program_cost_model = model, seed = (opts.seed or 1) + i,
                                               params = opts.params, verbose = 0 })
    task.policy = policy
    local mt = search.measure_task(task, not option.runner.check_correctness)
    list[i] = setmetatable({ task = task, policy = policy, mtask = mt,
                             batch = ameasure.create_measure_batch(mt, option) }, Round)
  end
  return list
end

return M
