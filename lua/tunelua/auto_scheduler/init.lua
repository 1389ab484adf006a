--- tunelua.auto_scheduler: search tasks from a relay program (TVM's auto_scheduler).
--
--   local auto_scheduler = require "tunelua.auto_scheduler"
--   local tasks, weights = auto_scheduler.extract_tasks(mod, params, "opencl -device=mali")
--   for i, t in ipairs(tasks) do
--     print(string.format("========== Task %d  (workload key: %s) ==========", i - 1, t.workload_key))
--     print(t.compute_dag)
--   end
--
-- The program is optimized as the compiler does it (relay.optimize with params bound,
-- FuseOps), then every fused group becomes one compute DAG built with topi ops
-- (tunelua.graph.group). Groups without a reduction are left out (TVM's default,
-- include_simple_tasks = false; opts.include_simple_tasks = true keeps them). Tasks are
-- keyed by the DAG's workload key (tl_dag_key_text: a hash of the DAG's structure and the
-- io shapes), deduplicated, in the order first seen; weights[i] = how many call sites
-- share task i's key. A task has .workload_key, .compute_dag (tostring: the DAG, one line
-- per op as seed 003 prints it), .desc (the fused function names), .target, .flop, .dag
-- (the tl_dag cdata), and tostring(task) prints its DAG.
--
-- auto_scheduler.analyze(task | compute_dag | tensors) is the static analysis of a DAG,
-- one table per stage (tunelua.auto_scheduler.analysis).
--
-- auto_scheduler.HardwareParams{...} and auto_scheduler.hardware_params_of(target[, opts])
-- are the hardware params (tunelua.auto_scheduler.hardware_params).
--
-- auto_scheduler.XGBModel{...} and auto_scheduler.RandomModel() are the cost models, over the
-- per-store features auto_scheduler.features(lowered, hw) (tunelua.auto_scheduler.cost_model).
--
-- On CPU targets a 3x3 stride-1 NHWC conv with a constant weight becomes a Winograd task
-- (conv2d_winograd_nhwc, its weight transformed once) where the x86 rule by shape says it
-- wins (opts.winograd; tunelua.auto_scheduler.winograd), and a dense with a constant weight
-- becomes a matmul on the transposed weight (tunelua.auto_scheduler.weights).
local ffi = require "ffi"
local core = require "tunelua.core"
local walk = require "tunelua.graph.walk"
local group = require "tunelua.graph.group"
local extract = require "tunelua.graph.extract"
local strategy = require "tunelua.graph.strategy"
local analysis = require "tunelua.auto_scheduler.analysis"
local hardware_params = require "tunelua.auto_scheduler.hardware_params"
local cost_model = require "tunelua.auto_scheduler.cost_model"
local winograd = require "tunelua.auto_scheduler.winograd"
local weight_layouts = require "tunelua.auto_scheduler.weights"

local C = core.C

local auto_scheduler = {}

local ComputeDAG = {}
ComputeDAG.__index = ComputeDAG
ComputeDAG.__tostring = function(d) return ffi.string(C.tl_dag_text(d.handle)) end
function ComputeDAG:workload_key() return ffi.string(C.tl_dag_key_text(self.handle)) end
function ComputeDAG:flop() return C.tl_dag_flop_ansor(self.handle) end
auto_scheduler.ComputeDAG = ComputeDAG

local SearchTask = {}
SearchTask.__index = SearchTask
SearchTask.__tostring = function(t) return tostring(t.compute_dag) end
auto_scheduler.SearchTask_mt = SearchTask

-- The search (tunelua.auto_scheduler.search): tasks tune, explore and replay their best.
local search = require "tunelua.auto_scheduler.search"
local te = require "tunelua.te"
local target_mod = require "tunelua.target"

