--- tunelua.autotvm.dispatch: choosing configs from tuning logs (formats §5.4).
--
--   local ctx = autotvm.apply_history_best("resnet.log")   -- or a list of files / records
--   local best = ctx:query("llvm -mcpu=skylake-avx512", task:workload())
--   -- best = {entity = {...}, index = n, cost = s, target = str, source = "log"|"tophub"} or nil
--   local index = ctx:query_task(task)     -- an index of task's space, or -1 (fallback)
--
-- Records with error_no ~= 0 are ignored. Each record is indexed under every
-- key of its target and under its model (unless "unknown"); the lowest mean
-- cost wins, the first loaded wins a tie. A query tries (model, workload),
-- then each key of the target in order.
-- Unlike TVM, where a user's apply_history_best replaces TopHub entirely,
-- queries that find nothing fall back to the TopHub log of the target
-- (source = "tophub"); pass {tophub = false} for TVM's behaviour.
local targets = require "tunelua.target"
local record = require "tunelua.autotvm.record"

local dispatch = {}

local Context = {}
Context.__index = Context
dispatch.Context = Context

local function collect(log, lvl)
  if type(log) == "string" then return record.load_from_file(log) end
  if type(log) ~= "table" then
    error("apply_history_best: expected a log file, a list of files or a list of records", lvl + 1)
  end
  local out = {}
  for _, x in ipairs(log) do
    if type(x) == "string" then
      for _, r in ipairs(record.load_from_file(x)) do out[#out + 1] = r end
    elseif type(x) == "table" and x.inp and x.res then
      out[#out + 1] = x
    elseif type(x) == "table" and x[1] and x[2] then
      out[#out + 1] = { inp = x[1], res = x[2] }
    else
      error("apply_history_best: entries must be file names or {inp = ..., res = ...} records", lvl + 1)
    end
  end
  return out
end

--- dispatch.apply_history_best(log_or_records, {tophub = true}) -> Context
function dispatch.apply_history_best(log, opts)
  opts = opts or {}
  local recs = collect(log, 2)
  local by_key, by_model = record.best_index(recs)
  return setmetatable({ records = recs, by_key = by_key, by_model = by_model,
                        tophub = opts.tophub ~= false, pinned = {} }, Context)
end

local function result(r, source)
  return { entity = r.inp.config.entity, index = r.inp.config.index, cost = r.cost,
           target = r.inp.target, record = r, source = source }
end

--- ctx:query(target, workload) -> best config record or nil
function Context.query(ctx, target, workload)
  if type(workload) ~= "table" or type(workload[1]) ~= "string" then
    error("query: the workload must be a list {task_name, args...}", 2)
  end
  local info = targets.info(target)
  local wk = record.workload_key(workload)
  if info.model ~= "unknown" then
    local r = ctx.pinned[info.model .. "\0" .. wk] or ctx.by_model[info.model .. "\0" .. wk]
    if r then return result(r, "log") end
  end
  for _, k in ipairs(info.keys) do
    local r = ctx.pinned[k .. "\0" .. wk] or ctx.by_key[k .. "\0" .. wk]
    if r then return result(r, "log") end
  end
  if ctx.tophub then
    local tophub = require "tunelua.autotvm.tophub"
    local th = ctx._tophub and ctx._tophub[target]
    if not th then
      th = tophub.context(target)
      ctx._tophub = ctx._tophub or {}
      ctx._tophub[target] = th
    end
    local r = th:query(target, workload)
    if r then r.source = "tophub" end
    return r
  end
  return nil
end

--- ctx:query_task(task) -> an index of task's config space, or -1 (the fallback), and the hit
function Context.query_task(ctx, task)
  local hit = ctx:query(task.target, task:workload())
  if not hit then return -1 end
  local idx = task.config_space:index_of(hit.entity)
  if not idx then return -1, hit end
  return idx, hit
end

--- ctx:update(target, workload, record) pins a config (user-pinned configs win)
function Context.update(ctx, target, workload, r)
  local info = targets.info(target)
  local wk = record.workload_key(workload)
  for _, k in ipairs(info.keys) do ctx.pinned[k .. "\0" .. wk] = r end
  if info.model ~= "unknown" then ctx.pinned[info.model .. "\0" .. wk] = r end
end

return dispatch
