--- tunelua.autotvm.record: AutoTVM's JSON-lines tuning log (formats §1).
--
--   local record = require "tunelua.autotvm.record"
--   local line = record.encode(inp, res)     -- one line, no newline
--   local inp, res = record.decode(line)     -- or nil, reason
--   for _, r in ipairs(record.load_from_file("t.log")) do ... r.inp, r.res end
--   record.pick_best("t.log", "t.best.log")
--
-- A decoded input is {target = str, task_name = str, args = list, kwargs = {},
-- config = {index = n, code_hash = str|nil, entity = {{name, kind, value}, ...}},
-- workload = {task_name, args...}}; a result is {costs = {...}, error_no = n,
-- all_cost = s, timestamp = t}. MeasureInputs of tunelua.autotvm.measure ({task, config})
-- encode as well. JSON null is record.null (args keep their positions).
-- The legacy v0.1 format ("i"/"r"/"v": 0.1) decodes (its workload and config
-- in the short keys); auto-scheduler lines ("v" a string) are refused.
local record = {}

record.AUTOTVM_LOG_VERSION = 0.2
record.TVM_VERSION = "0.8.dev0"

local json = require "tunelua.json"

local null = json.null
record.null = null                 -- Python's None in args: tunelua.json's null
record.json_decode = json.decode

-- ---- workload identity ------------------------------------------------------------------

-- Python equality of nested tuples: numbers by value (True == 1), null only null.
local function canon(v)
  local tv = type(v)
  if v == null or v == nil then return "N" end
  if tv == "boolean" then return v and "1" or "0" end
  if tv == "number" then return string.format("%.17g", v) end
  if tv == "string" then return json.quote(v) end
  if tv == "table" then
    local p = {}
    for i = 1, #v do p[i] = canon(v[i]) end
    return "(" .. table.concat(p, ",") .. ")"
  end
  return tostring(v)
end
record.workload_key = function(wkl) return canon(wkl) end

-- ---- targets ------------------------------------------------------------------------------

--- record.target_info("llvm -mcpu=x -model=m") -> {kind, keys = {...}, model, device, options}
--- (tunelua.target.info: the target as a log names it)
function record.target_info(str) return require("tunelua.target").info(str) end

-- ---- encode / decode -------------------------------------------------------------------------

local function ordered(t, order) t.__order = order; return t end

local function input_fields(inp)
  if inp.task then
    local task = inp.task
    local cfg = inp.config
    if type(cfg) == "number" then cfg = task.config_space:get(cfg) end
    local entity
    if type(cfg) == "table" and type(cfg.entity) == "table" then
      entity = cfg.entity
    elseif type(cfg) == "table" and type(cfg.entity) == "function" then
      entity = cfg:entity()
    elseif type(cfg) == "table" and cfg.index then
      entity = task.config_space:get(cfg.index):entity()
    else
      error("record.encode: the measure input's config must be a config or an index", 3)
    end
    return task.target, task.name, task.args, { index = cfg.index, code_hash = cfg.code_hash, entity = entity }
  end
  return inp.target, inp.task_name, inp.args, inp.config
end

local function floats(list)
  local out = {}
  for i, v in ipairs(list or {}) do out[i] = json.float(tonumber(v)) end
  return out
end

--- record.encode(inp, res) -> one JSON line (no newline)
function record.encode(inp, res)
  if type(inp) ~= "table" or type(res) ~= "table" then
    error("record.encode: expected a measure input and a measure result", 2)
  end
  local target, name, args, config = input_fields(inp)
  local costs = res.costs or {}
  local error_no = res.error_no or 0
  if error_no ~= 0 then costs = { 1e9 } end
  local obj = ordered({
    input = { tostring(target), name, args or {}, setmetatable({}, { __index = {} }) },
    config = ordered({ index = config.index or -1, code_hash = config.code_hash or null,
                       entity = config.entity or {} }, { "index", "code_hash", "entity" }),
    result = { floats(costs), error_no, json.float(res.all_cost or 0), json.float(res.timestamp or os.time()) },
    version = json.float(record.AUTOTVM_LOG_VERSION),
    tvm_version = record.TVM_VERSION,
  }, { "input", "config", "result", "version", "tvm_version" })
  -- kwargs {} must print as an object
  obj.input[4] = ordered({}, {})
  return json.dumps(obj)
end

local function mk_result(r)
  if type(r) ~= "table" or type(r[1]) ~= "table" then return nil end
  local costs = {}
  for i, c in ipairs(r[1]) do
    if type(c) ~= "number" then return nil end
    costs[i] = c
  end
  if type(r[2]) ~= "number" then return nil end
  return { costs = costs, error_no = r[2], all_cost = tonumber(r[3]) or 0, timestamp = tonumber(r[4]) or 0 }
end

