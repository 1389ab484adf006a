--- networks.layers: the building blocks every network file shares.
--
--   local layers = require "networks.layers"
--   local b = layers.builder({dtype = "float32"})
--   local x = b:input("data", {1, 3, 224, 224})
--   local y = b:conv2d(x, {name = "conv0", channels = 64, kernel_size = 7, strides = 2,
--                          padding = 3, data_layout = "NCHW", kernel_layout = "OIHW"})
--   y = b:batch_norm(y, {name = "bn0", epsilon = 2e-5, axis = 1})
--   y = relay.nn.relu(y)
--   local mod, params = b:finish(relay.nn.softmax(y))
--
-- This is the Lua counterpart of TVM's relay.testing layers.py and init.py:
-- weight vars are named `<name>_weight`, batch norm vars `<name>_gamma`,
-- `_beta`, `_moving_mean`, `_moving_var`, dense biases `<name>_bias`.
-- Unlike TVM, vars are typed when they are made (Contract A infers types
-- eagerly), so the builder computes each weight's shape from its input.
--
-- b:finish(body) makes the relay Function (its parameters in TVM's
-- free_vars order: first use in a post-order walk, arguments left to
-- right; `data` first) and fills the parameters the way init.py does:
-- `*weight` Xavier(uniform, factor "avg", magnitude 3; factor = kh*kw when
-- the name holds "depthwise"), `*bias` 0, `*gamma` 1, `*beta` 0, `*mean` 0,
-- `*var` 1. Each weight is drawn in its logical O,I,(D,)H,W order and then
-- transposed into its layout (HWIO, HWOI, DHWIO), so a network's NHWC
-- parameters are exactly its NCHW parameters transposed. Every parameter
-- has its own seed (derived from the builder's seed and the parameter's
-- position), so the values do not depend on anything but (network, seed).
local nd = require "tunelua.nd"

local layers = {}

local function relay()
  return require "tunelua.relay"
end

-- ---- small helpers --------------------------------------------------------------------

--- n (number) or {a, b, ...} -> a list of length k.
function layers.tuple(v, k, what)
  if type(v) == "number" then
    local t = {}
    for i = 1, k do t[i] = v end
    return t
  end
  if type(v) ~= "table" then
    error(string.format("%s must be a number or a list of %d numbers, got %s", what, k,
                        type(v)), 3)
  end
  if #v == 1 and k > 1 then return layers.tuple(v[1], k, what) end
  return v
end

--- The shape (a Lua list) of a relay node.
function layers.shape(node)
  local ty = node.type
  if type(ty) ~= "table" or type(ty.shape) ~= "table" then
    error("node has no tensor type (a tuple?)", 3)
  end
  local s = {}
  for i, d in ipairs(ty.shape) do s[i] = tonumber(d) end
  return s
end

