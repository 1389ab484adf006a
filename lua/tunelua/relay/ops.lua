--- tunelua.relay.ops: the relay operator registry.
--
--   local ops = require "tunelua.relay.ops"
--   local e = ops.get("nn.conv2d")
--   e.name, e.topi, e.pattern          -- "nn.conv2d", "conv2d", "out_elemwise_fusable"
--   local ta, tname = e.to_topi(attrs, arg_types)   -- topi attrs table and topi op name
--   local outs = e.compute(inputs, attrs, arg_types)  -- te tensors (on te.dag)
--
-- An entry describes one relay op: its topi operator, its fusion pattern
-- (TVM's relay pattern, from tl_topi_pattern unless relay differs: softmax
-- is out_elemwise_fusable, batch_norm and dropout opaque), its attributes
-- (defaults, print order, normalization of what the builder gets) and how
-- to emit it on a tl_dag. Type inference (ops.infer) emits the op on a
-- scratch dag holding placeholders of the argument types and reads the
-- output types back, so the topi operator's own checks are the type checks.
--
-- Entry fields:
--   name, topi (default topi op name), pattern (TL_PAT_* name in lower case:
--   "elemwise", "broadcast", "injective", "comm_reduce",
--   "out_elemwise_fusable", "opaque"), pattern_code (TL_PAT_* value),
--   attr_order (print order), defaults (attr -> default value),
--   normalize(attrs) (builder attrs -> stored attrs, in place),
--   to_topi(attrs, arg_types) -> topi_attrs, topi_name,
--   weights = {arg index = weight type function} (untyped var inference),
--   num_outputs (1, or n for tuple-typed ops: batch_norm 3, dropout 2),
--   emit(dag, ids, attrs, arg_types) -> list of output tensor ids (on a tl_dag).
local ffi = require "ffi"
local core = require "tunelua.core"

local C, ctx = core.C, core.ctx

local ops = {}
local registry = {}
ops.registry = registry

local PAT = { elemwise = 0, broadcast = 1, injective = 2, comm_reduce = 3,
              out_elemwise_fusable = 4, tuple = 7, opaque = 8 }
ops.PAT = PAT

-- ---- helpers ------------------------------------------------------------------------

local function copy(t)
  local r = {}
  for k, v in pairs(t or {}) do r[k] = v end
  return r
end
ops.copy = copy

local function rep(v, n, what)
  if v == nil then return nil end
  if type(v) == "number" then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if type(v) ~= "table" then error(string.format("%s must be a number or a list, got %s", what, type(v)), 0) end
  if #v == 1 and n > 1 then return rep(v[1], n, what) end
  local t = {}
  for i = 1, #v do t[i] = v[i] end
  return t
end
ops.rep = rep

-- padding of nd spatial dims: 1, nd or 2*nd values -> 2*nd (before..., after...)
local function norm_pad(v, nd, what)
  if v == nil then return nil end
  if type(v) == "number" then return rep(v, 2 * nd, what) end
  local n = #v
  if n == 1 then return rep(v[1], 2 * nd, what) end
  if n == nd then
    local t = {}
    for i = 1, nd do t[i], t[i + nd] = v[i], v[i] end
    return t
  end
  if n == 2 * nd then return copy(v) end
  error(string.format("%s must have 1, %d or %d values, got %d", what, nd, 2 * nd, n), 0)
end
ops.norm_pad = norm_pad

local function bool(v) return v == true or v == 1 end

local function tshape(ty) return ty.shape end

local function shape_str(s)
  local p = {}
  for i, d in ipairs(s) do p[i] = tostring(d) end
  return "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")")
end
ops.shape_str = shape_str

local function prod(s, a, b)
  local r = 1
  for i = a or 1, b or #s do r = r * s[i] end
  return r
end

-- ---- emitting on a dag -------------------------------------------------------------

local intarr = ffi.typeof("int[?]")
local int1 = ffi.typeof("int[1]")
local MAXOUT = 64

