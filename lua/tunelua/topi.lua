--- tunelua.topi: the operator library -- TVM's topi names in Lua idiom.
--
--   local topi = require "tunelua.topi"
--   local y = topi.nn.conv2d(x, w, {strides = 1, padding = {1, 1, 1, 1}, dilation = 1,
--                                   layout = "NCHW", out_dtype = "float32"})
--   local z = topi.nn.relu(topi.add(y, b))
--   local p = topi.nn.softmax(z, {axis = -1})
--
-- Tensors are tunelua.te tensors (all in the shared te.dag); each operator
-- adds its compute ops there through libtunelua's tl_topi_op (core/topi)
-- and returns the output tensor (split: a list). Every op carries a tag and
-- attributes with its fusion pattern; topi.pattern(name) gives an operator's
-- pattern name ("elemwise", "broadcast", "injective", "comm_reduce",
-- "out_elemwise_fusable", "opaque"). topi.op(name, inputs, attrs) is the
-- generic entry (attrs: a Lua table encoded as a JSON object). Errors are
-- raised at the caller's level with libtunelua's message, e.g.
-- "conv2d: strides must be positive, got (0, 1) for data (1, 3, 5, 5) and
-- kernel (2, 3, 7, 7)".
local ffi = require "ffi"
local core = require "tunelua.core"
local te = require "tunelua.te"
local json = require "tunelua.json"

local C, ctx, check = core.C, core.ctx, core.check

local topi = { nn = {} }
local nn = topi.nn

--- topi.encode_attrs(attrs) -> the attribute table as the JSON object text tl_topi_op reads
local encode = json.encode
topi.encode_attrs = encode

-- ---- the generic entry ---------------------------------------------------------------

local intarr = ffi.typeof("int[?]")
local int1 = ffi.typeof("int[1]")
local MAXOUT = 64

local function call(name, inputs, attrs, level)
  local n = #inputs
  local ids = intarr(n > 0 and n or 1)
  for i, t in ipairs(inputs) do
    if not te.is_tensor(t) then
      error(string.format("%s: input %d is not a tensor", name, i), level + 1)
    end
    ids[i - 1] = t.id
  end
  local outs, nout = intarr(MAXOUT), int1()
  local json = attrs and encode(attrs) or nil
  check(C.tl_topi_op(ctx, te.dag, name, ids, n, json, outs, MAXOUT, nout), level + 1)
  local res = {}
  for i = 0, nout[0] - 1 do res[i + 1] = te.tensor_from_id(outs[i]) end
  return res
end

--- topi.op(name, inputs, attrs) -> list of output tensors.
function topi.op(name, inputs, attrs)
  local r = call(name, inputs, attrs, 2)
  return r
end

