--- tunelua.graph.group: the compute DAG of one fused group (or one bare op call).
--
--   local g = group.build(call_node)   -- call of a Primitive function, or of an op name
--   g.dag        -- a tl_dag (cdata, GC'd): the group's ops in one te DAG, extracted from the
--                -- outputs (placeholders p0..pn in parameter order, then computed ops)
--   g.inputs     -- per flattened call argument (a tuple argument gives one per field):
--                -- {tensor = id in g.dag, or -1 when the group does not read it}
--   g.consts     -- constants found inside the function body: {tensor, value}
--   g.outputs    -- output tensor ids (one per field of a tuple body)
--   g.has_reduce -- whether any op has a reduction (auto-scheduler keeps only those)
--   g.anchor     -- the first conv2d/dense call inside (tuning anchor), or nil
--   g.name       -- TVM-style function name ("fused_nn_conv2d_add_nn_relu")
local ffi = require "ffi"
local core = require "tunelua.core"
local walk = require "tunelua.graph.walk"
local ops = require "tunelua.graph.ops"
local topi = require "tunelua.topi"

local C, ctx, check = core.C, core.ctx, core.check

local group = {}

local intarr = ffi.typeof("int[?]")
local i64arr = ffi.typeof("int64_t[?]")
local int1 = ffi.typeof("int[1]")
local dagp = ffi.typeof("tl_dag *[1]")

--- group.dtype_code(name) -> the dtype code of "float32", "int8", ... (nil: float32)
local function dtype_code(name)
  local out = int1()
  check(C.tl_dtype_parse(ctx, name or "float32", out), 3)
  return out[0]
end
group.dtype_code = dtype_code

--- group.intermediates(bufs) -> the buffers of kind "inter" (each given its nbytes), and the sum
--- of their bytes: what an executor's memory plan places.
function group.intermediates(bufs)
  local inter, sum = {}, 0
  for _, b in ipairs(bufs) do
    if b.kind == "inter" then
      local n = 1
      for _, d in ipairs(b.shape) do n = n * d end
      b.nbytes = n * C.tl_dtype_bytes(dtype_code(b.dtype))
      sum = sum + b.nbytes
      inter[#inter + 1] = b
    end
  end
  return inter, sum
end

local function placeholder(dag, name, ty)
  local n = #ty.shape
  local sh = i64arr(n > 0 and n or 1)
  for i = 1, n do sh[i - 1] = ty.shape[i] end
  local out = int1()
  check(C.tl_dag_placeholder(ctx, dag, name, n, sh, dtype_code(ty.dtype), out), 3)
  return out[0]
end

local ANCHORS = { ["nn.conv2d"] = true, ["nn.dense"] = true, ["nn.conv2d_transpose"] = true,
                  ["nn.batch_matmul"] = true, ["nn.conv3d"] = true,
                  ["nn.contrib_conv2d_NCHWc"] = true, ["nn.contrib_depthwise_conv2d_NCHWc"] = true }
group.ANCHORS = ANCHORS

local MAXOUT = 64

--- Add one call's topi op(s) to dag: returns the list of output tensor ids.
--- anchor_hook(dag, node, in_ids, arg_types) may return output ids to replace the topi op
--- (used for AutoTVM template computes), and as a second value a list of extra constant
--- inputs {tensor = placeholder id in dag, value = nd array, node = {type = ...}} (weights the
--- hook packed at build time).
function group.emit_call(dag, node, in_ids, arg_types, anchor_hook, level)
  level = (level or 1) + 1
  if anchor_hook and ANCHORS[node.op] then
    local r, extra = anchor_hook(dag, node, in_ids, arg_types)
    if r then return r, extra end
  end
  local name, attrs = ops.to_topi(node, arg_types, level)
  local n = #in_ids
  local ids = intarr(n > 0 and n or 1)
  for i = 1, n do ids[i - 1] = in_ids[i] end
  local outs, nout = intarr(MAXOUT), int1()
  local json = attrs and next(attrs) ~= nil and topi.encode_attrs(attrs) or nil
  local rc = C.tl_topi_op(ctx, dag, name, ids, n, json, outs, MAXOUT, nout)
  if rc ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    error(string.format("graph: %s (layer %s): %s", tostring(node.op),
                        tostring(node.attrs and node.attrs.name or "?"), msg), level)
  end
  local r = {}
  for i = 0, nout[0] - 1 do r[#r + 1] = outs[i] end
  return r
end

--- group.emit_on_constant(dag, topi_name, data_id, name, value, attrs_json, what) -> outs, extra:
--- an anchor hook's replacement op: topi_name on (data_id, a new placeholder `name` holding the
--- float32 constant value, transformed by the hook at build time); the pair an anchor_hook
--- returns. Errors are raised with what (the hook's name) in front of the topi error.
function group.emit_on_constant(dag, topi_name, data_id, name, value, attrs_json, what)
  local shape = value:shape()
  local pt = int1()
  check(C.tl_dag_placeholder(ctx, dag, name, #shape, ffi.new("int64_t[?]", #shape, shape),
                             dtype_code("float32"), pt))
  local ids = intarr(2)
  ids[0], ids[1] = data_id, pt[0]
  local outs, nout = intarr(4), int1()
  if C.tl_topi_op(ctx, dag, topi_name, ids, 2, attrs_json, outs, 4, nout) ~= 0 then
    local msg = core.errmsg()
    C.tl_clearerr(ctx)
    error(what .. ": " .. msg, 0)
  end
  return { outs[0] }, { { tensor = pt[0], value = value, node = { type = { shape = shape, dtype = "float32" } } } }
end

local function fused_name(names)
  if #names == 0 then return "fused" end
  return "fused_" .. table.concat(names, "_")
end

-- The flattened field types of a type (a tuple's fields in order; else the type itself).
local function flat_types(ty)
  if ty and ty.fields then
    local r = {}
    for _, f in ipairs(ty.fields) do
      for _, x in ipairs(flat_types(f)) do r[#r + 1] = x end
    end
    return r
  end
  return { ty }
end

--- group.layout_free(g) -> tensors, positions: the group's layout-free arguments, the values a
--- build knows (the constants inside the group, and the call's constant arguments: a network's
--- weights once its params are bound), as tensor ids of g.dag and as positions among the
--- kernel's arguments (1-based; the used inputs in order, then the constants, then the outputs).
--- An auto-scheduled CPU kernel may store them in the order its loops read them
--- (docs/auto_scheduler.md, "Layout rewriting").
function group.layout_free(g)
  local const_arg, k = {}, 0
  for _, a in ipairs(g.call and g.call.args or {}) do
    for _ = 1, #flat_types(a.type or a.checked_type) do
      k = k + 1
      const_arg[k] = a.kind == "const"
    end
  end
  local tensors, positions, pos = {}, {}, 0
  for i, inp in ipairs(g.inputs) do
    if inp.tensor >= 0 then
      pos = pos + 1
      if const_arg[i] then tensors[#tensors + 1], positions[#positions + 1] = inp.tensor, pos end
    end
  end
  for _, c in ipairs(g.consts) do
    pos = pos + 1
    tensors[#tensors + 1], positions[#positions + 1] = c.tensor, pos
  end
  return tensors, positions
end

--- Build the DAG of a group call. opts.anchor_hook: see emit_call.
function group.build(call, opts, level)
  level = (level or 1) + 1
  opts = opts or {}
  local scratch = ffi.gc(C.tl_dag_new(), C.tl_dag_free)
  local val = {}          -- node -> list of tensor ids
  local params, body
  if walk.is_function(call.op) then
    params, body = call.op.params, call.op.body
  else
    -- a bare op call: its arguments are the group's inputs
    params, body = {}, nil
  end
  local inputs, consts, names, ph = {}, {}, {}, {}
  local np = 0
  local function new_ph(ty)
    local t = placeholder(scratch, "p" .. np, ty)
    np = np + 1
    return t
  end
  local anchor
  local function flat_ids(args, what)
    local in_ids, tys = {}, {}
    for j, a in ipairs(args) do
      local v = val[a]
      if not v then error("graph: argument " .. j .. " of " .. what .. " has no value", level + 1) end
      for _, id in ipairs(v) do in_ids[#in_ids + 1] = id end
      tys[j] = a.type or a.checked_type
    end
    return in_ids, tys
  end
  if body then
    for _, p in ipairs(params) do
      local l = {}
      for _, ty in ipairs(flat_types(p.type or p.checked_type)) do
        local t = new_ph(ty)
        ph[#ph + 1] = t
        l[#l + 1] = t
      end
      val[p] = l
    end
    for _, n in ipairs(walk.postorder(body)) do
      if n.kind == "const" then
        local t = new_ph(walk.ttype(n))
        val[n] = { t }
        consts[#consts + 1] = { tensor = t, value = n.value, node = n }
      elseif n.kind == "call" then
        if walk.is_function(n.op) then
          error("graph: nested functions inside a fused group are not supported", level)
        end
        local in_ids, tys = flat_ids(n.args, n.op)
        local extra
        val[n], extra = group.emit_call(scratch, n, in_ids, tys, opts.anchor_hook, level)
        for _, c in ipairs(extra or {}) do consts[#consts + 1] = c end
        if ANCHORS[n.op] and not anchor then anchor = n end
        names[#names + 1] = (n.op:gsub("%.", "_"))
      elseif n.kind == "tuple" then
        local l = {}
        for _, f in ipairs(n.fields) do
          for _, id in ipairs(val[f]) do l[#l + 1] = id end
        end
        val[n] = l
      elseif n.kind == "tuple_get" then
        val[n] = { val[n.tuple][n.index + 1] }
      elseif n.kind == "var" then
        if not val[n] then error("graph: free variable " .. tostring(n.name) .. " in a fused group", level) end
      end
    end
  else
    local tys = {}
    local in_ids = {}
    for j, a in ipairs(call.args) do
      tys[j] = a.type or a.checked_type
      for _, ty in ipairs(flat_types(tys[j])) do
        local t = new_ph(ty)
        ph[#ph + 1] = t
        in_ids[#in_ids + 1] = t
      end
    end
    body = call
    local extra
    val[call], extra = group.emit_call(scratch, call, in_ids, tys, opts.anchor_hook, level)
    for _, c in ipairs(extra or {}) do consts[#consts + 1] = c end
    if ANCHORS[call.op] then anchor = call end
    names[1] = (call.op:gsub("%.", "_"))
  end
  local outs = val[body]
  local no = #outs
  local oarr = intarr(no)
  for i = 1, no do oarr[i - 1] = outs[i] end
  local ntens = C.tl_dag_num_tensors(scratch)
  local map = intarr(ntens)
  local out = dagp()
  check(C.tl_dag_extract(ctx, scratch, oarr, no, out, map), level)
  local dag = ffi.gc(out[0], C.tl_dag_free)
  local g = { dag = dag, inputs = {}, consts = {}, outputs = {}, anchor = anchor,
              name = fused_name(names), call = call }
  -- one input per flattened argument (tuple arguments give one per field)
  for i = 1, #ph do g.inputs[i] = { tensor = map[ph[i]] } end
  for _, c in ipairs(consts) do
    -- a constant no op reads any more (e.g. replaced by a packed copy) is dropped
    if map[c.tensor] >= 0 then
      g.consts[#g.consts + 1] = { tensor = map[c.tensor], value = c.value, node = c.node }
    end
  end
  for i = 1, no do g.outputs[i] = map[outs[i]] end
  local has_reduce = false
  for op = 0, C.tl_dag_num_ops(dag) - 1 do
    if C.tl_dag_op_nreduce(dag, op) > 0 then has_reduce = true end
  end
  g.has_reduce = has_reduce
  return g
end

--- The DAG's text (seed 003's compute_dag print) and key text.
function group.text(g) return ffi.string(C.tl_dag_text(g.dag)) end
function group.key_text(g) return ffi.string(C.tl_dag_key_text(g.dag)) end

--- The io tensors of the DAG in order (placeholders in DAG order, then outputs).
function group.io_tensors(g)
  local dag = g.dag
  local r = {}
  for t = 0, C.tl_dag_num_tensors(dag) - 1 do
    local op = C.tl_dag_tensor_op(dag, t)
    if C.tl_dag_op_kind(dag, op) == C.TL_DAG_PLACEHOLDER then r[#r + 1] = t end
  end
  for _, o in ipairs(g.outputs) do r[#r + 1] = o end
  return r
end

function group.shape(dag, t)
  local n = C.tl_dag_tensor_ndim(dag, t)
  local p = C.tl_dag_tensor_shape(dag, t)
  local s = {}
  for i = 0, n - 1 do s[i + 1] = tonumber(p[i]) end
  return s
end

return group
