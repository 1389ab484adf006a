--- tunelua.schedule: TVM's te schedules in Lua idiom, over the step lists
-- of core/te/schedule.c.
--
--   local te = require "tunelua.te"
--   local s = te.create_schedule(C.op)            -- or schedule.create({C1, C2})
--   local xo, xi = s[C]:split(C.op.axis[1], {factor = 8})
--   s[C]:reorder(xo, k, xi)
--   s[C]:vectorize(xi)
--   local CL = s:cache_write(C, "local")
--   s[CL]:compute_at(s[C], xo)
--   print(s)                 -- the steps and the stage/iterator table
--   print(s:steps())         -- the §2.4 JSON step list
--
-- A Schedule wraps a tl_sched (its own copy of the sub-DAG that computes
-- the outputs). Every method records one or more transform steps; the
-- schedule is exactly its step list, so s:steps() replayed on a fresh
-- schedule (schedule.create(...):apply_steps(json)) gives the same state.
--
-- Objects:
--   Schedule  s[t] -> Stage, where t is a te Tensor or Op, a tensor returned
--             by cache_read/cache_write/rfactor, a Stage or an op name.
--             s:step_<verb>(...) for every step kind of the library's step
--             table (core/te/steps.h): one raw step from its record fields,
--             e.g. s:step_split(2, 0, {8}, 1); generated, not written here.
--   Stage     s[C]:split / tile / reorder / fuse / vectorize / unroll /
--             parallel / bind / pragma / storage_align / compute_at /
--             compute_inline / compute_root; st.op.axis and
--             st.op.reduce_axis (lists of Axis), st.name, st.iters (the
--             current iterators, outer to inner, as Axis objects).
--   Axis      an iterator of one stage: ax.name, ax.extent (0 = unknown),
--             ax.stage (stage name), ax.node (its stable id). te IterVars
--             (C.op.axis[1], a reduce_axis) are accepted wherever an Axis is
--             and stand for the op axis of the stage they are used with.
--   Tensor    from cache_read/cache_write/rfactor: t.name, t.op (with
--             .axis/.reduce_axis of Axis objects), t.shape, t.dtype,
--             t.value_index; usable as s[t] and as a tl.lower argument.
--
-- Errors are raised at the caller's level with the library's message, e.g.
--   split: stage 'C' has no iterator 5 (it has 3: i, j, k)
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local schedule = {}

local Schedule, Stage, Axis, STensor, StageOp = {}, {}, {}, {}, {}

local int1 = ffi.typeof("int[1]")
local intarr = ffi.typeof("int[?]")
local i64arr = ffi.typeof("int64_t[?]")

-- Every helper below takes `lvl`: the level that error() in that very
-- function needs to reach the user's code (1 = the helper itself). Public
-- methods pass 3 when they call a helper (helper, method, user) and never
-- tail-call, so that messages carry the user's file and line.
local function check(rc, lvl)
  if rc ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    if msg == "" then msg = "schedule: error " .. tonumber(rc) end
    error(msg, lvl)
  end
end

local function te_mod() return require "tunelua.te" end

