--- tunelua.relay.frontend.onnx: ONNX models (e.g. exported from PyTorch) as relay modules.
--
--   local relay = require "tunelua.relay"
--   local mod, params = relay.frontend.from_onnx("resnet18.onnx", {shape = {input = {1, 3, 224, 224}}})
--   local lib = relay.build(mod, {target = "llvm", params = params})
--
-- The model is read by tunelua.onnx (core/graph/onnx.c over protobuf-c). Float
-- initializers become params (relay vars of the same name); graph inputs that
-- are not initializers become the module's inputs, their shapes from the model
-- or from opts.shape (a dynamic dimension needs one). Nodes are converted in
-- file order, each with the semantics of the model's ai.onnx opset (opset 7 to
-- 17). A node whose inputs are all known at import time (initializers,
-- Constant nodes, Shape of a statically shaped tensor, and what is computed from
-- them) is folded: shape arithmetic in Lua here, float computations through the
-- relay reference evaluator (tunelua.relay.eval). So the imported graph holds
-- only relay ops over the model's inputs and its weights, and goes through the
-- same passes, task extraction and executor as the Lua networks.
--
-- Several ONNX ops become a few relay ops: Gemm -> dense (+ bias), MatMul ->
-- dense or batch_matmul over reshapes, Reduce* -> a global pool over a
-- transposed and reshaped view, Resize/Upsample -> one dense per resized axis
-- against the axis's interpolation matrix (exact for every mode and coordinate
-- transformation, computed here), Slice and Split of a computed tensor -> split,
-- 1-D Conv/pools -> their 2-D form over a height of 1.
--
-- Errors name the node, its op type and the opset, and say what is not
-- supported: an unknown op lists the ops the importer supports.
local ffi = require "ffi"
local nd = require "tunelua.nd"
local onnx = require "tunelua.onnx"
local relay = require "tunelua.relay"

local M = {}

local FLT_MAX = 3.4028234663852886e38

local DTYPE = {
  [1] = "float32", [2] = "uint8", [3] = "int8", [5] = "int16", [6] = "int32", [7] = "int64",
  [9] = "bool", [10] = "float16", [11] = "float64",
}
local ELEM_NAME = {}
for code, name in pairs(DTYPE) do ELEM_NAME[name] = code end

-- ---- values -------------------------------------------------------------------------------
--
-- A value is {c = nd array} (known at import time) or {e = relay node}; both carry
-- shape and dtype. Initializers also carry pname: used as a relay tensor they become a
-- param of that name.

local function numel(s)
  local n = 1
  for _, d in ipairs(s) do n = n * d end
  return n
end

local function cval(arr, pname)
  return { c = arr, shape = arr:shape(), dtype = arr:dtype(), pname = pname }
end
local function eval_of(e)
  return { e = e, shape = e.type.shape, dtype = e.type.dtype }
end

-- A constant from a flat Lua list (row-major) of a shape and dtype.
local function from_flat(flat, shape, dtype)
  local a = nd.empty(shape, dtype)
  local n = numel(shape)
  if n > 0 then
    local ct = ({ float32 = "float *", float64 = "double *", int64 = "int64_t *", int32 = "int32_t *",
                  int8 = "int8_t *", uint8 = "uint8_t *", int16 = "int16_t *", bool = "uint8_t *" })[dtype]
    if not ct then error("cannot fold a constant of dtype " .. dtype, 0) end
    local p = ffi.cast(ct, a:data_ptr())
    for i = 1, n do
      local v = flat[i]
      if v == true then v = 1 elseif v == false then v = 0 end
      p[i - 1] = v
    end
  end
  return a
end

local function flat_of(arr)
  local n = arr:numel()
  if n == 0 then return {} end
  return arr:flat()
end

local function ints_of(arr)
  local r = {}
  for i, v in ipairs(flat_of(arr)) do r[i] = tonumber(v) end
  return r
end

-- ---- the importer state ---------------------------------------------------------------------

local Importer = {}
Importer.__index = Importer

local function node_label(n)
  return string.format("ONNX node '%s' (%s)", n.name ~= "" and n.name or n.outputs[1] or "?", n.op_type)
end

function Importer:fail(n, fmt, ...)
  error(string.format("%s, opset %d: " .. fmt, node_label(n), self.opset, ...), 0)
end

function Importer:unsupported_attr(n, attr, value, why)
  self:fail(n, "attribute %s = %s is not supported%s", attr, tostring(value), why and (" (" .. why .. ")") or "")
end

