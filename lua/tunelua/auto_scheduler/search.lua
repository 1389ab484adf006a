--- tunelua.auto_scheduler.search: the auto-scheduler's search for one task (TVM's
--- SearchTask, SketchPolicy, TuningOptions, RecordToFile), over core/ansor/search.c.
--
--   local auto_scheduler = require "tunelua.auto_scheduler"
--   local task = auto_scheduler.SearchTask{compute_dag = dag_or_tensors, target = "llvm"}
--   local policy = auto_scheduler.SketchPolicy(task, {program_cost_model = auto_scheduler.XGBModel(), seed = 1})
--   task:tune(auto_scheduler.TuningOptions{num_measure_trials = 64, num_measures_per_round = 16,
--             measure_callbacks = {auto_scheduler.RecordToFile("conv.json")}}, policy)
--   local state = task:apply_best("conv.json")     -- a State: :build(), :source(), :lower()
--   print(task:print_best("conv.json", "c"))
--
-- A SearchTask has .compute_dag, .workload_key, .target (a target string), .hardware_params,
-- .flop and .dag (the tl_dag cdata). The tasks extract_tasks returns are SearchTasks.
--
-- The loop is pull-style (docs/auto_scheduler.md): each round the policy's C side proposes
-- num_measures_per_round new states (evolutionary search scored by the cost model, eps-greedy
-- random states mixed in), Lua builds and measures them through the AutoTVM builder and
-- runners (LocalBuilder/LocalRunner, the OpenCL hook, RPCRunner: a crash, hang or wrong
-- answer is an error record), appends one record line per state to the log (RecordToFile:
-- the auto-scheduler's JSON-lines format, flushed per line) and hands the throughputs back.
-- With a log that already holds records of the task, tune loads them first: those states are
-- never proposed again, they warm-start the cost model, and they count toward
-- num_measure_trials (a killed run resumes where it stopped). A malformed line is skipped with
-- a warning naming the file and line.
--
-- REPL exploration: task:sketches() (States with open tile sizes), task:sample(n) (random
-- complete States), tostring(state) (steps and iterators), state:steps() (the record's step
-- list), state:lower() (the loop nest), state:source() (C or OpenCL), state:time() (seconds).
local ffi = require "ffi"
local core = require "tunelua.core"
local json = require "tunelua.json"
local target = require "tunelua.target"
local file = require "tunelua.file"
local build = require "tunelua.build"
local nd = require "tunelua.nd"
local records = require "tunelua.auto_scheduler.records"

local C, ctx = core.C, core.ctx

local M = {}

local function fail(lvl)
  local m = core.errmsg()
  C.tl_clearerr(ctx)
  error(m, lvl + 1)
end

local function check(rc, lvl) if rc ~= 0 then fail(lvl + 1) end end

M.LOG_VERSION = records.LOG_VERSION

-- ---- states -------------------------------------------------------------------------------------

local State = {}
State.__index = State
State.__tostring = function(s) return ffi.string(C.tl_sched_print(s.handle)) end
M.State_mt = State

local function state_of(task, h)
  return setmetatable({ handle = ffi.gc(h, C.tl_sched_free), task = task }, State)
end

--- state:steps() -> the step list as the record writes it (JSON text)
function State:steps() return ffi.string(C.tl_sched_json(self.handle)) end

-- The lowered function of a state ({handle, name, nargs}, what tunelua.build's backends take).
-- rewrite: the task's layout-free arguments in the order the loops read them (trials of a task
-- whose layout_rewrite is 2, as the network build then runs them; docs/auto_scheduler.md,
-- "Layout rewriting"; the policy knows which arguments: SketchPolicy).
local function lower_state(task, h, name, lvl, rewrite)
  local p = task:policy_handle()
  name = name or "default_function"
  local out = ffi.new("tl_lowered *[1]")
  check(C.tl_ansor_policy_lower(ctx, p, h, name, rewrite and 1 or 0, out), lvl + 1)
  return { handle = ffi.gc(out[0], C.tl_lowered_free), name = name, nargs = C.tl_ansor_policy_num_args(p),
           lower_seconds = C.tl_lowered_seconds(out[0]) }
end
--- The layout_rewrite_option of a task whose layout-free arguments (constant weights) trials
--- and builds store in their loops' order (TVM's RewriteForPreTransformed).
M.LAYOUT_REWRITE = 2

