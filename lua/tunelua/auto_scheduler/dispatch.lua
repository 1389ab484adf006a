--- tunelua.auto_scheduler.dispatch: the best auto-scheduler record of each workload, for a
--- network build (TVM's auto_scheduler.ApplyHistoryBest, formats §6.2).
--
--   local auto_scheduler = require "tunelua.auto_scheduler"
--   local best = auto_scheduler.ApplyHistoryBest("mobilenet.json")   -- or a list of files
--   local lib = relay.build(mod, {target = "llvm", params = params, history = best})
--   local rec = best:query("llvm", workload_key)   -- the best record, or nil
--
-- Records are indexed under every key of their target and under their model (unless
-- "unknown"); error records never count; the lowest mean cost wins (the first loaded wins a
-- tie). A query tries the target's model, then each of its keys in order, with the
-- workload's identity (records.match_key: name or hash plus flattened shapes).
--
-- Given to the build (history = ctx), every fused group of the network looks up its DAG's
-- workload key and replays the record's steps on its DAG instead of the AutoTVM templates
-- and TopHub; a group without a record, or whose record does not replay on its DAG (a
-- warning says why), takes the target's default schedule. The build prints one line: "N of M
-- tasks have no tuned schedule" (M counts the distinct groups with a reduction, the tasks
-- extract_tasks finds; N those of them left to default schedules).
local records = require "tunelua.auto_scheduler.records"
local target = require "tunelua.target"

local dispatch = {}

local Context = {}
Context.__index = Context
dispatch.Context = Context

--- dispatch.ApplyHistoryBest(log | {logs...} | {records...}) -> Context
function dispatch.ApplyHistoryBest(log)
  local recs = {}
  local list = type(log) == "table" and log or { log }
  if type(log) ~= "string" and type(log) ~= "table" then
    error("ApplyHistoryBest: expected a log file name or a list of them, got " .. type(log), 2)
  end
  for _, x in ipairs(list) do
    if type(x) == "string" then
      local f = io.open(x, "r")
      if not f then error("ApplyHistoryBest: cannot read the log '" .. x .. "'", 2) end
      f:close()
      for _, r in ipairs(records.load(x)) do recs[#recs + 1] = r end
    elseif type(x) == "table" and type(x.workload_key) == "string" and type(x.steps) == "string" then
      x.cost = x.cost or ((x.error_no or 0) == 0 and records.mean(x.costs or {}) or math.huge)
      x.error_no = x.error_no or 0
      recs[#recs + 1] = x
    else
      error("ApplyHistoryBest: entries must be log file names or records", 2)
    end
  end
  local by_key, by_model = records.best_index(recs)
  return setmetatable({ records = recs, by_key = by_key, by_model = by_model, auto_scheduler = true },
                      Context)
end

--- ctx:query(target, workload_key) -> the best record ({steps, cost, ...}) or nil
function Context:query(tgt, workload_key)
  if type(workload_key) ~= "string" then error("query: the workload key must be a string", 2) end
  local info = target.info(tgt)
  local mk = records.match_key(workload_key)
  if info.model ~= "unknown" then
    local r = self.by_model[info.model .. "\0" .. mk]
    if r then return r end
  end
  for _, k in ipairs(info.keys) do
    local r = self.by_key[k .. "\0" .. mk]
    if r then return r end
  end
  return nil
end

return dispatch