--- ops.topi_call(dag, name, ids (Lua list of tensor ids), attrs) -> list of ids, or
--- nil, message.
function ops.topi_call(dag, name, ids, attrs)
  local n = #ids
  local arr = intarr(n > 0 and n or 1)
  for i = 1, n do arr[i - 1] = ids[i] end
  local json = attrs and require("tunelua.topi").encode_attrs(attrs) or nil
  local outs, nout = intarr(MAXOUT), int1()
  local rc = C.tl_topi_op(ctx, dag, name, arr, n, json, outs, MAXOUT, nout)
  if rc ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    if msg == "" then msg = name .. ": error " .. tonumber(rc) end
    return nil, msg
  end
  local r = {}
  for i = 0, nout[0] - 1 do r[i + 1] = outs[i] end
  return r
end

local function default_emit(entry)
  return function(dag, ids, attrs, arg_types)
    local ta, tname = entry.to_topi(attrs, arg_types)
    return ops.topi_call(dag, tname or entry.topi, ids, ta)
  end
end

local topi_names
--- Is a topi operator available (tl_topi_list)?
function ops.topi_has(name)
  if not topi_names then
    topi_names = {}
    local i = 0
    while true do
      local p = C.tl_topi_list(i)
      if p == nil then break end
      topi_names[ffi.string(p)] = true
      i = i + 1
    end
  end
  return topi_names[name] == true
end

-- ---- registration --------------------------------------------------------------------

local function register(e)
  e.attr_order = e.attr_order or {}
  e.defaults = e.defaults or {}
  e.to_topi = e.to_topi or function() return {} end
  e.num_outputs = e.num_outputs or 1
  e.emit = e.emit or default_emit(e)
  if not e.pattern then
    local p = C.tl_topi_pattern(e.topi)
    e.pattern = p >= 0 and ffi.string(C.tl_topi_pattern_name(p)) or "opaque"
  end
  e.pattern_code = PAT[e.pattern]
  registry[e.name] = e
  return e
end
ops.register = register

--- ops.get(name) -> entry, or nil for an unknown op.
function ops.get(name) return registry[name] end