--- state:lower() -> the lowered loop nest (tostring: the IR text)
function State:lower()
  local l = lower_state(self.task, self.handle, nil, 2)
  return setmetatable(l, { __tostring = function(x) return ffi.string(C.tl_lowered_text(x.handle)) end })
end

--- state:build([target[, {cflags = ...}]]) -> a callable function of the task's arrays
--- (placeholders, then outputs)
function State:build(tgt, opts)
  local t = target.parse(tgt or self.task.target, 2)
  local l = lower_state(self.task, self.handle, nil, 2)
  return build.backends[t.backend](l, t, opts or {}, 2)
end

--- state:source([target]) -> the generated C or OpenCL source
function State:source(tgt)
  local t = target.parse(tgt or self.task.target, 2)
  local l = lower_state(self.task, self.handle, nil, 2)
  if t.backend == "opencl" then
    local src = ffi.new("const char *[1]")
    check(C.tl_opencl_source(ctx, l.handle, src), 2)
    return ffi.string(src[0])
  end
  local f = build.backends[t.backend](l, t, {}, 2)
  return f:get_source()
end

--- task:random_args() -> arrays for the task's arguments (inputs random, outputs zero)
local function random_args(task, device, seed)
  local p = task:policy_handle()
  local dag = C.tl_sched_dag(ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(p)))
  local out = {}
  local n = C.tl_ansor_policy_num_args(p)
  for i = 0, n - 1 do
    local t = C.tl_ansor_policy_arg(p, i)
    local nd_ = C.tl_dag_tensor_ndim(dag, t)
    local sh = C.tl_dag_tensor_shape(dag, t)
    local shape = {}
    for d = 0, nd_ - 1 do shape[d + 1] = tonumber(sh[d]) end
    local a
    if C.tl_dag_op_kind(dag, C.tl_dag_tensor_op(dag, t)) == C.TL_DAG_PLACEHOLDER then
      a = nd.random_uniform(shape, { low = -1, high = 1, seed = (seed or 7) + i })
    else
      a = nd.zeros(shape)
    end
    out[#out + 1] = device and a:copyto(device) or a
  end
  return out
end
M.random_args = random_args

--- state:time([{number = 10, repeats = 3}]) -> mean seconds per run on the task's target
function State:time(opts)
  local f = self:build()
  local args = random_args(self.task, f.device)
  local r = f:time_evaluator(opts or { number = 5, repeats = 3 })(unpack(args))
  return r.mean
end

-- ---- the policy -------------------------------------------------------------------------------

local SketchPolicy = {}
SketchPolicy.__index = SketchPolicy
M.SketchPolicy_mt = SketchPolicy

local PARAMS = {
  "eps_greedy", "retry_search_one_round_on_empty", "sample_init_min_population",
  "sample_init_use_measured_ratio", "evolutionary_search_population", "evolutionary_search_num_iters",
  "evolutionary_search_mutation_prob", "max_innermost_split_factor", "max_vectorize_size",
  "disable_change_compute_location",
}

--- SketchPolicy(task, {program_cost_model = XGBModel() | RandomModel() | nil (random scores
---                     without features), seed = n,
---                     params = {evolutionary_search_population = 2048, ...}, verbose = 1})
function M.SketchPolicy(task, opts)
  opts = opts or {}
  if type(task) ~= "table" or type(task.dag) ~= "cdata" or type(task.target) ~= "string" then
    error("SketchPolicy: expected a SearchTask, got " .. type(task), 2)
  end
  if type(opts) ~= "table" then error("SketchPolicy: options must be a table", 2) end
  local seed = opts.seed or math.random(1, 2 ^ 30)
  if type(seed) ~= "number" or seed < 0 or seed % 1 ~= 0 then
    error("SketchPolicy: seed must be a non-negative integer, got " .. tostring(seed), 2)
  end
  local tgt = target.parse(task.target, 2)
  local out = ffi.new("tl_ansor_policy *[1]")
  check(C.tl_ansor_policy_new(ctx, task.dag, task.hardware_params:handle(),
                              tgt.backend == "opencl" and 1 or 0, seed, out), 2)
  local p = setmetatable({ handle = ffi.gc(out[0], C.tl_ansor_policy_free), task = task,
                           model = opts.program_cost_model, verbose = opts.verbose or 1 }, SketchPolicy)
  if task.layout_rewrite == M.LAYOUT_REWRITE and task.layout_free and #task.layout_free > 0 then
    -- the features see the kernels as the trials build them
    check(C.tl_ansor_policy_set_layout_free(ctx, p.handle, ffi.new("int[?]", #task.layout_free, task.layout_free),
                                            #task.layout_free), 2)
  end
  for k, v in pairs(opts.params or {}) do
    if type(v) ~= "number" then error("SketchPolicy: parameter " .. tostring(k) .. " must be a number", 2) end
    check(C.tl_ansor_policy_set_param(ctx, p.handle, tostring(k), v), 2)
  end
  local m = p.model
  if m ~= nil and (type(m) ~= "table" or type(m.handle) ~= "cdata") then
    error("SketchPolicy: program_cost_model must be auto_scheduler.XGBModel{...} or RandomModel{...}", 2)
  end
  return p
end

function SketchPolicy:param(name)
  local v = ffi.new("double[1]")
  if C.tl_ansor_policy_get_param(self.handle, name, v) ~= 0 then
    error("SketchPolicy: unknown parameter '" .. tostring(name) .. "'", 2)
  end
  return v[0]
end
M.PARAMS = PARAMS

-- The model handle for C (nil: no model, random scores without features).
local function model_handle(m) return m and m.handle or nil end

--- policy:sketches() -> States (split lengths are placeholders)
function SketchPolicy:sketches()
  local n = C.tl_ansor_policy_num_sketches(ctx, self.handle)
  if n < 0 then fail(2) end
  local r = {}
  for i = 0, n - 1 do
    local out = ffi.new("tl_sched *[1]")
    check(C.tl_ansor_policy_sketch(ctx, self.handle, i, out), 2)
    r[#r + 1] = state_of(self.task, out[0])
  end
  return r
end

--- policy:trace() -> why sketch rules did not apply (text)
function SketchPolicy:trace() return ffi.string(C.tl_ansor_policy_trace(self.handle)) end

--- policy:sample(n) -> n random complete States, each lowered and checked
function SketchPolicy:sample(n)
  n = n or 1
  local arr = ffi.new("tl_sched *[?]", n)
  local got = ffi.new("int[1]")
  local rc = C.tl_ansor_policy_sample(ctx, self.handle, n, arr, got)
  local r = {}
  for i = 0, got[0] - 1 do r[#r + 1] = state_of(self.task, arr[i]) end
  if rc ~= 0 then fail(2) end
  return r
end

--- policy:next_batch(n) -> up to n new States to measure (one search round)
function SketchPolicy:next_batch(n)
  local arr = ffi.new("tl_sched *[?]", n)
  local got = ffi.new("int[1]")
  local rc = C.tl_ansor_policy_next_batch(ctx, self.handle, model_handle(self.model), n, arr, got)
  local r = {}
  for i = 0, got[0] - 1 do r[#r + 1] = state_of(self.task, arr[i]) end
  if rc ~= 0 then fail(2) end
  return r, C.tl_ansor_policy_round_seconds(self.handle), C.tl_ansor_policy_round_population(self.handle)
end

--- policy:add_measured(steps_json, flops)
function SketchPolicy:add_measured(steps, flops)
  check(C.tl_ansor_policy_add_measured(ctx, self.handle, steps, flops or 0), 2)
end

function SketchPolicy:update_model()
  local h = model_handle(self.model)
  if h ~= nil then check(C.tl_ansor_policy_update_model(ctx, self.handle, h), 2) end
end

-- ---- records ------------------------------------------------------------------------------------

--- record line of one measurement (no newline): records.encode of the task and the result
function M.encode_record(task, steps, res, layout_rewrite)
  return records.encode { workload_key = task.workload_key, target = task.target, layout_rewrite = layout_rewrite,
                          hardware_params = task.hardware_params, steps = steps, costs = res.costs,
                          error_no = res.error_no, all_cost = res.all_cost, timestamp = res.timestamp }
end

--- load_records(path[, {warn = fn}]) -> records.load(path) (see there); a missing file has none
function M.load_records(path, opts)
  if not file.exists(path) then return {} end
  return records.load(path, opts)
end

-- A decoded step list back to JSON text (what tl_sched_apply_json reads).
local function steps_text(list) return json.encode(list) end
M.steps_text = steps_text

local mean = records.mean

-- Records of this task (same workload key and target kind).
local function task_records(task, path, opts)
  local r = {}
  local kind = target.record(task.target).kind
  for _, rec in ipairs(M.load_records(path, opts)) do
    if rec.workload_key == task.workload_key and target.record(rec.target).kind == kind then
      r[#r + 1] = rec
    end
  end
  return r
end
M.task_records = task_records

-- ---- tuning -------------------------------------------------------------------------------------

--- TuningOptions{num_measure_trials = 0, num_measures_per_round = 64, early_stopping = nil,
---               builder = LocalBuilder(), runner = LocalRunner(), measure_callbacks = {}, verbose = 1,
---               max_seconds = nil}
--- max_seconds (a tunelua extension): no new round starts once this many seconds have passed
--- since tune() began measuring (after a resumed log is loaded); the round in flight finishes and is logged, and a rerun with the same
--- log resumes. Rounds stay num_measures_per_round long, so a time budget costs no search
--- overhead per trial.
--- runner may also be a function(task) -> runner (a tunelua extension): each task is measured
--- with its own runner, e.g. on flushed caches where its weights are large (scripts/bench/
--- ansor_network.lua --cache-flush auto).
function M.TuningOptions(o)
  o = o or {}
  if type(o) ~= "table" then error("TuningOptions: expected a table", 2) end
  local known = { num_measure_trials = 1, num_measures_per_round = 1, early_stopping = 1, builder = 1,
                  runner = 1, measure_callbacks = 1, verbose = 1, max_seconds = 1 }
  for k in pairs(o) do
    if not known[k] then error("TuningOptions: unknown option '" .. tostring(k) .. "'", 2) end
  end
  local r = {
    num_measure_trials = o.num_measure_trials or 0,
    num_measures_per_round = o.num_measures_per_round or 64,
    early_stopping = o.early_stopping, builder = o.builder, runner = o.runner,
    measure_callbacks = o.measure_callbacks or {}, verbose = o.verbose or 1,
    max_seconds = o.max_seconds,
  }
  if r.runner ~= nil and type(r.runner) ~= "table" and type(r.runner) ~= "function" then
    error("TuningOptions: runner must be a runner or a function(task) -> runner, got " .. type(r.runner), 2)
  end
  if r.max_seconds ~= nil and (type(r.max_seconds) ~= "number" or not (r.max_seconds > 0)) then
    error("TuningOptions: max_seconds must be a positive number of seconds, got " .. tostring(r.max_seconds), 2)
  end
  for _, k in ipairs({ "num_measure_trials", "num_measures_per_round" }) do
    local v = r[k]
    if type(v) ~= "number" or v < 0 or v % 1 ~= 0 then
      error("TuningOptions: " .. k .. " must be a non-negative integer, got " .. tostring(v), 2)
    end
  end
  if r.num_measures_per_round < 1 then error("TuningOptions: num_measures_per_round must be >= 1", 2) end
  return r
end

--- RecordToFile(path): appends one record line per measurement (flushed per line)
M.RecordToFile = records.RecordToFile

-- The measure task the AutoTVM builder and runners take: config index k = states[k]; its
-- reference (check_correctness) is the task's unscheduled DAG.
-- rewrite: trials store the task's layout-free arguments in their loops' order (not with a
-- correctness check, whose reference reads them as given); mt.layout_rewrite is the option
-- its records carry.
local function measure_task(task, rewrite)
  local mt = { target = task.target, states = {}, name = "auto_scheduler", args = {},
               layout_rewrite = rewrite and task.layout_rewrite == M.LAYOUT_REWRITE and M.LAYOUT_REWRITE or 0 }
  function mt.lower(self, idx)
    local st = self.states[idx]
    if not st then error("no state " .. tostring(idx)) end
    return lower_state(task, st.handle, "default_function", 2, self.layout_rewrite == M.LAYOUT_REWRITE)
  end
  function mt.lower_reference(_)
    local p = task:policy_handle()
    return lower_state(task, ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(p)), "default_function", 2)
  end
  return mt
end
M.measure_task = measure_task

--- task_runner(runner, task) -> the runner that measures the task: TuningOptions' runner, or
--- what it returns for the task when it is a function (nil: none given)
function M.task_runner(runner, task)
  if type(runner) ~= "function" then return runner end
  local r = runner(task)
  if type(r) ~= "table" then
    error("TuningOptions: the runner function returned " .. type(r) .. " for task " .. task.workload_key ..
          ", expected a runner", 0)
  end
  return r
end

local function say(opts, ...) if (opts.verbose or 1) >= 1 then io.write(string.format(...)) io.flush() end end

--- task:tune(TuningOptions{...}[, policy]) -> {best_cost, best_steps, trials, rounds, round_seconds,
---                                              round_cpu_seconds (the process's CPU time per round)}
function M.tune(task, opts, policy)
  if getmetatable(opts) ~= nil or type(opts) ~= "table" then error("tune: expected TuningOptions", 2) end
  policy = policy or task.policy or
           M.SketchPolicy(task, { program_cost_model = require("tunelua.auto_scheduler.cost_model").XGBModel() })
  task.policy = policy
  local ameasure = require "tunelua.autotvm.measure"
  local builder = opts.builder or ameasure.LocalBuilder()
  local runner = M.task_runner(opts.runner, task) or ameasure.LocalRunner()
  local option = ameasure.measure_option({ builder = builder, runner = runner })
  local mt = measure_task(task, not runner.check_correctness)
  local writers = {}
  local best_cost, best_steps = math.huge, nil
  local ct = 0
  for _, cb in ipairs(opts.measure_callbacks) do
    if type(cb) == "table" and cb.kind == "record_to_file" then
      -- resume: what the log holds counts, is never proposed again and trains the model
      for _, rec in ipairs(task_records(task, cb.path)) do
        local steps = steps_text(rec.steps_list)
        local cost = rec.error_no == 0 and mean(rec.costs) or math.huge
        local ok, err = pcall(policy.add_measured, policy, steps, cost < math.huge and task.flop / cost or 0)
        if ok then
          ct = ct + 1
          if cost < best_cost then best_cost, best_steps = cost, steps end
        else
          io.stderr:write(string.format("warning: %s:%d: skipped a record of another DAG (%s)\n",
                                        cb.path, rec.line, tostring(err)))
        end
      end
      writers[#writers + 1] = file.append(cb.path)
    elseif type(cb) == "function" then
      writers[#writers + 1] = { fn = cb }
    else
      error("tune: a measure callback must be RecordToFile(path) or a function(task, states, results)", 2)
    end
  end
  if ct > 0 then
    say(opts, "Resumed %d measured states of task %s from the log.\n", ct, task.workload_key)
    policy:update_model()
  end
  local batch = ameasure.create_measure_batch(mt, option)
  local rounds, round_seconds, round_cpu_seconds = 0, {}, {}
  local early = opts.early_stopping
  local best_ct = ct
  local empty_retry = 0
  local now = core.C.tl_now
  local deadline = opts.max_seconds and now() + opts.max_seconds
  while ct < opts.num_measure_trials do
    if deadline and now() >= deadline then
      say(opts, "Stop: max_seconds (%g s) reached after %d trials.\n", opts.max_seconds, ct)
      break
    end
    local n = math.min(opts.num_measures_per_round, opts.num_measure_trials - ct)
    local c0 = os.clock()
    local states, secs, npop = policy:next_batch(n)
    rounds = rounds + 1
    round_seconds[#round_seconds + 1] = secs
    round_cpu_seconds[#round_cpu_seconds + 1] = os.clock() - c0
    if #states == 0 then
      empty_retry = empty_retry + 1
      if empty_retry > 1 then break end
    else
      empty_retry = 0
      local inputs = {}
      for i, st in ipairs(states) do
        mt.states[i] = st
        inputs[i] = ameasure.MeasureInput(mt, i)
      end
      local results = batch(inputs)
      for i, st in ipairs(states) do
        local res = results[i]
        local steps = st:steps()
        local cost = res.error_no == 0 and mean(res.costs) or math.huge
        policy:add_measured(steps, cost < math.huge and task.flop / cost or 0)
        ct = ct + 1
        if cost < best_cost then best_cost, best_steps, best_ct = cost, steps, ct end
        for _, w in ipairs(writers) do
          if w.fn then w.fn(task, st, res)
          else
            w:write(M.encode_record(task, steps, res, mt.layout_rewrite), "\n")
            w:sync()
          end
        end
      end
      say(opts, "round %d: %d states, best %.3f GFLOPS, search %.2f s (%d states scored)\n", rounds,
          #states, best_cost < math.huge and task.flop / best_cost / 1e9 or 0, secs, npop)
      policy:update_model()
      if early and ct - best_ct > early and best_cost < math.huge then break end
    end
  end
  for _, w in ipairs(writers) do if not w.fn then w:close() end end
  return { best_cost = best_cost, best_steps = best_steps, trials = ct, rounds = rounds,
           round_seconds = round_seconds, round_cpu_seconds = round_cpu_seconds }
end

--- task:apply_best(log) -> the best State of the log for this task (nil, msg if none)
function M.apply_best(task, path)
  local best, bc = nil, math.huge
  for _, rec in ipairs(task_records(task, path)) do
    if rec.error_no == 0 then
      local c = mean(rec.costs)
      if c < bc then best, bc = rec, c end
    end
  end
  if not best then return nil, "no valid record of task " .. task.workload_key .. " in " .. path end
  local init = ffi.cast("tl_sched *", C.tl_ansor_policy_init_state(task:policy_handle()))
  local out = ffi.new("tl_sched *[1]")
  check(C.tl_sched_fresh(ctx, init, out), 2)
  local st = state_of(task, out[0])
  check(C.tl_sched_apply_json(ctx, st.handle, steps_text(best.steps_list)), 2)
  return st, bc
end

--- task:print_best(log, "c" | "opencl") -> the best state's source
function M.print_best(task, path, kind)
  local st, why = M.apply_best(task, path)
  if not st then error("print_best: " .. why, 2) end
  local tgt = task.target
  if kind == "opencl" then tgt = "opencl" elseif kind == "c" then tgt = "c" end
  return st:source(tgt)
end

return M