-- ---- the step table ---------------------------------------------------------------
-- The step kinds of core/te/steps.h, read from the library, in kind order:
--   { kind = 4, name = "SP", verb = "split", types = "iieIb",
--     fields = {"stage_id", "iter_id", "extent", "lengths", "inner_to_outer"},
--     params = the fields a caller gives (all but the recorded extent `e`),
--              each { name = ..., type = "i" | "b" | "I" | "s" } }
-- step_kind.SP and step_kind.split are the same record.
local step_kinds, step_kind = {}, {}
for k = 0, C.tl_step_count() - 1 do
  local d = { kind = k, name = ffi.string(C.tl_step_name(k)), verb = ffi.string(C.tl_step_verb(k)),
              types = ffi.string(C.tl_step_field_types(k)), fields = {}, params = {} }
  for f = 1, #d.types do
    local name, ty = ffi.string(C.tl_step_field_name(k, f - 1)), d.types:sub(f, f)
    d.fields[f] = name
    if ty ~= "e" then d.params[#d.params + 1] = { name = name, type = ty } end
  end
  step_kinds[k + 1] = d
  step_kind[d.name], step_kind[d.verb] = d, d
end

local function is_int(v) return type(v) == "number" and v == math.floor(v) end

local function describe(v)
  if type(v) == "number" then return tostring(v) end
  if type(v) == "string" then return "'" .. v .. "'" end
  return type(v)
end

-- Apply step kind d to schedule s with the record fields of d.params, in
-- order: integers for i and b (b also takes a boolean), a list of integers
-- for I, a string for s. Returns the id of the stage the step inserted
-- (cache_read, cache_write, rfactor), else nothing.
local function add_step(s, d, lvl, ...)
  local given, args = select("#", ...), { ... }
  local np = #d.params
  if given ~= np then
    local names = {}
    for i, p in ipairs(d.params) do names[i] = p.name end
    error(string.format("%s: expected %d fields (%s), got %d", d.verb, np, table.concat(names, ", "),
                        given), lvl)
  end
  local scalars, nscalar = i64arr(math.max(np, 1)), 0
  local list, nlist, str = nil, 0, nil
  for i, p in ipairs(d.params) do
    local v = args[i]
    if p.type == "I" then
      if type(v) ~= "table" then
        error(string.format("%s: %s should be a list of integers, got %s", d.verb, p.name, describe(v)), lvl)
      end
      nlist = #v
      list = i64arr(math.max(nlist, 1))
      for k = 1, nlist do
        if not is_int(v[k]) then
          error(string.format("%s: %s[%d] should be an integer, got %s", d.verb, p.name, k, describe(v[k])),
                lvl)
        end
        list[k - 1] = v[k]
      end
    elseif p.type == "s" then
      if type(v) ~= "string" then
        error(string.format("%s: %s should be a string, got %s", d.verb, p.name, describe(v)), lvl)
      end
      str = v
    else
      if p.type == "b" and type(v) == "boolean" then v = v and 1 or 0 end
      if not is_int(v) then
        error(string.format("%s: %s should be an integer, got %s", d.verb, p.name, describe(v)), lvl)
      end
      scalars[nscalar] = v
      nscalar = nscalar + 1
    end
  end
  local ns = int1(-1)
  check(C.tl_sched_step(ctx, s.handle, d.kind, scalars, nscalar, list, nlist, str, ns), lvl + 1)
  if ns[0] >= 0 then return tonumber(ns[0]) end
end

-- ---- axes -------------------------------------------------------------------------

local function new_axis(s, stage_name, node)
  return setmetatable({ sched = s, stage = stage_name, node = node }, Axis)
end

Axis.__index = function(ax, k)
  local s = rawget(ax, "sched")
  if k == "name" then
    local id = C.tl_sched_stage_find(s.handle, ax.stage)
    local n = id >= 0 and C.tl_sched_node_name(s.handle, id, ax.node) or nil
    return n ~= nil and ffi.string(n) or "?"
  elseif k == "extent" then
    local id = C.tl_sched_stage_find(s.handle, ax.stage)
    local pos = id >= 0 and C.tl_sched_node_iter(s.handle, id, ax.node) or -1
    return pos >= 0 and tonumber(C.tl_sched_iter_extent(s.handle, id, pos)) or nil
  elseif k == "var" then
    return ax
  end
  return nil
end
Axis.__tostring = function(ax) return string.format("Axis(%s.%s)", ax.stage, ax.name) end

-- ---- stages -------------------------------------------------------------------------

local function stage_id(st, verb, lvl)
  local id = C.tl_sched_stage_find(st.sched.handle, st.name)
  if id < 0 then error(string.format("%s: the schedule has no stage '%s'", verb, st.name), lvl) end
  return id
end

-- Current position of axis `ax` in stage `st` (for step `verb`).
local function axis_pos(st, ax, verb, lvl)
  local h = st.sched.handle
  local id = stage_id(st, verb, lvl + 1)
  local node
  if getmetatable(ax) == Axis then
    if ax.sched ~= st.sched then
      error(string.format("%s: axis '%s' belongs to another schedule", verb, ax.name), lvl)
    end
    if ax.stage ~= st.name then
      error(string.format("%s: axis '%s' belongs to stage '%s', not '%s'", verb, ax.name, ax.stage,
                          st.name), lvl)
    end
    node = ax.node
  elseif te_mod().is_itervar(ax) then
    -- an op axis: by position when the te op is the stage's own, else by name
    local dag = C.tl_sched_dag(h)
    local ndim, nred = C.tl_dag_op_ndim(dag, id), C.tl_dag_op_nreduce(dag, id)
    local op = st.te_op
    if op and ax.op ~= nil then
      local kind, idx = op:find_axis(ax)
      if kind == "spatial" and idx <= ndim then node = idx - 1
      elseif kind == "reduce" and idx <= nred then node = ndim + idx - 1 end
    end
    if not node then
      local want = ax.kind == "reduce" and 1 or 0
      local lo, hi = want == 1 and ndim or 0, want == 1 and ndim + nred - 1 or ndim - 1
      for n = lo, hi do
        if ffi.string(C.tl_sched_node_name(h, id, n)) == ax.name then node = n; break end
      end
    end
    if not node then
      error(string.format("%s: stage '%s' has no axis '%s'", verb, st.name, ax.name), lvl)
    end
  else
    error(string.format("%s: expected an axis of stage '%s', got %s", verb, st.name,
                        type(ax) == "table" and tostring(ax) or type(ax)), lvl)
  end
  local pos = C.tl_sched_node_iter(h, id, node)
  if pos < 0 then
    error(string.format("%s: iterator '%s' of stage '%s' is no longer a loop (it was split or fused)",
                        verb, ffi.string(C.tl_sched_node_name(h, id, node)), st.name), lvl)
  end
  return id, pos
end

local function axis_at(st, id, pos)
  return new_axis(st.sched, st.name, C.tl_sched_iter_node(st.sched.handle, id, pos))
end

local function stage_op_view(st, lvl)
  local h = st.sched.handle
  local id = stage_id(st, "op", lvl + 1)
  local dag = C.tl_sched_dag(h)
  local ndim, nred = C.tl_dag_op_ndim(dag, id), C.tl_dag_op_nreduce(dag, id)
  local op = { name = st.name, axis = {}, reduce_axis = {} }
  for i = 0, ndim - 1 do op.axis[i + 1] = new_axis(st.sched, st.name, i) end
  for i = 0, nred - 1 do op.reduce_axis[i + 1] = new_axis(st.sched, st.name, ndim + i) end
  return setmetatable(op, StageOp)
end
StageOp.__index = StageOp
StageOp.__tostring = function(op) return "Op(" .. op.name .. ")" end

local stage_methods = {}

Stage.__index = function(st, k)
  if k == "op" then
    local op = stage_op_view(st, 3)
    return op
  end
  if k == "iters" then
    local id = stage_id(st, "iters", 3)
    local list = {}
    for p = 0, C.tl_sched_num_iters(st.sched.handle, id) - 1 do list[p + 1] = axis_at(st, id, p) end
    return list
  end
  return stage_methods[k]
end
Stage.__tostring = function(st) return "Stage(" .. st.name .. ")" end

local function new_stage(s, name, te_op)
  return setmetatable({ sched = s, name = name, te_op = te_op }, Stage)
end

local function split(st, ax, opts, lvl)
  if type(opts) == "number" then opts = { factor = opts } end
  if type(opts) ~= "table" or (opts.factor == nil) == (opts.nparts == nil) then
    error("split: give exactly one of {factor = f} or {nparts = n}", lvl)
  end
  local id, pos = axis_pos(st, ax, "split", lvl + 1)
  local n = opts.factor or opts.nparts
  if type(n) ~= "number" or n ~= math.floor(n) then
    error("split: the factor must be an integer, got " .. tostring(n), lvl)
  end
  add_step(st.sched, step_kind.split, lvl + 1, id, pos, { n }, opts.factor and 1 or 0)
  return axis_at(st, id, pos), axis_at(st, id, pos + 1)
end

--- st:split(axis, {factor = f} | {nparts = n}) -> outer, inner
function stage_methods.split(st, ax, opts)
  local outer, inner = split(st, ax, opts, 3)
  return outer, inner
end

--- st:split_n(axis, {l1, l2, ...}, inner_to_outer) -> the new axes, outer to inner
-- The auto-scheduler's multi-level split (one SP step).
function stage_methods.split_n(st, ax, lengths, inner_to_outer)
  local id, pos = axis_pos(st, ax, "split", 3)
  if type(lengths) ~= "table" then error("split: lengths must be a list of integers", 2) end
  local n = #lengths
  add_step(st.sched, step_kind.split, 3, id, pos, lengths, inner_to_outer == false and 0 or 1)
  local out = {}
  for i = 0, n do out[i + 1] = axis_at(st, id, pos + i) end
  return unpack(out)
end

local function axis_list(...)
  local list = { ... }
  if #list == 1 and type(list[1]) == "table" and getmetatable(list[1]) == nil then list = list[1] end
  return list
end

local function reorder(st, list, lvl)
  local h = st.sched.handle
  local id = stage_id(st, "reorder", lvl + 1)
  local n = C.tl_sched_num_iters(h, id)
  local pos, seen, sorted = {}, {}, {}
  for i, ax in ipairs(list) do
    local _, p = axis_pos(st, ax, "reorder", lvl + 1)
    if seen[p] then error(string.format("reorder: axis '%s' is given twice", ax.name), lvl) end
    seen[p] = true
    pos[i], sorted[i] = p, p
  end
  table.sort(sorted)
  local order = {}
  for i = 1, n do order[i] = i - 1 end
  for i = 1, #pos do order[sorted[i] + 1] = pos[i] end
  add_step(st.sched, step_kind.reorder, lvl + 1, id, order)
end

--- st:reorder(a, b, c, ...): the given axes take, in this order, the
-- positions they occupy now; the others stay where they are.
function stage_methods.reorder(st, ...)
  reorder(st, axis_list(...), 3)
end

--- st:fuse(a, b, ...) -> fused axis (a outer, consecutive)
function stage_methods.fuse(st, ...)
  local list = axis_list(...)
  if #list == 0 then error("fuse: no axes given", 2) end
  local id
  local iters = {}
  for i, ax in ipairs(list) do
    id, iters[i] = axis_pos(st, ax, "fuse", 3)
  end
  add_step(st.sched, step_kind.fuse, 3, id, iters)
  local fused = axis_at(st, id, iters[1])
  return fused
end

--- st:tile(x, y, x_factor, y_factor) -> xo, yo, xi, yi
function stage_methods.tile(st, x, y, xf, yf)
  local xo, xi = split(st, x, { factor = xf }, 3)
  local yo, yi = split(st, y, { factor = yf }, 3)
  reorder(st, { xo, yo, xi, yi }, 3)
  return xo, yo, xi, yi
end

-- (lvl: as seen from annotate's caller's caller, the user)
local function annotate(st, ax, ann, verb)
  local id, pos = axis_pos(st, ax, verb, 4)
  add_step(st.sched, step_kind.annotate, 4, id, pos, ann)
end

function stage_methods.vectorize(st, ax) annotate(st, ax, C.TL_ANN_VECTORIZE, "vectorize") end
function stage_methods.unroll(st, ax) annotate(st, ax, C.TL_ANN_UNROLL, "unroll") end
function stage_methods.parallel(st, ax) annotate(st, ax, C.TL_ANN_PARALLEL, "parallel") end
function stage_methods.tensorize(st, ax) annotate(st, ax, C.TL_ANN_TENSORIZE, "tensorize") end

local thread_codes = {
  vthread = C.TL_ANN_VTHREAD, cthread = C.TL_ANN_VTHREAD,
  ["blockIdx.x"] = C.TL_ANN_BLOCK_X, ["threadIdx.x"] = C.TL_ANN_THREAD_X,
  ["blockIdx.y"] = C.TL_ANN_BLOCK_Y, ["threadIdx.y"] = C.TL_ANN_THREAD_Y,
  ["blockIdx.z"] = C.TL_ANN_BLOCK_Z, ["threadIdx.z"] = C.TL_ANN_THREAD_Z,
}

--- st:bind(axis, "threadIdx.x" | te.thread_axis("threadIdx.x"))
function stage_methods.bind(st, ax, thread)
  local tag = thread
  if type(thread) == "table" then tag = thread.thread_tag or thread.tag or thread.name end
  local code = type(tag) == "string" and thread_codes[tag]
  if not code then
    error(string.format("bind: unknown thread tag %s (expected blockIdx.x/y/z, threadIdx.x/y/z or vthread)",
                        type(tag) == "string" and "'" .. tag .. "'" or type(tag)), 2)
  end
  annotate(st, ax, code, "bind")
end

--- st:pragma(axis, "auto_unroll_max_step", 16) / st:pragma(axis, "debug_skip_region")
function stage_methods.pragma(st, ax, key, value)
  if type(key) ~= "string" then error("pragma: the pragma name must be a string", 2) end
  local id, pos = axis_pos(st, ax, "pragma", 3)
  local text = value ~= nil and (key .. "$" .. tostring(value)) or key
  add_step(st.sched, step_kind.pragma, 3, id, pos, text)
end

--- st:storage_align(axis, factor, offset)
function stage_methods.storage_align(st, ax, factor, offset)
  local id, pos = axis_pos(st, ax, "storage_align", 3)
  add_step(st.sched, step_kind.storage_align, 3, id, pos, factor, offset or 0)
end

--- st:compute_at(parent_stage, axis_of_parent)
function stage_methods.compute_at(st, parent, ax)
  if getmetatable(parent) ~= Stage then
    error("compute_at: the target must be a stage (s[T])", 2)
  end
  local id = stage_id(st, "compute_at", 3)
  local pid, pos = axis_pos(parent, ax, "compute_at", 3)
  add_step(st.sched, step_kind.compute_at, 3, id, pid, pos)
end

function stage_methods.compute_inline(st)
  add_step(st.sched, step_kind.compute_inline, 3, stage_id(st, "compute_inline", 3))
end

function stage_methods.compute_root(st)
  add_step(st.sched, step_kind.compute_root, 3, stage_id(st, "compute_root", 3))
end

-- ---- tensors made by the schedule ----------------------------------------------------

local function new_stensor(s, id, value_index)
  local h = s.handle
  local dag = C.tl_sched_dag(h)
  local t = C.tl_sched_stage_tensor(h, id, value_index or 0)
  local shape = {}
  for i = 0, C.tl_dag_tensor_ndim(dag, t) - 1 do shape[i + 1] = tonumber(C.tl_dag_tensor_shape(dag, t)[i]) end
  local name = ffi.string(C.tl_sched_stage_name(h, id))
  local obj = setmetatable({ sched = s, name = name, value_index = value_index or 0, shape = shape,
                             ndim = #shape, dtype = ffi.string(C.tl_dtype_name(C.tl_dag_tensor_dtype(dag, t))) },
                           STensor)
  return obj
end

STensor.__index = function(t, k)
  if k == "op" then
    local op = stage_op_view(new_stage(rawget(t, "sched"), rawget(t, "name")), 3)
    return op
  end
  return nil
end
STensor.__tostring = function(t) return string.format("Tensor(%s, schedule)", t.name) end

function schedule.is_tensor(x) return getmetatable(x) == STensor end

-- ---- schedules ---------------------------------------------------------------------------

local sched_methods = {}

-- Name and output index of anything that names a stage.
local function target_name(x)
  local te = te_mod()
  if te.is_tensor(x) then return x.op.name, x.value_index, x.op end
  if getmetatable(x) == te.Op then return x.name, 0, x end
  if getmetatable(x) == STensor then return x.name, x.value_index end
  if getmetatable(x) == Stage then return x.name, 0, x.te_op end
  if getmetatable(x) == StageOp then return x.name, 0 end
  if type(x) == "string" then return x, 0 end
  return nil
end

local function get_stage(s, x, lvl)
  local name, _, te_op = target_name(x)
  if not name then
    error("schedule: expected a tensor, an op or a stage name, got " .. type(x), lvl)
  end
  if C.tl_sched_stage_find(s.handle, name) < 0 then
    error(string.format("schedule: no stage '%s' in this schedule", name), lvl)
  end
  return new_stage(s, name, te_op)
end

Schedule.__index = function(s, k)
  if type(k) == "string" then return sched_methods[k] end
  local st = get_stage(s, k, 3)
  return st
end
Schedule.__tostring = function(s) return ffi.string(C.tl_sched_print(s.handle)) end

local function wrap(handle, outputs)
  return setmetatable({ handle = ffi.gc(handle, C.tl_sched_free), outputs = outputs }, Schedule)
end

--- schedule.create(op_or_tensor | {ops or tensors}) -> Schedule
function schedule.create(outs)
  local te = te_mod()
  if te.is_tensor(outs) or getmetatable(outs) == te.Op then outs = { outs } end
  if type(outs) ~= "table" or #outs == 0 then
    error("create_schedule: expected an op, a tensor or a list of them", 2)
  end
  local ids, tensors = {}, {}
  for i, x in ipairs(outs) do
    if te.is_tensor(x) then
      ids[#ids + 1] = x.id
      tensors[#tensors + 1] = x
    elseif getmetatable(x) == te.Op then
      for k = 0, x.num_outputs - 1 do
        local t = x:output(k)
        ids[#ids + 1] = t.id
        tensors[#tensors + 1] = t
      end
    else
      error(string.format("create_schedule: output %d is not an op or a tensor", i), 2)
    end
  end
  local arr = intarr(#ids)
  for i, id in ipairs(ids) do arr[i - 1] = id end
  local out = ffi.new("tl_sched *[1]")
  check(C.tl_sched_new(ctx, te.dag, arr, #ids, out), 3)
  local s = wrap(out[0], tensors)
  return s
end

--- s:stage(x) -> Stage (same as s[x])
function sched_methods.stage(s, x)
  local st = get_stage(s, x, 3)
  return st
end

--- s:stages() -> list of stage names, in stage order
function sched_methods.stage_names(s)
  local list = {}
  for i = 0, C.tl_sched_num_stages(s.handle) - 1 do list[i + 1] = ffi.string(C.tl_sched_stage_name(s.handle, i)) end
  return list
end

local function stage_of(s, x, lvl)
  local st = get_stage(s, x, lvl + 1)
  return C.tl_sched_stage_find(s.handle, st.name)
end

--- s:cache_read(tensor, scope, readers) -> the cache tensor
function sched_methods.cache_read(s, t, scope, readers)
  local id = stage_of(s, t, 3)
  if type(scope) ~= "string" then error("cache_read: scope must be a string like \"shared\"", 2) end
  if type(readers) ~= "table" or target_name(readers) then readers = { readers } end
  local ids = {}
  for i, r in ipairs(readers) do ids[i] = stage_of(s, r, 3) end
  local ns = add_step(s, step_kind.cache_read, 3, id, scope, ids)
  local t2 = new_stensor(s, ns)
  return t2
end

--- s:cache_write(tensor, scope) -> the cache tensor
function sched_methods.cache_write(s, t, scope)
  local id = stage_of(s, t, 3)
  if type(scope) ~= "string" then error("cache_write: scope must be a string like \"local\"", 2) end
  local ns = add_step(s, step_kind.cache_write, 3, id, scope)
  local t2 = new_stensor(s, ns)
  return t2
end

--- s:rfactor(tensor, axis, factor_axis) -> the rfactor tensor (factor_axis 0-based as in TVM)
function sched_methods.rfactor(s, t, ax, factor_axis)
  local st = get_stage(s, t, 3)
  local id, pos = axis_pos(st, ax, "rfactor", 3)
  local ns = add_step(s, step_kind.rfactor, 3, id, pos, factor_axis or 0)
  local t2 = new_stensor(s, ns)
  return t2
end

-- ---- raw steps: one method per row of the step table ----------------------------------
-- s:step_<verb>(fields...) applies one step given as its record fields
-- (stage and iterator ids are positions, 0-based; the recorded extent of a
-- split is filled in): s:step_split(2, 0, {8}, 1) records ["SP", 2, 0, 64,
-- [8], 1]. Steps that insert a stage return its id. s:step(name, ...) does
-- the same by record prefix or verb: s:step("SP", 2, 0, {8}, 1).
for _, d in ipairs(step_kinds) do
  sched_methods["step_" .. d.verb] = function(s, ...)
    local new_stage = add_step(s, d, 3, ...)
    return new_stage
  end
end

function sched_methods.step(s, name, ...)
  local d = step_kind[name]
  if not d then error(string.format("step: unknown step kind %s", describe(name)), 2) end
  local new_stage = add_step(s, d, 3, ...)
  return new_stage
end

--- s:steps() -> the step list as §2.4 JSON text
function sched_methods.steps(s) return ffi.string(C.tl_sched_json(s.handle)) end

--- s:apply_steps(json): apply a step, a step list or a state [[], [steps]] (all or nothing)
function sched_methods.apply_steps(s, json)
  if type(json) ~= "string" then error("apply_steps: expected JSON text", 2) end
  check(C.tl_sched_apply_json(ctx, s.handle, json), 3)
  return s
end

--- s:copy() -> an independent schedule with the same steps
function sched_methods.copy(s)
  local out = ffi.new("tl_sched *[1]")
  check(C.tl_sched_copy(ctx, s.handle, out), 3)
  local c = wrap(out[0], s.outputs)
  return c
end

--- s:fresh() -> a schedule of the same DAG without steps
function sched_methods.fresh(s)
  local out = ffi.new("tl_sched *[1]")
  check(C.tl_sched_fresh(ctx, s.handle, out), 3)
  local c = wrap(out[0], s.outputs)
  return c
end

function sched_methods.num_steps(s) return C.tl_sched_num_steps(s.handle) end
function sched_methods.hash(s) return C.tl_sched_hash(s.handle) end

--- The schedule-side tensor id of an argument (te tensor, cache tensor, ...);
-- errors at level lvl (default: the caller of tensor_id).
function sched_methods.tensor_id(s, x, lvl)
  lvl = lvl or 2
  local name, vi = target_name(x)
  if not name then error("lower: arguments must be tensors, got " .. type(x), lvl) end
  local id = C.tl_sched_stage_find(s.handle, name)
  if id < 0 then
    error(string.format("lower: tensor '%s' is not computed or read by this schedule", name), lvl)
  end
  return C.tl_sched_stage_tensor(s.handle, id, vi or 0)
end

schedule.Schedule, schedule.Stage, schedule.Axis = Schedule, Stage, Axis
schedule.step_kinds = step_kinds
function schedule.is_schedule(x) return getmetatable(x) == Schedule end
function schedule.is_stage(x) return getmetatable(x) == Stage end
function schedule.is_axis(x) return getmetatable(x) == Axis end

return schedule