--- Names of every registered op (sorted).
function ops.list()
  local t = {}
  for k in pairs(registry) do t[#t + 1] = k end
  table.sort(t)
  return t
end

-- ---- convolutions ----------------------------------------------------------------------

-- Kernel shape from a layout string and its axes (O, I, spatial...).
local function kernel_shape(layout, O, I, ks)
  local s, si = {}, 1
  for i = 1, #layout do
    local ch = layout:sub(i, i)
    if ch == "O" then s[i] = O
    elseif ch == "I" then s[i] = I
    else s[i] = ks[si]; si = si + 1 end
  end
  return s
end

local function channel_axis(layout)
  return (layout:find("C", 1, true))
end

local function conv_weight(nd)
  return function(attrs, data_ty)
    local ks = attrs.kernel_size
    if not attrs.channels or not ks then return nil end
    local C = data_ty.shape[channel_axis(attrs.data_layout)]
    if not C then return nil end
    local g = attrs.groups or 1
    return { shape = kernel_shape(attrs.kernel_layout, attrs.channels, math.floor(C / g), ks), dtype = data_ty.dtype }
  end
end

local function conv_normalize(nd, dl, kl)
  return function(a)
    a.strides = rep(a.strides or 1, nd, "strides")
    a.padding = norm_pad(a.padding or 0, nd, "padding")
    a.dilation = rep(a.dilation or 1, nd, "dilation")
    if a.kernel_size then a.kernel_size = rep(a.kernel_size, nd, "kernel_size") end
    if a.output_padding then a.output_padding = rep(a.output_padding, nd, "output_padding") end
    a.groups = a.groups or 1
    a.data_layout = a.data_layout or a.layout or dl
    a.layout = nil
    if not a.kernel_layout then
      if a.data_layout == "NHWC" then a.kernel_layout = "HWIO"
      elseif a.data_layout == "NDHWC" then a.kernel_layout = "DHWIO"
      else a.kernel_layout = kl end
    end
  end
end

local conv_order = { "strides", "padding", "output_padding", "dilation", "groups", "channels",
                     "kernel_size", "data_layout", "kernel_layout", "out_layout", "out_dtype" }

-- Is this a depthwise conv2d (groups == input channels == output channels / multiplier 1)?
function ops.is_depthwise(attrs, data_ty, w_ty)
  local g = attrs.groups or 1
  if g == 1 then return false end
  local C = data_ty.shape[channel_axis(attrs.data_layout)]
  local kl = attrs.kernel_layout
  local O = w_ty.shape[kl:find("O", 1, true)]
  return C == g and O == g
end

local function conv2d_to_topi(attrs, t)
  local dl, kl = attrs.data_layout, attrs.kernel_layout
  local a = { strides = attrs.strides, padding = attrs.padding, dilation = attrs.dilation,
              groups = attrs.groups, layout = dl }
  if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
  local dw = t and t[1] and t[2] and ops.is_depthwise(attrs, t[1], t[2])
  if dl == "NCHW" and kl == "OIHW" then
    if dw and t[2].shape[2] == 1 then a.groups = nil; return a, "depthwise_conv2d" end
    return a, "conv2d"
  elseif dl == "NHWC" and kl == "HWOI" then
    a.groups = nil
    return a, "depthwise_conv2d"
  elseif dl == "NHWC" and kl == "HWIO" then
    return a, "conv2d"
  elseif dl:match("^NCHW%d+n%d+c$") and kl:match("^OIHW%d+o%d+i$") then
    a.layout, a.data_layout, a.kernel_layout = nil, dl, kl   -- VTA's blocked layouts
    return a, "conv2d_packed"
  end
  error(string.format("data_layout %s with kernel_layout %s is not supported (NCHW/OIHW, NHWC/HWIO, NHWC/HWOI, NCHW<b>n<c>c/OIHW<o>o<i>i)", dl, kl), 0)
end

register {
  name = "nn.conv2d", topi = "conv2d", pattern = "out_elemwise_fusable",
  attr_order = conv_order,
  defaults = { strides = { 1, 1 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 }, groups = 1,
               data_layout = "NCHW", kernel_layout = "OIHW", out_layout = "", out_dtype = "" },
  normalize = conv_normalize(2, "NCHW", "OIHW"),
  weights = { [2] = conv_weight(2) },
  to_topi = conv2d_to_topi,
}

-- The channel-blocked forms AlterOpLayout gives x86 convolutions (TVM's contrib ops):
-- data NCHW[ib]c, kernel OIHW[ob]o (5-D), output NCHW[ob]c; topi's conv2d_NCHWc /
-- depthwise_conv2d_NCHWc (core/topi/nchwc.c). The layouts are attributes for printing;
-- the blocks are the operands' last dims.
for _, v in ipairs { { "nn.contrib_conv2d_NCHWc", "conv2d_NCHWc" },
                     { "nn.contrib_depthwise_conv2d_NCHWc", "depthwise_conv2d_NCHWc" } } do
  register {
    name = v[1], topi = v[2], pattern = "out_elemwise_fusable",
    attr_order = { "strides", "padding", "dilation", "data_layout", "kernel_layout", "out_layout",
                   "out_dtype" },
    defaults = { strides = { 1, 1 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 }, out_dtype = "" },
    normalize = function(a)
      a.strides = rep(a.strides or 1, 2, "strides")
      a.padding = norm_pad(a.padding or 0, 2, "padding")
      a.dilation = rep(a.dilation or 1, 2, "dilation")
    end,
    to_topi = function(attrs)
      local a = { strides = attrs.strides, padding = attrs.padding, dilation = attrs.dilation }
      if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
      return a, v[2]
    end,
  }
end

register {
  name = "nn.conv3d", topi = "conv3d", pattern = "out_elemwise_fusable",
  attr_order = conv_order,
  defaults = { strides = { 1, 1, 1 }, padding = { 0, 0, 0, 0, 0, 0 }, dilation = { 1, 1, 1 },
               groups = 1, data_layout = "NCDHW", kernel_layout = "OIDHW", out_layout = "",
               out_dtype = "" },
  normalize = conv_normalize(3, "NCDHW", "OIDHW"),
  weights = { [2] = conv_weight(3) },
  to_topi = function(attrs)
    local a = { strides = attrs.strides, padding = attrs.padding, dilation = attrs.dilation,
                groups = attrs.groups, layout = attrs.data_layout,
                kernel_layout = attrs.kernel_layout }
    if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
    return a, "conv3d"
  end,
}

register {
  name = "nn.conv2d_transpose", topi = "conv2d_transpose", pattern = "out_elemwise_fusable",
  attr_order = conv_order,
  defaults = { strides = { 1, 1 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 }, groups = 1,
               output_padding = { 0, 0 }, data_layout = "NCHW", kernel_layout = "IOHW",
               out_layout = "", out_dtype = "" },
  normalize = function(a)
    conv_normalize(2, "NCHW", "IOHW")(a)
    a.output_padding = a.output_padding or { 0, 0 }
  end,
  weights = { [2] = function(attrs, data_ty)
    local ks = attrs.kernel_size
    if not attrs.channels or not ks then return nil end
    local C = data_ty.shape[2]
    return { shape = { C, math.floor(attrs.channels / (attrs.groups or 1)), ks[1], ks[2] }, dtype = data_ty.dtype }
  end },
  to_topi = function(attrs)
    if attrs.data_layout ~= "NCHW" or attrs.kernel_layout ~= "IOHW" then
      error(string.format("data_layout %s with kernel_layout %s is not supported (NCHW/IOHW)",
                          attrs.data_layout, attrs.kernel_layout), 0)
    end
    local a = { strides = attrs.strides, padding = attrs.padding, dilation = attrs.dilation,
                groups = attrs.groups, output_padding = attrs.output_padding, layout = "NCHW" }
    if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
    return a, "conv2d_transpose"
  end,
}

register {
  name = "nn.dense", topi = "dense", pattern = "out_elemwise_fusable",
  attr_order = { "units", "out_dtype" }, defaults = { out_dtype = "" },
  weights = { [2] = function(attrs, data_ty)
    if not attrs.units then return nil end
    return { shape = { attrs.units, data_ty.shape[#data_ty.shape] }, dtype = data_ty.dtype }
  end },
  to_topi = function(attrs, t)
    if attrs.units and t and t[2] and t[2].shape[1] ~= attrs.units then
      error(string.format("units=%d but the weight has %d rows", attrs.units, t[2].shape[1]), 0)
    end
    local a = {}
    if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
    return a, "dense"
  end,
}

register {
  name = "nn.batch_matmul", topi = "batch_matmul", pattern = "out_elemwise_fusable",
  attr_order = { "out_dtype", "transpose_a", "transpose_b" },
  defaults = { out_dtype = "", transpose_a = false, transpose_b = true },
  normalize = function(a)
    if a.transpose_a == nil then a.transpose_a = false end
    if a.transpose_b == nil then a.transpose_b = true end
  end,
  to_topi = function(attrs)
    local a = { transpose_a = bool(attrs.transpose_a) and 1 or 0,
                transpose_b = bool(attrs.transpose_b) and 1 or 0 }
    if attrs.out_dtype and attrs.out_dtype ~= "" then a.out_dtype = attrs.out_dtype end
    return a
  end,
}

-- ---- per-channel ops -------------------------------------------------------------------------

local function chan_vec(idx)
  return function(attrs, data_ty)
    local n = #data_ty.shape
    local ax = attrs.axis or 1
    if ax < 0 then ax = ax + n end
    local c = data_ty.shape[ax + 1]
    if not c then return nil end
    return { shape = { c }, dtype = data_ty.dtype }
  end
end

register {
  name = "nn.bias_add", topi = "bias_add", attr_order = { "axis" }, defaults = { axis = 1 },
  normalize = function(a) a.axis = a.axis or 1 end,
  weights = { [2] = chan_vec() },
  to_topi = function(attrs) return { axis = attrs.axis } end,
}

register {
  name = "nn.batch_norm", topi = "batch_norm", pattern = "opaque", num_outputs = 3,
  attr_order = { "axis", "epsilon", "center", "scale" },
  defaults = { axis = 1, epsilon = 1e-5, center = true, scale = true },
  normalize = function(a)
    a.axis = a.axis or 1
    a.epsilon = a.epsilon or 1e-5
    if a.center == nil then a.center = true end
    if a.scale == nil then a.scale = true end
  end,
  weights = { [2] = chan_vec(), [3] = chan_vec(), [4] = chan_vec(), [5] = chan_vec() },
  to_topi = function(attrs)
    return { axis = attrs.axis, epsilon = attrs.epsilon, center = bool(attrs.center) and 1 or 0,
             scale = bool(attrs.scale) and 1 or 0 }
  end,
  emit = function(dag, ids, attrs, t)
    local e = registry["nn.batch_norm"]
    local r, msg = ops.topi_call(dag, "batch_norm", ids, e.to_topi(attrs, t))
    if not r then return nil, msg end
    local m = ops.topi_call(dag, "identity", { ids[4] })
    local v = ops.topi_call(dag, "identity", { ids[5] })
    return { r[1], m[1], v[1] }
  end,
}

register {
  name = "nn.prelu", topi = "prelu", pattern = "broadcast", attr_order = { "axis" },
  defaults = { axis = 1 },
  normalize = function(a) a.axis = a.axis or 1 end,
  weights = { [2] = chan_vec() },
  -- prelu(x, alpha) = relu(x) + alpha[axis] * min(x, 0), composed of topi ops
  emit = function(dag, ids, attrs, t)
    local n = #t[1].shape
    local ax = attrs.axis < 0 and attrs.axis + n or attrs.axis
    if not t[2] or #t[2].shape ~= 1 or t[2].shape[1] ~= t[1].shape[ax + 1] then
      return nil, string.format("prelu: alpha must have shape (%s,), got %s",
                                tostring(t[1].shape[ax + 1]), t[2] and shape_str(t[2].shape) or "?")
    end
    local pos = ops.topi_call(dag, "relu", { ids[1] })
    local neg = ops.topi_call(dag, "negative", { ids[1] })
    neg = ops.topi_call(dag, "relu", { neg[1] })
    neg = ops.topi_call(dag, "negative", { neg[1] })
    local ex = { ids[2] }
    if n - ax - 1 > 0 then
      ex = ops.topi_call(dag, "expand_dims", { ids[2] }, { axis = 1, num_newaxis = n - ax - 1 })
    end
    local m = ops.topi_call(dag, "multiply", { neg[1], ex[1] })
    return ops.topi_call(dag, "add", { pos[1], m[1] })
  end,
}

-- ---- activations, element-wise -----------------------------------------------------------

local function unary(name, topi_name, extra)
  local e = { name = name, topi = topi_name or name }
  for k, v in pairs(extra or {}) do e[k] = v end
  return register(e)
end

unary("nn.relu", "relu")
unary("nn.leaky_relu", "leaky_relu", {
  attr_order = { "alpha" }, defaults = { alpha = 0.01 },
  normalize = function(a) a.alpha = a.alpha or 0.01 end,
  to_topi = function(attrs) return { alpha = attrs.alpha } end })
for _, n in ipairs { "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "negative", "abs",
                     "floor", "ceil", "round", "erf" } do
  unary(n)
end
unary("copy", "identity")
-- a fusion boundary (TVM's annotation.stop_fusion): the identity, in a group of its own
unary("annotation.stop_fusion", "identity", { pattern = "opaque" })
unary("clip", "clip", {
  attr_order = { "a_min", "a_max" },
  to_topi = function(attrs) return { a_min = attrs.a_min, a_max = attrs.a_max } end })
unary("cast", "cast", {
  attr_order = { "dtype" },
  to_topi = function(attrs) return { dtype = attrs.dtype } end })

for _, n in ipairs { "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                     "right_shift", "left_shift" } do
  register { name = n, topi = n }
end

register {
  name = "nn.dropout", topi = "identity", pattern = "opaque", num_outputs = 2,
  attr_order = { "rate" }, defaults = { rate = 0.5 },
  normalize = function(a) a.rate = a.rate or 0.5 end,
  emit = function(dag, ids)
    local r = ops.topi_call(dag, "identity", ids)
    local m = ops.topi_call(dag, "identity", ids)
    return { r[1], m[1] }
  end,
}

register {
  name = "nn.softmax", topi = "softmax", pattern = "out_elemwise_fusable",
  attr_order = { "axis" }, defaults = { axis = -1 },
  normalize = function(a) a.axis = a.axis or -1 end,
  to_topi = function(attrs) return { axis = attrs.axis } end,
}
register {
  name = "nn.log_softmax", topi = "log_softmax", pattern = "opaque",
  attr_order = { "axis" }, defaults = { axis = -1 },
  normalize = function(a) a.axis = a.axis or -1 end,
  to_topi = function(attrs) return { axis = attrs.axis } end,
}

-- ---- pooling ------------------------------------------------------------------------------

local function pool(name, nd, kind, layout)
  local order = { "pool_size", "strides", "dilation", "padding", "layout", "out_layout", "ceil_mode" }
  local defaults = { strides = rep(1, nd), dilation = rep(1, nd), padding = rep(0, 2 * nd),
                     layout = layout, out_layout = "", ceil_mode = false }
  if kind == "avg" then
    order[#order + 1] = "count_include_pad"
    defaults.count_include_pad = false
  end
  register {
    name = name, topi = nd == 2 and "pool2d" or "pool3d", pattern = "out_elemwise_fusable",
    attr_order = order, defaults = defaults,
    normalize = function(a)
      if a.pool_size == nil then error("pool_size is required", 0) end
      a.pool_size = rep(a.pool_size, nd, "pool_size")
      a.strides = rep(a.strides or 1, nd, "strides")
      a.dilation = rep(a.dilation or 1, nd, "dilation")
      a.padding = norm_pad(a.padding or 0, nd, "padding")
      a.layout = a.layout or layout
      if a.ceil_mode == nil then a.ceil_mode = false end
      if kind == "avg" and a.count_include_pad == nil then a.count_include_pad = false end
    end,
    to_topi = function(attrs)
      return { kernel = attrs.pool_size, strides = attrs.strides, dilation = attrs.dilation,
               padding = attrs.padding, layout = attrs.layout, pool_type = kind,
               ceil_mode = bool(attrs.ceil_mode) and 1 or 0,
               count_include_pad = bool(attrs.count_include_pad) and 1 or 0 },
             nd == 2 and "pool2d" or "pool3d"
    end,
  }
end
pool("nn.max_pool2d", 2, "max", "NCHW")
pool("nn.avg_pool2d", 2, "avg", "NCHW")
pool("nn.max_pool3d", 3, "max", "NCDHW")
pool("nn.avg_pool3d", 3, "avg", "NCDHW")

for _, k in ipairs { "avg", "max" } do
  register {
    name = "nn.global_" .. k .. "_pool2d", topi = "global_pool", pattern = "out_elemwise_fusable",
    attr_order = { "layout", "out_layout" }, defaults = { layout = "NCHW", out_layout = "" },
    normalize = function(a) a.layout = a.layout or "NCHW" end,
    to_topi = function(attrs) return { pool_type = k, layout = attrs.layout } end,
  }
  register {
    name = "nn.global_" .. k .. "_pool3d", topi = "global_pool3d", pattern = "out_elemwise_fusable",
    attr_order = { "layout", "out_layout" }, defaults = { layout = "NCDHW", out_layout = "" },
    normalize = function(a) a.layout = a.layout or "NCDHW" end,
    to_topi = function(attrs) return { pool_type = k, layout = attrs.layout } end,
  }
end

-- ---- transforms -------------------------------------------------------------------------

register {
  name = "nn.batch_flatten", topi = "flatten", pattern = "injective",
  to_topi = function() return { axis = 1 } end,
}

register {
  name = "nn.pad", topi = "pad", pattern = "injective",
  attr_order = { "pad_width", "pad_value", "pad_mode" },
  defaults = { pad_value = 0, pad_mode = "constant" },
  normalize = function(a)
    a.pad_value = a.pad_value or 0
    a.pad_mode = a.pad_mode or "constant"
  end,
  to_topi = function(attrs, t)
    if attrs.pad_mode ~= "constant" then error("only pad_mode=\"constant\" is supported", 0) end
    local pw = attrs.pad_width
    if type(pw) ~= "table" then error("pad_width must be a list of {before, after} pairs", 0) end
    if t and t[1] and #pw ~= #t[1].shape then
      error(string.format("pad_width has %d pairs for a %d-D input", #pw, #t[1].shape), 0)
    end
    local b, af = {}, {}
    for i, p in ipairs(pw) do
      if type(p) == "number" then b[i], af[i] = p, p else b[i], af[i] = p[1], p[2] end
    end
    return { pad_before = b, pad_after = af, pad_value = attrs.pad_value }
  end,
}

-- relay reshape's newshape (0 copy, -1 infer, -2 copy the rest, -3 merge two, -4 split)
-- -> a concrete shape
function ops.reshape_shape(inshape, newshape)
  local out, i, j = {}, 1, 1
  local infer_at
  while j <= #newshape do
    local v = newshape[j]
    if v > 0 then out[#out + 1] = v; i = i + 1
    elseif v == 0 then
      if not inshape[i] then error("reshape: newshape 0 at a position past the input's rank", 0) end
      out[#out + 1] = inshape[i]; i = i + 1
    elseif v == -1 then
      if infer_at then error("reshape: more than one -1 in newshape", 0) end
      out[#out + 1] = -1; infer_at = #out; i = i + 1
    elseif v == -2 then
      while i <= #inshape do out[#out + 1] = inshape[i]; i = i + 1 end
    elseif v == -3 then
      out[#out + 1] = inshape[i] * inshape[i + 1]; i = i + 2
    elseif v == -4 then
      local a, b = newshape[j + 1], newshape[j + 2]
      local d = inshape[i]
      if a == -1 then a = math.floor(d / b) elseif b == -1 then b = math.floor(d / a) end
      out[#out + 1] = a; out[#out + 1] = b; i = i + 1; j = j + 2
    else
      error("reshape: invalid newshape value " .. tostring(v), 0)
    end
    j = j + 1
  end
  if infer_at then
    local known = 1
    for k, d in ipairs(out) do if k ~= infer_at then known = known * d end end
    out[infer_at] = known > 0 and math.floor(prod(inshape) / known) or 0
  end
  return out
end

register {
  name = "reshape", topi = "reshape", attr_order = { "newshape" },
  to_topi = function(attrs, t)
    if not t or not t[1] then return { newshape = attrs.newshape } end
    return { newshape = ops.reshape_shape(t[1].shape, attrs.newshape) }
  end,
}
register {
  name = "transpose", topi = "transpose", attr_order = { "axes" },
  to_topi = function(attrs) return { axes = attrs.axes } end,
}
register {
  name = "squeeze", topi = "squeeze", attr_order = { "axis" },
  normalize = function(a) if type(a.axis) == "number" then a.axis = { a.axis } end end,
  to_topi = function(attrs) return { axis = attrs.axis } end,
}
register {
  name = "expand_dims", topi = "expand_dims", attr_order = { "axis", "num_newaxis" },
  defaults = { num_newaxis = 1 },
  normalize = function(a) a.num_newaxis = a.num_newaxis or 1 end,
  to_topi = function(attrs) return { axis = attrs.axis, num_newaxis = attrs.num_newaxis } end,
}
register {
  name = "concatenate", topi = "concatenate", attr_order = { "axis" }, defaults = { axis = 0 },
  normalize = function(a) a.axis = a.axis or 0 end,
  to_topi = function(attrs) return { axis = attrs.axis } end,
}
register {
  name = "split", topi = "split", tuple_out = true, attr_order = { "indices_or_sections", "axis" },
  defaults = { axis = 0 },
  normalize = function(a) a.axis = a.axis or 0 end,
  to_topi = function(attrs) return { indices_or_sections = attrs.indices_or_sections, axis = attrs.axis } end,
}
register {
  name = "layout_transform", topi = "layout_transform", attr_order = { "src_layout", "dst_layout" },
  to_topi = function(attrs) return { src_layout = attrs.src_layout, dst_layout = attrs.dst_layout } end,
}

-- ---- inference on a scratch dag -----------------------------------------------------------

local i64arr = ffi.typeof("int64_t[?]")
local dtype_codes = {}
local function dtype_code(name)
  local c = dtype_codes[name]
  if c then return c end
  local out = int1()
  if C.tl_dtype_parse(ctx, name, out) ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    error(msg, 0)
  end
  dtype_codes[name] = out[0]
  return out[0]
end

local function placeholder(dag, ty, name)
  local n = #ty.shape
  local arr = i64arr(n > 0 and n or 1)
  for i = 1, n do arr[i - 1] = ty.shape[i] end
  local out = int1()
  if C.tl_dag_placeholder(ctx, dag, name, n, arr, dtype_code(ty.dtype), out) ~= 0 then
    local msg = ffi.string(C.tl_errmsg(ctx))
    C.tl_clearerr(ctx)
    error(msg, 0)
  end
  return out[0]
end

local function read_type(dag, id)
  local n = C.tl_dag_tensor_ndim(dag, id)
  local p = C.tl_dag_tensor_shape(dag, id)
  local s = {}
  for i = 0, n - 1 do s[i + 1] = tonumber(p[i]) end
  return { shape = s, dtype = ffi.string(C.tl_dtype_name(C.tl_dag_tensor_dtype(dag, id))) }
end

--- ops.emit_typed(dag, entry, attrs, arg_types, ids) -> out ids or nil, msg (wraps errors)
function ops.emit(dag, entry, attrs, arg_types, ids)
  local ok, r, msg = pcall(entry.emit, dag, ids, attrs, arg_types)
  if not ok then return nil, tostring(r) end
  return r, msg
end

local cache, cache_n = {}, 0

--- ops.infer(entry, attrs, arg_types) -> output type ({shape, dtype} or {fields = ...}),
--- or nil, message (the topi operator's message).
function ops.infer(entry, attrs, arg_types)
  local enc = require("tunelua.topi").encode_attrs
  local parts = { entry.name }
  local a = copy(attrs)
  a.name = nil
  local ok, ea = pcall(enc, a)
  if ok then
    parts[2] = ea
    for i, t in ipairs(arg_types) do parts[#parts + 1] = t.dtype .. shape_str(t.shape) end
    local key = table.concat(parts, "|")
    local hit = cache[key]
    if hit then return hit end
    local ty, msg = ops.infer_uncached(entry, attrs, arg_types)
    if ty then
      if cache_n > 20000 then cache, cache_n = {}, 0 end
      cache[key] = ty
      cache_n = cache_n + 1
    end
    return ty, msg
  end
  return ops.infer_uncached(entry, attrs, arg_types)
end

function ops.infer_uncached(entry, attrs, arg_types)
  local dag = C.tl_dag_new()
  local ok, r = pcall(function()
    local ids = {}
    for i, t in ipairs(arg_types) do ids[i] = placeholder(dag, t, "p" .. (i - 1)) end
    local outs, msg = ops.emit(dag, entry, attrs, arg_types, ids)
    if not outs then return { err = msg } end
    if entry.num_outputs == 1 and not entry.tuple_out then return { ty = read_type(dag, outs[1]) } end
    local f = {}
    for i = 1, #outs do f[i] = read_type(dag, outs[i]) end
    return { ty = { fields = f } }
  end)
  C.tl_dag_free(dag)
  if not ok then return nil, tostring(r) end
  if r.err then return nil, r.err end
  return r.ty
end

--- entry:compute(inputs, attrs, arg_types) on te.dag: te tensors in, te tensors out.
function ops.compute(entry, inputs, attrs, arg_types)
  local te = require "tunelua.te"
  local ids, types = {}, {}
  for i, t in ipairs(inputs) do
    ids[i] = t.id
    types[i] = arg_types and arg_types[i] or { shape = t.shape, dtype = t.dtype }
  end
  local outs, msg = ops.emit(te.dag, entry, attrs, types, ids)
  if not outs then error(entry.name .. ": " .. tostring(msg), 2) end
  local r = {}
  for i, id in ipairs(outs) do r[i] = te.tensor_from_id(id) end
  return r
end
for _, e in pairs(registry) do
  e.compute = function(inputs, attrs, arg_types) local r = ops.compute(e, inputs, attrs, arg_types); return r end
end
local reg0 = register
ops.register = function(e)
  local r = reg0(e)
  r.compute = function(inputs, attrs, arg_types) local x = ops.compute(r, inputs, attrs, arg_types); return x end
  return r
end

return ops
