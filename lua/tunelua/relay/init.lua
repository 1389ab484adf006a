--- tunelua.relay: the graph IR (TVM's Relay in Lua idiom).
--
--   local relay = require "tunelua.relay"
--   local x = relay.var("data", {shape = {1, 3, 32, 32}, dtype = "float32"})
--   local w = relay.var("conv1_weight", {shape = {8, 3, 3, 3}})
--   local y = relay.nn.relu(relay.nn.conv2d(x, w, {padding = 1, channels = 8, kernel_size = 3}))
--   local mod = relay.Module(relay.Function(relay.free_vars(y), y))
--   print(mod)                                   -- TVM text style, one node per line
--   mod = relay.bind_params(mod, {conv1_weight = tl.nd.random_uniform({8, 3, 3, 3})})
--   mod = relay.optimize(mod, {target = "llvm"})  -- the opt_level=3 pass sequence
--
-- Nodes are tables with a metatable: `.kind` ("var", "const", "call", "tuple",
-- "tuple_get", "function"), `.type` ({shape = {...}, dtype = "float32"}, or
-- {fields = {type, ...}} for tuples), and by kind: var `.name`; const `.value`
-- (a tl.nd array); call `.op` (op name, or a relay Function for a fused group),
-- `.args`, `.attrs`; tuple `.fields`; tuple_get `.tuple`, `.index` (0-based);
-- function `.params`, `.body`, `.attrs` (Primitive = 1 for fused groups).
-- Nodes are immutable once built (passes rebuild with relay.mutate); `t[i]`
-- on a tuple-typed node is relay.tuple_get(t, i - 1).
--
-- Types are inferred eagerly when a call is built: the op's topi operator is
-- emitted on a scratch dag holding placeholders of the argument types
-- (tunelua.relay.ops), so the operator's own shape checks are the type
-- checks. A type error names the op, the layer (attrs.name, else the name of
-- the first weight var argument, else the nearest upstream one) and the
-- argument types. A var made without a type (relay.var("w")) gets its type
-- from the first op that uses it as a weight (conv2d channels/kernel_size,
-- dense units, bias_add/batch_norm channel vectors), as TVM's InferType does.
local ffi = require "ffi"
local nd = require "tunelua.nd"
local ops = require "tunelua.relay.ops"

local relay = { nn = {}, op = {}, transform = {}, analysis = {} }
relay.ops = ops

local Node = {}
local methods = {}
local serial = 0

local function new_node(t)
  serial = serial + 1
  t._id = serial
  return setmetatable(t, Node)
end

local function is_node(x) return getmetatable(x) == Node end
relay.is_node = is_node

local function is_function(x) return is_node(x) and x.kind == "function" end
relay.is_function = is_function

local shape_str = ops.shape_str

local function type_str(ty)
  if ty == nil then return "?" end
  if ty.fields then
    local p = {}
    for i, f in ipairs(ty.fields) do p[i] = type_str(f) end
    return "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")")
  end
  if ty.ret then
    local p = {}
    for i, f in ipairs(ty.params or {}) do p[i] = type_str(f) end
    return "fn (" .. table.concat(p, ", ") .. ") -> " .. type_str(ty.ret)
  end
  return string.format("Tensor[%s, %s]", shape_str(ty.shape), ty.dtype)
end
relay.type_str = type_str

local function is_tensor_type(ty) return type(ty) == "table" and type(ty.shape) == "table" end

local function copy_type(ty)
  if ty == nil then return nil end
  if ty.fields then
    local f = {}
    for i, x in ipairs(ty.fields) do f[i] = copy_type(x) end
    return { fields = f }
  end
  local s = {}
  for i, d in ipairs(ty.shape) do s[i] = d end
  return { shape = s, dtype = ty.dtype }
end

local function types_equal(a, b)
  if a == nil or b == nil then return a == b end
  if a.fields or b.fields then
    if not (a.fields and b.fields) or #a.fields ~= #b.fields then return false end
    for i = 1, #a.fields do if not types_equal(a.fields[i], b.fields[i]) then return false end end
    return true
  end
  if a.dtype ~= b.dtype or #a.shape ~= #b.shape then return false end
  for i = 1, #a.shape do if a.shape[i] ~= b.shape[i] then return false end end
  return true