--- Names of every operator tl_topi_op knows.
function topi.list()
  local t, i = {}, 0
  while true do
    local p = C.tl_topi_list(i)
    if p == nil then break end
    t[#t + 1] = ffi.string(p)
    i = i + 1
  end
  return t
end

--- Fusion pattern name of an operator, or nil.
function topi.pattern(name)
  local p = C.tl_topi_pattern(name)
  if p < 0 then return nil end
  return ffi.string(C.tl_topi_pattern_name(p))
end

local function one(name, inputs, attrs)
  local r = call(name, inputs, attrs, 3)
  return r[1]
end

local function copy(t)
  local r = {}
  for k, v in pairs(t or {}) do r[k] = v end
  return r
end

-- ---- nn -------------------------------------------------------------------------------

local function conv(name, layout)
  return function(data, kernel, opts)
    local a = copy(opts)
    if layout and a.layout == nil then a.layout = layout end
    local r = one(name, { data, kernel }, a)
    return r
  end
end
nn.conv2d = conv("conv2d")
nn.conv2d_nchw = conv("conv2d", "NCHW")
nn.conv2d_nhwc = conv("conv2d", "NHWC")
nn.group_conv2d_nchw = conv("conv2d", "NCHW")
nn.depthwise_conv2d = conv("depthwise_conv2d")
nn.depthwise_conv2d_nchw = conv("depthwise_conv2d", "NCHW")
nn.depthwise_conv2d_nhwc = conv("depthwise_conv2d", "NHWC")
--- nn.conv3d(data, kernel, {strides, padding (1, 3 or 6 values), dilation, groups,
--  layout = "NCDHW" | "NDHWC", out_dtype}); kernel OIDHW or DHWIO. nn.conv1d likewise.
nn.conv3d = conv("conv3d")
nn.conv3d_ncdhw = conv("conv3d", "NCDHW")
nn.conv3d_ndhwc = conv("conv3d", "NDHWC")
nn.conv1d = conv("conv1d")
nn.conv1d_ncw = conv("conv1d", "NCW")
nn.conv1d_nwc = conv("conv1d", "NWC")
--- nn.conv1d_transpose / conv3d_transpose (data, kernel [C, O/groups, K...], {strides, padding,
--  dilation, groups, output_padding}): NCW / NCDHW
nn.conv1d_transpose = conv("conv1d_transpose")
nn.conv3d_transpose = conv("conv3d_transpose")
nn.conv3d_transpose_ncdhw = conv("conv3d_transpose", "NCDHW")
nn.conv2d_transpose = conv("conv2d_transpose")
nn.conv2d_transpose_nchw = conv("conv2d_transpose", "NCHW")
--- NHWC data x HWOI kernel [KH, KW, O/groups, C] (kernel_layout = "IOHW" also works)
nn.conv2d_transpose_nhwc = conv("conv2d_transpose", "NHWC")
--- nn.conv2d_winograd(data, kernel, {tile_size = 4, padding = ..., pre_transformed = false})
nn.conv2d_winograd = conv("conv2d_winograd")
nn.conv2d_winograd_nchw = conv("conv2d_winograd")
--- nn.winograd_weight_transform(kernel, tile_size) -> [alpha, alpha, O, C]
function nn.winograd_weight_transform(kernel, tile_size)
  local r = one("winograd_weight_transform", { kernel }, { tile_size = tile_size or 4 })
  return r
end

--- nn.dense(data, weight[, bias][, {out_dtype = ...}]): weight is [units, in].
function nn.dense(data, weight, bias, opts)
  if opts == nil and type(bias) == "table" and not te.is_tensor(bias) then bias, opts = nil, bias end
  local r = one("dense", bias and { data, weight, bias } or { data, weight }, copy(opts))
  return r
end
--- nn.batch_matmul(x, y[, {transpose_a = false, transpose_b = true, out_dtype}])
function nn.batch_matmul(x, y, opts)
  local r = one("batch_matmul", { x, y }, copy(opts))
  return r
end
function topi.matmul(a, b)
  local r = one("matmul", { a, b }, nil)
  return r
end
nn.matmul = topi.matmul

--- nn.pool2d(data, {kernel = {kh, kw}, strides, padding, dilation, pool_type = "max"|"avg",
--  ceil_mode, count_include_pad, layout})
function nn.pool2d(data, opts)
  local r = one("pool2d", { data }, copy(opts))
  return r
end
function nn.max_pool2d(data, opts)
  local a = copy(opts); a.pool_type = "max"
  local r = one("pool2d", { data }, a)
  return r
end
function nn.avg_pool2d(data, opts)
  local a = copy(opts); a.pool_type = "avg"
  local r = one("pool2d", { data }, a)
  return r
end
--- nn.pool3d / max_pool3d / avg_pool3d (data, {kernel = {kd, kh, kw}, strides, padding,
--  dilation, ceil_mode, count_include_pad, layout = "NCDHW" | "NDHWC"}); pool1d likewise.
for _, d in ipairs { "1d", "3d" } do
  nn["pool" .. d] = function(data, opts)
    local r = one("pool" .. d, { data }, copy(opts))
    return r
  end
  for _, pt in ipairs { "max", "avg" } do
    nn[pt .. "_pool" .. d] = function(data, opts)
      local a = copy(opts); a.pool_type = pt
      local r = one("pool" .. d, { data }, a)
      return r
    end
  end
end
--- nn.global_pool(data, "avg"|"max"[, layout]): 3-D, 4-D or 5-D data (1, 2 or 3 spatial dims)
function nn.global_pool(data, pool_type, layout)
  local rank = te.is_tensor(data) and #data.shape or 4
  local name = rank == 5 and "global_pool3d" or rank == 3 and "global_pool1d" or "global_pool"
  local r = one(name, { data }, { pool_type = pool_type, layout = layout })
  return r
end
function nn.global_avg_pool3d(data, layout) local r = one("global_pool3d", { data }, { pool_type = "avg", layout = layout }); return r end
function nn.global_max_pool3d(data, layout) local r = one("global_pool3d", { data }, { pool_type = "max", layout = layout }); return r end
--- nn.adaptive_pool(data, {oh, ow}, "avg"|"max"[, layout])
function nn.adaptive_pool(data, output_size, pool_type, layout)
  if type(output_size) == "number" then output_size = { output_size, output_size } end
  local r = one("adaptive_pool", { data }, { output_size = output_size, pool_type = pool_type,
                                            layout = layout })
  return r
end

function nn.relu(x) local r = one("relu", { x }); return r end
function nn.leaky_relu(x, alpha) local r = one("leaky_relu", { x }, { alpha = alpha }); return r end
--- nn.softmax(x[, {axis = -1}]) and nn.log_softmax
function nn.softmax(x, opts)
  local r = one("softmax", { x }, { axis = opts and opts.axis or -1 })
  return r
end
function nn.log_softmax(x, opts)
  local r = one("log_softmax", { x }, { axis = opts and opts.axis or -1 })
  return r
end
--- nn.bias_add(data, bias[, axis = 1])
function nn.bias_add(data, bias, axis)
  local r = one("bias_add", { data, bias }, { axis = axis or 1 })
  return r
end
--- nn.batch_norm(data, gamma, beta, mean, var[, {axis = 1, epsilon = 1e-5, center, scale}])
function nn.batch_norm(data, gamma, beta, mean, var, opts)
  local r = one("batch_norm", { data, gamma, beta, mean, var }, copy(opts))
  return r
end
--- nn.flatten(x[, axis = 1])
function nn.flatten(x, axis)
  local r = one("flatten", { x }, { axis = axis or 1 })
  return r
end
--- nn.pad(x, pad_before[, pad_after[, pad_value]])
function nn.pad(x, pad_before, pad_after, pad_value)
  local r = one("pad", { x }, { pad_before = pad_before, pad_after = pad_after or pad_before,
                                pad_value = pad_value or 0 })
  return r
end

-- ---- element-wise and broadcast -----------------------------------------------------

for _, name in ipairs { "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "negative",
                        "floor", "ceil", "round", "erf", "identity" } do
  topi[name] = function(x) local r = one(name, { x }); return r end
end
function topi.clip(x, a_min, a_max)
  local r = one("clip", { x }, { a_min = a_min, a_max = a_max })
  return r
end
for _, name in ipairs { "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                        "right_shift", "left_shift" } do
  topi[name] = function(a, b) local r = one(name, { a, b }); return r end
end
topi.sub, topi.mul, topi.div = topi.subtract, topi.multiply, topi.divide
function topi.cast(x, dtype)
  local r = one("cast", { x }, { dtype = dtype })
  return r
end

-- ---- transforms -----------------------------------------------------------------------

--- topi.concatenate({a, b, ...}[, axis = 0])
function topi.concatenate(list, axis)
  local r = one("concatenate", list, { axis = axis or 0 })
  return r
end
--- topi.split(x, sections_or_indices[, axis = 0]) -> list of tensors
function topi.split(x, ios, axis)
  local a = { axis = axis or 0 }
  if type(ios) == "number" then a.sections = ios else a.indices = ios end
  local r = call("split", { x }, a, 2)
  return r
end
function topi.reshape(x, newshape)
  local r = one("reshape", { x }, { newshape = newshape })
  return r
end
--- topi.transpose(x[, axes = reversed])
function topi.transpose(x, axes)
  local r = one("transpose", { x }, { axes = axes })
  return r
end
--- topi.squeeze(x[, axis: number or list; nil = every size-1 axis])
function topi.squeeze(x, axis)
  if type(axis) == "number" then axis = { axis } end
  local r = one("squeeze", { x }, { axis = axis })
  return r
end
--- topi.expand_dims(x, axis[, num_newaxis = 1])
function topi.expand_dims(x, axis, num_newaxis)
  local r = one("expand_dims", { x }, { axis = axis, num_newaxis = num_newaxis or 1 })
  return r
end
function topi.layout_transform(x, src_layout, dst_layout)
  local r = one("layout_transform", { x }, { src_layout = src_layout, dst_layout = dst_layout })
  return r
end
topi.nn.layout_transform = topi.layout_transform
topi.flatten, topi.pad = nn.flatten, nn.pad

-- ---- default schedules ----------------------------------------------------------------

-- The default-schedule class of a target: "cpu" itself, else the parsed target's
-- (tunelua.target: "cpu" for "c" and "llvm ...", "opencl" for "opencl ..."); nil and the
-- message for a string that is no target.
local function schedule_class(target)
  if target == "cpu" then return "cpu" end
  local t, msg = require("tunelua.target").try_parse(target)
  if not t then return nil, msg end
  return t.schedules
end

--- topi.default_schedule(outputs[, target = "c"]) -> tunelua.schedule Schedule
-- outputs: a tensor or a list of tensors (all in te.dag); the schedule covers
-- the DAG that computes them, with the default steps of the target class
-- (core/topi/schedule.c): injective producers inlined, a reduction computed
-- at its same-shape consumer, outer loops fused and parallel, the innermost
-- vectorized; "opencl ..." binds work-groups (blockIdx.x / threadIdx.x).
function topi.default_schedule(outputs, target)
  local schedule = require "tunelua.schedule"
  target = target or "c"
  if type(target) ~= "string" then
    error("default_schedule: target must be a string like \"llvm\" or \"c\", got " .. type(target), 2)
  end
  local kind, msg = schedule_class(target)
  if not kind then error("default_schedule: " .. msg, 2) end
  if te.is_tensor(outputs) then outputs = { outputs } end
  if type(outputs) ~= "table" or #outputs == 0 then
    error("default_schedule: expected a tensor or a list of tensors", 2)
  end
  for i, t in ipairs(outputs) do
    if not te.is_tensor(t) then
      error(string.format("default_schedule: output %d is not a tensor", i), 2)
    end
  end
  local s = schedule.create(outputs)
  check(C.tl_topi_default_schedule(ctx, s.handle, kind), 2)
  return s
end

return topi