local function check_entity(e)
  if type(e) ~= "table" then return false end
  for _, it in ipairs(e) do
    if type(it) ~= "table" or type(it[1]) ~= "string" or type(it[2]) ~= "string" then return false end
    local k = it[2]
    if k ~= "sp" and k ~= "re" and k ~= "an" and k ~= "ot" then return false end
  end
  return true
end

-- A workload's arguments: a tensor is ["TENSOR", shape (a list of non-negative integers),
-- dtype (a string)]; anything else passes as it is. A reason string when one is malformed.
local function check_args(args)
  for k, a in ipairs(args) do
    if type(a) == "table" and a[1] == "TENSOR" then
      local shape = a[2]
      if type(shape) ~= "table" or next(shape) ~= nil and #shape == 0 then
        return string.format("argument %d: the tensor's shape is not a list (expected [\"TENSOR\", [d1, ...], dtype])", k)
      end
      for n, d in pairs(shape) do
        if type(n) ~= "number" or type(d) ~= "number" or d < 0 or d ~= math.floor(d) then
          return string.format("argument %d: the tensor's shape holds %s (expected non-negative integers)",
                               k, type(d) == "string" and string.format("%q", d) or tostring(d))
        end
      end
      if type(a[3]) ~= "string" then
        return string.format("argument %d: the tensor's dtype is not a string", k)
      end
    end
  end
  return nil
end

--- record.decode(line) -> inp, res | nil, reason
function record.decode(line)
  if type(line) ~= "string" then return nil, "not a string" end
  if line:match("^%s*$") then return nil, "an empty line" end
  local ok, obj = pcall(json.decode, line)
  if not ok then
    if tostring(obj):match("^invalid JSON: ") then return nil, obj end
    error(obj, 0)
  end
  if type(obj) ~= "table" then return nil, "not a JSON object" end
  if obj.input then
    local i, c = obj.input, obj.config
    if type(i) ~= "table" or type(i[1]) ~= "string" or type(i[2]) ~= "string" or type(i[3]) ~= "table" then
      return nil, "bad \"input\" (expected [target, task_name, args, kwargs])"
    end
    local why = check_args(i[3])
    if why then return nil, "bad \"input\" args: " .. why end
    if type(c) ~= "table" or not check_entity(c.entity) then
      return nil, "bad \"config\" (expected {index, code_hash, entity: [[name, kind, value]...]})"
    end
    local res = mk_result(obj.result)
    if not res then return nil, "bad \"result\" (expected [costs, error_no, all_cost, timestamp])" end
    local inp = { target = i[1], task_name = i[2], args = i[3], kwargs = i[4] or {},
                  config = { index = tonumber(c.index) or -1, code_hash = c.code_hash ~= null and c.code_hash or nil,
                             entity = c.entity },
                  version = obj.version, tvm_version = obj.tvm_version }
    inp.workload = { inp.task_name, unpack(inp.args) }
    return inp, res
  end
  if type(obj.v) == "string" then return nil, "an auto-scheduler record (\"v\": " .. obj.v .. ")" end
  if obj.i and type(obj.v) == "number" then
    local i = obj.i
    if type(i) ~= "table" or #i < 6 or type(i[6]) ~= "table" then return nil, "bad legacy \"i\"" end
    local c = i[6]
    if not check_entity(c.e) then return nil, "bad legacy config" end
    local res = mk_result(obj.r)
    if not res then return nil, "bad legacy \"r\"" end
    local inp = { target = i[1], task_name = i[2], args = i[3], kwargs = i[4] or {}, legacy = true,
                  legacy_workload = i[5], template_key = c.t,
                  config = { index = tonumber(c.i) or -1, code_hash = c.c ~= null and c.c or nil, entity = c.e },
                  version = obj.v }
    inp.workload = { inp.task_name, unpack(inp.args) }
    return inp, res
  end
  return nil, "not an AutoTVM record (no \"input\" or \"i\")"
end

--- record.decode_mended(line, decode, marker) -> decode(line)'s results; else, for a torn
--- record (its writer died) that the next record was appended to, those of the first whole
--- record starting at marker further on, and its column; else nil and decode's reason.
--- (The AutoTVM and the auto-scheduler log readers both mend lines so.)
function record.decode_mended(line, decode, marker)
  local a, b = decode(line)
  if a then return a, b end
  local at = line:find(marker, 2, true)
  while at do
    local a2, b2 = decode(line:sub(at))
    if a2 then return a2, b2, at end
    at = line:find(marker, at + 1, true)
  end
  return nil, b
end