-- A task's hardware params, made on first use from its target when none were given.
SearchTask.__index = function(t, k)
  if k == "hardware_params" then
    local hp = hardware_params.hardware_params_of(t.target)
    rawset(t, "hardware_params", hp)
    return hp
  end
  return SearchTask[k]
end

-- The policy that holds the task's sketches and lowering arguments (made on first use).
function SearchTask:policy_handle()
  if not rawget(self, "default_policy") then
    rawset(self, "default_policy", search.SketchPolicy(self, { seed = 1 }))
  end
  return (self.policy or self.default_policy).handle
end
function SearchTask:tune(opts, policy) return search.tune(self, opts, policy) end
function SearchTask:apply_best(log) return search.apply_best(self, log) end
function SearchTask:print_best(log, kind) return search.print_best(self, log, kind) end
function SearchTask:sketches()
  self:policy_handle()
  return (self.policy or self.default_policy):sketches()
end
function SearchTask:sample(n)
  self:policy_handle()
  return (self.policy or self.default_policy):sample(n)
end

--- task:constant_bytes() -> bytes of the task's constant arguments (a network's weights; 0 for a
--- task that was not extracted from a network)
function SearchTask:constant_bytes()
  local g = rawget(self, "group")
  if not g then return 0 end
  local n = 0
  for _, t in ipairs((group.layout_free(g))) do
    local shape, k = C.tl_dag_tensor_shape(g.dag, t), C.tl_dtype_bytes(C.tl_dag_tensor_dtype(g.dag, t))
    for d = 0, C.tl_dag_tensor_ndim(g.dag, t) - 1 do k = k * tonumber(shape[d]) end
    n = n + k
  end
  return n
end

--- SearchTask{compute_dag = dag | tensors, target = "llvm", hardware_params = hp}
--- or SearchTask{func = fn, args = {...}, target = ...} (fn(unpack(args)) returns the output tensors)
function auto_scheduler.SearchTask(o)
  if type(o) ~= "table" then error("SearchTask: expected a table of options", 2) end
  for k in pairs(o) do
    if k ~= "compute_dag" and k ~= "func" and k ~= "args" and k ~= "target" and k ~= "hardware_params"
       and k ~= "workload_key" then
      error("SearchTask: unknown option '" .. tostring(k) .. "'", 2)
    end
  end
  if o.target == nil then error("SearchTask: a target is required (e.g. 'llvm')", 2) end
  local tgt = target_mod.parse(o.target, 2)
  local d = o.compute_dag
  if d == nil and o.func ~= nil then
    if type(o.func) ~= "function" then error("SearchTask: func must be a function", 2) end
    d = o.func(unpack(o.args or {}))
  end
  if d == nil then error("SearchTask: compute_dag or func is required", 2) end
  local dag, owner = nil, d
  if type(d) == "cdata" then dag = d
  elseif type(d) == "table" and getmetatable(d) == ComputeDAG then dag = d.handle
  elseif te.is_tensor(d) or (type(d) == "table" and te.is_tensor(d[1])) then
    owner = te.extract(d)
    dag = owner.dag
  elseif type(d) == "table" and d.dag ~= nil then dag = d.dag
  else error("SearchTask: compute_dag must be a ComputeDAG, a tl_dag or output tensors", 2) end
  local cd = setmetatable({ handle = dag, owner = owner }, ComputeDAG)
  local t = setmetatable({ workload_key = o.workload_key or cd:workload_key(), compute_dag = cd,
                           dag = dag, target = tgt.str, flop = cd:flop(), desc = {} }, SearchTask)
  if o.hardware_params ~= nil then
    if getmetatable(o.hardware_params) ~= hardware_params.HardwareParams_mt then
      error("SearchTask: hardware_params must be a HardwareParams", 2)
    end
    rawset(t, "hardware_params", o.hardware_params)
  end
  return t
end