end
relay.types_equal = types_equal

-- ---- traversal -----------------------------------------------------------------------

local function kids(n)
  local k = n.kind
  if k == "call" then return n.args
  elseif k == "tuple" then return n.fields
  elseif k == "tuple_get" then return { n.tuple }
  end
  return {}
end
relay.kids = kids

--- relay.post_order(expr) -> list of the nodes reachable from expr, each once, children
--- (call arguments left to right) before parents. A fused call's function is not
--- entered (walk f.body for that).
local function post_order(expr)
  local order, seen = {}, { [expr] = true }
  local stack = { { expr, 0 } }
  while #stack > 0 do
    local top = stack[#stack]
    local node, i = top[1], top[2]
    local ks = kids(node)
    if i < #ks then
      top[2] = i + 1
      local c = ks[i + 1]
      if not seen[c] then
        seen[c] = true
        stack[#stack + 1] = { c, 0 }
      end
    else
      stack[#stack] = nil
      order[#order + 1] = node
    end
  end
  return order
end
relay.post_order = post_order

--- relay.free_vars(expr) -> vars in order of first use in a post-order walk.
function relay.free_vars(expr)
  if is_function(expr) then
    local bound, r = {}, {}
    for _, p in ipairs(expr.params) do bound[p] = true end
    for _, v in ipairs(relay.free_vars(expr.body)) do if not bound[v] then r[#r + 1] = v end end
    return r
  end
  local r = {}
  for _, n in ipairs(post_order(expr)) do
    if n.kind == "var" then r[#r + 1] = n end
  end
  return r
end
relay.analysis.free_vars = relay.free_vars

--- relay.visit(expr, f): calls f(node) for every node in post order.
function relay.visit(expr, f)
  for _, n in ipairs(post_order(expr)) do f(n) end
end

-- ---- errors ---------------------------------------------------------------------------------

local WEIGHT_SUFFIX = { "_weight", "_bias", "_gamma", "_beta", "_moving_mean", "_moving_var", "_alpha" }
local function weight_var(call)
  local e = type(call.op) == "string" and ops.get(call.op)
  if not (e and e.weights) then return nil end
  for i = 2, #(call.args or {}) do
    local a = call.args[i]
    if a.kind == "var" then return a.name end
  end
  return nil
end

-- The layer a call belongs to: attrs.name, a weight var argument, or the nearest
-- upstream layer ("after <name>").
local function layer_of(op_name, args, attrs)
  if attrs and attrs.name then return tostring(attrs.name) end
  local w = weight_var({ op = op_name, args = args })
  if w then return w end
  local queue, seen, qi = {}, {}, 1
  for _, a in ipairs(args) do queue[#queue + 1] = a end
  while qi <= #queue and qi < 200 do
    local n = queue[qi]
    qi = qi + 1
    if not seen[n] then
      seen[n] = true
      if n.kind == "call" then
        local nm = (type(n.attrs) == "table" and n.attrs.name) or weight_var(n)
        if nm then return "after layer " .. nm end
      end
      for _, k in ipairs(kids(n)) do queue[#queue + 1] = k end
    end
  end
  if #args > 0 and args[1].kind == "var" then return "input " .. args[1].name end
  return nil
end
relay.layer_of = layer_of

local function type_error(op_name, args, attrs, msg, level)
  local layer = layer_of(op_name, args, attrs)
  local tys = {}
  for i, a in ipairs(args) do tys[i] = type_str(a.type) end
  if layer and not (layer:find("^after layer ") or layer:find("^input ")) then
    layer = "layer " .. layer
  end
  error(string.format("relay: %s%s: %s; argument types %s", op_name,
                      layer and (" (" .. layer .. ")") or "", msg, table.concat(tys, ", ")),
        level + 1)
end

-- ---- node constructors -----------------------------------------------------------------

local function normalize_type(ty, dtype, what, level)
  if ty == nil then return nil end
  if type(ty) ~= "table" then
    error(string.format("%s: type must be {shape = {...}, dtype = ...}, got %s", what, type(ty)), level + 1)
  end
  if ty.fields then return copy_type(ty) end
  local shape = ty.shape
  if shape == nil and (ty[1] ~= nil or next(ty) == nil) then shape = ty end
  if type(shape) ~= "table" then
    error(string.format("%s: type needs a shape list", what), level + 1)
  end
  local s = {}
  for i, d in ipairs(shape) do
    d = tonumber(d)
    if d == nil or d ~= math.floor(d) or d < 0 then
      error(string.format("%s: shape[%d] must be a non-negative integer, got %s", what, i,
                          tostring(shape[i])), level + 1)
    end
    s[i] = d
  end
  return { shape = s, dtype = ty.dtype or dtype or "float32" }
end

--- relay.var(name, {shape = {...}, dtype = "float32"}) or relay.var(name, {1, 3}, dtype);
--- relay.var(name) makes an untyped var (typed by its first weight use).
function relay.var(name, ty, dtype)
  if type(name) ~= "string" then error("relay.var: the name must be a string", 2) end
  return new_node { kind = "var", name = name, type = normalize_type(ty, dtype, "relay.var '" .. name .. "'", 2) }
end

--- relay.const(value, dtype): value a tl.nd array, a number (a scalar; float32 unless
--- dtype says otherwise) or a nested Lua list.
function relay.const(value, dtype)
  local arr
  if type(value) == "cdata" then
    arr = value
    if dtype and arr:dtype() ~= dtype then arr = arr:astype(dtype) end
  elseif type(value) == "number" or type(value) == "table" then
    arr = nd.array(value, dtype or "float32")
  else
    error("relay.const: expected a tl.nd array, a number or a list, got " .. type(value), 2)
  end
  return new_node { kind = "const", value = arr, type = { shape = arr:shape(), dtype = arr:dtype() } }
end

--- relay.tuple({a, b, ...})
function relay.tuple(fields)
  if type(fields) ~= "table" then error("relay.tuple: expected a list of nodes", 2) end
  local f, tys = {}, {}
  for i, x in ipairs(fields) do
    if not is_node(x) then error(string.format("relay.tuple: field %d is not a relay node", i), 2) end
    f[i] = x
    tys[i] = x.type
  end
  return new_node { kind = "tuple", fields = f, type = { fields = tys } }
end

--- relay.tuple_get(t, index): field `index` (0-based, as in TVM) of a tuple-typed node.
function relay.tuple_get(t, index)
  if not is_node(t) then error("relay.tuple_get: expected a relay node", 2) end
  local ty = t.type
  if not ty or not ty.fields then
    error(string.format("relay.tuple_get: %s is not a tuple (type %s)", t.kind, type_str(ty)), 2)
  end
  if type(index) ~= "number" or index < 0 or index >= #ty.fields then
    error(string.format("relay.tuple_get: index %s out of range for a %d-field tuple",
                        tostring(index), #ty.fields), 2)
  end
  if t.kind == "tuple" then
    -- still a TupleGetItem node (as TVM keeps it); passes may simplify it
  end
  return new_node { kind = "tuple_get", tuple = t, index = index, type = ty.fields[index + 1] }
end
relay.TupleGetItem = relay.tuple_get

-- Build a call: normalize attrs, type untyped weight vars, infer the output type.
local function make_call(op_name, args, attrs, level, normalized)
  local entry = ops.get(op_name)
  if not entry then error(string.format("relay: unknown op '%s'", tostring(op_name)), level + 1) end
  if type(args) ~= "table" then error(op_name .. ": expected a list of arguments", level + 1) end
  local a = ops.copy(attrs)
  if not normalized and entry.normalize then
    local ok, err = pcall(entry.normalize, a)
    if not ok then
      error(string.format("relay: %s%s: %s", op_name,
                          (a.name and (" (layer " .. tostring(a.name) .. ")") or ""), tostring(err)),
            level + 1)
    end
  end
  local argl, tys = {}, {}
  for i, x in ipairs(args) do
    if not is_node(x) then
      error(string.format("relay: %s: argument %d is not a relay node (got %s)", op_name, i, type(x)), level + 1)
    end
    argl[i] = x
  end
  for i, x in ipairs(argl) do
    if x.type == nil and x.kind == "var" then
      local f = entry.weights and entry.weights[i]
      local ty = f and argl[1] and is_tensor_type(argl[1].type) and f(a, argl[1].type)
      if not ty then
        type_error(op_name, argl, a, string.format("argument %d (%%%s) has no type and none can be inferred", i, x.name), level + 1)
      end
      rawset(x, "type", ty)
    end
    if not is_tensor_type(x.type) then
      type_error(op_name, argl, a, string.format("argument %d must be a tensor, got %s", i, type_str(x.type)), level + 1)
    end
    tys[i] = x.type
  end
  local ty, msg = ops.infer(entry, a, tys)
  if not ty then type_error(op_name, argl, a, msg, level + 1) end
  return new_node { kind = "call", op = op_name, args = argl, attrs = a, type = copy_type(ty) }
end

--- relay.call(op_name, args, attrs) -- the generic call builder.
function relay.call(op_name, args, attrs)
  local r_ = make_call(op_name, args, attrs, 2)
  return r_
end

-- Calls of a relay Function (fused groups): the type is the function's return type.
local function call_function(fn, args)
  return new_node { kind = "call", op = fn, args = args, attrs = {}, type = fn.type.ret }
end

--- relay.with_args(node, new_children) -> a node like `node` over new children
--- (call arguments, tuple fields, or {tuple} for tuple_get); types re-inferred.
function relay.with_args(n, new)
  local k = n.kind
  if k == "call" then
    if is_function(n.op) then return call_function(n.op, new) end
    local r_ = make_call(n.op, new, n.attrs, 2, true)
    return r_
  elseif k == "tuple" then
    return relay.tuple(new)
  elseif k == "tuple_get" then
    return relay.tuple_get(new[1], n.index)
  end
  return n
end

-- n over its children as rewritten in map (n itself when none changed).
local function rebuild(n, map)
  local ks = kids(n)
  if #ks == 0 then return n end
  local changed, new = false, {}
  for i, c in ipairs(ks) do
    new[i] = map[c]
    if new[i] ~= c then changed = true end
  end
  return changed and relay.with_args(n, new) or n
end

--- relay.mutate(expr, f) -> new expr, map: rebuilds the graph bottom-up (memoized: every
--- node once); f(node, old) gets each node with its children already rewritten and may
--- return a replacement (nil keeps it).
function relay.mutate(expr, f)
  local map = {}
  for _, n in ipairs(post_order(expr)) do
    local cur = rebuild(n, map)
    local r = f and f(cur, n, map)
    map[n] = r or cur
  end
  return map[expr], map
end

--- relay.mutate_pre(expr, f) -> new expr, map: like relay.mutate, but f(old, map) is
--- called first (map holds the rewritten children); when it returns nil the node is
--- rebuilt over its rewritten children.
function relay.mutate_pre(expr, f)
  local map = {}
  for _, n in ipairs(post_order(expr)) do
    map[n] = f(n, map) or rebuild(n, map)
  end
  return map[expr], map
end

-- ---- functions and modules ---------------------------------------------------------------

--- relay.Function(params, body[, attrs]): params a list of var nodes.
function relay.Function(params, body, attrs)
  if type(params) ~= "table" then error("relay.Function: params must be a list of vars", 2) end
  if not is_node(body) then error("relay.Function: body must be a relay node", 2) end
  local pt = {}
  for i, p in ipairs(params) do
    if not is_node(p) or p.kind ~= "var" then
      error(string.format("relay.Function: parameter %d is not a var", i), 2)
    end
    pt[i] = p.type
  end
  local bound = {}
  for _, p in ipairs(params) do bound[p] = true end
  for _, v in ipairs(relay.free_vars(body)) do
    if not bound[v] then
      error(string.format("relay.Function: the body uses %%%s, which is not a parameter", v.name), 2)
    end
  end
  return new_node { kind = "function", params = params, body = body, attrs = attrs or {},
                    type = { params = pt, ret = body.type } }
end

local Module = {}
Module.__index = Module

--- relay.Module(func_or_expr) -> mod with mod.main (an expression is wrapped in a
--- Function of its free vars).
function relay.Module(f)
  if not is_node(f) then error("relay.Module: expected a relay Function or expression", 2) end
  if not is_function(f) then f = relay.Function(relay.free_vars(f), f) end
  return setmetatable({ main = f }, Module)
end
relay.IRModule = relay.Module
function relay.is_module(m) return getmetatable(m) == Module end

--- mod:infer_type(): types are inferred when nodes are built; this re-checks the whole
--- program (rebuilding every call) and returns the module.
function Module:infer_type()
  local f = self.main
  local body = relay.mutate(f.body, function(n, old)
    if n == old and n.kind == "call" and not is_function(n.op) then
      local r_ = make_call(n.op, n.args, n.attrs, 2, true)
      return r_
    end
  end)
  return setmetatable({ main = relay.Function(f.params, body, f.attrs) }, Module)
end

--- Main function of a module, a function, or an expression (level: error level).
local function main_of(m, what, level)
  if getmetatable(m) == Module or (type(m) == "table" and not is_node(m) and is_function(m.main)) then
    return m.main, true
  end
  if is_function(m) then return m, false end
  if is_node(m) then return relay.Function(relay.free_vars(m), m), false end
  error(string.format("%s: expected a relay Module or Function, got %s", what, type(m)), level + 1)
end
relay.main_of = main_of

-- ---- params ----------------------------------------------------------------------------------

--- relay.bind_params(mod, params) -> mod: the vars named in params (name -> tl.nd array)
--- become constants; the remaining vars stay parameters.
function relay.bind_params(mod, params)
  local f, was_mod = main_of(mod, "relay.bind_params", 2)
  if type(params) ~= "table" then error("relay.bind_params: params must be a table name -> tl.nd array", 2) end
  local consts = {}
  for _, p in ipairs(f.params) do
    local v = params[p.name]
    if v ~= nil then
      local c = relay.const(v)
      if p.type and not types_equal(p.type, c.type) then
        error(string.format("relay.bind_params: param '%s' is %s but the value is %s", p.name,
                            type_str(p.type), type_str(c.type)), 2)
      end
      consts[p] = c
    end
  end
  local body = relay.mutate(f.body, function(n, old)
    if old.kind == "var" and consts[old] then return consts[old] end
  end)
  local rest = {}
  for _, p in ipairs(f.params) do if not consts[p] then rest[#rest + 1] = p end end
  local nf = relay.Function(rest, body, f.attrs)
  if was_mod then return relay.Module(nf) end
  return nf
end

-- ---- printing -------------------------------------------------------------------------------

local FLOAT_ATTRS = { epsilon = true, rate = true, alpha = true, a_min = true, a_max = true,
                      pad_value = true }

local function num_str(v, float)
  if v == math.huge then return float and "inff" or "inf" end
  if v == -math.huge then return float and "-inff" or "-inf" end
  local s
  if v == math.floor(v) and math.abs(v) < 1e15 then s = string.format("%d", v)
  else s = string.format("%.7g", v) end
  return float and (s .. "f") or s
end

local function attr_val(v, float)
  local t = type(v)
  if t == "number" then return num_str(v, float)
  elseif t == "boolean" then return v and "True" or "False"
  elseif t == "string" then return '"' .. v .. '"'
  elseif t == "table" then
    local p = {}
    for i, x in ipairs(v) do p[i] = attr_val(x, float) end
    return "[" .. table.concat(p, ", ") .. "]"
  end
  return tostring(v)
end

local function deep_eq(a, b)
  if type(a) ~= type(b) then
    if (a == true or a == false) and (b == 1 or b == 0) then return (a and 1 or 0) == b end
    if (b == true or b == false) and (a == 1 or a == 0) then return (b and 1 or 0) == a end
    return false
  end
  if type(a) ~= "table" then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do if not deep_eq(a[i], b[i]) then return false end end
  for k, v in pairs(a) do if not deep_eq(v, b[k]) then return false end end
  return true
end

local function attrs_str(op_name, attrs)
  local e = type(op_name) == "string" and ops.get(op_name)
  local parts, done = {}, { name = true }
  if e then
    for _, k in ipairs(e.attr_order) do
      done[k] = true
      local v = attrs[k]
      if v ~= nil and not deep_eq(v, e.defaults[k]) then
        parts[#parts + 1] = k .. "=" .. attr_val(v, FLOAT_ATTRS[k])
      end
    end
  end
  local rest = {}
  for k in pairs(attrs) do if not done[k] and type(k) == "string" then rest[#rest + 1] = k end end
  table.sort(rest)
  for _, k in ipairs(rest) do parts[#parts + 1] = k .. "=" .. attr_val(attrs[k], FLOAT_ATTRS[k]) end
  return parts
end

local function const_scalar_str(c)
  local v = c.value:flat()[1]
  local dt = c.type.dtype
  if dt == "float32" then return num_str(v, true) end
  if dt == "int32" then return num_str(v) end
  if dt == "bool" then return v and "True" or "False" end
  return num_str(v) .. dt:gsub("float", "f"):gsub("int", "i")
end

local function new_printer()
  return { n = 0, names = {}, consts = {}, nconst = 0 }
end

local print_function

local function ref(st, x)
  if x.kind == "var" then return "%" .. x.name end
  if x.kind == "const" then
    if #x.type.shape == 0 then return const_scalar_str(x) end
    local k = st.consts[x]
    if not k then
      k = st.nconst
      st.consts[x] = k
      st.nconst = k + 1
    end
    return string.format("meta[relay.Constant][%d]", k)
  end
  return st.names[x] or "?"
end

local function node_text(st, n)
  if n.kind == "call" then
    local p = {}
    for i, a in ipairs(n.args) do p[i] = ref(st, a) end
    if n.op == "concatenate" then
      p = { "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")") }
    end
    local head
    if is_function(n.op) then
      head = st.names[n.op] or "fn"
    else
      head = n.op
      for _, s in ipairs(attrs_str(n.op, n.attrs)) do p[#p + 1] = s end
    end
    return string.format("%s(%s)", head, table.concat(p, ", "))
  elseif n.kind == "tuple" then
    local p = {}
    for i, a in ipairs(n.fields) do p[i] = ref(st, a) end
    return "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")")
  elseif n.kind == "tuple_get" then
    return string.format("%s.%d", ref(st, n.tuple), n.index)
  end
  return ref(st, n)
end

local function ty_comment(ty)
  if ty and ty.shape and #ty.shape == 0 then return " /* ty=" .. ty.dtype .. " */" end
  return " /* ty=" .. type_str(ty) .. " */"
end

local function print_body(st, body, indent, out)
  for _, n in ipairs(post_order(body)) do
    if n.kind == "call" and is_function(n.op) and not st.names[n.op] then
      local name = "%" .. st.n
      st.n = st.n + 1
      local lines = {}
      print_function(st, n.op, nil, indent, lines)
      lines[1] = indent .. name .. " = " .. lines[1]:gsub("^%s*", "")
      lines[#lines] = lines[#lines] .. ";"
      for _, l in ipairs(lines) do out[#out + 1] = l end
      st.names[n.op] = name
    end
    if n.kind == "call" or n.kind == "tuple" or n.kind == "tuple_get" then
      local text = node_text(st, n) .. ty_comment(n.type)
      if n == body then
        out[#out + 1] = indent .. text
      else
        local name = "%" .. st.n
        st.n = st.n + 1
        st.names[n] = name
        out[#out + 1] = indent .. name .. " = " .. text .. ";"
      end
    end
  end
  if body.kind == "var" or body.kind == "const" then out[#out + 1] = indent .. ref(st, body) end
end

function print_function(st, f, fname, indent, out)
  local p = {}
  for i, v in ipairs(f.params) do p[i] = "%" .. v.name .. ": " .. type_str(v.type) end
  local keys = {}
  for k in pairs(f.attrs or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do p[#p + 1] = k .. "=" .. attr_val(f.attrs[k]) end
  out[#out + 1] = string.format("%s%s(%s) -> %s {", indent, fname and ("def " .. fname) or "fn ",
                                table.concat(p, ", "), type_str(f.type.ret))
  print_body(st, f.body, indent .. "  ", out)
  out[#out + 1] = indent .. "}"
end

--- relay.astext(mod_or_expr) -> text (TVM style; also tostring(mod), tostring(node)).
function relay.astext(x)
  local st, out = new_printer(), {}
  if getmetatable(x) == Module then
    print_function(st, x.main, "@main", "", out)
  elseif is_function(x) then
    print_function(st, x, nil, "", out)
  else
    print_body(st, x, "", out)
  end
  return table.concat(out, "\n")
end

Module.__tostring = function(m) return relay.astext(m) end
Node.__tostring = function(n) return relay.astext(n) end
Node.__index = function(n, k)
  if type(k) == "number" then
    local ty = rawget(n, "type")
    if ty and ty.fields then
      local cache = rawget(n, "_items")
      if not cache then
        cache = {}
        rawset(n, "_items", cache)
      end
      local r = cache[k]
      if not r then
        if k < 1 or k > #ty.fields then
          error(string.format("tuple index %d out of range (1..%d)", k, #ty.fields), 2)
        end
        r = relay.tuple_get(n, k - 1)
        cache[k] = r
      end
      return r
    end
    return nil
  end
  return methods[k]
end
function methods.astext(n) return relay.astext(n) end

-- ---- builders ----------------------------------------------------------------------------

local function builder(op_name, nargs)
  return function(...)
    local args, attrs = {}, nil
    local n = select("#", ...)
    for i = 1, n do
      local x = select(i, ...)
      if i <= nargs then args[i] = x
      elseif i == nargs + 1 then attrs = x end
    end
    if attrs ~= nil and type(attrs) ~= "table" then
      error(string.format("relay: %s: attributes must be a table, got %s", op_name, type(attrs)), 2)
    end
    for i = 1, nargs do
      if args[i] == nil then
        error(string.format("relay: %s takes %d argument%s, argument %d is missing", op_name, nargs,
                            nargs == 1 and "" or "s", i), 2)
      end
    end
    local r_ = make_call(op_name, args, attrs, 2)
    return r_
  end
end

local nnb = relay.nn
for _, n in ipairs { "conv2d", "conv3d", "conv2d_transpose", "dense", "batch_matmul", "bias_add",
                     "prelu" } do
  nnb[n] = builder("nn." .. n, 2)
end
nnb.batch_norm = builder("nn.batch_norm", 5)
for _, n in ipairs { "relu", "softmax", "log_softmax", "max_pool2d", "avg_pool2d", "max_pool3d",
                     "avg_pool3d", "global_avg_pool2d", "global_max_pool2d", "global_avg_pool3d",
                     "global_max_pool3d", "batch_flatten", "pad" } do
  nnb[n] = builder("nn." .. n, 1)
end
--- relay.nn.leaky_relu(x, {alpha = 0.01}) (or a number alpha)
function nnb.leaky_relu(x, a)
  if type(a) == "number" then a = { alpha = a } end
  local r_ = make_call("nn.leaky_relu", { x }, a, 2)
  return r_
end
--- relay.nn.dropout(x, {rate}) -> field 0 of the dropout call (as TVM's Python API).
function nnb.dropout(x, a)
  local c = make_call("nn.dropout", { x }, a, 2)
  return relay.tuple_get(c, 0)
end
nnb.dropout_raw = builder("nn.dropout", 1)
nnb.layout_transform = builder("layout_transform", 1)

for _, n in ipairs { "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                     "right_shift", "left_shift" } do
  relay[n] = builder(n, 2)
end
for _, n in ipairs { "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "negative", "abs",
                     "floor", "ceil", "round", "erf", "copy" } do
  relay[n] = builder(n, 1)
end
--- relay.clip(x, a_min, a_max) or relay.clip(x, {a_min, a_max})
function relay.clip(x, lo, hi)
  local a = type(lo) == "table" and lo or { a_min = lo, a_max = hi }
  local r_ = make_call("clip", { x }, a, 2)
  return r_
end
-- relay[op](x, v) of one attribute key: v is the attrs table when it is a table (that has
-- key, unless any_table), else the attribute's value.
local function one_attr_builder(op, key, any_table)
  return function(x, v)
    local a = (type(v) == "table" and (any_table or v[key])) and v or { [key] = v }
    local r_ = make_call(op, { x }, a, 2)
    return r_
  end
end
--- relay.cast(x, dtype)
relay.cast = one_attr_builder("cast", "dtype", true)
--- relay.reshape(x, newshape) (or {newshape = ...})
relay.reshape = one_attr_builder("reshape", "newshape")
--- relay.transpose(x[, axes])
relay.transpose = one_attr_builder("transpose", "axes")
--- relay.squeeze(x[, axis])
relay.squeeze = one_attr_builder("squeeze", "axis")
--- relay.expand_dims(x, axis[, num_newaxis])
function relay.expand_dims(x, axis, num)
  local a = type(axis) == "table" and axis or { axis = axis, num_newaxis = num }
  local r_ = make_call("expand_dims", { x }, a, 2)
  return r_
end
--- relay.concatenate({a, b, ...}, {axis}) (or a number axis). The call's args are the
--- tensors themselves (printed as a tuple).
function relay.concatenate(list, axis)
  if type(list) ~= "table" or is_node(list) then
    error("relay: concatenate: expected a list of nodes", 2)
  end
  local a = type(axis) == "table" and axis or { axis = axis }
  local r_ = make_call("concatenate", list, a, 2)
  return r_
end
--- relay.split(x, indices_or_sections, axis) or relay.split(x, {indices_or_sections, axis})
--- -> a tuple-typed call (index it: s[1], relay.tuple_get(s, 0)).
function relay.split(x, ios, axis)
  local a = (type(ios) == "table" and ios.indices_or_sections) and ios
            or { indices_or_sections = ios, axis = axis }
  local c = make_call("split", { x }, a, 2)
  return c
end
--- relay.layout_transform(x, src_layout, dst_layout)
function relay.layout_transform(x, src, dst)
  local a = type(src) == "table" and src or { src_layout = src, dst_layout = dst }
  local r_ = make_call("layout_transform", { x }, a, 2)
  return r_
end

-- ---- op registry access ---------------------------------------------------------------------

relay.op.get = ops.get
relay.op.list = ops.list
relay.op.register = ops.register

-- ---- passes -----------------------------------------------------------------------------

local PASSES = { "SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps", "ConvertLayout",
                 "DeadCodeElimination", "CanonicalizeOps", "AlterOpLayout", "SimplifyExpr", "EliminateCommonSubexpr" }
for _, p in ipairs(PASSES) do
  relay.transform[p] = function(...)
    local m = require("tunelua.relay.pass." .. p)
    return m.pass(...)
  end
end
relay.transform.InferType = function()
  return function(mod) return mod:infer_type() end
end

--- relay.transform.Sequential(list of passes[, {dump}]) -> pass
function relay.transform.Sequential(list, opts)
  return function(mod)
    for _, p in ipairs(list) do mod = p(mod) end
    return mod
  end
end

--- relay.optimize(mod, {target, params, dump, disabled = {PassName = true}}) -> mod, params
function relay.optimize(mod, opts)
  local r = require("tunelua.relay.pass.optimize").optimize(mod, opts or {})
  return r
end

--- relay.frontend.from_onnx(path_or_bytes, {shape = {name = dims}, dtype}) -> mod, params
--- (tunelua.relay.frontend.onnx; docs/onnx.md).
relay.frontend = {
  from_onnx = function(src, opts) local m, p = require("tunelua.relay.frontend.onnx").from_onnx(src, opts); return m, p end,
}

--- relay.quantize: tunelua.relay.quantize (qconfig, quantize; int8 post-training
--- quantization), loaded on first use.
relay.quantize = setmetatable({}, { __index = function(_, k)
  return require("tunelua.relay.quantize")[k]
end })

--- relay.build(mod, opts) forwards to the graph executor.
relay.build = function(mod, opts) return require("tunelua.graph.executor").build(mod, opts) end

relay.Node = Node
relay.ModuleMeta = Module
return relay
