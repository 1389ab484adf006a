--- tunelua.auto_scheduler.records: the auto-scheduler's JSON-lines log (formats §2).
--
--   local records = require "tunelua.auto_scheduler.records"
--   local line = records.encode{workload_key = k, target = "llvm", hardware_params = hp,
--                               steps = s:steps(), costs = {1.2e-4}, error_no = 0, all_cost = 0.3}
--   local rec = records.decode(line)            -- or nil, reason
--   for _, r in ipairs(records.load("net.json")) do ... r.workload_key, r.steps, r.cost end
--   records.distill("net.json", "net.json.best.json")
--
-- A record is {workload_key (string: JSON text), target (string), hardware_params (the 8
-- integers, or nil in a v0.2 line), target_host, layout_rewrite, task_input_names,
-- steps_list (the decoded §2.4 step list), steps (its text as the writer prints it:
-- what tl_sched_apply_json reads), costs (seconds), error_no, all_cost, timestamp, version,
-- cost (mean of costs; math.huge for an error record), path and line (where it was read)}.
--
-- Lines are written as TVM's writer prints them: `{"i": [[key, target, [hw...], "", 0, []],
-- [[], [steps...]]], "r": [[costs...], error_no, all_cost, timestamp], "v": "v0.6"}`, floats
-- with 6 significant digits, an error record's cost 1e+10. Reading skips lines that start
-- with '#' or a space and blank lines; a malformed line is skipped with a warning naming
-- file:line and why; a torn record (its writer died) with a whole one appended on the same
-- line gives that whole one.
--
-- Matching (formats §2.6): a workload key's first element is a name or DAG hash and the rest
-- is flattened, so the nested and the flattened forms of the shapes are the same workload;
-- records.match_key(key) is that identity. best_index keeps, per (target key, workload), the
-- record with the lowest mean cost (error records never; the first one wins a tie).
local json = require "tunelua.json"
local file = require "tunelua.file"
local target = require "tunelua.target"
local record = require "tunelua.autotvm.record"

local records = {}

records.LOG_VERSION = "v0.6"
records.ERROR_COST = 1e10

-- ---- encode ------------------------------------------------------------------------------

local function g6(v) return (string.format("%.6g", v)) end

local HW_FIELDS = { "num_cores", "vector_unit_bytes", "cache_line_bytes", "max_shared_memory_per_block",
                    "max_local_memory_per_block", "max_threads_per_block", "max_vthread_extent",
                    "warp_size" }
records.HW_FIELDS = HW_FIELDS

-- The 8 hardware-param integers of a HardwareParams object or a list.
local function hw_values(hp)
  if hp == nil then return nil end
  local r = {}
  for i, f in ipairs(HW_FIELDS) do
    local v = hp[f]
    if v == nil then v = hp[i] end
    if type(v) ~= "number" or v % 1 ~= 0 then
      error(string.format("records.encode: hardware param %s must be an integer, got %s", f, tostring(v)), 3)
    end
    r[i] = v
  end
  return r
end

local function ints_text(list)
  local p = {}
  for i, v in ipairs(list) do p[i] = string.format("%d", v) end
  return "[" .. table.concat(p, ", ") .. "]"
end

--- records.encode(rec) -> one line (no newline). rec.steps is the step list's JSON text (as
--- s:steps() gives it) or rec.steps_list the decoded list; rec.hardware_params a
--- HardwareParams or the 8 integers.
function records.encode(rec)
  if type(rec) ~= "table" then error("records.encode: expected a record table", 2) end
  if type(rec.workload_key) ~= "string" then error("records.encode: workload_key must be a string", 2) end
  if type(rec.target) ~= "string" then error("records.encode: target must be a string", 2) end
  local steps = rec.steps
  if steps == nil then
    if type(rec.steps_list) ~= "table" then error("records.encode: steps (JSON text) or steps_list is required", 2) end
    steps = json.dumps(json.array(rec.steps_list))
  elseif type(steps) ~= "string" then
    error("records.encode: steps must be the step list's JSON text", 2)
  end
  local hw = hw_values(rec.hardware_params) or { -1, 16, 64, 0, 0, 0, 0, 0 }
  local err = rec.error_no or 0
  local costs = {}
  if err ~= 0 or not rec.costs or #rec.costs == 0 then
    costs[1] = g6(records.ERROR_COST)
  else
    for i, c in ipairs(rec.costs) do costs[i] = g6(c) end
  end
  local names = {}
  for i, n in ipairs(rec.task_input_names or {}) do names[i] = json.quote(n) end
  return string.format('{"i": [[%s, %s, %s, %s, %d, [%s]], [[], %s]], "r": [[%s], %d, %s, %d], "v": "%s"}',
    json.quote(rec.workload_key), json.quote(rec.target), ints_text(hw), json.quote(rec.target_host or ""),
    rec.layout_rewrite or 0, table.concat(names, ", "), steps, table.concat(costs, ", "), err,
    g6(rec.all_cost or 0), math.floor(rec.timestamp or os.time()), records.LOG_VERSION)
end

--- records.RecordToFile(path): a measure callback that appends one record line per
--- measurement to path (what TuningOptions.measure_callbacks takes)
function records.RecordToFile(path)
  if type(path) ~= "string" or path == "" then error("RecordToFile: expected a file name", 2) end
  return { kind = "record_to_file", path = path }
end

-- ---- decode ------------------------------------------------------------------------------

local function mean(costs)
  local s = 0
  for _, c in ipairs(costs) do s = s + c end
  return #costs > 0 and s / #costs or math.huge
end
records.mean = mean

local function is_int(v) return type(v) == "number" and v % 1 == 0 end

-- The task array of "i": the v0.2 .. v0.6 forms (formats §2.2); a 4-element array is refused.
local function task_fields(t, rec)
  if type(t) ~= "table" or type(t[1]) ~= "string" then return "\"i\" has no task [workload_key, target, ...]" end
  local n = #t
  if n < 2 or n == 4 or n > 6 then return string.format("the task array has %d elements (expected 2, 3, 5 or 6)", n) end
  if type(t[2]) ~= "string" then return "the task's target is not a string" end
  rec.workload_key, rec.target = t[1], t[2]
  if n >= 3 then
    local hw = t[3]
    if type(hw) ~= "table" or #hw ~= 8 then return "the hardware params are not 8 integers" end
    for i = 1, 8 do if not is_int(hw[i]) then return "the hardware params are not 8 integers" end end
    rec.hardware_params = { unpack(hw, 1, 8) }
  end
  if n >= 5 then
    if type(t[4]) ~= "string" then return "the task's target_host is not a string" end
    if not is_int(t[5]) then return "the task's layout_rewrite_option is not an integer" end
    rec.target_host, rec.layout_rewrite = t[4], t[5]
  end
  if n == 6 then
    if type(t[6]) ~= "table" then return "the task's input names are not a list" end
    for _, s in ipairs(t[6]) do if type(s) ~= "string" then return "the task's input names are not strings" end end
    rec.task_input_names = t[6]
  end
  return nil
end

local function check_steps(list)
  if type(list) ~= "table" then return "the state's steps are not a list" end
  for i, st in ipairs(list) do
    if type(st) ~= "table" or type(st[1]) ~= "string" then
      return string.format("step %d is not [prefix, fields...]", i - 1)
    end
  end
  return nil
end

--- records.decode(line) -> rec | nil, reason
function records.decode(line)
  if type(line) ~= "string" then return nil, "not a string" end
  local ok, obj = pcall(json.decode, line)
  if not ok then return nil, tostring(obj):gsub("^[^:]*:%d+: ", "") end
  if type(obj) ~= "table" then return nil, "not a JSON object" end
  for k in pairs(obj) do
    if k ~= "i" and k ~= "r" and k ~= "v" then return nil, string.format("unknown key '%s'", tostring(k)) end
  end
  if type(obj.i) ~= "table" then return nil, "no \"i\" (expected [task, state])" end
  local rec = {}
  local why = task_fields(obj.i[1], rec)
  if why then return nil, why end
  local state = obj.i[2]
  if type(state) ~= "table" or type(state[1]) ~= "table" or next(state[1]) ~= nil then
    return nil, "the state is not [[], [steps...]]"
  end
  why = check_steps(state[2])
  if why then return nil, why end
  local r = obj.r
  if type(r) ~= "table" or type(r[1]) ~= "table" or not is_int(r[2]) then
    return nil, "\"r\" is not [costs, error_no, all_cost, timestamp]"
  end
  local costs = {}
  for i, c in ipairs(r[1]) do
    if type(c) ~= "number" then return nil, "a cost is not a number" end
    costs[i] = c
  end
  if obj.v ~= nil and type(obj.v) ~= "string" then return nil, "\"v\" is not a version string" end
  rec.steps_list = state[2]
  rec.steps = json.dumps(json.array(state[2]))
  rec.costs, rec.error_no = costs, r[2]
  rec.all_cost, rec.timestamp = tonumber(r[3]) or 0, tonumber(r[4]) or 0
  rec.version = obj.v
  rec.cost = (rec.error_no == 0 and #costs > 0) and mean(costs) or math.huge
  return rec
end

--- records.load(path[, {warn = fn}]) -> list of records (formats §2.1). A missing file is an
--- error; malformed lines warn (file:line: why) and are skipped.
function records.load(path, opts)
  opts = opts or {}
  if type(path) ~= "string" then error("records.load: expected a file name", 2) end
  local f, ferr = io.open(path, "r")
  if not f then error("records.load: cannot open " .. tostring(ferr), 2) end
  local warn = opts.warn or function(msg) io.stderr:write("warning: ", msg, "\n") end
  local out, ln = {}, 0
  for line in file.lines(f) do
    ln = ln + 1
    local c = line:sub(1, 1)
    if line ~= "" and c ~= "#" and c ~= " " then
      local rec, why, at = record.decode_mended(line, records.decode, '{"i"')
      if at then warn(string.format("%s:%d: skipped a torn record before column %d", path, ln, at)) end
      if rec then
        rec.line, rec.path = ln, path
        out[#out + 1] = rec
      else
        warn(string.format("%s:%d: skipped a malformed record line (%s)", path, ln, why))
      end
    end
  end
  f:close()
  return out
end

--- records.is_log(path) -> true when the first record-looking line of path is an
--- auto-scheduler record ({"i": ..., "v": "..."}), false otherwise (an AutoTVM log)
function records.is_log(path)
  local f = io.open(path, "r")
  if not f then return false end
  for line in file.lines(f) do
    local c = line:sub(1, 1)
    if line ~= "" and c ~= "#" and c ~= " " then
      f:close()
      if line:find('^{"input"') then return false end
      return line:find('^{"i"') ~= nil and line:find('"v": *"') ~= nil
    end
  end
  f:close()
  return false
end

-- ---- matching ----------------------------------------------------------------------------

local function flatten(v, out)
  if type(v) == "table" and v ~= json.null then
    for _, x in ipairs(v) do flatten(x, out) end
  elseif type(v) == "number" then
    out[#out + 1] = string.format("%.17g", v)
  elseif type(v) == "string" then
    out[#out + 1] = json.quote(v)
  else
    out[#out + 1] = tostring(v)
  end
  return out
end

--- records.match_key(workload_key) -> the workload's identity: its name or hash and its
--- flattened arguments (a key that is not JSON is a name without arguments)
function records.match_key(key)
  local ok, v = pcall(json.decode, key)
  if not ok or type(v) ~= "table" or type(v[1]) ~= "string" then return key end
  local rest = {}
  for i = 2, #v do flatten(v[i], rest) end
  return v[1] .. "(" .. table.concat(rest, ",") .. ")"
end

--- records.best_index(recs) -> by_key: [target key .. "\0" .. match_key] -> best record, and
--- by_model: [model .. "\0" .. match_key] (formats §6.2)
function records.best_index(recs)
  local mk_cache = {}
  return record.best_by_target(recs, function(r)
    if r.error_no ~= 0 or r.cost >= math.huge then return nil end
    local mk = mk_cache[r.workload_key]
    if not mk then mk = records.match_key(r.workload_key); mk_cache[r.workload_key] = mk end
    return r.target, mk
  end)
end

--- records.distill(in_file | {files}, out_file) -> number of records written (formats §6.3):
--- the lowest-cost error-free record per (target key, workload), from the inputs and out_file
--- if it exists, without duplicates, grouped by target key then workload in first-seen order.
--- out_file is replaced atomically (a failure leaves it as it was).
function records.distill(in_file, out_file)
  local all
  all, out_file = record.gather(in_file, out_file, records.load, "records.distill", ".best.json")
  -- winners per (key, workload), in the order keys and workloads are first seen
  local best, key_order, wl_order = {}, {}, {}
  for _, r in ipairs(all) do
    if r.error_no == 0 and r.cost < math.huge then
      local mk = records.match_key(r.workload_key)
      for _, k in ipairs(target.info(r.target).keys) do
        if not best[k] then best[k] = {}; wl_order[k] = {}; key_order[#key_order + 1] = k end
        local cur = best[k][mk]
        if not cur then wl_order[k][#wl_order[k] + 1] = mk end
        if not cur or r.cost < cur.cost then best[k][mk] = r end
      end
    end
  end
  local lines, seen = {}, {}
  for _, k in ipairs(key_order) do
    for _, mk in ipairs(wl_order[k]) do
      local r = best[k][mk]
      if not seen[r] then
        seen[r] = true
        lines[#lines + 1] = records.encode(r)
      end
    end
  end
  file.write_all(out_file, lines)
  return #lines
end

--- records.summary_rows(path) -> rows in first-seen order, one per (target, workload):
--- {workload_key, target, trials, errors, best_cost, error_kinds}, and the record count
function records.summary_rows(path)
  local recs = records.load(path)
  local rows, order = {}, {}
  for _, r in ipairs(recs) do
    local key = r.target .. "|" .. records.match_key(r.workload_key)
    local row = rows[key]
    if not row then
      row = { workload_key = r.workload_key, target = r.target, trials = 0, errors = 0, error_kinds = {} }
      rows[key] = row
      order[#order + 1] = row
    end
    row.trials = row.trials + 1
    if r.error_no ~= 0 then
      row.errors = row.errors + 1
      row.error_kinds[r.error_no] = (row.error_kinds[r.error_no] or 0) + 1
    elseif not row.best_cost or r.cost < row.best_cost then
      row.best_cost, row.best = r.cost, r
    end
  end
  return order, #recs
end

return records