local function shape_str(s)
  local p = {}
  for i, d in ipairs(s) do p[i] = tostring(d) end
  return "(" .. table.concat(p, ", ") .. (#p == 1 and ",)" or ")")
end
layers.shape_str = shape_str

--- Kernel layout for a data layout (layers.conv_kernel_layout in TVM).
function layers.conv_kernel_layout(data_layout, is_depthwise)
  if data_layout == "NCHW" then return "OIHW" end
  if data_layout == "NHWC" then return is_depthwise and "HWOI" or "HWIO" end
  if data_layout == "NCDHW" then return "OIDHW" end
  if data_layout == "NDHWC" then return "DHWIO" end
  error("unsupported data layout '" .. tostring(data_layout) .. "'", 2)
end

-- ---- the builder ------------------------------------------------------------------------

local Builder = {}
Builder.__index = Builder

--- A builder: opts.dtype (default float32), opts.seed (default 0), opts.init
--- ("xavier", TVM's initializer, the default; or "he": weights U(+-sqrt(6/fan_in)),
--- which keeps activations of deep networks at unit scale -- for tests that
--- want outputs far from uniform).
function layers.builder(opts)
  opts = opts or {}
  return setmetatable({
    dtype = opts.dtype or "float32",
    seed = opts.seed or 0,
    init = opts.init or "xavier",
    init_layout = {},      -- var name -> layout of its weight (for the logical init order)
  }, Builder)
end

--- A typed var. layout (optional) is the weight layout ("OIHW", "HWIO", ...).
function Builder:var(name, shape, layout)
  local v = relay().var(name, { shape = shape, dtype = self.dtype })
  if layout then self.init_layout[name] = layout end
  return v
end

function Builder:input(name, shape)
  return self:var(name, shape)
end

local function channel_of(x, layout)
  local s = layers.shape(x)
  local ci = layout:find("C")
  if not ci or #s ~= #layout then
    error(string.format("input of shape %s does not match layout %s", shape_str(s), layout), 3)
  end
  return s[ci]
end

-- Kernel shape in kernel_layout for O=channels, I=cin/groups and the spatial kernel.
local function kernel_shape(kernel_layout, o, i, ks)
  local dims = { O = o, I = i }
  local sp = kernel_layout:gsub("[OI]", "")
  for k = 1, #sp do dims[sp:sub(k, k)] = ks[k] end
  local s = {}
  for k = 1, #kernel_layout do s[k] = dims[kernel_layout:sub(k, k)] end
  return s
end
layers.kernel_shape = kernel_shape

--- conv2d / conv3d without bias (layers.conv2d): opts name, channels, kernel_size,
--- strides, padding, dilation, groups, data_layout, kernel_layout, weight (a var to use).
local function conv(self, op, x, o, nsp)
  local data_layout = o.data_layout or (nsp == 2 and "NCHW" or "NCDHW")
  local kernel_layout = o.kernel_layout or layers.conv_kernel_layout(data_layout)
  local groups = o.groups or 1
  local ks = layers.tuple(o.kernel_size, nsp, "kernel_size")
  local strides = layers.tuple(o.strides or 1, nsp, "strides")
  local padding = layers.tuple(o.padding or 0, nsp, "padding")
  local dilation = layers.tuple(o.dilation or 1, nsp, "dilation")
  local w = o.weight
  if not w then
    local cin = channel_of(x, data_layout)
    w = self:var(o.name .. "_weight", kernel_shape(kernel_layout, o.channels, cin / groups, ks),
                 kernel_layout)
  end
  local attrs = {
    strides = strides, padding = padding, dilation = dilation, groups = groups,
    channels = o.channels, kernel_size = ks, data_layout = data_layout,
    kernel_layout = kernel_layout,
  }
  return relay().nn[op](x, w, attrs)
end

function Builder:conv2d(x, o) return conv(self, "conv2d", x, o, 2) end
function Builder:conv3d(x, o) return conv(self, "conv3d", x, o, 3) end

--- batch_norm_infer: nn.batch_norm(...)[0] with vars <name>_gamma, _beta,
--- _moving_mean, _moving_var. opts name, axis (default 1), epsilon (1e-5), scale, center.
function Builder:batch_norm(x, o)
  local axis = o.axis or 1
  local s = layers.shape(x)
  local ax = axis < 0 and #s + axis + 1 or axis + 1
  local c = s[ax]
  if not c then
    error(string.format("batch_norm '%s': axis %d out of range for shape %s", o.name, axis,
                        shape_str(s)), 2)
  end
  local g = self:var(o.name .. "_gamma", { c })
  local b = self:var(o.name .. "_beta", { c })
  local m = self:var(o.name .. "_moving_mean", { c })
  local v = self:var(o.name .. "_moving_var", { c })
  local R = relay()
  local bn = R.nn.batch_norm(x, g, b, m, v, {
    axis = axis, epsilon = o.epsilon or 1e-5,
    center = o.center == nil and true or o.center,
    scale = o.scale == nil and true or o.scale,
  })
  return R.tuple_get(bn, 0)
end

--- dense_add_bias: nn.dense(x, <name>_weight, units) + bias_add(<name>_bias, axis=-1).
function Builder:dense_add_bias(x, o)
  local y = self:dense(x, o)
  local b = self:var((o.bias_name or (o.name .. "_bias")), { o.units })
  return relay().nn.bias_add(y, b, { axis = o.bias_axis or -1 })
end

--- nn.dense(x, <name>_weight (units, in), units).
function Builder:dense(x, o)
  local s = layers.shape(x)
  local w = self:var(o.weight_name or (o.name .. "_weight"), { o.units, s[#s] }, "OI")
  return relay().nn.dense(x, w, { units = o.units })
end

--- bias_add with a new var <name> of the size of `axis` (default 1).
function Builder:bias_add(x, name, axis)
  axis = axis or 1
  local s = layers.shape(x)
  local ax = axis < 0 and #s + axis + 1 or axis + 1
  local b = self:var(name, { s[ax] })
  return relay().nn.bias_add(x, b, { axis = axis })
end

-- ---- free vars and parameter initialization ----------------------------------------------

--- The vars of expr in TVM's free_vars order (post-order, args left to right).
function layers.free_vars(expr)
  local seen, list = {}, {}
  local visited = {}
  local function walk(n)
    if visited[n] then return end
    visited[n] = true
    local k = n.kind
    if k == "var" then
      if not seen[n] then
        seen[n] = true
        list[#list + 1] = n
      end
    elseif k == "call" then
      for _, a in ipairs(n.args) do walk(a) end
    elseif k == "tuple" then
      for _, f in ipairs(n.fields) do walk(f) end
    elseif k == "tuple_get" then
      walk(n.tuple)
    end
  end
  walk(expr)
  return list
end

-- Permute a (logical-order) array into the array of shape `shape` whose
-- dims are named by `layout`; `logical` names the dims of src.
local function permute(src, logical, layout, shape)
  local dst = nd.empty(shape, src:dtype())
  local sshape = src:shape()
  local n = #sshape
  local sstride = {}
  local acc = 1
  for d = n, 1, -1 do
    sstride[d] = acc
    acc = acc * sshape[d]
  end
  -- stride (in src) of each dst dim
  local st = {}
  for d = 1, n do
    local letter = layout:sub(d, d)
    st[d] = sstride[logical:find(letter, 1, true)]
  end
  local sp, dp = src:data_ptr(), dst:data_ptr()
  -- rows along the last dst dim; the other dims step like an odometer
  local idx = {}
  for d = 1, n do idx[d] = 0 end
  local last, lst = shape[n], st[n]
  local rows = dst:numel() / last
  local off, o = 0, 0
  for _ = 1, rows do
    for k = 0, last - 1 do dp[o + k] = sp[off + k * lst] end
    o = o + last
    local d = n - 1
    while d >= 1 do
      idx[d] = idx[d] + 1
      off = off + st[d]
      if idx[d] < shape[d] then break end
      off = off - st[d] * shape[d]
      idx[d] = 0
      d = d - 1
    end
  end
  return dst
end
layers.permute = permute

local function ends_with(s, suffix)
  return #s >= #suffix and s:sub(-#suffix) == suffix
end

-- Xavier(uniform, avg, magnitude 3) on a logical (O, I, spatial...) shape.
local function xavier_scale(name, lshape)
  local hw = 1
  for d = 3, #lshape do hw = hw * lshape[d] end
  local fan_in, fan_out = (lshape[2] or 1) * hw, lshape[1] * hw
  local factor = (fan_in + fan_out) / 2
  if name:find("depthwise", 1, true) then factor = hw end
  return math.sqrt(3 / factor)
end

--- Fill one parameter value the way TVM's init.py does (see the top of the file).
function Builder:init_param(var, index)
  local name = var.name
  local shape = {}
  for i, d in ipairs(var.type.shape) do shape[i] = tonumber(d) end
  local dtype = var.type.dtype or self.dtype
  if ends_with(name, "weight") then
    local layout = self.init_layout[name]
    local logical, lshape = nil, shape
    if layout and #layout == #shape then
      local sp = layout:gsub("[OI]", "")
      logical = "OI" .. sp
      lshape = {}
      for k = 1, #logical do lshape[k] = shape[layout:find(logical:sub(k, k), 1, true)] end
    end
    if #lshape < 2 then
      error(string.format("weight '%s' has shape %s; Xavier needs at least 2 dims", name,
                          shape_str(shape)), 2)
    end
    local scale = xavier_scale(name, lshape)
    if self.init == "he" then          -- variance-preserving through relu: U(+-sqrt(6/fan_in))
      local fan_in = lshape[2]
      for d = 3, #lshape do fan_in = fan_in * lshape[d] end
      scale = math.sqrt(6 / fan_in)
    end
    local seed = (self.seed * 7919 + index * 104729 + 17) % 2 ^ 31
    local a = nd.random_uniform(lshape, { low = -scale, high = scale, seed = seed,
                                          dtype = dtype })
    if logical and logical ~= layout then a = permute(a, logical, layout, shape) end
    return a
  end
  local value = 0
  if ends_with(name, "gamma") or ends_with(name, "var") then value = 1 end
  if not (ends_with(name, "bias") or ends_with(name, "beta") or ends_with(name, "mean")
          or value == 1) then
    error(string.format("parameter '%s': no initializer for this name (expected a name ending in weight, bias, gamma, beta, mean or var)", name), 2)
  end
  return nd.full(shape, value, dtype)
end

--- The module and its parameters: body -> mod, params (name -> tl.nd array).
--- opts.init_params = false skips the values (params is then {}).
function Builder:finish(body, opts)
  opts = opts or {}
  local R = relay()
  local vars = layers.free_vars(body)
  local func = R.Function(vars, body)
  local mod = R.Module(func)
  local params = {}
  if opts.init_params ~= false then
    local idx = 0
    for _, v in ipairs(vars) do
      if v.name ~= (opts.input_name or "data") then
        idx = idx + 1
        params[v.name] = self:init_param(v, idx)
      end
    end
  end
  return mod, params
end

return layers
