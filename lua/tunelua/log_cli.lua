--- tunelua.log_cli: `tunelua log ...` -- AutoTVM and auto-scheduler tuning logs.
--
--   tunelua log best IN [OUT]     keep the best record per workload (pick_best;
--                                 OUT defaults to IN.best.log; an auto-scheduler log:
--                                 the best per workload key and target key, OUT
--                                 IN.best.json, TVM's measure_record --mode distill)
--   tunelua log distill IN [OUT]  the same, by TVM's name (autotvm.record --mode distill)
--   tunelua log summary LOG       per task: trials, errors, best GFLOPS
--   tunelua log plot LOG [-o OUT] a picture of the run (OUT .png or .svg, default LOG.png)
local record = require "tunelua.autotvm.record"
local as_records = require "tunelua.auto_scheduler.records"

local log_cli = {}

local USAGE = table.concat({
  "usage: tunelua log best IN [OUT]    keep the best record per workload (default OUT: IN.best.log;",
  "                                    an auto-scheduler log: IN.best.json)",
  "       tunelua log distill IN [OUT] the same (TVM's name: autotvm.record --mode distill)",
  "       tunelua log summary LOG       per task: trials, errors, best GFLOPS",
  "       tunelua log plot LOG [-o OUT] per task: best GFLOPS against trials, failed trials",
  "                                    marked (OUT: .png or .svg; default LOG.png)",
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

-- Columns as wide as their widest cell: the first `left` columns left-aligned, the rest right.
local function print_table(cells, left)
  local width = {}
  for _, c in ipairs(cells) do
    for j, v in ipairs(c) do width[j] = math.max(width[j] or 0, #v) end
  end
  for _, c in ipairs(cells) do
    local parts = {}
    for j, v in ipairs(c) do
      parts[j] = j <= left and (v .. string.rep(" ", width[j] - #v)) or (string.rep(" ", width[j] - #v) .. v)
    end
    print((table.concat(parts, "  "):gsub("%s+$", "")))
  end
end

-- An auto-scheduler workload key shortened for a table: the hash's first 8 digits and the
-- shapes ("3a2d9e60 (1x16x16x32) (1x1x32x64) ...").
local function short_key(key)
  local ok, v = pcall(require("tunelua.json").decode, key)
  if not ok or type(v) ~= "table" or type(v[1]) ~= "string" then return key end
  local parts = { v[1]:match("^%x+$") and v[1]:sub(1, 8) or v[1] }
  local flat = {}
  for i = 2, #v do
    if type(v[i]) == "table" then
      local d = {}
      for k, x in ipairs(v[i]) do d[k] = tostring(x) end
      parts[#parts + 1] = "(" .. table.concat(d, "x") .. ")"
    else
      flat[#flat + 1] = tostring(v[i])
    end
  end
  if #flat > 0 then parts[#parts + 1] = table.concat(flat, ",") end
  return table.concat(parts, " ")
end

-- An auto-scheduler log: one row per (target, workload). Records carry no FLOP count and a
-- workload key's hash cannot be turned back into its DAG, so the table gives times.
local function as_summary(path)
  local rows, n = as_records.summary_rows(path)
  print(string.format("%s: %d auto-scheduler records, %d tasks", path, n, #rows))
  local cells = { { "#", "workload", "target", "trials", "errors", "best ms" } }
  for i, row in ipairs(rows) do
    cells[#cells + 1] = { tostring(i), short_key(row.workload_key), row.target, tostring(row.trials),
                          tostring(row.errors), row.best_cost and string.format("%.4f", row.best_cost * 1e3) or "-" }
  end
  print_table(cells, 3)
  return 0
end

local function summary(path)
  if as_records.is_log(path) then return as_summary(path) end
  local rows, n = log_cli.summary_rows(path)
  print(string.format("%s: %d records, %d tasks", path, n, #rows))
  -- columns as wide as their widest cell: text left-aligned, numbers right-aligned
  local cells = { { "#", "task", "shapes", "trials", "errors", "best ms", "best GFLOPS" } }
  for i, row in ipairs(rows) do
    cells[#cells + 1] = { tostring(i), row.task, row.args, tostring(row.trials), tostring(row.errors),
                          row.best_cost and string.format("%.4f", row.best_cost * 1e3) or "-",
                          row.best_gflops and string.format("%.2f", row.best_gflops) or "-" }
  end
  print_table(cells, 3)
  return 0
end

--- log_cli.plot(path, out) -> out, the chart's spec. Draws each task's best GFLOPS so far
--- against its trial number (its own trials, in log order), each trial's GFLOPS as a dot and
--- its failed trials as crosses in a strip under the axes. Records carry no FLOP count: it is
--- the task's, made again from the record's workload; where a task cannot be made, the chart
--- shows the best time in ms for all tasks instead and says so. Raises, naming the log, for
--- an empty log or one without a valid record.
function log_cli.plot(path, out)
  local f = io.open(path, "r")
  if not f then error(string.format("cannot read '%s'", path), 0) end
  local blank = not f:read("*l")
  f:close()
  if blank then error(string.format("'%s' is empty: no tuning records to plot", path), 0) end
  -- per task (target and workload, first-seen order): its trials, failed trial numbers and
  -- {trial, cost} of the others; an auto-scheduler log's tasks have no FLOP count
  local ansor = as_records.is_log(path)
  local recs = ansor and as_records.load(path) or record.load_from_file(path)
  if #recs == 0 then
    error(string.format("'%s' holds no valid %s record to plot", path, ansor and "auto-scheduler" or "AutoTVM"), 0)
  end
  local tasks, order = {}, {}
  for _, r in ipairs(recs) do
    local key = ansor and (r.target .. "|" .. as_records.match_key(r.workload_key))
                or (r.inp.target .. "|" .. record.workload_key(r.inp.workload))
    local t = tasks[key]
    if not t then
      t = { inp = r.inp, trials = 0, errors = {}, costs = {},
            desc = ansor and short_key(r.workload_key) or (r.inp.task_name .. " " .. short_args(r.inp.args)) }
      tasks[key] = t
      order[#order + 1] = t
    end
    t.trials = t.trials + 1
    local err = ansor and r.error_no or r.res.error_no
    if err ~= 0 then
      t.errors[#t.errors + 1] = t.trials
    else
      t.costs[#t.costs + 1] = { t.trials, ansor and r.cost or record.mean_cost(r.res) }
    end
  end
  local unknown, nerr = {}, 0
  for i, t in ipairs(order) do
    t.flop = t.inp and flop_of(t.inp)
    if not t.flop then unknown[#unknown + 1] = "T" .. i end
    nerr = nerr + #t.errors
  end
  local gflops = #unknown == 0
  local series = {}
  for i, t in ipairs(order) do
    local line, dots, best = {}, {}, nil
    for _, p in ipairs(t.costs) do
      local v = gflops and t.flop / p[2] / 1e9 or p[2] * 1e3
      dots[#dots + 1] = { p[1], v }
      if not best or (gflops and v > best) or (not gflops and v < best) then best = v end
      line[#line + 1] = { p[1], best }
    end
    if #line > 0 and line[#line][1] < t.trials then line[#line + 1] = { t.trials, best } end
    local what = best and string.format(gflops and "best %.2f GFLOPS" or "best %.4f ms", best)
                 or "no successful trial"
    series[i] = {
      label = "T" .. i, dots = dots, line = line, errors = t.errors,
      legend = string.format("T%d  %s: %s, %d trial%s, %d failed", i, t.desc, what, t.trials,
        t.trials == 1 and "" or "s", #t.errors),
    }
  end
  local spec = {
    title = "Tuning run: " .. (path:match("[^/]+$") or path),
    subtitle = string.format("%d task%s, %d trial%s, %d failed. Lines: the best so far; dots: " ..
      "each trial; crosses: failed trials.%s", #order, #order == 1 and "" or "s", #recs,
      #recs == 1 and "" or "s", nerr,
      gflops and "" or (" FLOPs unknown for " .. table.concat(unknown, ", ") .. ": times in ms.")),
    xlabel = "trial (of each task)",
    ylabel = gflops and "GFLOPS (best so far; higher is better)"
             or "time in ms (best so far; lower is better)",
    series = series,
    scale_by_lines = not gflops,   -- a slow trial's dot would squash the lines of times
  }
  out = out or (path .. ".png")
  require("tunelua.plot").chart(spec, out)
  return out, spec
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
    local ansor = as_records.is_log(inp)
    out = out or (inp .. (ansor and ".best.json" or ".best.log"))
    local ok, n = pcall(ansor and as_records.distill or record.pick_best, inp, out)
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
  elseif cmd == "plot" then
    local path, out
    local i = 2
    while args[i] do
      if args[i] == "-o" then
        out = args[i + 1]
        if not out then return fail("plot: -o needs a file name (.png or .svg)\n" .. USAGE) end
        i = i + 2
      elseif path then
        return fail("plot: unexpected argument '" .. args[i] .. "'\n" .. USAGE)
      else
        path, i = args[i], i + 1
      end
    end
    if not path then return fail("plot: missing the log\n" .. USAGE) end
    local ok, res = pcall(log_cli.plot, path, out)
    if not ok then return fail("plot: " .. tostring(res)) end
    print("wrote " .. res)
    return 0
  end
  return fail("unknown command '" .. tostring(cmd) .. "'\n" .. USAGE)
end

return log_cli
