--- tunelua.auto_scheduler.analysis: the auto-scheduler's static analysis of a compute DAG
-- (core/ansor), one table per stage, for the sketch rules and the REPL.
--
--   local auto_scheduler = require "tunelua.auto_scheduler"
--   local a = auto_scheduler.analyze(task)        -- or a ComputeDAG, a tensor, a tensor list
--   print(a)                                      -- one line per stage
--   a.stages[3].needs_multi_level_tiling, a:stage("T_relu").consumers
--   a:elementwise_match("T_matmul", "T_relu")
--
-- Each stage: id (the op's index, from 0), name, kind ("placeholder" | "compute"),
-- injective, strictly_inlinable, needs_multi_level_tiling, has_reuse, is_output,
-- has_reduce (booleans), producers and consumers (op names, dag order), and
-- fused_consumer: the name of the single element-wise matched consumer that multi-level
-- tiling fuses, or nil. Definitions: core/ansor/ansor.h. Errors are raised.
local ffi = require "ffi"
local core = require "tunelua.core"
local te = require "tunelua.te"

local C, ctx, check = core.C, core.ctx, core.check

local analysis = {}

local Analysis = {}
Analysis.__index = Analysis

-- The tl_dag cdata of what analyze accepts, and the object that keeps it alive.
local function dag_of(x, level)
  if type(x) == "cdata" then return x, x end
  if te.is_tensor(x) then x = te.extract(x)
  elseif type(x) == "table" and #x > 0 and te.is_tensor(x[1]) then x = te.extract(x) end
  if type(x) == "table" then
    if x.dag ~= nil then return x.dag, x end        -- a SearchTask or a te ComputeDAG
    if x.handle ~= nil then return x.handle, x end  -- an auto_scheduler ComputeDAG
  end
  error("analyze: expected a search task, a compute DAG or tensors, got " .. type(x), level + 1)
end

local function names(a, n, get, op)
  local r = {}
  for i = 0, n - 1 do r[#r + 1] = ffi.string(C.tl_dag_op_name(a.dag, get(a.handle, op, i))) end
  return r
end

--- analyze(task | compute_dag | tensor | {tensors}) -> Analysis
function analysis.analyze(x)
  local dag, owner = dag_of(x, 2)
  local out = ffi.new("tl_ansor_analysis *[1]")
  check(C.tl_ansor_analyze(ctx, dag, out), 2)
  local a = setmetatable({ handle = ffi.gc(out[0], C.tl_ansor_analysis_free), dag = dag,
                           owner = owner, stages = {}, by_name = {} }, Analysis)
  local h = a.handle
  for op = 0, C.tl_ansor_num_ops(h) - 1 do
    local c = ffi.new("int[1]")
    local fused = C.tl_ansor_elementwise_consumer(h, op, nil, c) == 1
    local s = {
      id = op, name = ffi.string(C.tl_dag_op_name(dag, op)),
      kind = C.tl_dag_op_kind(dag, op) == C.TL_DAG_PLACEHOLDER and "placeholder" or "compute",
      injective = C.tl_ansor_is_injective(h, op) == 1,
      strictly_inlinable = C.tl_ansor_is_strictly_inlinable(h, op) == 1,
      needs_multi_level_tiling = C.tl_ansor_needs_multi_level_tiling(h, op) == 1,
      has_reuse = C.tl_ansor_has_reuse(h, op) == 1,
      is_output = C.tl_ansor_is_output(h, op) == 1,
      has_reduce = C.tl_ansor_has_reduce(h, op) == 1,
      producers = names(a, C.tl_ansor_num_producers(h, op), C.tl_ansor_producer, op),
      consumers = names(a, C.tl_ansor_num_consumers(h, op), C.tl_ansor_consumer, op),
      fused_consumer = fused and ffi.string(C.tl_dag_op_name(dag, c[0])) or nil,
    }
    a.stages[op + 1] = s
    a.by_name[s.name] = s
  end
  return a
end

--- a:stage(name | id) -> the stage table (an error names an unknown stage)
function Analysis:stage(k)
  local s = type(k) == "number" and self.stages[k + 1] or self.by_name[k]
  if not s then error("analysis: no stage " .. tostring(k), 2) end
  return s
end

--- a:elementwise_match(op, target) -> boolean (stages by name or id)
function Analysis:elementwise_match(op, target)
  return C.tl_ansor_elementwise_match(self.handle, self:stage(op).id, self:stage(target).id) == 1
end

local FLAGS = {
  { "injective", "injective" }, { "strictly_inlinable", "inline" },
  { "needs_multi_level_tiling", "tile" }, { "has_reuse", "reuse" },
  { "has_reduce", "reduce" }, { "is_output", "output" },
}

Analysis.__tostring = function(a)
  local lines = {}
  for _, s in ipairs(a.stages) do
    local f = {}
    for _, p in ipairs(FLAGS) do if s[p[1]] then f[#f + 1] = p[2] end end
    local line = string.format("%-24s %-11s %s", s.name, s.kind, table.concat(f, " "))
    if #s.consumers > 0 then line = line .. "  -> " .. table.concat(s.consumers, ", ") end
    if s.fused_consumer then line = line .. "  (fuses " .. s.fused_consumer .. ")" end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n")
end

return analysis