-- The relay expression of a value: a param var for an initializer, a relay const
-- for another folded value.
function Importer:expr(v)
  if v.e then return v.e end
  if v.rel then return v.rel end
  if v.pname and (v.dtype == "float32" or v.dtype == "float64") then
    local var = relay.var(v.pname, { shape = v.shape, dtype = v.dtype })
    self.params[v.pname] = v.c
    self.param_order[#self.param_order + 1] = var
    v.rel = var
  else
    v.rel = relay.const(v.c)
  end
  return v.rel
end

-- The array of a value that must be known at import time.
function Importer:const(n, v, what)
  if v == nil then self:fail(n, "input %s is missing", what) end
  if not v.c then
    self:fail(n, "input %s must be known at import time (a constant, an initializer or computed from shapes), " ..
              "but it is computed from the graph's inputs", what)
  end
  return v.c
end

local function attr(n, name, default)
  local v = n.attrs[name]
  if v == nil then return default end
  return v
end

-- Normalize a possibly negative axis for rank r (0-based result).
function Importer:axis(n, a, r, what)
  local ax = a < 0 and a + r or a
  if ax < 0 or ax >= r then self:fail(n, "%s %d is out of range for a rank-%d tensor", what or "axis", a, r) end
  return ax
end

-- An optional input: nil when absent or named "".
local function opt_in(ins, i) return ins[i] end

-- ---- shape helpers ---------------------------------------------------------------------------

local function copy(t)
  local r = {}
  for i, v in ipairs(t) do r[i] = v end
  return r
end

local function bcast_shape(a, b)
  local n = math.max(#a, #b)
  local r = {}
  for i = 1, n do
    local x = a[i - (n - #a)] or 1
    local y = b[i - (n - #b)] or 1
    if x ~= y and x ~= 1 and y ~= 1 then return nil end
    r[i] = x == 1 and y or x
  end
  return r
end

-- Strides of a shape (row-major, in elements).
local function strides(s)
  local st, acc = {}, 1
  for i = #s, 1, -1 do st[i] = acc; acc = acc * s[i] end
  return st
end

-- Element-wise f over broadcast constants (Lua numbers; booleans read as 0/1).
local function fold_nary(arrs, f, dtype)
  local os = {}
  for _, a in ipairs(arrs) do
    os = bcast_shape(os, a:shape())
    if not os then return nil end
  end
  local n = numel(os)
  local sto = strides(os)
  local info = {}
  for k, a in ipairs(arrs) do
    local fl = flat_of(a)
    for i, v in ipairs(fl) do
      if v == true then fl[i] = 1 elseif v == false then fl[i] = 0 else fl[i] = tonumber(v) end
    end
    info[k] = { shape = a:shape(), st = strides(a:shape()), flat = fl }
  end
  local out = {}
  local args = {}
  for k = 0, n - 1 do
    for j, it in ipairs(info) do
      local off, rem = 0, k
      local sa = it.shape
      for d = 1, #os do
        local idx = math.floor(rem / sto[d])
        rem = rem - idx * sto[d]
        local da = d - (#os - #sa)
        if da >= 1 and sa[da] ~= 1 then off = off + idx * it.st[da] end
      end
      args[j] = it.flat[off + 1]
    end
    out[k + 1] = f(unpack(args, 1, #info))
  end
  return from_flat(out, os, dtype)
end

local function fold_binary(a, b, f, dtype) return fold_nary({ a, b }, f, dtype) end

-- A strided slice of a constant: starts/ends/steps per axis (0-based, normalized).
local function fold_slice(arr, starts, steps, counts)
  local s = arr:shape()
  local st = strides(s)
  local flat = flat_of(arr)
  local os = counts
  local n = numel(os)
  local sto = strides(os)
  local out = {}
  for k = 0, n - 1 do
    local off, rem = 0, k
    for d = 1, #os do
      local idx = math.floor(rem / sto[d])
      rem = rem - idx * sto[d]
      off = off + (starts[d] + idx * steps[d]) * st[d]
    end
    out[k + 1] = flat[off + 1]
  end
  return from_flat(out, os, arr:dtype())
end

-- A computed 0-d tensor is kept as a (1,) relay tensor (the fused kernels take no 0-d
-- intermediate); its value says shape {} so the ONNX semantics stay: it broadcasts the
-- same. reshape_to gives the relay side, as_scalar marks the value.
local function reshape_to(e, shape)
  if #shape == 0 then shape = { 1 } end
  if #e.type.shape == #shape then
    local same = true
    for i, d in ipairs(shape) do if e.type.shape[i] ~= d then same = false end end
    if same then return e end
  end
  return relay.reshape(e, shape)
end

local function as_scalar(v)
  if v.c then return cval(v.c:copy():reshape({})) end
  v.shape = {}
  return v
end

local function is_float(dt) return dt == "float32" or dt == "float64" or dt == "float16" end

-- ---- converters ---------------------------------------------------------------------------------
--
-- conv[op_type](self, n, ins) -> list of output values. ins[i]: the value of input i
-- (nil when omitted). self.opset is the ai.onnx opset of the model.

local conv = {}

-- Evaluate a relay expression over constants (the constant subgraphs of float data).
local function fold_expr(e)
  local eval = require "tunelua.relay.eval"
  local v = eval.run(relay.Function({}, e), {})
  return v
end

-- Build a relay result from a builder; fold when every input is constant.
function Importer:emit(n, ins, build)
  local all_const = true
  for _, v in pairs(ins) do if not v.c then all_const = false end end
  local es = {}
  for i, v in pairs(ins) do es[i] = self:expr(v) end
  local e = build(es)
  if all_const and next(ins) ~= nil then
    return cval(fold_expr(e))
  end
  return eval_of(e)
end

local function pads_of(self, n, ins_shape, nd_, kernel, strides_, dilations, out_is_transpose)
  local auto = attr(n, "auto_pad", "NOTSET")
  local pads = attr(n, "pads")
  if auto == "NOTSET" or auto == "" then
    local p = {}
    for i = 1, 2 * nd_ do p[i] = pads and pads[i] or 0 end
    if pads and #pads ~= 2 * nd_ then self:unsupported_attr(n, "pads", "{" .. table.concat(pads, ",") .. "}", "expected " .. 2 * nd_ .. " values") end
    for i = 1, 2 * nd_ do
      if p[i] < 0 then self:unsupported_attr(n, "pads", "{" .. table.concat(pads, ",") .. "}", "negative padding") end
    end
    return p
  elseif auto == "VALID" then
    local p = {}
    for i = 1, 2 * nd_ do p[i] = 0 end
    return p
  elseif auto == "SAME_UPPER" or auto == "SAME_LOWER" then
    local p = {}
    for i = 1, nd_ do
      local inn = ins_shape[i]
      local out = math.ceil(inn / strides_[i])
      local total = math.max(0, (out - 1) * strides_[i] + (kernel[i] - 1) * dilations[i] + 1 - inn)
      local small = math.floor(total / 2)
      if auto == "SAME_UPPER" then p[i], p[i + nd_] = small, total - small
      else p[i], p[i + nd_] = total - small, small end
    end
    return p
  end
  self:unsupported_attr(n, "auto_pad", auto, "expected NOTSET, SAME_UPPER, SAME_LOWER or VALID")
end

local function list_or(v, nd_, default)
  local r = {}
  for i = 1, nd_ do r[i] = v and v[i] or default end
  return r
end

-- 1-D data (N, C, W) as 2-D (N, C, 1, W), with the window attributes to match.
local function to_2d_attrs(k, s, d, p)
  return { 1, k[1] }, { 1, s[1] }, { 1, d[1] }, { 0, p[1], 0, p[2] }
end

-- A 1-D op through its 2-D form: e of shape (N, C, W) as (N, C, 1, W) given to f, the unit
-- height of f's result dropped again.
local function via_2d(e, shape, f)
  local y = f(relay.reshape(e, { shape[1], shape[2], 1, shape[3] }))
  local t = y.type.shape
  return relay.reshape(y, { t[1], t[2], t[4] })
end

conv.Conv = function(self, n, ins)
  local x, w, b = ins[1], ins[2], opt_in(ins, 3)
  if not w then self:fail(n, "needs the weight input W") end
  local r = #x.shape
  local nd_ = r - 2
  if nd_ < 1 or nd_ > 3 then self:fail(n, "a %d-D input is not supported (1-D, 2-D or 3-D convolutions)", r) end
  local kernel = attr(n, "kernel_shape") or { unpack(w.shape, 3) }
  local strides_ = list_or(attr(n, "strides"), nd_, 1)
  local dil = list_or(attr(n, "dilations"), nd_, 1)
  local group = attr(n, "group", 1)
  local sp = { unpack(x.shape, 3) }
  local pads = pads_of(self, n, sp, nd_, kernel, strides_, dil)
  local out_ch = w.shape[1]
  local function build(es)
    local xe, we = es[1], es[2]
    local y
    if nd_ == 1 then
      local k2, s2, d2, p2 = to_2d_attrs(kernel, strides_, dil, pads)
      y = via_2d(xe, x.shape, function(x2)
        return relay.nn.conv2d(x2, relay.reshape(we, { w.shape[1], w.shape[2], 1, w.shape[3] }),
                               { strides = s2, padding = p2, dilation = d2, groups = group,
                                 channels = out_ch, kernel_size = k2 })
      end)
    elseif nd_ == 2 then
      y = relay.nn.conv2d(xe, we, { strides = strides_, padding = pads, dilation = dil, groups = group,
                                    channels = out_ch, kernel_size = kernel })
    else
      y = relay.nn.conv3d(xe, we, { strides = strides_, padding = pads, dilation = dil, groups = group,
                                    channels = out_ch, kernel_size = kernel })
    end
    if es[3] then y = relay.nn.bias_add(y, es[3], { axis = 1 }) end
    return y
  end
  return { self:emit(n, { x, w, b }, build) }
end

conv.ConvTranspose = function(self, n, ins)
  local x, w, b = ins[1], ins[2], opt_in(ins, 3)
  local r = #x.shape
  local nd_ = r - 2
  if nd_ ~= 1 and nd_ ~= 2 then self:fail(n, "a %d-D input is not supported (1-D or 2-D transposed convolutions)", r) end
  local kernel = attr(n, "kernel_shape") or { unpack(w.shape, 3) }
  local strides_ = list_or(attr(n, "strides"), nd_, 1)
  local dil = list_or(attr(n, "dilations"), nd_, 1)
  local group = attr(n, "group", 1)
  local outpad = list_or(attr(n, "output_padding"), nd_, 0)
  local auto = attr(n, "auto_pad", "NOTSET")
  local out_shape = attr(n, "output_shape")
  local pads
  if out_shape or auto == "SAME_UPPER" or auto == "SAME_LOWER" then
    pads = {}
    for i = 1, nd_ do
      local inn = x.shape[i + 2]
      local want = out_shape and out_shape[#out_shape - nd_ + i] or inn * strides_[i]
      local total = strides_[i] * (inn - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - want
      if total < 0 then
        self:unsupported_attr(n, "output_shape", "{" .. table.concat(out_shape or {}, ",") .. "}",
                              "larger than the full transposed convolution")
      end
      local half = math.floor(total / 2)
      if auto == "SAME_UPPER" then pads[i], pads[i + nd_] = half, total - half
      else pads[i], pads[i + nd_] = total - half, half end
    end
  else
    pads = pads_of(self, n, { unpack(x.shape, 3) }, nd_, kernel, strides_, dil)
  end
  local out_ch = w.shape[2] * group
  local function build(es)
    local xe, we = es[1], es[2]
    local y
    if nd_ == 1 then
      local k2, s2, d2, p2 = to_2d_attrs(kernel, strides_, dil, pads)
      y = via_2d(xe, x.shape, function(x2)
        return relay.nn.conv2d_transpose(x2, relay.reshape(we, { w.shape[1], w.shape[2], 1, w.shape[3] }),
          { strides = s2, padding = p2, dilation = d2, groups = group, channels = out_ch,
            kernel_size = k2, output_padding = { 0, outpad[1] } })
      end)
    else
      y = relay.nn.conv2d_transpose(xe, we, { strides = strides_, padding = pads, dilation = dil,
        groups = group, channels = out_ch, kernel_size = kernel, output_padding = outpad })
    end
    if es[3] then y = relay.nn.bias_add(y, es[3], { axis = 1 }) end
    return y
  end
  return { self:emit(n, { x, w, b }, build) }
end

-- The weight of a dense layer, (units, K), from B (K, N) or B^T: a param or a
-- relay expression.
function Importer:dense_weight(bv, transposed)
  if transposed then return self:expr(bv) end
  if bv.c and bv.pname then
    -- transposed once at import: a param of its own
    if not bv.transposed then
      local t = fold_expr(relay.transpose(relay.const(bv.c), { 1, 0 }))
      bv.transposed = cval(t, bv.pname .. ".T")
    end
    return self:expr(bv.transposed)
  end
  return relay.transpose(self:expr(bv), { 1, 0 })
end

conv.Gemm = function(self, n, ins)
  local a, b, c = ins[1], ins[2], opt_in(ins, 3)
  local alpha, beta = attr(n, "alpha", 1.0), attr(n, "beta", 1.0)
  local ta, tb = attr(n, "transA", 0), attr(n, "transB", 0)
  if #a.shape ~= 2 or #b.shape ~= 2 then self:fail(n, "A and B must be 2-D, got %d-D and %d-D", #a.shape, #b.shape) end
  if a.c and b.c and (not c or c.c) then
    local ae, be = relay.const(a.c), relay.const(b.c)
    if ta ~= 0 then ae = relay.transpose(ae, { 1, 0 }) end
    if tb == 0 then be = relay.transpose(be, { 1, 0 }) end
    local y = relay.nn.dense(ae, be)
    if alpha ~= 1 then y = relay.multiply(y, relay.const(alpha, y.type.dtype)) end
    if c then
      local ce = relay.const(c.c)
      if beta ~= 1 then ce = relay.multiply(ce, relay.const(beta, y.type.dtype)) end
      y = relay.add(y, ce)
    end
    return { cval(fold_expr(y)) }
  end
  local ae = self:expr(a)
  if ta ~= 0 then ae = relay.transpose(ae, { 1, 0 }) end
  local y = relay.nn.dense(ae, self:dense_weight(b, tb ~= 0))
  if alpha ~= 1 then y = relay.multiply(y, relay.const(alpha, y.type.dtype)) end
  if c then
    local ce = self:expr(c)
    if beta ~= 1 then ce = relay.multiply(ce, relay.const(beta, y.type.dtype)) end
    if #c.shape == 1 and c.shape[1] == y.type.shape[2] and beta == 1 then
      y = relay.nn.bias_add(y, ce, { axis = 1 })
    else
      y = relay.add(y, ce)
    end
  end
  return { eval_of(y) }
end

conv.MatMul = function(self, n, ins)
  local a, b = ins[1], ins[2]
  local function build(es)
    local ae, be = es[1], es[2]
    local sa, sb = copy(a.shape), copy(b.shape)
    local squeeze_a, squeeze_b = false, false
    if #sa == 1 then sa = { 1, sa[1] }; ae = relay.reshape(ae, sa); squeeze_a = true end
    if #sb == 1 then sb = { sb[1], 1 }; be = relay.reshape(be, sb); squeeze_b = true end
    local M_, K = sa[#sa - 1], sa[#sa]
    local K2, N_ = sb[#sb - 1], sb[#sb]
    if K ~= K2 then self:fail(n, "inner dimensions differ: %d and %d", K, K2) end
    local ba, bb = { unpack(sa, 1, #sa - 2) }, { unpack(sb, 1, #sb - 2) }
    local batch = bcast_shape(ba, bb)
    if not batch then self:fail(n, "batch dimensions do not broadcast") end
    local y
    if #bb == 0 then
      -- (..., M, K) x (K, N): one dense over the flattened rows
      local rows = numel(ba) * M_
      local x2 = relay.reshape(ae, { rows, K })
      local wt
      if b.c and b.pname and not squeeze_b then wt = self:dense_weight(b, false)
      else wt = relay.transpose(be, { 1, 0 }) end
      y = relay.nn.dense(x2, wt)
      local os = copy(ba)
      os[#os + 1] = M_; os[#os + 1] = N_
      y = relay.reshape(y, os)
    else
      local nb = numel(batch)
      local function to3(e, bs, s, rows, cols)
        if numel(bs) ~= nb then
          -- broadcast the batch dims by adding zeros of the full shape
          local full = copy(batch)
          full[#full + 1] = rows; full[#full + 1] = cols
          e = relay.add(e, relay.const(nd.zeros(full, s)))
        end
        return relay.reshape(e, { nb, rows, cols })
      end
      local a3 = to3(ae, ba, a.dtype, M_, K)
      local b3 = to3(be, bb, b.dtype, K, N_)
      y = relay.nn.batch_matmul(a3, b3, { transpose_a = false, transpose_b = false })
      local os = copy(batch)
      os[#os + 1] = M_; os[#os + 1] = N_
      y = relay.reshape(y, os)
    end
    local os = copy(y.type.shape)
    if squeeze_a then table.remove(os, #os - 1) end
    if squeeze_b then table.remove(os, #os) end
    if squeeze_a or squeeze_b then y = relay.reshape(y, os) end
    return y
  end
  return { self:emit(n, { a, b }, build) }
end

conv.BatchNormalization = function(self, n, ins)
  if attr(n, "training_mode", 0) ~= 0 then self:unsupported_attr(n, "training_mode", 1, "inference only") end
  if self.opset < 9 and attr(n, "spatial", 1) ~= 1 then self:unsupported_attr(n, "spatial", 0) end
  for i = 2, #n.outputs do
    if n.outputs[i] ~= "" and self.used[n.outputs[i]] then
      self:fail(n, "output %d (%s) is used: training-mode outputs are not supported", i, n.outputs[i])
    end
  end
  local eps = attr(n, "epsilon", 1e-5)
  local y = self:emit(n, { ins[1], ins[2], ins[3], ins[4], ins[5] }, function(es)
    return relay.nn.batch_norm(es[1], es[2], es[3], es[4], es[5], { epsilon = eps, axis = 1 })[1]
  end)
  return { y }
end

local function unary(fn)
  return function(self, n, ins)
    return { self:emit(n, { ins[1] }, function(es) return fn(es[1], n, self) end) }
  end
end

conv.Relu = unary(function(x) return relay.nn.relu(x) end)
conv.Sigmoid = unary(function(x) return relay.sigmoid(x) end)
conv.Tanh = unary(function(x) return relay.tanh(x) end)
conv.Exp = unary(function(x) return relay.exp(x) end)
conv.Log = unary(function(x) return relay.log(x) end)
conv.Sqrt = unary(function(x) return relay.sqrt(x) end)
conv.Abs = unary(function(x) return relay.abs(x) end)
conv.Neg = unary(function(x) return relay.negative(x) end)
conv.Floor = unary(function(x) return relay.floor(x) end)
conv.Ceil = unary(function(x) return relay.ceil(x) end)
conv.Erf = unary(function(x) return relay.erf(x) end)
conv.Reciprocal = unary(function(x) return relay.divide(relay.const(1, x.type.dtype), x) end)
conv.Softplus = unary(function(x)
  return relay.log(relay.add(relay.exp(x), relay.const(1, x.type.dtype)))
end)
conv.LeakyRelu = unary(function(x, n) return relay.nn.leaky_relu(x, { alpha = attr(n, "alpha", 0.01) }) end)

local function hard_sigmoid(x, alpha, beta)
  local dt = x.type.dtype
  local y = relay.add(relay.multiply(x, relay.const(alpha, dt)), relay.const(beta, dt))
  return relay.clip(y, 0, 1)
end
conv.HardSigmoid = unary(function(x, n) return hard_sigmoid(x, attr(n, "alpha", 0.2), attr(n, "beta", 0.5)) end)
conv.HardSwish = unary(function(x) return relay.multiply(x, hard_sigmoid(x, 1 / 6, 0.5)) end)
conv.Identity = function(self, n, ins) return { ins[1] } end

conv.Dropout = function(self, n, ins)
  if self.opset >= 12 and ins[3] then
    local t = ins[3].c and flat_of(ins[3].c)[1]
    if t == nil or (t ~= 0 and t ~= false) then
      self:fail(n, "input training_mode = %s is not supported (inference only: a constant false)",
                t == nil and "(computed)" or tostring(t))
    end
  end
  -- inference: the identity, and a mask of all true
  local x = ins[1]
  local mask = nil
  if n.outputs[2] and n.outputs[2] ~= "" then
    local ones = {}
    for i = 1, numel(x.shape) do ones[i] = 1 end
    mask = cval(from_flat(ones, x.shape, "bool"))
  end
  return { x, mask }
end

conv.PRelu = function(self, n, ins)
  return { self:emit(n, { ins[1], ins[2] }, function(es)
    local x, s = es[1], es[2]
    local dt = x.type.dtype
    local sshape = s.type.shape
    -- a slope of shape (C,) against (N, C, ...) applies per channel (as exporters write it)
    if #sshape == 1 and #x.type.shape > 2 and sshape[1] == x.type.shape[2] and sshape[1] ~= x.type.shape[#x.type.shape] then
      s = relay.expand_dims(s, 1, #x.type.shape - 2)
    end
    local zero = relay.const(0, dt)
    return relay.add(relay.maximum(x, zero), relay.multiply(s, relay.minimum(x, zero)))
  end) }
end

conv.Clip = function(self, n, ins)
  local lo, hi
  if self.opset < 11 then
    lo, hi = attr(n, "min", -FLT_MAX), attr(n, "max", FLT_MAX)
  else
    local mn, mx = opt_in(ins, 2), opt_in(ins, 3)
    if (mn and not mn.c) or (mx and not mx.c) then
      return { self:emit(n, { ins[1], mn, mx }, function(es)
        local y = es[1]
        if es[2] then y = relay.maximum(y, es[2]) end
        if es[3] then y = relay.minimum(y, es[3]) end
        return y
      end) }
    end
    lo = mn and tonumber(flat_of(mn.c)[1]) or -FLT_MAX
    hi = mx and tonumber(flat_of(mx.c)[1]) or FLT_MAX
  end
  lo, hi = math.max(lo, -FLT_MAX), math.min(hi, FLT_MAX)
  return { self:emit(n, { ins[1] }, function(es) return relay.clip(es[1], lo, hi) end) }
end

local function softmax(log)
  return function(self, n, ins)
    local x = ins[1]
    local r = #x.shape
    local ax = self:axis(n, attr(n, "axis", self.opset < 13 and 1 or -1), r)
    return { self:emit(n, { x }, function(es)
      local f = log and relay.nn.log_softmax or relay.nn.softmax
      if self.opset >= 13 or ax == r - 1 then return f(es[1], { axis = ax }) end
      -- before opset 13: over the flattened dimensions from axis on
      local rows = numel({ unpack(x.shape, 1, ax) })
      local y = f(relay.reshape(es[1], { rows, numel(x.shape) / rows }), { axis = 1 })
      return relay.reshape(y, x.shape)
    end) }
  end
end
conv.Softmax = softmax(false)
conv.LogSoftmax = softmax(true)

-- ---- binary and variadic ------------------------------------------------------------------------

local INT_OPS = {
  Add = function(a, b) return a + b end, Sub = function(a, b) return a - b end,
  Mul = function(a, b) return a * b end,
  Div = function(a, b) local q = a / b; return q >= 0 and math.floor(q) or math.ceil(q) end,
  Max = math.max, Min = math.min,
  Pow = function(a, b) return a ^ b end,
}
local REL_OPS = { Add = "add", Sub = "subtract", Mul = "multiply", Div = "divide", Pow = "power",
                  Max = "maximum", Min = "minimum" }

local function binary(op)
  return function(self, n, ins)
    local a, b = ins[1], ins[2]
    if self.opset < 7 and attr(n, "broadcast", 0) ~= 0 then self:unsupported_attr(n, "broadcast", 1, "opset 7+ broadcasting only") end
    if a.c and b.c and not is_float(a.dtype) then
      local r = fold_binary(a.c, b.c, INT_OPS[op], a.dtype)
      if not r then self:fail(n, "shapes %s and %s do not broadcast", relay.ops.shape_str(a.shape), relay.ops.shape_str(b.shape)) end
      return { cval(r) }
    end
    if not bcast_shape(a.shape, b.shape) then
      self:fail(n, "shapes %s and %s do not broadcast", relay.ops.shape_str(a.shape), relay.ops.shape_str(b.shape))
    end
    return { self:emit(n, { a, b }, function(es)
      local x, y = es[1], es[2]
      if op == "Pow" and y.type.dtype ~= x.type.dtype then y = relay.cast(y, x.type.dtype) end
      return relay[REL_OPS[op]](x, y)
    end) }
  end
end
for op in pairs(REL_OPS) do conv[op] = binary(op) end

local function variadic(op, mean)
  local bin = binary(op)
  return function(self, n, ins)
    local acc = ins[1]
    for i = 2, #n.inputs do acc = bin(self, n, { acc, ins[i] })[1] end
    if mean and #n.inputs > 1 then
      acc = self:emit(n, { acc }, function(es) return relay.divide(es[1], relay.const(#n.inputs, acc.dtype)) end)
    end
    return { acc }
  end
end
conv.Sum = variadic("Add")
conv.Mean = variadic("Add", true)
conv.Max = variadic("Max")
conv.Min = variadic("Min")

-- ---- pooling --------------------------------------------------------------------------------------

local function pool(kind)
  return function(self, n, ins)
    local x = ins[1]
    local r = #x.shape
    local nd_ = r - 2
    if nd_ < 1 or nd_ > 3 then self:fail(n, "a %d-D input is not supported (1-D, 2-D or 3-D pooling)", r) end
    if kind == "max" and n.outputs[2] and n.outputs[2] ~= "" and self.used[n.outputs[2]] then
      self:fail(n, "output 2 (Indices) is not supported")
    end
    if attr(n, "storage_order", 0) ~= 0 then self:unsupported_attr(n, "storage_order", attr(n, "storage_order")) end
    local kernel = attr(n, "kernel_shape")
    if not kernel then self:fail(n, "attribute kernel_shape is required") end
    local strides_ = list_or(attr(n, "strides"), nd_, 1)
    local dil = list_or(attr(n, "dilations"), nd_, 1)
    local ceil = attr(n, "ceil_mode", 0) ~= 0
    local pads = pads_of(self, n, { unpack(x.shape, 3) }, nd_, kernel, strides_, dil)
    local a = { pool_size = kernel, strides = strides_, dilation = dil, padding = pads, ceil_mode = ceil }
    if kind == "avg" then
      a.count_include_pad = attr(n, "count_include_pad", 0) ~= 0
      for _, d in ipairs(dil) do if d ~= 1 then self:unsupported_attr(n, "dilations", d, "average pooling") end end
    end
    return { self:emit(n, { x }, function(es)
      local f = relay.nn[kind .. "_pool" .. (nd_ == 3 and "3d" or "2d")]
      if nd_ == 1 then
        local k2, s2, d2, p2 = to_2d_attrs(kernel, strides_, dil, pads)
        local b = { pool_size = k2, strides = s2, dilation = d2, padding = p2, ceil_mode = ceil,
                    count_include_pad = a.count_include_pad }
        return via_2d(es[1], x.shape, function(x2) return f(x2, b) end)
      end
      return f(es[1], a)
    end) }
  end
end
conv.MaxPool = pool("max")
conv.AveragePool = pool("avg")

local function global_pool(kind)
  return function(self, n, ins)
    local x = ins[1]
    local r = #x.shape
    return { self:emit(n, { x }, function(es)
      if r == 4 then return relay.nn["global_" .. kind .. "_pool2d"](es[1]) end
      if r == 5 then return relay.nn["global_" .. kind .. "_pool3d"](es[1]) end
      if r == 3 then
        return via_2d(es[1], x.shape, relay.nn["global_" .. kind .. "_pool2d"])
      end
      self:fail(n, "a %d-D input is not supported", r)
    end) }
  end
end
conv.GlobalAveragePool = global_pool("avg")
conv.GlobalMaxPool = global_pool("max")

-- ---- reductions: a global pool over the reduced axes, moved last ----------------------------------

-- The relay expression reducing e (of shape) over the axes in red (0-based set): the kept
-- axes first, the reduced ones flattened last, one global pool; keep: keepdims.
local function reduce_expr(e, shape, red, kind, keep)
  local r = #shape
  local keep_axes, red_axes, out_shape, K, R = {}, {}, {}, 1, 1
  for i = 0, r - 1 do
    if red[i] then
      red_axes[#red_axes + 1] = i
      R = R * shape[i + 1]
      if keep then out_shape[#out_shape + 1] = 1 end
    else
      keep_axes[#keep_axes + 1] = i
      K = K * shape[i + 1]
      out_shape[#out_shape + 1] = shape[i + 1]
    end
  end
  local y = e
  local perm = {}
  for _, a in ipairs(keep_axes) do perm[#perm + 1] = a end
  for _, a in ipairs(red_axes) do perm[#perm + 1] = a end
  local ident = true
  for i, p in ipairs(perm) do if p ~= i - 1 then ident = false end end
  if not ident then y = relay.transpose(y, perm) end
  y = relay.reshape(y, { 1, K, R, 1 })
  if kind == "min" then y = relay.negative(y) end
  y = relay.nn[(kind == "mean" or kind == "sum") and "global_avg_pool2d" or "global_max_pool2d"](y)
  if kind == "min" then y = relay.negative(y) end
  if kind == "sum" then y = relay.multiply(y, relay.const(R, e.type.dtype)) end
  return reshape_to(y, out_shape), out_shape
end

local function reduce(kind)
  return function(self, n, ins)
    local x = ins[1]
    local r = #x.shape
    local axes = attr(n, "axes")
    local axes_in = (kind == "sum" and self.opset >= 13) or self.opset >= 18
    if axes_in then
      axes = ins[2] and ints_of(self:const(n, ins[2], "axes")) or nil
    end
    local keep = attr(n, "keepdims", 1) ~= 0
    local noop = attr(n, "noop_with_empty_axes", 0) ~= 0
    if (axes == nil or #axes == 0) and noop then return { x } end
    local red = {}
    if axes == nil or #axes == 0 then
      for i = 0, r - 1 do red[i] = true end
    else
      for _, a in ipairs(axes) do red[self:axis(n, a, r)] = true end
    end
    local out_shape
    local v = self:emit(n, { x }, function(es)
      local y
      y, out_shape = reduce_expr(es[1], x.shape, red, kind, keep)
      return y
    end)
    return { #out_shape == 0 and as_scalar(v) or v }
  end
end
conv.ReduceMean = reduce("mean")
conv.ReduceSum = reduce("sum")
conv.ReduceMax = reduce("max")
conv.ReduceMin = reduce("min")

-- LayerNormalization (opset 17): over the axes from `axis` on, (x - mean) / sqrt(var + eps)
-- * scale + bias, from the same reductions
conv.LayerNormalization = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local ax = self:axis(n, attr(n, "axis", -1), r)
  local eps = attr(n, "epsilon", 1e-5)
  if attr(n, "stash_type", 1) ~= 1 then self:unsupported_attr(n, "stash_type", attr(n, "stash_type")) end
  local red = {}
  for i = ax, r - 1 do red[i] = true end
  -- which: 1 Y, 2 Mean, 3 InvStdDev (each its own expression; EliminateCommonSubexpr merges them)
  local function part(which)
    return self:emit(n, { x, ins[2], ins[3] }, function(es)
      local dt = x.dtype
      local mean = reduce_expr(es[1], x.shape, red, "mean", true)
      if which == 2 then return mean end
      local d = relay.subtract(es[1], mean)
      local var = reduce_expr(relay.multiply(d, d), x.shape, red, "mean", true)
      local std = relay.sqrt(relay.add(var, relay.const(eps, dt)))
      if which == 3 then return relay.divide(relay.const(1, dt), std) end
      local y = relay.divide(d, std)
      if es[2] then y = relay.multiply(y, es[2]) end
      if es[3] then y = relay.add(y, es[3]) end
      return y
    end)
  end
  local outs = { part(1) }
  for i = 2, 3 do
    if n.outputs[i] and n.outputs[i] ~= "" then outs[i] = part(i) end
  end
  return outs
end

-- ---- data movement ------------------------------------------------------------------------------

-- Reshape / flatten / squeeze / unsqueeze: a new shape of the same elements.
function Importer:reshaped(n, x, shape)
  if numel(shape) ~= numel(x.shape) then
    self:fail(n, "cannot reshape %s to %s", relay.ops.shape_str(x.shape), relay.ops.shape_str(shape))
  end
  if x.c then return cval(x.c:copy():reshape(shape)) end
  local v = eval_of(reshape_to(self:expr(x), shape))
  return #shape == 0 and as_scalar(v) or v
end

conv.Reshape = function(self, n, ins)
  local x = ins[1]
  local spec
  if self.opset < 5 then spec = attr(n, "shape") else spec = ints_of(self:const(n, ins[2], "shape")) end
  local allowzero = attr(n, "allowzero", 0) ~= 0
  local out, infer = {}, nil
  for i, d in ipairs(spec) do
    if d == 0 and not allowzero then out[i] = x.shape[i]
      if out[i] == nil then self:fail(n, "shape[%d] = 0 copies a dimension the input does not have", i - 1) end
    elseif d == -1 then
      if infer then self:fail(n, "shape has more than one -1") end
      infer = i; out[i] = 1
    elseif d < 0 then self:fail(n, "shape[%d] = %d is not valid", i - 1, d)
    else out[i] = d end
  end
  if infer then
    local known = numel(out)
    out[infer] = known > 0 and math.floor(numel(x.shape) / known) or 0
  end
  return { self:reshaped(n, x, out) }
end

conv.Flatten = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local a = attr(n, "axis", 1)
  if a < 0 then a = a + r end
  if a < 0 or a > r then self:fail(n, "axis %d is out of range for a rank-%d tensor", attr(n, "axis"), r) end
  local rows = numel({ unpack(x.shape, 1, a) })
  return { self:reshaped(n, x, { rows, numel(x.shape) / math.max(rows, 1) }) }
end

local function axes_arg(self, n, ins, since)
  if self.opset >= since then
    return ins[2] and ints_of(self:const(n, ins[2], "axes")) or nil
  end
  return attr(n, "axes")
end

conv.Squeeze = function(self, n, ins)
  local x = ins[1]
  local axes = axes_arg(self, n, ins, 13)
  local drop = {}
  if axes then
    for _, a in ipairs(axes) do
      local ax = self:axis(n, a, #x.shape)
      if x.shape[ax + 1] ~= 1 then self:fail(n, "cannot squeeze axis %d of size %d", a, x.shape[ax + 1]) end
      drop[ax] = true
    end
  else
    for i, d in ipairs(x.shape) do if d == 1 then drop[i - 1] = true end end
  end
  local out = {}
  for i, d in ipairs(x.shape) do if not drop[i - 1] then out[#out + 1] = d end end
  return { self:reshaped(n, x, out) }
end

conv.Unsqueeze = function(self, n, ins)
  local x = ins[1]
  local axes = axes_arg(self, n, ins, 13)
  if not axes then self:fail(n, "needs axes") end
  local r = #x.shape + #axes
  local ins_at = {}
  for _, a in ipairs(axes) do ins_at[self:axis(n, a, r)] = true end
  local out, j = {}, 1
  for i = 0, r - 1 do
    if ins_at[i] then out[i + 1] = 1 else out[i + 1] = x.shape[j]; j = j + 1 end
  end
  return { self:reshaped(n, x, out) }
end

conv.Transpose = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local perm = attr(n, "perm")
  if not perm then perm = {}; for i = 1, r do perm[i] = r - i end end
  return { self:emit(n, { x }, function(es) return relay.transpose(es[1], perm) end) }
end

conv.Concat = function(self, n, ins)
  local list = {}
  for i = 1, #n.inputs do
    if ins[i] and numel(ins[i].shape) > 0 then list[#list + 1] = ins[i] end
  end
  if #list == 0 then self:fail(n, "has no non-empty input") end
  local ax = self:axis(n, attr(n, "axis", self.opset < 4 and 1 or nil) or self:fail(n, "attribute axis is required"), #list[1].shape)
  if #list == 1 then return { list[1] } end
  local all_const = true
  for _, v in ipairs(list) do if not v.c then all_const = false end end
  if all_const and not is_float(list[1].dtype) then
    -- shape arithmetic: concatenate flat Lua lists
    local s = copy(list[1].shape)
    local outer = numel({ unpack(s, 1, ax) })
    local parts, total = {}, 0
    for i, v in ipairs(list) do
      parts[i] = { flat = flat_of(v.c), inner = numel({ unpack(v.shape, ax + 1) }) }
      total = total + v.shape[ax + 1]
    end
    local out = {}
    for o = 0, outer - 1 do
      for _, p in ipairs(parts) do
        for k = 1, p.inner do out[#out + 1] = p.flat[o * p.inner + k] end
      end
    end
    s[ax + 1] = total
    return { cval(from_flat(out, s, list[1].dtype)) }
  end
  local vals = {}
  for i, v in ipairs(list) do vals[i] = v end
  return { self:emit(n, vals, function(es) return relay.concatenate(es, { axis = ax }) end) }
end

-- A stride-1 slice [b, e) of a computed tensor along axis ax: the middle part of a split.
local function slice_expr(x, shape, ax, b, e)
  if b == 0 and e == shape[ax + 1] then return x end
  local idx = {}
  if b > 0 then idx[#idx + 1] = b end
  if e < shape[ax + 1] then idx[#idx + 1] = e end
  local s = relay.split(x, { indices_or_sections = idx, axis = ax })
  return relay.tuple_get(s, b > 0 and 1 or 0)
end

conv.Split = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local ax = self:axis(n, attr(n, "axis", 0), r)
  local sizes
  if self.opset >= 13 then
    sizes = ins[2] and ints_of(self:const(n, ins[2], "split")) or nil
  else
    sizes = attr(n, "split")
  end
  local nout = #n.outputs
  local dim = x.shape[ax + 1]
  if not sizes or #sizes == 0 then
    local num = attr(n, "num_outputs", nout)
    local each = math.ceil(dim / num)
    sizes = {}
    for i = 1, num do sizes[i] = math.max(0, math.min(each, dim - each * (i - 1))) end
  end
  local total = 0
  for _, s in ipairs(sizes) do
    if s == 0 then self:fail(n, "an empty output (split size 0) is not supported") end
    total = total + s
  end
  if total ~= dim then self:fail(n, "split sizes add up to %d, the axis has %d", total, dim) end
  local outs, at = {}, 0
  for i, s in ipairs(sizes) do
    local b, e = at, at + s
    outs[i] = self:emit(n, { x }, function(es) return slice_expr(es[1], x.shape, ax, b, e) end)
    at = e
  end
  return outs
end

conv.Slice = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local starts, ends, axes, steps
  if self.opset < 10 then
    starts, ends, axes = attr(n, "starts"), attr(n, "ends"), attr(n, "axes")
  else
    starts = ints_of(self:const(n, ins[2], "starts"))
    ends = ints_of(self:const(n, ins[3], "ends"))
    axes = ins[4] and ints_of(self:const(n, ins[4], "axes")) or nil
    steps = ins[5] and ints_of(self:const(n, ins[5], "steps")) or nil
  end
  local b, st, cnt = {}, {}, {}
  for i = 1, r do b[i], st[i], cnt[i] = 0, 1, x.shape[i] end
  for k = 1, #starts do
    local ax = self:axis(n, axes and axes[k] or k - 1, r)
    local d = x.shape[ax + 1]
    local step = steps and steps[k] or 1
    if step == 0 then self:fail(n, "steps[%d] is 0", k - 1) end
    local s, e = starts[k], ends[k]
    if s < 0 then s = s + d end
    if e < 0 then e = e + d end
    if step > 0 then
      s = math.max(0, math.min(s, d)); e = math.max(0, math.min(e, d))
      cnt[ax + 1] = math.max(0, math.ceil((e - s) / step))
    else
      s = math.max(-1, math.min(s, d - 1)); e = math.max(-1, math.min(e, d - 1))
      cnt[ax + 1] = math.max(0, math.ceil((s - e) / -step))
    end
    b[ax + 1], st[ax + 1] = s, step
  end
  if x.c then
    local b0 = {}
    for i = 1, r do b0[i] = b[i] end
    return { cval(fold_slice(x.c, b0, st, cnt)) }
  end
  local y = self:expr(x)
  for i = 1, r do
    if st[i] ~= 1 then self:fail(n, "steps = %d (axis %d) on computed data is not supported (only on constants)", st[i], i - 1) end
    if cnt[i] == 0 then self:fail(n, "an empty slice of axis %d is not supported", i - 1) end
    y = slice_expr(y, y.type.shape, i - 1, b[i], b[i] + cnt[i])
  end
  return { eval_of(y) }
end

conv.Gather = function(self, n, ins)
  local x, idx = ins[1], ins[2]
  local r = #x.shape
  local ax = self:axis(n, attr(n, "axis", 0), r)
  local ia = self:const(n, idx, "indices")
  local ii = ints_of(ia)
  local d = x.shape[ax + 1]
  for k, v in ipairs(ii) do
    if v < 0 then v = v + d end
    if v < 0 or v >= d then self:fail(n, "index %d is out of range for an axis of %d", ii[k], d) end
    ii[k] = v
  end
  local ishape = ia:shape()
  local out_shape = {}
  for i = 1, ax do out_shape[#out_shape + 1] = x.shape[i] end
  for _, s in ipairs(ishape) do out_shape[#out_shape + 1] = s end
  for i = ax + 2, r do out_shape[#out_shape + 1] = x.shape[i] end
  if x.c then
    local flat = flat_of(x.c)
    local outer = numel({ unpack(x.shape, 1, ax) })
    local inner = numel({ unpack(x.shape, ax + 2) })
    local out = {}
    for o = 0, outer - 1 do
      for _, v in ipairs(ii) do
        for k = 1, inner do out[#out + 1] = flat[(o * d + v) * inner + k] end
      end
    end
    return { cval(from_flat(out, out_shape, x.dtype)) }
  end
  -- a computed tensor: one stride-1 slice per index, concatenated
  local y = self:expr(x)
  local parts = {}
  for k, v in ipairs(ii) do parts[k] = slice_expr(y, x.shape, ax, v, v + 1) end
  local g = #parts == 1 and parts[1] or relay.concatenate(parts, { axis = ax })
  local v = eval_of(reshape_to(g, out_shape))
  return { #out_shape == 0 and as_scalar(v) or v }
end

-- ---- shape computations folded at import (comparisons, Where, Range, Expand) -----------------

local CMP = {
  Equal = function(a, b) return a == b end, Less = function(a, b) return a < b end,
  Greater = function(a, b) return a > b end, LessOrEqual = function(a, b) return a <= b end,
  GreaterOrEqual = function(a, b) return a >= b end,
}
for op, f in pairs(CMP) do
  conv[op] = function(self, n, ins)
    local a = self:const(n, ins[1], "A")
    local b = self:const(n, ins[2], "B")
    local r = fold_binary(a, b, f, "bool")
    if not r then self:fail(n, "shapes do not broadcast") end
    return { cval(r) }
  end
end

conv.Not = function(self, n, ins)
  local a = self:const(n, ins[1], "X")
  local fl = flat_of(a)
  for i, v in ipairs(fl) do fl[i] = not (v == true or v == 1) end
  return { cval(from_flat(fl, a:shape(), "bool")) }
end

conv.Where = function(self, n, ins)
  local c = self:const(n, ins[1], "condition")
  local x, y = ins[2], ins[3]
  if x.c and y.c then
    local dt = x.dtype
    local r = fold_nary({ c, x.c, y.c }, function(k, a, b) if k ~= 0 then return a end return b end, dt)
    if not r then self:fail(n, "shapes do not broadcast") end
    return { cval(r) }
  end
  self:fail(n, "X and Y computed from the graph's inputs are not supported (only constants)")
end

conv.Range = function(self, n, ins)
  local st = tonumber(flat_of(self:const(n, ins[1], "start"))[1])
  local lim = tonumber(flat_of(self:const(n, ins[2], "limit"))[1])
  local dl = tonumber(flat_of(self:const(n, ins[3], "delta"))[1])
  if dl == 0 then self:fail(n, "delta is 0") end
  local cnt = math.max(0, math.ceil((lim - st) / dl))
  local out = {}
  for i = 1, cnt do out[i] = st + (i - 1) * dl end
  return { cval(from_flat(out, { cnt }, ins[1].dtype)) }
end

conv.Expand = function(self, n, ins)
  local x = ins[1]
  local want = ints_of(self:const(n, ins[2], "shape"))
  local os = bcast_shape(x.shape, want)
  if not os then
    self:fail(n, "cannot expand %s to %s", relay.ops.shape_str(x.shape), relay.ops.shape_str(want))
  end
  if x.c then
    return { cval(fold_nary({ x.c, nd.zeros(os, "float32") }, function(a) return a end, x.dtype)) }
  end
  -- broadcast by adding zeros of the target shape (exact)
  return { self:emit(n, { x }, function(es) return relay.add(es[1], relay.const(nd.zeros(os, x.dtype))) end) }
end

conv.Shape = function(self, n, ins)
  local s = ins[1].shape
  local r = #s
  local b, e = attr(n, "start", 0), attr(n, "end", r)
  if b < 0 then b = b + r end
  if e < 0 then e = e + r end
  b, e = math.max(0, math.min(b, r)), math.max(0, math.min(e, r))
  local out = {}
  for i = b + 1, e do out[#out + 1] = s[i] end
  return { cval(from_flat(out, { #out }, "int64")) }
end

conv.Size = function(self, n, ins)
  return { cval(from_flat({ numel(ins[1].shape) }, {}, "int64")) }
end

conv.Constant = function(self, n)
  local a = n.attrs
  if a.value then
    if not onnx.is_array(a.value) then self:unsupported_attr(n, "value", a.value.elem_type, a.value.unsupported) end
    return { cval(a.value) }
  end
  if a.value_float then return { cval(from_flat({ a.value_float }, {}, "float32")) } end
  if a.value_floats then return { cval(from_flat(a.value_floats, { #a.value_floats }, "float32")) } end
  if a.value_int then return { cval(from_flat({ a.value_int }, {}, "int64")) } end
  if a.value_ints then return { cval(from_flat(a.value_ints, { #a.value_ints }, "int64")) } end
  for k in pairs(a) do self:unsupported_attr(n, k, "(given)") end
  self:fail(n, "has no value attribute")
end

conv.ConstantOfShape = function(self, n, ins)
  local shape = ints_of(self:const(n, ins[1], "input"))
  local v = n.attrs.value
  local val, dt = 0, "float32"
  if v then
    if not onnx.is_array(v) then self:unsupported_attr(n, "value", v.elem_type, v.unsupported) end
    val, dt = tonumber(flat_of(v)[1]), v:dtype()
  end
  local out = {}
  for i = 1, numel(shape) do out[i] = val end
  return { cval(from_flat(out, shape, dt)) }
end

conv.Cast = function(self, n, ins)
  local to = attr(n, "to")
  local dt = type(to) == "number" and DTYPE[to] or nil
  if type(to) == "string" then dt = ({ FLOAT = "float32", INT64 = "int64", INT32 = "int32" })[to] end
  if not dt then self:unsupported_attr(n, "to", to, "no tunelua dtype") end
  local x = ins[1]
  if x.dtype == dt then return { x } end
  if x.c and not (is_float(dt) or is_float(x.dtype)) then
    return { cval(from_flat(flat_of(x.c), x.shape, dt)) }
  end
  if x.c and not is_float(x.dtype) and is_float(dt) then
    return { cval(from_flat(flat_of(x.c), x.shape, dt)) }
  end
  return { self:emit(n, { x }, function(es) return relay.cast(es[1], dt) end) }
end

conv.Pad = function(self, n, ins)
  local x = ins[1]
  local r = #x.shape
  local mode, pads, value
  if self.opset < 11 then
    mode, pads, value = attr(n, "mode", "constant"), attr(n, "pads") or attr(n, "paddings"), attr(n, "value", 0)
  else
    mode = attr(n, "mode", "constant")
    pads = ints_of(self:const(n, ins[2], "pads"))
    value = ins[3] and tonumber(flat_of(self:const(n, ins[3], "constant_value"))[1] or 0) or 0
    if ins[4] then
      local axes = ints_of(self:const(n, ins[4], "axes"))
      local full = {}
      for i = 1, 2 * r do full[i] = 0 end
      for k, a in ipairs(axes) do
        local ax = self:axis(n, a, r)
        full[ax + 1], full[ax + 1 + r] = pads[k], pads[k + #axes]
      end
      pads = full
    end
  end
  if mode ~= "constant" and mode ~= "edge" and mode ~= "reflect" then
    self:unsupported_attr(n, "mode", mode, "constant, edge or reflect")
  end
  if #pads ~= 2 * r then self:fail(n, "pads has %d values for a rank-%d input", #pads, r) end
  local pw, any = {}, false
  for i = 1, r do
    if pads[i] < 0 or pads[i + r] < 0 then self:unsupported_attr(n, "pads", pads[i] < 0 and pads[i] or pads[i + r], "negative padding (cropping)") end
    pw[i] = { pads[i], pads[i + r] }
    if pads[i] ~= 0 or pads[i + r] ~= 0 then any = true end
    if mode == "reflect" and (pads[i] >= x.shape[i] or pads[i + r] >= x.shape[i]) then
      self:fail(n, "reflect padding of %d on axis %d of size %d is not supported (at most size - 1)",
                math.max(pads[i], pads[i + r]), i - 1, x.shape[i])
    end
  end
  if not any then return { x } end
  if mode == "constant" then
    return { self:emit(n, { x }, function(es) return relay.nn.pad(es[1], { pad_width = pw, pad_value = value }) end) }
  end
  -- edge and reflect: per padded axis, the copied rows (one-row slices) concatenated around x
  return { self:emit(n, { x }, function(es)
    local y = es[1]
    for ax = 0, r - 1 do
      local b, a = pw[ax + 1][1], pw[ax + 1][2]
      if b > 0 or a > 0 then
        local s = y.type.shape
        local d = s[ax + 1]
        local parts = {}
        for k = b, 1, -1 do
          local at = mode == "edge" and 0 or k
          parts[#parts + 1] = slice_expr(y, s, ax, at, at + 1)
        end
        parts[#parts + 1] = y
        for k = 1, a do
          local at = mode == "edge" and d - 1 or d - 1 - k
          parts[#parts + 1] = slice_expr(y, s, ax, at, at + 1)
        end
        y = relay.concatenate(parts, { axis = ax })
      end
    end
    return y
  end) }
end

-- ---- Resize / Upsample: one dense per resized axis ---------------------------------------------

-- The (out, in) interpolation matrix of one axis as a flat list.
local function interp_matrix(self, n, inn, out, scale, o)
  local m = {}
  for i = 1, out * inn do m[i] = 0 end
  local function put(i, j, w)
    if j < 0 then j = 0 elseif j > inn - 1 then j = inn - 1 end
    m[i * inn + j + 1] = m[i * inn + j + 1] + w
  end
  for i = 0, out - 1 do
    local x
    local ct = o.coord
    if ct == "half_pixel" then x = (i + 0.5) / scale - 0.5
    elseif ct == "pytorch_half_pixel" then x = inn * scale > 1 and (i + 0.5) / scale - 0.5 or 0
    elseif ct == "align_corners" then
      -- the resized length is in * scale, not rounded (as ONNX's reference computes it)
      x = inn * scale > 1 and i * (inn - 1) / (inn * scale - 1) or 0
    elseif ct == "asymmetric" then x = i / scale
    elseif ct == "tf_half_pixel_for_nn" then x = (i + 0.5) / scale
    else self:unsupported_attr(n, "coordinate_transformation_mode", ct) end
    if o.mode == "nearest" then
      local nm, j = o.nearest, nil
      if nm == "round_prefer_floor" then j = (x - math.floor(x) == 0.5) and math.floor(x) or math.floor(x + 0.5)
      elseif nm == "round_prefer_ceil" then j = math.floor(x + 0.5)
      elseif nm == "floor" then j = math.floor(x)
      elseif nm == "ceil" then j = math.ceil(x)
      else self:unsupported_attr(n, "nearest_mode", nm) end
      put(i, j, 1)
    elseif o.mode == "linear" then
      if x < 0 then x = 0 end
      if x > inn - 1 then x = inn - 1 end
      local j = math.floor(x)
      local w = x - j
      put(i, j, 1 - w)
      if w > 0 then put(i, j + 1, w) end
    elseif o.mode == "cubic" then
      local A = o.cubic_a
      local j = math.floor(x)
      local t = x - j
      local function k(d)
        d = math.abs(d)
        if d <= 1 then return ((A + 2) * d - (A + 3)) * d * d + 1 end
        if d < 2 then return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A end
        return 0
      end
      local ws, sum = {}, 0
      for q = -1, 2 do
        local w = k(t - q)
        if o.exclude_outside and (j + q < 0 or j + q > inn - 1) then w = 0 end
        ws[q] = w
        sum = sum + w
      end
      for q = -1, 2 do put(i, j + q, o.exclude_outside and ws[q] / sum or ws[q]) end
    else
      self:unsupported_attr(n, "mode", o.mode, "nearest, linear or cubic")
    end
  end
  return m
end

function Importer:resize(n, x, out_shape, scales, o)
  local r = #x.shape
  return self:emit(n, { x }, function(es)
    local y = es[1]
    for ax = 0, r - 1 do
      local inn, out = x.shape[ax + 1], out_shape[ax + 1]
      if inn ~= out or scales[ax + 1] ~= 1 then
        if ax < 2 and r >= 3 then self:fail(n, "resizing the batch or channel axis (%d) is not supported", ax) end
        local mat = from_flat(interp_matrix(self, n, inn, out, scales[ax + 1], o), { out, inn }, x.dtype)
        -- move the axis last, one dense against the matrix, move it back
        local s = y.type.shape
        local perm, back = {}, {}
        for i = 0, r - 1 do if i ~= ax then perm[#perm + 1] = i end end
        perm[#perm + 1] = ax
        for i, p in ipairs(perm) do back[p + 1] = i - 1 end
        local t = ax == r - 1 and y or relay.transpose(y, perm)
        local ts = t.type.shape
        local z = relay.nn.dense(relay.reshape(t, { numel(s) / inn, inn }), relay.const(mat))
        local zs = copy(ts)
        zs[#zs] = out
        z = relay.reshape(z, zs)
        y = ax == r - 1 and z or relay.transpose(z, back)
      end
    end
    return y
  end)
end

local function resize_opts(self, n, modern)
  local mode = attr(n, "mode", "nearest")
  if mode == "bilinear" or mode == "trilinear" then mode = "linear" end
  local o = { mode = mode, coord = "asymmetric", nearest = "floor", cubic_a = -0.75, exclude_outside = false }
  if modern then
    o.coord = attr(n, "coordinate_transformation_mode", "half_pixel")
    o.nearest = attr(n, "nearest_mode", "round_prefer_floor")
    o.cubic_a = attr(n, "cubic_coeff_a", -0.75)
    o.exclude_outside = attr(n, "exclude_outside", 0) ~= 0
    if o.coord == "tf_crop_and_resize" then self:unsupported_attr(n, "coordinate_transformation_mode", o.coord) end
    if attr(n, "antialias", 0) ~= 0 then self:unsupported_attr(n, "antialias", 1) end
    if attr(n, "axes") then self:unsupported_attr(n, "axes", "(given)") end
    local kar = attr(n, "keep_aspect_ratio_policy", "stretch")
    if kar ~= "stretch" then self:unsupported_attr(n, "keep_aspect_ratio_policy", kar) end
  end
  return o
end

local function out_from_scales(x, scales)
  local out = {}
  for i, d in ipairs(x.shape) do out[i] = math.floor(d * scales[i]) end
  return out
end

conv.Upsample = function(self, n, ins)
  local x = ins[1]
  local scales
  if self.opset < 9 then scales = attr(n, "scales") else scales = flat_of(self:const(n, ins[2], "scales")) end
  local o = resize_opts(self, n, false)
  for i = 1, #scales do scales[i] = tonumber(scales[i]) end
  return { self:resize(n, x, out_from_scales(x, scales), scales, o) }
end

conv.Resize = function(self, n, ins)
  local x = ins[1]
  local modern = self.opset >= 11
  local o = resize_opts(self, n, modern)
  local scales, sizes
  if not modern then
    scales = flat_of(self:const(n, ins[2], "scales"))
  else
    local sv, zv = opt_in(ins, 3), opt_in(ins, 4)
    if sv and numel(sv.shape) > 0 then scales = flat_of(self:const(n, sv, "scales")) end
    if zv and numel(zv.shape) > 0 then sizes = ints_of(self:const(n, zv, "sizes")) end
  end
  local out
  if scales then
    for i = 1, #scales do scales[i] = tonumber(scales[i]) end
    if #scales ~= #x.shape then self:fail(n, "scales has %d values for a rank-%d input", #scales, #x.shape) end
    out = out_from_scales(x, scales)
  elseif sizes then
    if #sizes ~= #x.shape then self:fail(n, "sizes has %d values for a rank-%d input", #sizes, #x.shape) end
    out, scales = sizes, {}
    for i, d in ipairs(x.shape) do scales[i] = sizes[i] / d end
  else
    self:fail(n, "needs scales or sizes")
  end
  return { self:resize(n, x, out, scales, o) }
end

-- ---- the list ---------------------------------------------------------------------------------------

--- The op types the importer converts (sorted).
function M.supported_ops()
  local t = {}
  for k in pairs(conv) do t[#t + 1] = k end
  table.sort(t)
  return t
end

-- ---- graph inputs -------------------------------------------------------------------------------------

local function input_var(self, v, opts)
  local ty = v.type
  if not ty or ty.kind ~= "tensor" then
    error(string.format("ONNX input '%s': only tensor inputs are supported, got %s", v.name,
                        ty and ty.kind or "no type"), 0)
  end
  local dtype = (opts.dtype and (type(opts.dtype) == "table" and opts.dtype[v.name] or
                 type(opts.dtype) == "string" and opts.dtype)) or ty.elem_type
  local given = opts.shape and opts.shape[v.name]
  local shape = {}
  if given then
    if ty.shape and #given ~= #ty.shape then
      error(string.format("ONNX input '%s': the shape option gives %d dimensions, the model's input has %d",
                          v.name, #given, #ty.shape), 0)
    end
    for i, d in ipairs(given) do
      local want = ty.shape and ty.shape[i]
      if type(want) == "number" and want > 0 and want ~= d then
        error(string.format("ONNX input '%s': the shape option gives dimension %d as %d, the model fixes it to %d",
                            v.name, i - 1, d, want), 0)
      end
      shape[i] = d
    end
  else
    if not ty.shape then
      error(string.format("ONNX input '%s' has an unknown rank: give its shape with the shape option, " ..
                          "e.g. shape = {[\"%s\"] = {1, 3, 224, 224}}", v.name, v.name), 0)
    end
    for i, d in ipairs(ty.shape) do
      if type(d) ~= "number" or d < 0 then
        error(string.format("ONNX input '%s' dimension %d (%s) is dynamic: give the input's shape with the " ..
                            "shape option, e.g. shape = {[\"%s\"] = {...}} (tunelua.relay.frontend.from_onnx), " ..
                            "--input %s:1x3x224x224 (scripts/tune_onnx.lua)", v.name, i - 1,
                            type(d) == "string" and ("'" .. d .. "'") or "unknown", v.name, v.name), 0)
      end
      shape[i] = d
    end
  end
  for i, d in ipairs(shape) do
    if d == 0 then
      error(string.format("ONNX input '%s' dimension %d is 0: empty tensors are not supported", v.name, i - 1), 0)
    end
  end
  if not ELEM_NAME[dtype] then
    error(string.format("ONNX input '%s': element type %s is not supported", v.name, tostring(dtype)), 0)
  end
  return relay.var(v.name, { shape = shape, dtype = dtype })
end

--- from_onnx(path_or_bytes, {shape = {name = dims}, dtype = "float32" | {name = dtype},
--- freeze_params = false, const_inputs = {name = tl.nd array}, dir}) -> mod, params.
--- path_or_bytes: a file name or the model's bytes. const_inputs gives graph inputs a value
--- known at import time (folded like initializers); dir: where the external data of a model
--- given as bytes is (default: the current directory).
--- The module's function takes the graph's inputs (those that are not initializers), in
--- graph order, then the params (the float initializers it uses); with freeze_params the
--- initializers are bound as constants and params is empty.
function M.from_onnx(src, opts)
  opts = opts or {}
  if type(src) ~= "string" then error("from_onnx: expected a file name or the model's bytes, got " .. type(src), 0) end
  local ok, m = pcall(onnx.load_model, src, { dir = opts.dir })
  if not ok then
    local what = onnx.is_model_bytes(src) and "the bytes given" or src
    local msg = tostring(m):gsub("^[^\n]-%.lua:%d+: ", "")
    if msg:find("malformed", 1, true) or msg:find("no graph", 1, true) then
      error(string.format("from_onnx: %s is not a valid ONNX model (%s)", what, msg), 0)
    end
    error("from_onnx: " .. msg, 0)
  end
  local self = setmetatable({ opset = m.opset or 1, params = {}, param_order = {}, values = {}, used = {},
                              model = m }, Importer)
  if m.opset == nil then
    error(string.format("from_onnx: %s imports no ai.onnx opset", m.path), 0)
  end
  for _, nd_ in ipairs(m.nodes) do
    for _, i in ipairs(nd_.inputs) do self.used[i] = true end
  end
  for _, o in ipairs(m.outputs) do self.used[o.name] = true end
  for _, init in ipairs(m.initializers) do
    if not onnx.is_array(init.value) then
      error(string.format("from_onnx: initializer '%s': %s", init.name, init.value.unsupported or "not supported"), 0)
    end
    self.values[init.name] = cval(init.value, init.name)
  end
  local inputs = {}
  local known = opts.const_inputs or {}
  for _, v in ipairs(m.inputs) do
    if known[v.name] ~= nil and not m.initializer[v.name] then
      self.values[v.name] = cval(known[v.name])
    elseif not m.initializer[v.name] then
      local var = input_var(self, v, opts)
      inputs[#inputs + 1] = var
      self.values[v.name] = eval_of(var)
    end
  end
  for _, n in ipairs(m.nodes) do
    if n.domain ~= "" and n.domain ~= "ai.onnx" then
      error(string.format("%s: domain '%s' is not supported (ai.onnx only)", node_label(n), n.domain), 0)
    end
    local f = conv[n.op_type]
    if not f then
      error(string.format("%s, opset %d: op %s is not supported; the importer supports: %s", node_label(n),
                          self.opset, n.op_type, table.concat(M.supported_ops(), ", ")), 0)
    end
    local ins = {}
    for i, name in ipairs(n.inputs) do
      if name ~= "" then
        local v = self.values[name]
        if v == nil then
          error(string.format("%s: input '%s' is not produced by any earlier node, initializer or graph input",
                              node_label(n), name), 0)
        end
        ins[i] = v
      end
    end
    local ok2, outs = pcall(f, self, n, ins)
    if not ok2 then
      local msg = tostring(outs)
      if not msg:find("^ONNX node") then
        msg = string.format("%s, opset %d: %s", node_label(n), self.opset, msg:gsub("^[^\n]-%.lua:%d+: ", ""))
      end
      error(msg, 0)
    end
    for i, name in ipairs(n.outputs) do
      if name ~= "" and outs[i] then self.values[name] = outs[i] end
    end
  end
  local outs = {}
  for _, o in ipairs(m.outputs) do
    local v = self.values[o.name]
    if not v then error(string.format("from_onnx: graph output '%s' is not produced by any node", o.name), 0) end
    outs[#outs + 1] = self:expr(v)
  end
  local body = #outs == 1 and outs[1] or relay.tuple(outs)
  local params = {}
  for _, p in ipairs(self.param_order) do inputs[#inputs + 1] = p end
  local f = relay.Function(inputs, body)
  local mod = relay.Module(f)
  for k, v in pairs(self.params) do params[k] = v end
  if opts.freeze_params then mod, params = relay.bind_params(mod, params), {} end
  return mod, params
end

return M
