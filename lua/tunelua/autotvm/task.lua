--- tunelua.autotvm.task: tuning tasks and the template registry.
--
--   local task = autotvm.task.create("conv2d_NCHWc.x86",
--     {{"TENSOR", {1, 64, 56, 56}, "float32"}, {"TENSOR", {64, 64, 3, 3}, "float32"},
--      {1, 1}, {1, 1, 1, 1}, {1, 1}, "NCHW", "NCHW", "float32"}, "llvm")
--   #task.config_space, task.flop, task:workload()
--   local s, args = task:instantiate(193)       -- a tunelua.schedule + its arguments
--   local f = tl.build(s, args, "llvm")
--   local l = task:lower(193)                     -- a tunelua.build Lowered
--
-- C templates (core/autotvm, targets/x86): tunelua.autotvm.task.templates().
-- Lua templates: task.register(name, function(cfg, ...args) ... return s, {tensors} end)
-- (or register(name, {template = fn})). The function receives a cfg object:
--   cfg:define_split(name, axis_or_length, {num_outputs = 2, policy = "factors",
--                    max_factor = n, filter = function(size) -> bool, candidate = {...}})
--   cfg:define_reorder(name, axes, policy, {interval = {b, e}, candidate = {...}})
--   cfg:define_annotate(name, axes, policy)   cfg:define_knob(name, {candidates})
--   cfg[name] -> the chosen entity (.size/.perm/.anns/.val, e:apply(s, t, axis))
--   cfg:add_flop(n)   cfg.is_fallback   cfg:fallback_split(name, constraints)
-- On task creation it runs in define mode (knobs are added; cfg[name] is the
-- knob's first entity, or the fallback); instantiation runs it in apply mode.
local ffi = require "ffi"
local core = require "tunelua.core"
local space = require "tunelua.autotvm.space"
local json = require "tunelua.json"

local C, ctx = core.C, core.ctx

local task = {}

local Task = {}
Task.__index = Task
task.Task = Task

local lua_templates = {}

local function check(rc, lvl)
  if rc ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    error(msg, lvl + 1)
  end
end

--- task.templates() -> names of every template (C and Lua)
function task.templates()
  local out = {}
  local i = 0
  while true do
    local n = C.tl_atvm_template_list(i)
    if n == nil then break end
    out[#out + 1] = ffi.string(n)
    i = i + 1
  end
  for n in pairs(lua_templates) do out[#out + 1] = n end
  table.sort(out)
  return out
end

local function args_to_json(args, lvl)
  if type(args) ~= "table" then
    error("autotvm.task.create: args must be a list as in the log, e.g. {{\"TENSOR\", {1, 3, 224, 224}, \"float32\"}, ...}", lvl + 1)
  end
  return json.dumps(args)
end

-- ---- Lua templates -------------------------------------------------------------------------

local LuaCfg = {}
task.LuaCfg = LuaCfg

local i64arr = ffi.typeof("int64_t[?]")

local function axis_len(x, lvl)
  if type(x) == "number" then return x end
  if type(x) == "table" then
    local e = (type(x.dom) == "table" and x.dom.extent) or x.extent
    if type(e) == "number" and e > 0 then return e end
  end
  error("define_split: the axis must be a number or an axis with a known extent", lvl + 1)
end

local function defined(cfg, name) return C.tl_atvm_space_find(cfg.sp, name) >= 0 end

local function lcheck(k, lvl) if k < 0 then check(-1, lvl + 1) end return k end

function LuaCfg.define_split(cfg, name, axis, opts)
  opts = opts or {}
  if cfg.mode ~= "define" or defined(cfg, name) then return end
  local n = opts.num_outputs or 2
  local policy = opts.policy or "factors"
  local cands, nc = nil, 0
  if opts.candidate then
    policy = "candidate"
    nc = #opts.candidate
    cands = i64arr(nc * n)
    for i, c in ipairs(opts.candidate) do
      for j = 1, n do cands[(i - 1) * n + j - 1] = c[j] or -1 end
    end
  end
  local no_tail = opts.no_tail == nil and -1 or (opts.no_tail and 1 or 0)
  local k = lcheck(C.tl_atvm_space_define_split(ctx, cfg.sp, name, axis_len(axis, 2), policy, n,
    opts.max_factor or 0, no_tail, cands, nc), 2)
  if opts.filter then
    -- the knob-level filter: keeps the order; it sees an entity with .size
    local dim = tonumber(C.tl_atvm_space_dim(cfg.sp, k))
    local keep = ffi.new("uint8_t[?]", dim)
    local tmp = space.wrap(cfg.sp)
    for j = 0, dim - 1 do
      keep[j] = opts.filter({ size = tmp:entity_value(k, j) }) and 1 or 0
    end
    check(C.tl_atvm_space_knob_keep(ctx, cfg.sp, k, keep, dim), 2)
  end
end

function LuaCfg.define_reorder(cfg, name, axes, policy, opts)
  opts = opts or {}
  if cfg.mode ~= "define" or defined(cfg, name) then return end
  local n = type(axes) == "number" and axes or #axes
  local b, e = 0, n
  if opts.interval then b, e = opts.interval[1], opts.interval[2] end
  if policy == "interleave" then b = opts.spatial or math.floor(n / 2) end
  local cands, nc = nil, 0
  if opts.candidate then
    nc = #opts.candidate
    cands = i64arr(nc * n)
    for i, c in ipairs(opts.candidate) do for j = 1, n do cands[(i - 1) * n + j - 1] = c[j] end end
  end
  lcheck(C.tl_atvm_space_define_reorder(ctx, cfg.sp, name, n, policy or "all", b, e, cands, nc), 2)
end

function LuaCfg.define_annotate(cfg, name, axes, policy, opts)
  opts = opts or {}
  if cfg.mode ~= "define" or defined(cfg, name) then return end
  local n = type(axes) == "number" and axes or #axes
  lcheck(C.tl_atvm_space_define_annotate(ctx, cfg.sp, name, n, policy or "none", opts.num_anchor or 0), 2)
end

function LuaCfg.define_knob(cfg, name, candidates)
  if cfg.mode ~= "define" or defined(cfg, name) then return end
  if type(candidates) ~= "table" or #candidates == 0 then
    error("define_knob '" .. tostring(name) .. "': candidates must be a non-empty list", 2)
  end
  lcheck(C.tl_atvm_space_define_knob(ctx, cfg.sp, name, json.dumps(candidates)), 2)
end

function LuaCfg.add_flop(cfg, n) cfg.flop = (cfg.flop or 0) + n end

function LuaCfg.fallback_split(cfg, name, constraints)
  local k = C.tl_atvm_space_find(cfg.sp, name)
  if k < 0 then error("fallback_split: no knob '" .. tostring(name) .. "'", 2) end
  local arr = i64arr(#constraints)
  for i, c in ipairs(constraints) do arr[i - 1] = c end
  check(C.tl_atvm_space_fallback_split(ctx, cfg.sp, k, arr, #constraints), 2)
  if cfg.digits then cfg.digits[k + 1] = tonumber(C.tl_atvm_space_fallback_digit(cfg.sp, k)) end
end

LuaCfg.__index = function(cfg, k)
  if LuaCfg[k] then return LuaCfg[k] end
  if type(k) ~= "string" then return nil end
  local sp = rawget(cfg, "sp")
  local kk = C.tl_atvm_space_find(sp, k)
  if kk < 0 then return nil end
  local digits = rawget(cfg, "digits")
  local j = digits and digits[kk + 1] or tonumber(C.tl_atvm_space_fallback_digit(sp, kk))
  local conf = setmetatable({ space = space.wrap(sp), digits = {}, index = 0 }, space.Config)
  for i = 0, C.tl_atvm_space_nknobs(sp) - 1 do
    conf.digits[i + 1] = (digits and digits[i + 1]) or tonumber(C.tl_atvm_space_fallback_digit(sp, i))
  end
  conf.digits[kk + 1] = j
  return conf:get(k)
end

--- task.register(name, fn | {template = fn}): a Lua template
function task.register(name, def)
  if type(name) ~= "string" or name == "" then error("autotvm.task.register: expected a template name", 2) end
  local fn = type(def) == "function" and def or (type(def) == "table" and (def.template or def.func or def[1]))
  if type(fn) ~= "function" then
    error("autotvm.task.register(" .. name .. "): expected a function(cfg, ...) returning s, {tensors}", 2)
  end
  lua_templates[name] = fn
  return fn
end

local function te_outputs_flop(tensors, lvl)
  local te = require "tunelua.te"
  local ids = ffi.new("int[?]", #tensors)
  local n = 0
  for _, t in ipairs(tensors) do
    if te.is_tensor(t) and t.op and C.tl_dag_op_kind(te.dag, C.tl_dag_tensor_op(te.dag, t.id)) == C.TL_DAG_COMPUTE then
      ids[n] = t.id
      n = n + 1
    end
  end
  if n == 0 then return 0 end
  local out = ffi.new("tl_dag *[1]")
  check(C.tl_dag_extract(ctx, te.dag, ids, n, out, nil), lvl + 1)
  local f = C.tl_dag_flop(out[0])
  C.tl_dag_free(out[0])
  return f
end

local function create_lua(name, args, target, lvl)
  local fn = lua_templates[name]
  local sp = ffi.gc(C.tl_atvm_space_new(), C.tl_atvm_space_free)
  local cfg = setmetatable({ sp = sp, mode = "define", is_fallback = false }, LuaCfg)
  local ok, s, tensors = pcall(fn, cfg, unpack(args))
  if not ok then error("autotvm.task.create(" .. name .. "): the template failed: " .. tostring(s), lvl + 1) end
  if type(tensors) ~= "table" then
    error("autotvm.task.create(" .. name .. "): the template must return s, {tensors}", lvl + 1)
  end
  local flop = cfg.flop or te_outputs_flop(tensors, lvl + 1)
  if not (flop > 0) then error("autotvm.task.create(" .. name .. "): cannot count FLOPs (use cfg:add_flop)", lvl + 1) end
  local t = setmetatable({ name = name, args = args, target = target or "llvm", flop = flop, handle = nil,
                           lua_template = fn, sp = sp }, Task)
  t.config_space = space.wrap(sp, t)
  return t
end

--- task.create(name, args, target) -> Task
function task.create(name, args, target)
  if type(name) ~= "string" then error("autotvm.task.create: expected a template name", 2) end
  target = target or "llvm"
  if type(target) == "table" then target = target.str or tostring(target) end
  if lua_templates[name] then
    local t = create_lua(name, args, target, 2)
    return t
  end
  local json = args_to_json(args, 2)
  local out = ffi.new("tl_atvm_task *[1]")
  check(C.tl_atvm_task_create(ctx, name, json, target, out), 2)
  local h = ffi.gc(out[0], C.tl_atvm_task_free)
  local t = setmetatable({ name = name, args = args, target = target, handle = h,
                           flop = C.tl_atvm_task_flop(h) }, Task)
  t.config_space = space.wrap(C.tl_atvm_task_space(h), t)
  return t
end

--- task:workload() -> {name, args...} (the log's workload)
function Task.workload(t) return { t.name, unpack(t.args) } end

--- task:config(index) -> Config (-1: the fallback)
function Task.config(t, index) return t.config_space:get(index) end

Task.__tostring = function(t)
  return string.format("Task(func_name=%s, args=%s, target=%s, flop=%g, space=%d)", t.name,
                       json.dumps(t.args), t.target, t.flop, #t.config_space)
end

local schedule_mod
local function wrap_sched(h)
  schedule_mod = schedule_mod or require "tunelua.schedule"
  return setmetatable({ handle = ffi.gc(h, C.tl_sched_free), outputs = {} }, schedule_mod.Schedule)
end

local function index_of(t, index, lvl)
  if type(index) == "table" and index.index then return index.is_fallback and -1 or index.index end
  if index == nil then return -1 end
  if type(index) ~= "number" or index ~= math.floor(index) or index < -1 or index >= #t.config_space then
    error(string.format("task %s: config index must be an integer in [-1, %d), got %s", t.name,
                        #t.config_space, tostring(index)), lvl + 1)
  end
  return index
end

--- task:instantiate(index | config) -> schedule, args (stage names / tensors usable with tl.build)
--- and, for C templates, the args' shapes (an input may have the shape it is deployed with,
--- e.g. conv2d_NCHWc.x86's pre-packed 5-D weight)
function Task.instantiate(t, index)
  index = index_of(t, index, 2)
  if t.lua_template then
    local digits = index >= 0 and t.config_space:point2knob(index) or t.config_space:fallback_digits()
    local cfg = setmetatable({ sp = t.sp, mode = "apply", digits = digits, is_fallback = index < 0 }, LuaCfg)
    local s, tensors = t.lua_template(cfg, unpack(t.args))
    return s, tensors
  end
  local sched = ffi.new("tl_sched *[1]")
  local args = ffi.new("int[16]")
  local n = ffi.new("int[1]")
  check(C.tl_atvm_instantiate(ctx, t.handle, index, sched, args, 16, n), 2)
  local s = wrap_sched(sched[0])
  local dag = C.tl_sched_dag(s.handle)
  local names, shapes = {}, {}
  for i = 0, n[0] - 1 do
    names[i + 1] = ffi.string(C.tl_dag_tensor_name(dag, args[i]))
    local p, sh = C.tl_dag_tensor_shape(dag, args[i]), {}
    for d = 0, C.tl_dag_tensor_ndim(dag, args[i]) - 1 do sh[d + 1] = tonumber(p[d]) end
    shapes[i + 1] = sh
  end
  return s, names, shapes
end

--- task:lower(index, {name = "f"}) -> a tunelua.build Lowered
function Task.lower(t, index, opts)
  local build = require "tunelua.build"
  local s, args = t:instantiate(index_of(t, index, 2))
  local l = build.lower(s, args, opts)
  return l
end

--- task:build(index, {name = "f"}) -> a tunelua.build function
function Task.build(t, index, opts)
  local build = require "tunelua.build"
  local s, args = t:instantiate(index_of(t, index, 2))
  local f = build.build(s, args, "c", opts)
  return f
end

--- task:set_blocked(on) -> true when the task now instantiates (measures, builds) each config
--- in the blocked layout the graph executor runs it in (x86 conv2d_NCHWc / depthwise: inputs
--- NCHW[ib]c and OIHW[ob]o with the config's blocks, output NCHW[ob]c), false when its
--- template has no such form for its args. Extraction from a program sets it on where the
--- graph runs blocked (layouts ~= false).
function Task.set_blocked(t, on)
  if not t.handle then return false end
  t.blocked = C.tl_atvm_task_set_blocked(t.handle, on and 1 or 0) ~= 0
  return t.blocked
end

--- task:config_json(index) -> the log's config object text
function Task.config_json(t, index)
  if t.handle then return ffi.string(C.tl_atvm_config_json(t.handle, index)) end
  local c = t.config_space:get(index)
  return json.dumps({ __order = { "index", "code_hash", "entity" }, index = c.index,
                              code_hash = json.null, entity = c:entity() })
end

--- task.extract_from_program(mod, params, target, ...) (tunelua.graph.extract)
task.extract_from_program = function(...) return require("tunelua.graph.extract").autotvm(...) end

return task