--- record.load_from_file(path, {legacy = true}) -> list of {inp = ..., res = ...}
-- Lines starting with '#' are skipped; malformed lines (bad JSON, JSON nested too deep,
-- records of the wrong shape) warn with file:line and are skipped, only they. A torn record
-- with a whole one appended to it on the same line gives that whole one.
-- Legacy v0.1 lines are skipped (as TVM does) unless opts.legacy.
function record.load_from_file(path, opts)
  opts = opts or {}
  if type(path) ~= "string" then error("record.load_from_file: expected a file name", 2) end
  local f, ferr = io.open(path, "r")
  if not f then error("record.load_from_file: cannot open " .. tostring(ferr), 2) end
  local out, ln, warned_legacy = {}, 0, false
  local warn = opts.warn or function(msg) io.stderr:write("warning: ", msg, "\n") end
  for line in require("tunelua.file").lines(f) do
    ln = ln + 1
    if line:sub(1, 1) ~= "#" then
      local inp, res, at = record.decode_mended(line, record.decode, '{"i')
      if at then warn(string.format("%s:%d: skipped a torn record before column %d", path, ln, at)) end
      if not inp then
        warn(string.format("%s:%d: skipped a malformed record: %s", path, ln, res))
      elseif inp.legacy and not opts.legacy then
        if not warned_legacy then
          warn(string.format("%s:%d: skipped legacy v0.1 records", path, ln))
          warned_legacy = true
        end
      else
        inp.line = ln
        out[#out + 1] = { inp = inp, res = res }
      end
    end
  end
  f:close()
  return out
end

--- record.mean_cost(res)
function record.mean_cost(res)
  local s, n = 0, 0
  for _, c in ipairs(res.costs) do s = s + c; n = n + 1 end
  return n > 0 and s / n or math.huge
end

--- record.writer(path) -> {write = function(inp, res), sync = function(), close = function()}
--- (appends; close syncs; a write error raises naming the file)
function record.writer(path)
  local w = require("tunelua.file").append(path)
  local r = {}
  function r.write(inp, res) w:write(record.encode(inp, res), "\n") end
  function r.sync() w:sync() end
  function r.close() w:close() end
  return r
end

-- measure_str_key: target, task, args, entities
local function str_key(inp)
  return table.concat({ tostring(inp.target), canon(inp.workload), canon(inp.config.entity) }, "|")
end
record.measure_str_key = str_key

--- record.best_by_target(list, ident) -> by_key, by_model: of the items r for which
--- ident(r) gives a target string and a workload identity (nil: skip r), the lowest r.cost per
--- [target key .. "\0" .. workload] and per [model .. "\0" .. workload] (formats §5.4, §6.2;
--- the AutoTVM and the auto-scheduler logs both pick their best records so)
function record.best_by_target(list, ident)
  local by_key, by_model = {}, {}
  for _, r in ipairs(list) do
    local tgt, wk = ident(r)
    if tgt then
      local info = record.target_info(tgt)
      for _, k in ipairs(info.keys) do
        local id = k .. "\0" .. wk
        local cur = by_key[id]
        if not cur or r.cost < cur.cost then by_key[id] = r end
      end
      if info.model ~= "unknown" then
        local id = info.model .. "\0" .. wk
        local cur = by_model[id]
        if not cur or r.cost < cur.cost then by_model[id] = r end
      end
    end
  end
  return by_key, by_model
end

--- record.best_index(records) -> best_by_targetkey, best_by_model (formats §5.4)
function record.best_index(records)
  return record.best_by_target(records, function(r)
    if r.res.error_no ~= 0 then return nil end
    r.cost = record.mean_cost(r.res)
    return r.inp.target, canon(r.inp.workload)
  end)
end

--- record.gather(in_file | {files}, out_file, load, what, suffix) -> all, out_file: the records
--- load(path) gives for each input file, then for out_file when it exists (what the best-record
--- writers read); out_file defaults to the first input .. suffix, what names the caller in errors
function record.gather(in_file, out_file, load, what, suffix)
  local ins = type(in_file) == "table" and in_file or { in_file }
  if #ins == 0 or type(ins[1]) ~= "string" then error(what .. ": expected an input file name", 3) end
  out_file = out_file or (ins[1] .. suffix)
  local all = {}
  for _, path in ipairs(ins) do
    for _, r in ipairs(load(path)) do all[#all + 1] = r end
  end
  if require("tunelua.file").exists(out_file) then
    for _, r in ipairs(load(out_file)) do all[#all + 1] = r end
  end
  return all, out_file
end

--- record.pick_best(in_file, out_file) -> number of records written (formats §6.1)
--- in_file may be a list of file names. out_file is replaced atomically (temporary file,
--- fsync, rename): a failure leaves it as it was.
function record.pick_best(in_file, out_file)
  local all
  all, out_file = record.gather(in_file, out_file, record.load_from_file, "record.pick_best", ".best.log")
  local by_key, by_model = record.best_index(all)
  local keep = {}
  for _, r in pairs(by_key) do keep[str_key(r.inp)] = true end
  for _, r in pairs(by_model) do keep[str_key(r.inp)] = true end
  local lines = {}
  for _, r in ipairs(all) do
    local k = str_key(r.inp)
    if keep[k] then
      lines[#lines + 1] = record.encode(r.inp, r.res)
      keep[k] = nil
    end
  end
  require("tunelua.file").write_all(out_file, lines)
  return #lines
end

return record
