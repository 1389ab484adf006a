--- tunelua.graph.extract: AutoTVM task extraction from a relay program.
--
--   local extract = require "tunelua.graph.extract"
--   local tasks = extract.autotvm(mod, {target = "opencl -device=mali", params = params,
--                                      ops = {"nn.conv2d"}})
--   for i, t in ipairs(tasks) do print(i, t.name, t.args) end
--
-- The program is optimized as TVM's extraction does (relay.optimize with the target and
-- params bound, so weights are constants), then every call of an op in `ops` is asked for
-- the implementations the target's strategy offers (tunelua.graph.strategy); each one is a
-- task (template name, serialized args), deduplicated on (name, args) and listed in the
-- order first seen (post-order over the graph, arguments left to right). No weights.
-- Tasks are `autotvm.task.create(name, args, target)` objects when that template is
-- registered; otherwise plain {name, args, target} tables (printing like a task) so that
-- targets whose templates are not implemented yet still list the right tasks.
local strategy = require "tunelua.graph.strategy"
local walk = require "tunelua.graph.walk"

local extract = {}

local PlainTask = {}
PlainTask.__index = PlainTask
PlainTask.__tostring = function(t)
  return string.format("Task(func_name=%s, args=%s, kwargs={}, workload=%s)", t.name,
                       strategy.args_str(t.args), t:workload_str())
end
function PlainTask:workload()
  local w = { self.name }
  for i = 1, #self.args do w[i + 1] = self.args[i] end
  return w
end
function PlainTask:workload_str()
  local parts = { "'" .. self.name .. "'" }
  for i = 1, #self.args do parts[i + 1] = strategy.args_repr(self.args[i]) end
  return "(" .. table.concat(parts, ", ") .. ")"
end
function PlainTask:args_json() return strategy.args_json(self.args) end
extract.PlainTask = PlainTask

--- Optimize a module the way the compilers do (relay.optimize); returns the module to walk.
function extract.optimize(mod, opts, level)
  local r = require("tunelua.relay").optimize(mod, opts)
  if r == nil then return mod end
  return r
end

--- Make a task: an AutoTVM task when its template accepts the args, else a PlainTask.
function extract.make_task(name, args, target)
  local ok, t = pcall(require("tunelua.autotvm.task").create, name, args, target)
  if ok and t then return t end
  return setmetatable({ name = name, args = args, target = target }, PlainTask)
end

local function as_set(ops, level)
  if ops == nil then ops = strategy.tunable_ops() end
  if type(ops) == "string" then ops = { ops } end
  if type(ops) ~= "table" then
    error("extract: ops must be a list of op names such as {\"nn.conv2d\"}, got " .. type(ops),
          level + 1)
  end
  local s = {}
  for _, o in ipairs(ops) do s[o] = true end
  return s
end

