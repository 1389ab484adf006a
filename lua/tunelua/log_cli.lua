--- tunelua.log_cli: `tunelua log ...` -- AutoTVM tuning logs.
--
--   tunelua log best IN [OUT]     keep the best record per workload (pick_best;
--                                 OUT defaults to IN.best.log)
--   tunelua log distill IN [OUT]  the same, by TVM's name (autotvm.record --mode distill)
--   tunelua log summary LOG       per task: trials, errors, best GFLOPS
local record = require "tunelua.autotvm.record"

local log_cli = {}

local USAGE = table.concat({
  "usage: tunelua log best IN [OUT]    keep the best record per workload (default OUT: IN.best.log)",
  "       tunelua log distill IN [OUT] the same (TVM's name: autotvm.record --mode distill)",
  "       tunelua log summary LOG       per task: trials, errors, best GFLOPS",
}, "\n")

local function fail(msg)
  io.stderr:write("tunelua log: ", msg, "\n")
  return 1
end

local function readable(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

-- FLOPs of a workload: from a task of a known template, else nil.
local flop_cache = {}
local function flop_of(inp)
  local key = record.workload_key(inp.workload)
  if flop_cache[key] == nil then
    local ok, t = pcall(function()
      return require("tunelua.autotvm.task").create(inp.task_name, inp.args, inp.target)
    end)
    flop_cache[key] = ok and t.flop or false
  end
  return flop_cache[key] or nil
end

local function short_args(args)
  local parts = {}
  for _, a in ipairs(args) do
    if type(a) == "table" and a[1] == "TENSOR" then
      parts[#parts + 1] = "(" .. table.concat(a[2], "x") .. ")"
    end
  end
  return table.concat(parts, " ")
end

--- log_cli.summary(path, out) -> rows: {task, args, trials, errors, best_gflops, best_cost}
function log_cli.summary_rows(path)
  local recs = record.load_from_file(path)
  local rows, order = {}, {}
  for _, r in ipairs(recs) do
    local key = r.inp.target .. "|" .. record.workload_key(r.inp.workload)
    local row = rows[key]
    if not row then
      row = { task = r.inp.task_name, target = r.inp.target, args = short_args(r.inp.args), trials = 0,
              errors = 0, best_cost = nil, inp = r.inp, error_kinds = {} }
      rows[key] = row
      order[#order + 1] = row
    end
    row.trials = row.trials + 1
    if r.res.error_no ~= 0 then
      row.errors = row.errors + 1
      row.error_kinds[r.res.error_no] = (row.error_kinds[r.res.error_no] or 0) + 1
    else
      local c = record.mean_cost(r.res)
      if not row.best_cost or c < row.best_cost then row.best_cost = c end
    end
  end
  for _, row in ipairs(order) do
    local fl = row.best_cost and flop_of(row.inp)
    row.best_gflops = fl and fl / row.best_cost / 1e9 or nil
  end
  return order, #recs
end

local function summary(path)
  local rows, n = log_cli.summary_rows(path)
  print(string.format("%s: %d records, %d tasks", path, n, #rows))
  -- columns as wide as their widest cell: text left-aligned, numbers right-aligned
  local cells = { { "#", "task", "shapes", "trials", "errors", "best ms", "best GFLOPS" } }
  for i, row in ipairs(rows) do
    cells[#cells + 1] = { tostring(i), row.task, row.args, tostring(row.trials), tostring(row.errors),
                          row.best_cost and string.format("%.4f", row.best_cost * 1e3) or "-",
                          row.best_gflops and string.format("%.2f", row.best_gflops) or "-" }
  end
  local width = {}
  for _, c in ipairs(cells) do
    for j, v in ipairs(c) do width[j] = math.max(width[j] or 0, #v) end
  end
  for _, c in ipairs(cells) do
    local parts = {}
    for j, v in ipairs(c) do
      local left = j <= 3
      parts[j] = left and (v .. string.rep(" ", width[j] - #v)) or (string.rep(" ", width[j] - #v) .. v)
    end
    print((table.concat(parts, "  "):gsub("%s+$", "")))
  end
  return 0
end

--- log_cli.main(args) -> exit status
function log_cli.main(args)
  args = args or {}
  local cmd = args[1]
  if cmd == nil or cmd == "-h" or cmd == "--help" or cmd == "help" then
    print(USAGE)
    return cmd == nil and 1 or 0
  end
  if cmd == "best" or cmd == "distill" then
    local inp, out = args[2], args[3]
    if not inp then return fail(cmd .. ": missing the input log\n" .. USAGE) end
    if not readable(inp) then return fail(cmd .. ": cannot read '" .. inp .. "'") end
    out = out or (inp .. ".best.log")
    local ok, n = pcall(record.pick_best, inp, out)
    if not ok then return fail(cmd .. ": " .. tostring(n)) end
    print(string.format("wrote %d records to %s", n, out))
    return 0
  elseif cmd == "summary" then
    local path = args[2]
    if not path then return fail("summary: missing the log\n" .. USAGE) end
    if not readable(path) then return fail("summary: cannot read '" .. path .. "'") end
    local ok, rc = pcall(summary, path)
    if not ok then return fail("summary: " .. tostring(rc)) end
    return rc
  end
  return fail("unknown command '" .. tostring(cmd) .. "'\n" .. USAGE)
end

return log_cli