auto_scheduler.SketchPolicy = search.SketchPolicy
auto_scheduler.TuningOptions = search.TuningOptions
auto_scheduler.RecordToFile = search.RecordToFile
auto_scheduler.load_records = search.load_records
do
  local am = require "tunelua.autotvm.measure"
  auto_scheduler.LocalBuilder, auto_scheduler.LocalRunner = am.LocalBuilder, am.LocalRunner
end

auto_scheduler.analyze = analysis.analyze
auto_scheduler.HardwareParams = hardware_params.HardwareParams
auto_scheduler.hardware_params_of = hardware_params.hardware_params_of
auto_scheduler.XGBModel = cost_model.XGBModel
auto_scheduler.RandomModel = cost_model.RandomModel
auto_scheduler.features = cost_model.features

--- extract_tasks(mod, params, target[, opts]) -> tasks, weights
--- opts.winograd = "auto" (default), "always" or "never": whether 3x3 stride-1 NHWC convs with a
--- constant weight become Winograd tasks (tunelua.auto_scheduler.winograd); the network build
--- with ApplyHistoryBest must be given the same mode (relay.build's winograd option).
--- opts.layout_rewrite = false: trials read the weights as given (records with layout_rewrite_option
--- 0), else, on CPU targets, in the order of each state's loops (2).
function auto_scheduler.extract_tasks(mod, params, target, opts)
  opts = opts or {}
  if target == nil then error("extract_tasks: a target is required (e.g. 'llvm')", 2) end
  local mode = winograd.check_mode(opts.winograd, "extract_tasks", 2)
  local tgt = strategy.parse_target(target, 2)
  local m = extract.optimize(mod, { target = tgt.str, params = params or {} }, 2)
  local main = walk.main(m, 2)
  local cpu = tgt.schedules == "cpu"
  local tasks, weights, by_key = {}, {}, {}
  for _, n in ipairs(walk.postorder(main.body)) do
    if n.kind == "call" and (walk.is_function(n.op) or opts.include_unfused) then
      local g = group.build(n, { anchor_hook = weight_layouts.hook(n, mode, cpu) }, 2)
      if g.has_reduce or opts.include_simple_tasks then
        local key = group.key_text(g)
        local i = by_key[key]
        if i then
          weights[i] = weights[i] + 1
          local d = tasks[i].desc
          if not d[g.name] then d[g.name] = true; d[#d + 1] = g.name end
        else
          local dag = setmetatable({ handle = g.dag }, ComputeDAG)
          -- on CPU targets the weights are layout-free: trials and the build store them in the
          -- order each state's loops read them (docs/auto_scheduler.md, "Layout rewriting")
          local free = cpu and opts.layout_rewrite ~= false and group.layout_free(g) or {}
          local t = setmetatable({
            workload_key = key, compute_dag = dag, dag = g.dag, target = tgt.str,
            desc = { g.name, [g.name] = true }, flop = C.tl_dag_flop_ansor(g.dag), group = g,
            layout_free = free, layout_rewrite = #free > 0 and search.LAYOUT_REWRITE or 0,
          }, SearchTask)
          tasks[#tasks + 1] = t
          weights[#weights + 1] = 1
          by_key[key] = #tasks
        end
      end
    end
  end
  return tasks, weights
end

-- Logs and network builds: the record format (tunelua.auto_scheduler.records) and the best
-- record of each workload for relay.build's history (tunelua.auto_scheduler.dispatch).
auto_scheduler.records = require "tunelua.auto_scheduler.records"
auto_scheduler.ApplyHistoryBest = require("tunelua.auto_scheduler.dispatch").ApplyHistoryBest
-- One trial budget over a network's tasks (tunelua.auto_scheduler.task_scheduler).
do
  local ts = require "tunelua.auto_scheduler.task_scheduler"
  auto_scheduler.TaskScheduler = ts.TaskScheduler
  auto_scheduler.PrintTableInfo, auto_scheduler.LogEstimatedLatency = ts.PrintTableInfo, ts.LogEstimatedLatency
end

return auto_scheduler