--- The (name, args) candidates in order, before dedup and task creation.
function extract.candidates(mod, opts, level)
  level = (level or 1) + 1
  opts = opts or {}
  if opts.target == nil then error("extract: opts.target is required (e.g. 'llvm')", level) end
  local tgt = strategy.parse_target(opts.target, level)
  local ops = as_set(opts.ops, level)
  -- AutoTVM's extraction lowers with AlterOpLayout disabled (specs/networks.md §7)
  local m = extract.optimize(mod, { target = tgt.str, params = opts.params,
                                    disabled = { AlterOpLayout = true } }, level)
  local main = walk.main(m, level)
  local list, seen = {}, {}
  local untemplated, order = {}, {}   -- "op" or "op (layout L)" -> calls without a template
  local ncalls = 0
  walk.each_op_call(main.body, function(node)
    if not ops[node.op] then return end
    ncalls = ncalls + 1
    local impls = strategy.templates(node, tgt)
    if #impls == 0 then
      local layout = node.attrs and node.attrs.data_layout
      local what = layout and layout ~= "NCHW" and string.format("%s in layout %s", node.op, layout)
                   or node.op
      if not untemplated[what] then untemplated[what] = 0; order[#order + 1] = what end
      untemplated[what] = untemplated[what] + 1
    end
    for _, impl in ipairs(impls) do
      local key = impl.name .. " " .. strategy.args_json(impl.args)
      if not seen[key] then
        seen[key] = true
        list[#list + 1] = impl
      end
    end
  end)
  if not opts.quiet then extract.warn_untemplated(tgt, ops, ncalls, untemplated, order) end
  return list, tgt
end

-- Nothing to tune is never silent: a named warning on stderr for the calls of the asked ops that
-- no template of the target serves (they run with default schedules), and for asked ops that
-- the program does not call at all.
function extract.warn_untemplated(tgt, ops, ncalls, untemplated, order)
  local label = tgt.family or tgt.device or tgt.kind or tgt.str
  local has_op = {}
  for _, e in ipairs(tgt.strategy or {}) do has_op[e.op] = true end
  local lines = {}
  for _, what in ipairs(order) do
    local op = what:match("^(%S+)")
    local n = untemplated[what]
    if has_op[op] or has_op[op:gsub("^nn%.", "")] then
      lines[#lines + 1] = string.format("warning: %s: no templates for %s on this target; %d call%s " ..
        "would run untuned (default schedules)", label, what, n, n == 1 and "" or "s")
    else
      lines[#lines + 1] = string.format("warning: %s: no templates for this target (%s); %d call%s " ..
        "would run untuned (default schedules)", label, what, n, n == 1 and "" or "s")
    end
  end
  if ncalls == 0 then
    local names = {}
    for op in pairs(ops) do names[#names + 1] = op end
    table.sort(names)
    lines[#lines + 1] = string.format("warning: the program has no calls of %s: nothing to tune",
                                      table.concat(names, ", "))
  end
  if #lines > 0 then
    io.stdout:flush()
    io.stderr:write(table.concat(lines, "\n"), "\n")
  end
end

--- AutoTVM tasks of a program: extract.autotvm(mod, {target, params, ops}) -> list.
--- Also TVM's positional form: extract.autotvm(mod, params, target[, ops]).
function extract.autotvm(mod, opts, target, ops)
  if target ~= nil then
    if type(ops) == "table" and ops.ops then ops = ops.ops end
    opts = { params = opts, target = target, ops = ops }
  end
  local list, tgt = extract.candidates(mod, opts, 2)
  local tasks = {}
  for i, c in ipairs(list) do
    tasks[i] = extract.make_task(c.name, c.args, tgt.str)
    -- where the graph runs a conv blocked (AlterOpLayout, opts.layouts ~= false), its task
    -- measures that blocked kernel, not the NCHW form with its packing
    if opts.layouts ~= false and tasks[i].set_blocked then tasks[i]:set_blocked(true) end
  end
  return tasks
end

extract.extract_from_program = extract.autotvm

--- The packed conv2d tasks of a packed program (tunelua.relay.graph_pack's output), as the
--- VTA tutorial keeps them (a 6-D input): extract.packed_conv2d(mod, {target, template}) ->
--- list of tasks of template (default "conv2d_packed.vta") in first-seen post order,
--- deduplicated on args; AutoTVM tasks when that template is registered and takes the args,
--- else PlainTasks. The graph is walked as given (no pass runs: graph_pack's output is
--- final).
function extract.packed_conv2d(mod, opts)
  opts = opts or {}
  local name = opts.template or "conv2d_packed.vta"
  local main = walk.main(mod, 2)
  local tasks, seen = {}, {}
  walk.each_op_call(main.body, function(node)
    local args = strategy.packed_conv_args(node)
    if not args then return end
    local key = strategy.args_json(args)
    if seen[key] then return end
    seen[key] = true
    tasks[#tasks + 1] = opts.target and extract.make_task(name, args, opts.target)
                        or setmetatable({ name = name, args = args }, PlainTask)
  end)
  return tasks
end

return extract
