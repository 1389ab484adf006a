--- tunelua.te: tensor expressions -- TVM's `te` in Lua idiom.
--
--   local te = require "tunelua.te"
--   local A = te.placeholder({n, l}, "float32", "A")
--   local B = te.placeholder({l, m}, "float32", "B")
--   local k = te.reduce_axis({0, l}, "k")
--   local C = te.compute({n, m}, function(i, j) return te.sum(A(i, k) * B(k, j), k) end, "C")
--
-- All tensors of a Lua state live in one shared compute DAG (`te.dag`, a
-- tl_dag* owned by this module); schedules and tasks work on the sub-DAG of
-- their outputs (`te.extract`). Errors are raised at the caller's level
-- (error(msg, 2)); messages come from libtunelua's checks and name the op
-- and what is wrong.
--
-- Objects and their fields (read-only; ids are the C ids, 0-based):
--   Tensor  t.dag (tl_dag* cdata), t.id (tensor id), t.op (Op), t.name,
--           t.dtype ("float32"...), t.shape (Lua list of numbers), t.ndim,
--           t.value_index (output index in its op, 0-based).
--           t(i, j) or t[{i, j}] is the element expression.
--   Op      op.dag, op.id (op index, topological), op.kind ("placeholder" |
--           "compute"), op.name, op.tag, op.axis (list of IterVar),
--           op.reduce_axis (list of IterVar), op.input_tensors (list of
--           Tensor, first-use order), op.num_outputs, op:output(k) (k 0-based
--           as in TVM), op.reducer ("sum", "max", "min", "prod", a custom
--           reducer's name, or nil), op:find_axis(iv) -> kind, index (1-based)
--           or nil: where an axis object sits in this op (use it to resolve
--           an axis against a stage: a reduce axis reused by several
--           computes belongs to each of them).
--   IterVar iv.dag, iv.var (uint32 var ref), iv.name, iv.kind ("spatial" |
--           "reduce"), iv.iter_kind (0 spatial, 1 reduce: the C TL_ITER_*),
--           iv.dom = {min = lo, extent = n}, iv.op (id of the first op using
--           it, nil before), iv.index (its position there, 0-based). An
--           IterVar is also an expression (iv.ref: the var, or var + lo for a
--           reduce axis declared over {lo, hi}).
--   Expr    e.ref (uint32 expression ref in te.dag), e.dtype; tostring(e)
--           prints it; e:astype(dtype) casts.
--   ComputeDAG (te.extract): d.dag (tl_dag* cdata, garbage-collected),
--           d.tensor_map[src tensor id] = new id, d:text(), d:workload_key(),
--           d:flop(), d:flop_ansor(), d.outputs (list of new tensor ids).
-- Lookups for other modules: te.tensor_from_id(id) (a Tensor of te.dag),
-- te.expr_from_ref(ref) (an Expr), te.ref_of(x) (the ref of an Expr,
-- IterVar or number), te.is_tensor/is_expr/is_itervar(x).
--
-- (Wrappers never tail-call a helper that raises at a given level: a tail
-- call would drop their frame and shift the reported position.)
--
-- Arithmetic: + - * with numbers on either side; / is floor division on
-- integers and true division on floats; % is floormod (integers only); ^ is
-- pow (floats); unary - negates. Explicit te.floordiv, te.floormod,
-- te.truncdiv, te.truncmod. Comparisons are functions (Lua's < must return
-- a boolean): te.lt/le/gt/ge/eq/ne; logic te.all/te.any/te.not_. A number
-- takes the dtype of the other operand (a non-integer with an integer
-- expression is an error: cast first); both operands must otherwise have one
-- dtype. Reductions (te.sum, te.max/te.min with an axis list, te.prod,
-- custom ones from te.comm_reducer) may only be the whole body of a compute.
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx, check = core.C, core.ctx, core.check

local te = {}

te.dag = ffi.gc(C.tl_dag_new(), C.tl_dag_free)
local dag = te.dag

local Expr, IterVar, Tensor, Op, Reduce, Reducer, ComputeDAG = {}, {}, {}, {}, {}, {}, {}

local tensors, ops, itervars = {}, {}, {}    -- caches: tensor id, op id, var ref -> object

local u32 = ffi.typeof("uint32_t[1]")
local int1 = ffi.typeof("int[1]")
local u32arr = ffi.typeof("uint32_t[?]")
local i64arr = ffi.typeof("int64_t[?]")
local intarr = ffi.typeof("int[?]")
local charpp = ffi.typeof("const char *[?]")

-- ---- dtypes -----------------------------------------------------------------

local dtype_codes = {}

local function dtype_code(name, level)
  if type(name) ~= "string" then
    error("dtype must be a string like \"float32\", got " .. type(name), level + 1)
  end
  local c = dtype_codes[name]
  if c then return c end
  local out = int1()
  check(C.tl_dtype_parse(ctx, name, out), level + 1)
  dtype_codes[name] = out[0]
  return out[0]
end

local function dtype_name(code) return ffi.string(C.tl_dtype_name(code)) end

local function is_int_dtype(dt)
  return dt:match("^u?int") ~= nil
end

-- ---- expressions ----------------------------------------------------------------

local function mkexpr(ref)
  ref = tonumber(ref)
  return setmetatable({ ref = ref, dtype = dtype_name(C.tl_dag_expr_dtype(dag, ref)) }, Expr)
end
te.expr_from_ref = mkexpr

local function is_expr(x)
  local mt = getmetatable(x)
  return mt == Expr or mt == IterVar
end

local function const_ref(v, dtype, level)
  local out = u32()
  if type(v) == "boolean" then
    check(C.tl_dag_const_int(ctx, dag, dtype_code("bool", level + 1), v and 1 or 0, out), level + 1)
  elseif dtype then
    local code = dtype_code(dtype, level + 1)
    if v == math.floor(v) and math.abs(v) < 2 ^ 53 and not dtype:match("^float") then
      check(C.tl_dag_const_int(ctx, dag, code, v, out), level + 1)
    else
      check(C.tl_dag_const_float(ctx, dag, code, v, out), level + 1)
    end
  elseif v == math.floor(v) and math.abs(v) < 2 ^ 31 then
    check(C.tl_dag_const_int(ctx, dag, dtype_code("int32", level + 1), v, out), level + 1)
  elseif v == math.floor(v) and math.abs(v) < 2 ^ 53 then
    check(C.tl_dag_const_int(ctx, dag, dtype_code("int64", level + 1), v, out), level + 1)
  else
    check(C.tl_dag_const_float(ctx, dag, dtype_code("float32", level + 1), v, out), level + 1)
  end
  return tonumber(out[0])
end

-- An expression ref for x (Expr, IterVar, number, boolean); level: error level.
local function ref_of(x, level)
  local mt = getmetatable(x)
  if mt == Expr or mt == IterVar then return x.ref end
  local tx = type(x)
  if tx == "number" or tx == "boolean" then return const_ref(x, nil, level + 1) end
  if mt == Tensor then
    error(string.format("tensor '%s' used as an expression; index it: %s(%s)", x.name, x.name,
                        x.ndim == 0 and "" or ("i" .. (x.ndim > 1 and ", ..." or ""))), level + 1)
  end
  if mt == Reduce then
    error("a reduction (sum, max, ...) may only be the whole body of a compute", level + 1)
  end
  error("expected an expression or a number, got " .. tx, level + 1)
end
te.ref_of = function(x) return ref_of(x, 2) end

local function binary(op, a, b, level)
  local ra, rb = ref_of(a, level + 1), ref_of(b, level + 1)
  local out = u32()
  check(C.tl_dag_binary(ctx, dag, op, ra, rb, out), level + 1)
  return mkexpr(out[0])
end

local function dtype_of_ref(r) return dtype_name(C.tl_dag_expr_dtype(dag, r)) end

local function both_int(a, b)
  local function isint(x)
    if type(x) == "number" then return x == math.floor(x) end
    if is_expr(x) then return is_int_dtype(dtype_of_ref(x.ref)) end
    return false
  end
  return isint(a) and isint(b)
end

local function call(name, args, level)
  local n = #args
  local refs = u32arr(n)
  for i = 1, n do refs[i - 1] = ref_of(args[i], level + 1) end
  local out = u32()
  check(C.tl_dag_call(ctx, dag, name, n, refs, out), level + 1)
  return mkexpr(out[0])
end

local NO_COMPARE = "compare expressions with te.lt/te.le/te.gt/te.ge (Lua's < and <= must return a boolean)"

local arith = {
  __add = function(a, b) local r = binary(C.TL_EXPR_ADD, a, b, 2); return r end,
  __sub = function(a, b) local r = binary(C.TL_EXPR_SUB, a, b, 2); return r end,
  __mul = function(a, b) local r = binary(C.TL_EXPR_MUL, a, b, 2); return r end,
  __div = function(a, b)
    local r = binary(both_int(a, b) and C.TL_EXPR_FLOORDIV or C.TL_EXPR_DIV, a, b, 2); return r
  end,
  __mod = function(a, b) local r = binary(C.TL_EXPR_FLOORMOD, a, b, 2); return r end,
  __pow = function(a, b) local r = call("pow", { a, b }, 2); return r end,
  __unm = function(a) local r = binary(C.TL_EXPR_SUB, 0, a, 2); return r end,
  __tostring = function(e) return ffi.string(C.tl_dag_expr_text(dag, e.ref)) end,
  __lt = function() error(NO_COMPARE, 2) end,
  __le = function() error(NO_COMPARE, 2) end,
}

local expr_methods = {}
function expr_methods.astype(e, dtype)
  local out = u32()
  check(C.tl_dag_cast(ctx, dag, dtype_code(dtype, 2), ref_of(e, 2), out), 2)
  return mkexpr(out[0])
end

for k, f in pairs(arith) do Expr[k], IterVar[k] = f, f end
Expr.__index = expr_methods
IterVar.__index = expr_methods

-- ---- axes ------------------------------------------------------------------------

local function new_itervar(var, name, kind, lo, extent, ref)
  local iv = setmetatable({
    dag = dag, var = var, name = name, kind = kind, iter_kind = kind == "reduce" and 1 or 0,
    dom = { min = lo, extent = extent }, ref = ref or var, dtype = "int32",
  }, IterVar)
  itervars[var] = iv
  return iv
end

--- A reduce axis over [lo, hi): te.reduce_axis({0, 64}, "k") or te.reduce_axis(64, "k").
function te.reduce_axis(dom, name)
  local lo, hi
  if type(dom) == "number" then
    lo, hi = 0, dom
  elseif type(dom) == "table" and type(dom[1]) == "number" and type(dom[2]) == "number" then
    lo, hi = dom[1], dom[2]
  else
    error("reduce_axis: the domain must be {lo, hi} or an extent", 2)
  end
  name = name or "k"
  if lo ~= math.floor(lo) or hi ~= math.floor(hi) then
    error(string.format("reduce axis '%s': bounds must be integers, got {%s, %s}", name, lo, hi), 2)
  end
  local out = u32()
  check(C.tl_dag_reduce_axis(ctx, dag, name, hi - lo, out), 2)
  local var = tonumber(out[0])
  local ref = var
  if lo ~= 0 then
    local r = u32()
    check(C.tl_dag_binary(ctx, dag, C.TL_EXPR_ADD, var, const_ref(lo, "int32", 2), r), 2)
    ref = tonumber(r[0])
  end
  return new_itervar(var, name, "reduce", lo, hi - lo, ref)
end

-- ---- tensors and ops ------------------------------------------------------------------

local function get_op(id)
  local op = ops[id]
  if op then return op end
  op = setmetatable({ dag = dag, id = id }, Op)
  ops[id] = op
  return op
end

local function get_tensor(id)
  local t = tensors[id]
  if t then return t end
  local ndim = C.tl_dag_tensor_ndim(dag, id)
  local sp = C.tl_dag_tensor_shape(dag, id)
  local shape = {}
  for i = 0, ndim - 1 do shape[i + 1] = tonumber(sp[i]) end
  t = setmetatable({
    dag = dag, id = id, name = ffi.string(C.tl_dag_tensor_name(dag, id)),
    dtype = dtype_name(C.tl_dag_tensor_dtype(dag, id)), shape = shape, ndim = ndim,
    value_index = C.tl_dag_tensor_index(dag, id), op = get_op(C.tl_dag_tensor_op(dag, id)),
  }, Tensor)
  tensors[id] = t
  return t
end
te.tensor_from_id = get_tensor

local function load(t, idx, level)
  local n = #idx
  local refs = u32arr(n)
  for i = 1, n do refs[i - 1] = ref_of(idx[i], level + 1) end
  local out = u32()
  check(C.tl_dag_load(ctx, dag, t.id, n, refs, out), level + 1)
  return mkexpr(out[0])
end

local tensor_methods = {}
Tensor.__call = function(t, ...) local r = load(t, { ... }, 2); return r end
Tensor.__index = function(t, k)
  if type(k) == "table" then local r = load(t, k, 2); return r end
  return tensor_methods[k]
end
Tensor.__tostring = function(t)
  return string.format("Tensor(%s, shape=[%s], %s)", t.name, table.concat(t.shape, ", "), t.dtype)
end
-- tensors are not expressions
local function no_arith() error("a tensor is not an expression; index it: A(i, j)", 2) end
for _, k in ipairs { "__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm" } do
  Tensor[k] = no_arith
end

local reducer_names = { [0] = nil, "sum", "max", "min", "prod" }

local op_fields = {}
function op_fields.kind(op)
  return C.tl_dag_op_kind(dag, op.id) == C.TL_DAG_PLACEHOLDER and "placeholder" or "compute"
end
function op_fields.name(op) return ffi.string(C.tl_dag_op_name(dag, op.id)) end
function op_fields.tag(op) return ffi.string(C.tl_dag_op_tag(dag, op.id)) end
function op_fields.num_outputs(op) return C.tl_dag_op_nout(dag, op.id) end
function op_fields.axis(op)
  local list = {}
  if op.kind ~= "compute" then return list end
  for i = 0, C.tl_dag_op_ndim(dag, op.id) - 1 do
    local var = tonumber(C.tl_dag_op_axis(dag, op.id, i))
    local iv = itervars[var] or new_itervar(var, ffi.string(C.tl_dag_var_name(dag, var)),
                                            "spatial", 0, tonumber(C.tl_dag_op_axis_extent(dag, op.id, i)))
    list[i + 1] = iv
  end
  return list
end
function op_fields.reduce_axis(op)
  local list = {}
  for i = 0, C.tl_dag_op_nreduce(dag, op.id) - 1 do
    local var = tonumber(C.tl_dag_op_reduce_axis(dag, op.id, i))
    local iv = itervars[var] or new_itervar(var, ffi.string(C.tl_dag_var_name(dag, var)),
                                            "reduce", 0, tonumber(C.tl_dag_op_reduce_extent(dag, op.id, i)))
    list[i + 1] = iv
  end
  return list
end
function op_fields.input_tensors(op)
  local list = {}
  for i = 0, C.tl_dag_op_ninputs(dag, op.id) - 1 do
    list[i + 1] = get_tensor(C.tl_dag_op_input(dag, op.id, i))
  end
  return list
end
function op_fields.reducer(op)
  local r = C.tl_dag_op_reducer(dag, op.id)
  if r == 0 then return nil end
  return op._reducer_name or reducer_names[r]
end

local op_methods = {}
function op_methods.output(op, k)
  local t = C.tl_dag_op_output(dag, op.id, k or 0)
  if t < 0 then error(string.format("op '%s' has no output %s", op.name, tostring(k)), 2) end
  return get_tensor(t)
end
function op_methods.find_axis(op, iv)
  if getmetatable(iv) ~= IterVar then return nil end
  for i, a in ipairs(op.axis) do
    if a.var == iv.var then return "spatial", i end
  end
  for i, a in ipairs(op.reduce_axis) do
    if a.var == iv.var or (a.orig and a.orig == iv.var) then return "reduce", i end
  end
  return nil
end

Op.__index = function(op, k)
  local f = op_fields[k]
  if f then
    local v = f(op)
    if k ~= "reducer" then rawset(op, k, v) end
    return v
  end
  return op_methods[k]
end
Op.__tostring = function(op) return string.format("Op(%s, %s)", op.kind, op.name) end

-- ---- placeholder and compute -------------------------------------------------------------

local function shape_array(what, name, shape, level)
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" then
    error(string.format("%s '%s': shape must be a list of extents, got %s", what, name, type(shape)),
          level + 1)
  end
  local n = #shape
  local arr = i64arr(n > 0 and n or 1)
  for i = 1, n do
    local v = shape[i]
    if getmetatable(v) == Expr or getmetatable(v) == IterVar then
      local cv = ffi.new("double[1]")
      if C.tl_dag_expr_is_const(dag, v.ref, cv) == 1 then v = cv[0] end
    end
    if type(v) ~= "number" or v ~= math.floor(v) then
      error(string.format("%s '%s': shape[%d] must be an integer, got %s", what, name, i,
                          tostring(v)), level + 1)
    end
    arr[i - 1] = v
  end
  return arr, n
end

--- te.placeholder(shape, dtype = "float32", name = "placeholder") -> Tensor
function te.placeholder(shape, dtype, name)
  name = name or "placeholder"
  local arr, n = shape_array("placeholder", name, shape, 2)
  local code = dtype_code(dtype or "float32", 2)
  local out = int1()
  check(C.tl_dag_placeholder(ctx, dag, name, n, arr, code, out), 2)
  return get_tensor(out[0])
end

-- Names of f's parameters if it takes exactly n of them (else i0, i1, ...).
local function axis_names(f, n, name, level)
  local info = debug.getinfo(f, "u")
  local names = {}
  if info.nparams == n then
    for i = 1, n do names[i] = debug.getlocal(f, i) end
  elseif not info.isvararg or info.nparams > n then
    error(string.format("compute '%s': the function takes %d argument%s, the shape has %d dimension%s",
                        name, info.nparams, info.nparams == 1 and "" or "s", n, n == 1 and "" or "s"),
          level + 1)
  else
    for i = 1, n do names[i] = "i" .. (i - 1) end
  end
  return names
end

--- te.compute(shape, fcompute, name = "compute", {tag = "", attrs = "<json object>"})
-- fcompute receives one axis per dimension and returns an expression, a
-- number, a reduction (te.sum ...) or a list of expressions (several
-- outputs: te.compute then returns one tensor per output).
function te.compute(shape, fcompute, name, opts)
  if type(name) == "table" and opts == nil then name, opts = nil, name end
  name = name or "compute"
  opts = opts or {}
  local arr, n = shape_array("compute", name, shape, 2)
  if type(fcompute) ~= "function" then
    error(string.format("compute '%s': expected a function, got %s", name, type(fcompute)), 2)
  end
  if opts.attrs ~= nil then
    if type(opts.attrs) ~= "string" then
      error(string.format("compute '%s': attrs must be JSON object text", name), 2)
    end
    local rc = C.tl_dag_set_attrs(ctx, dag, -1, opts.attrs)
    if rc ~= 0 then
      local msg = core.errmsg():gsub("^op '%?'", "op '" .. name .. "'")
      C.tl_clearerr(ctx)
      error(msg, 2)
    end
  end
  local names = axis_names(fcompute, n, name, 2)
  local axes, vars = {}, u32arr(n > 0 and n or 1)
  local int32 = dtype_code("int32", 2)
  for i = 1, n do
    local out = u32()
    check(C.tl_dag_var(ctx, dag, names[i], int32, out), 2)
    axes[i] = new_itervar(tonumber(out[0]), names[i], "spatial", 0, tonumber(arr[i - 1]))
    vars[i - 1] = axes[i].var
  end
  local body = fcompute(unpack(axes, 1, n))
  local reducer, nred, rvars, cond, red_name = 0, 0, nil, 0, nil
  local bodies
  if getmetatable(body) == Reduce then
    reducer, red_name = body.reducer, body.name
    nred = #body.axes
    rvars = u32arr(nred)
    for i = 1, nred do rvars[i - 1] = body.axes[i].var end
    if body.where ~= nil then cond = ref_of(body.where, 2) end
    bodies = { body.source }
  elseif type(body) == "table" and getmetatable(body) == nil then
    bodies = body
    if #bodies == 0 then
      error(string.format("compute '%s': the function returned an empty list", name), 2)
    end
    for i, b in ipairs(bodies) do
      if getmetatable(b) == Reduce then
        error(string.format("compute '%s': output %d is a reduction; a reduction has one output", name, i), 2)
      end
    end
  elseif body == nil then
    error(string.format("compute '%s': the function returned nothing", name), 2)
  else
    bodies = { body }
  end
  local nout = #bodies
  local brefs = u32arr(nout)
  for i = 1, nout do
    local ok, r = pcall(ref_of, bodies[i], 1)
    if not ok then error(string.format("compute '%s': %s", name, r), 2) end
    brefs[i - 1] = r
  end
  local outs = intarr(nout)
  check(C.tl_dag_compute(ctx, dag, name, opts.tag or "", n, arr, vars, nout, brefs, reducer, nred,
                         rvars, cond, outs), 2)
  local first = get_tensor(outs[0])
  local op = first.op
  op._reducer_name = red_name
  if opts.attrs then check(C.tl_dag_set_attrs(ctx, dag, op.id, opts.attrs), 2) end
  for i, iv in ipairs(axes) do
    iv.op, iv.index = op.id, i - 1
  end
  for i = 0, nred - 1 do
    local var = tonumber(C.tl_dag_op_reduce_axis(dag, op.id, i))
    local user = body.axes[i + 1]
    if var == user.var then
      if user.op == nil then user.op, user.index = op.id, i end
    else
      local iv = new_itervar(var, user.name, "reduce", user.dom.min, user.dom.extent)
      iv.orig, iv.op, iv.index = user.var, op.id, i
    end
  end
  if nout == 1 then return first end
  local res = {}
  for i = 1, nout do res[i] = get_tensor(outs[i - 1]) end
  return unpack(res, 1, nout)
end

-- ---- reductions ---------------------------------------------------------------------------

local function axis_list(axis, what, level)
  local list
  if getmetatable(axis) == IterVar then list = { axis }
  elseif type(axis) == "table" and getmetatable(axis) == nil then list = axis
  else error(what .. ": expected a reduce axis or a list of them", level + 1) end
  if #list == 0 then error(what .. ": no reduce axis", level + 1) end
  for i, a in ipairs(list) do
    if getmetatable(a) ~= IterVar or a.kind ~= "reduce" then
      error(string.format("%s: axis %d is not a reduce axis (make one with te.reduce_axis)", what, i),
            level + 1)
    end
  end
  return list
end

local function make_reduce(reducer, name, source, axis, opts, level)
  local list = axis_list(axis, name, level + 1)
  local src = mkexpr(ref_of(source, level + 1))
  return setmetatable({ reducer = reducer, name = name, source = src, axes = list,
                        where = opts and opts.where }, Reduce)
end

local function no_reduce_arith()
  error("a reduction (sum, max, ...) may only be the whole body of a compute", 2)
end
for _, k in ipairs { "__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm" } do
  Reduce[k] = no_reduce_arith
end
Reduce.__tostring = function(r)
  local names = {}
  for i, a in ipairs(r.axes) do names[i] = a.name end
  return string.format("%s(%s, axis=[%s])", r.name, tostring(r.source), table.concat(names, ", "))
end

local function is_axis_arg(b)
  return (getmetatable(b) == IterVar and b.kind == "reduce") or
         (type(b) == "table" and getmetatable(b) == nil)
end

--- te.sum(expr, axis_or_list, {where = cond})
function te.sum(expr, axis, opts)
  local r = make_reduce(C.TL_REDUCE_SUM, "sum", expr, axis, opts, 2)
  return r
end
--- te.prod(expr, axis_or_list, {where = cond})
function te.prod(expr, axis, opts)
  local r = make_reduce(C.TL_REDUCE_PROD, "prod", expr, axis, opts, 2)
  return r
end
--- te.max(a, b): elementwise; te.max(expr, axis_or_list, {where = cond}): a reduction.
function te.max(a, b, opts)
  if is_axis_arg(b) then local r = make_reduce(C.TL_REDUCE_MAX, "max", a, b, opts, 2); return r end
  local r = binary(C.TL_EXPR_MAX, a, b, 2); return r
end
--- te.min(a, b) or te.min(expr, axis_or_list, {where = cond}).
function te.min(a, b, opts)
  if is_axis_arg(b) then local r = make_reduce(C.TL_REDUCE_MIN, "min", a, b, opts, 2); return r end
  local r = binary(C.TL_EXPR_MIN, a, b, 2); return r
end

--- te.comm_reducer(fcombine(x, y), fidentity(dtype), name) -> a reducer used
-- like te.sum: r(expr, axis_or_list, {where = cond}). fcombine must be
-- commutative and associative; fidentity returns a number or a constant.
function te.comm_reducer(fcombine, fidentity, name)
  if type(fcombine) ~= "function" or type(fidentity) ~= "function" then
    error("comm_reducer: expected two functions (combine, identity)", 2)
  end
  return setmetatable({ fcombine = fcombine, fidentity = fidentity, name = name or "reducer",
                        handles = {} }, Reducer)
end

Reducer.__call = function(r, expr, axis, opts)
  local src = mkexpr(ref_of(expr, 2))
  local h = r.handles[src.dtype]
  if not h then
    local code = dtype_code(src.dtype, 2)
    local lv, rv = u32(), u32()
    check(C.tl_dag_var(ctx, dag, "x", code, lv), 2)
    check(C.tl_dag_var(ctx, dag, "y", code, rv), 2)
    local x, y = mkexpr(lv[0]), mkexpr(rv[0])
    local comb = ref_of(r.fcombine(x, y), 2)
    local id = r.fidentity(src.dtype)
    local idref = type(id) == "number" and const_ref(id, src.dtype, 2) or ref_of(id, 2)
    local out = int1()
    check(C.tl_dag_comm_reducer(ctx, dag, r.name, x.ref, y.ref, comb, idref, out), 2)
    h = out[0]
    r.handles[src.dtype] = h
  end
  local res = make_reduce(h, r.name, src, axis, opts, 2)
  return res
end
Reducer.__tostring = function(r) return "comm_reducer(" .. r.name .. ")" end

-- ---- expression functions -------------------------------------------------------------------

--- te.const(value, dtype): dtype defaults to int32 for integers, float32 otherwise.
function te.const(v, dtype)
  if type(v) ~= "number" and type(v) ~= "boolean" then
    error("const: expected a number or a boolean, got " .. type(v), 2)
  end
  return mkexpr(const_ref(v, dtype, 2))
end

local function binfn(op)
  return function(a, b) local r = binary(op, a, b, 2); return r end
end
te.floordiv = binfn(C.TL_EXPR_FLOORDIV)
te.floormod = binfn(C.TL_EXPR_FLOORMOD)
te.truncdiv = binfn(C.TL_EXPR_TRUNCDIV)
te.truncmod = binfn(C.TL_EXPR_TRUNCMOD)
te.div = binfn(C.TL_EXPR_DIV)
te.lt = binfn(C.TL_EXPR_LT)
te.le = binfn(C.TL_EXPR_LE)
te.gt = binfn(C.TL_EXPR_GT)
te.ge = binfn(C.TL_EXPR_GE)
te.eq = binfn(C.TL_EXPR_EQ)
te.ne = binfn(C.TL_EXPR_NE)
te.shift_left = binfn(C.TL_EXPR_SHL)
te.shift_right = binfn(C.TL_EXPR_SHR)
te.bitwise_and = binfn(C.TL_EXPR_BITAND)
te.bitwise_or = binfn(C.TL_EXPR_BITOR)
te.bitwise_xor = binfn(C.TL_EXPR_BITXOR)

--- te.all(c1, c2, ...) / te.any(...): logical and / or of bool expressions.
function te.all(...)
  local n = select("#", ...)
  if n == 0 then error("all: no arguments", 2) end
  local acc = ...
  if n == 1 then return mkexpr(ref_of(acc, 2)) end
  for i = 2, n do acc = binary(C.TL_EXPR_AND, acc, (select(i, ...)), 2) end
  return acc
end
function te.any(...)
  local n = select("#", ...)
  if n == 0 then error("any: no arguments", 2) end
  local acc = ...
  if n == 1 then return mkexpr(ref_of(acc, 2)) end
  for i = 2, n do acc = binary(C.TL_EXPR_OR, acc, (select(i, ...)), 2) end
  return acc
end
function te.not_(a)
  local out = u32()
  check(C.tl_dag_not(ctx, dag, ref_of(a, 2), out), 2)
  return mkexpr(out[0])
end

local function select_op(op)
  return function(c, a, b)
    local rc, ra, rb = ref_of(c, 2), ref_of(a, 2), ref_of(b, 2)
    local out = u32()
    check(C.tl_dag_select(ctx, dag, op, rc, ra, rb, out), 2)
    return mkexpr(out[0])
  end
end
--- te.select(cond, a, b): both sides evaluated; te.if_then_else: only the taken one.
te.select = select_op(C.TL_EXPR_SELECT)
te.if_then_else = select_op(C.TL_EXPR_IF_THEN_ELSE)

for _, name in ipairs { "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "fabs", "floor",
                        "ceil", "round", "erf" } do
  te[name] = function(x) local r = call(name, { x }, 2); return r end
end
function te.pow(a, b) local r = call("pow", { a, b }, 2); return r end
te.power = te.pow
--- te.abs: fabs on floats, select(x < 0, -x, x) on integers.
function te.abs(x)
  local e = mkexpr(ref_of(x, 2))
  if e.dtype:match("^float") then local r = call("fabs", { e }, 2); return r end
  if e.dtype:match("^uint") or e.dtype == "bool" then return e end
  return te.select(binary(C.TL_EXPR_LT, e, 0, 2), binary(C.TL_EXPR_SUB, 0, e, 2), e)
end

--- Lowest / highest finite value of a dtype, as a constant.
local limits = {
  float32 = { -3.4028234663852886e38, 3.4028234663852886e38 },
  float64 = { -1.7976931348623157e308, 1.7976931348623157e308 },
  float16 = { -65504, 65504 },
  int8 = { -128, 127 }, int16 = { -32768, 32767 }, int32 = { -2147483648, 2147483647 },
  uint8 = { 0, 255 }, bool = { 0, 1 },
}
function te.min_value(dtype)
  local l = limits[dtype]
  if not l then error("min_value: no limits known for dtype " .. tostring(dtype), 2) end
  return mkexpr(const_ref(l[1], dtype, 2))
end
function te.max_value(dtype)
  local l = limits[dtype]
  if not l then error("max_value: no limits known for dtype " .. tostring(dtype), 2) end
  return mkexpr(const_ref(l[2], dtype, 2))
end

-- ---- whole DAGs ------------------------------------------------------------------------------

ComputeDAG.__index = ComputeDAG

--- te.extract(tensors) -> ComputeDAG: the ops reachable from the output
-- tensors, copied into a fresh DAG (what schedules and tasks are made on).
function te.extract(outputs)
  if getmetatable(outputs) == Tensor then outputs = { outputs } end
  if type(outputs) ~= "table" or #outputs == 0 then
    error("extract: expected a tensor or a list of tensors", 2)
  end
  local n = #outputs
  local ids = intarr(n)
  for i, t in ipairs(outputs) do
    if getmetatable(t) ~= Tensor then error(string.format("extract: output %d is not a tensor", i), 2) end
    ids[i - 1] = t.id
  end
  local nt = C.tl_dag_num_tensors(dag)
  local map = intarr(nt > 0 and nt or 1)
  local out = ffi.new("tl_dag *[1]")
  check(C.tl_dag_extract(ctx, dag, ids, n, out, map), 2)
  local d = setmetatable({ dag = ffi.gc(out[0], C.tl_dag_free), tensor_map = {}, outputs = {} }, ComputeDAG)
  for i = 0, nt - 1 do
    if map[i] >= 0 then d.tensor_map[i] = map[i] end
  end
  for i = 0, C.tl_dag_num_outputs(d.dag) - 1 do d.outputs[i + 1] = C.tl_dag_output(d.dag, i) end
  return d
end

function ComputeDAG:text() return ffi.string(C.tl_dag_text(self.dag)) end
function ComputeDAG:workload_key() return ffi.string(C.tl_dag_key_text(self.dag)) end
function ComputeDAG:flop() return C.tl_dag_flop(self.dag) end
function ComputeDAG:flop_ansor() return C.tl_dag_flop_ansor(self.dag) end
ComputeDAG.__tostring = function(d) return d:text() end

--- Text of the whole shared DAG (every tensor made so far).
function te.dag_text() return ffi.string(C.tl_dag_text(dag)) end

te.Tensor, te.IterVar, te.Expr, te.Op = Tensor, IterVar, Expr, Op
function te.is_tensor(x) return getmetatable(x) == Tensor end
function te.is_expr(x) return is_expr(x) end
function te.is_itervar(x) return getmetatable(x) == IterVar end

--- te.create_schedule(C.op) or te.create_schedule({C1.op, C2.op}): a new
-- schedule (lua/tunelua/schedule.lua) over the sub-DAG that computes them.
function te.create_schedule(ops)
  local s = require("tunelua.schedule").create(ops)  -- not a tail call: keeps error positions
  return s
end

return te
