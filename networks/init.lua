--- networks: the benchmark networks of TVM's relay.testing, in Lua.
--
--   local networks = require "networks"
--   local mod, params, input_shape, output_shape =
--     networks.get_network("resnet-18", {batch_size = 1, layout = "NHWC", dtype = "float32"})
--   for _, name in ipairs(networks.list()) do print(name) end
--
--   -- a network as a plain table of layers (see docs/networks.md)
--   local mod, params = networks.from_table({
--     {"conv2d", name = "conv1", channels = 16, kernel_size = 3, padding = 1},
--     {"batch_norm"}, {"relu"},
--     {"global_avg_pool2d"}, {"batch_flatten"},
--     {"dense", name = "fc", units = 10}, {"softmax"},
--   }, {input_shape = {1, 3, 32, 32}})
--
-- get_network mirrors the seeds' get_network (specs/networks.md): the module
-- (relay Module, input var `data`), its parameters (name -> tl.nd array,
-- random and seeded, initialized as TVM's init.py does), the input shape
-- and the output shape. Options: batch_size (1), layout ("NCHW" | "NHWC";
-- resnet3d also takes "NCDHW" | "NDHWC"), dtype ("float32"), image_size
-- (default 224, 299 for inception_v3, 112 for resnet3d), num_classes (1000),
-- seed (0), init ("xavier", as TVM; "he" keeps deep activations at unit
-- scale, for numerical tests), init_params (true; false returns an empty
-- params table), depth (resnet3d frames, 16).
-- VGG, SqueezeNet and Inception v3 exist only in NCHW, as in TVM. resnet18_v1,
-- resnet34_v1 and resnet50_v1 are the Gluon model zoo's post-activation ResNets
-- (networks/resnet_v1.lua, NCHW only); they end in the logits, without softmax.
local layers = require "networks.layers"

local networks = {}

local NAMES = {
  "resnet-18", "resnet-34", "resnet-50", "resnet-101", "resnet-152",
  "resnet18_v1", "resnet34_v1", "resnet50_v1",
  "mobilenet",
  "vgg-11", "vgg-13", "vgg-16", "vgg-19",
  "vgg-11-bn", "vgg-13-bn", "vgg-16-bn", "vgg-19-bn",
  "squeezenet_v1.0", "squeezenet_v1.1",
  "inception_v3",
  "resnet3d-18", "resnet3d-34",
}

--- Every network name get_network knows, in a fixed order.
function networks.list()
  local t = {}
  for i, n in ipairs(NAMES) do t[i] = n end
  return t
end

local known = {}
for _, n in ipairs(NAMES) do known[n] = true end

--- Which layouts a network supports (the first is its default).
function networks.layouts(name)
  if name:match("^resnet%-") or name == "mobilenet" then return { "NCHW", "NHWC" } end
  if name:match("^resnet3d%-") then return { "NCDHW", "NDHWC" } end
  return { "NCHW" }
end

local function strip_position(msg)
  msg = tostring(msg)
  return (msg:gsub("^[^\n]-%.lua:%d+: ", ""))
end

local ALLOWED = { batch_size = true, layout = true, dtype = true, image_size = true,
                  num_classes = true, seed = true, init_params = true, depth = true,
                  init = true }

--- get_network(name, opts) -> mod, params, input_shape, output_shape
function networks.get_network(name, opts)
  if type(name) ~= "string" then
    error("get_network: the network name must be a string, got " .. type(name), 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then
    error("get_network: options must be a table, got " .. type(opts), 2)
  end
  for k in pairs(opts) do
    if not ALLOWED[k] then
      error(string.format("get_network: unknown option '%s' (expected batch_size, layout, " ..
                          "dtype, image_size, num_classes, seed, init, init_params or depth)",
                          tostring(k)), 2)
    end
  end
  if not known[name] then
    error(string.format("get_network: unknown network '%s' (expected one of %s)", name,
                        table.concat(NAMES, ", ")), 2)
  end
  local batch = opts.batch_size or 1
  local layout = opts.layout or "NCHW"
  local nc = opts.num_classes or 1000
  local w = {
    batch_size = batch, dtype = opts.dtype or "float32", num_classes = nc,
    seed = opts.seed or 0, init_params = opts.init_params, init = opts.init,
  }
  if w.init ~= nil and w.init ~= "xavier" and w.init ~= "he" then
    error(string.format("get_network: init must be 'xavier' or 'he', got %s", tostring(w.init)), 2)
  end
  local family, input_shape
  if name:match("^resnet3d%-") then
    local map = { NCHW = "NCDHW", NHWC = "NDHWC", NCDHW = "NCDHW", NDHWC = "NDHWC" }
    local l3 = map[layout]
    if not l3 then
      error(string.format("get_network: %s supports the layouts NCDHW (or NCHW) and NDHWC " ..
                          "(or NHWC), got %s", name, tostring(layout)), 2)
    end
    local size, depth = opts.image_size or 112, opts.depth or 16
    w.layout = l3
    w.num_layers = tonumber(name:match("%-(%d+)$"))
    w.image_shape = l3 == "NCDHW" and { 3, depth, size, size } or { depth, size, size, 3 }
    family = "networks.resnet_3d"
  else
    local supported = networks.layouts(name)
    local ok = false
    for _, l in ipairs(supported) do ok = ok or l == layout end
    if not ok then
      error(string.format("get_network: %s supports only the %s layout%s, got %s", name,
                          table.concat(supported, " and "), #supported > 1 and "s" or "",
                          tostring(layout)), 2)
    end
    local size = opts.image_size or (name == "inception_v3" and 299 or 224)
    w.layout = layout
    w.image_shape = layout == "NCHW" and { 3, size, size } or { size, size, 3 }
    if name:match("^resnet%-") then
      w.num_layers = tonumber(name:match("%-(%d+)$"))
      family = "networks.resnet"
    elseif name:match("^resnet%d+_v1$") then
      w.num_layers = tonumber(name:match("^resnet(%d+)_v1$"))
      family = "networks.resnet_v1"
    elseif name == "mobilenet" then
      family = "networks.mobilenet"
    elseif name:match("^vgg%-") then
      w.num_layers = tonumber(name:match("^vgg%-(%d+)"))
      w.batch_norm = name:match("%-bn$") ~= nil
      family = "networks.vgg"
    elseif name:match("^squeezenet") then
      w.version = name:match("v(1%.%d)$")
      family = "networks.squeezenet"
    else
      family = "networks.inception_v3"
    end
  end
  local ok, mod, params = pcall(require(family).get_workload, w)
  if not ok then error("get_network: " .. strip_position(mod), 2) end
  input_shape = { batch }
  for i, d in ipairs(w.image_shape) do input_shape[i + 1] = d end
  return mod, params, input_shape, { batch, nc }
end

-- ---- networks as tables of layers ---------------------------------------------------------


local shape_str = layers.shape_str

-- one layer: name, op, its inputs (nodes), the builder, options -> node
local LAYERS = {}

local function need_rank(x, ranks, what)
  local s = layers.shape(x)
  for _, r in ipairs(ranks) do if #s == r then return s end end
  error(string.format("%s needs a %d-d input, got shape %s", what, ranks[1], shape_str(s)), 0)
end

local function conv_layer(nsp)
  return function(L, ins, b, o)
    local x = ins[1]
    local dl = L.layout or L.data_layout or o.layout
    local s = need_rank(x, { #dl }, L[1])
    local ci = dl:find("C")
    local groups = L.groups or 1
    if not L.channels or not L.kernel_size then
      error(L[1] .. " needs channels and kernel_size", 0)
    end
    if s[ci] % groups ~= 0 then
      error(string.format("input channels %d (shape %s) are not divisible by groups=%d", s[ci],
                          shape_str(s), groups), 0)
    end
    local kl = L.kernel_layout or layers.conv_kernel_layout(dl, groups > 1 and groups == s[ci])
    local y = b[nsp == 2 and "conv2d" or "conv3d"](b, x, {
      name = L.name, channels = L.channels, kernel_size = L.kernel_size, strides = L.strides,
      padding = L.padding, dilation = L.dilation, groups = groups, data_layout = dl,
      kernel_layout = kl })
    if L.use_bias then y = b:bias_add(y, L.name .. "_bias", ci - 1) end
    return y
  end
end
LAYERS.conv2d = conv_layer(2)
LAYERS.conv3d = conv_layer(3)

function LAYERS.dense(L, ins, b)
  need_rank(ins[1], { 2 }, "dense")
  if not L.units then error("dense needs units", 0) end
  if L.use_bias == false then return b:dense(ins[1], { name = L.name, units = L.units }) end
  return b:dense_add_bias(ins[1], { name = L.name, units = L.units })
end

function LAYERS.batch_norm(L, ins, b, o)
  local axis = L.axis
  if axis == nil then
    local s = layers.shape(ins[1])
    local l = o.layout
    axis = (#s == #l and l:find("C") or 2) - 1
  end
  return b:batch_norm(ins[1], { name = L.name, axis = axis, epsilon = L.epsilon,
                                scale = L.scale, center = L.center })
end

function LAYERS.bias_add(L, ins, b, o)
  local axis = L.axis
  if axis == nil then
    local s = layers.shape(ins[1])
    axis = (#s == #o.layout and o.layout:find("C") or 2) - 1
  end
  return b:bias_add(ins[1], L.name .. "_bias", axis)
end

local function simple(fn, attrs_of)
  return function(L, ins)
    local R = require "tunelua.relay"
    local f = fn:match("^nn%.") and R.nn[fn:sub(4)] or R[fn]
    if attrs_of then return f(ins[1], attrs_of(L)) end
    return f(ins[1])
  end
end

LAYERS.relu = simple("nn.relu")
LAYERS.sigmoid = simple("sigmoid")
LAYERS.tanh = simple("tanh")
LAYERS.leaky_relu = simple("nn.leaky_relu", function(L) return { alpha = L.alpha or 0.01 } end)
LAYERS.softmax = simple("nn.softmax", function(L) return { axis = L.axis or -1 } end)
LAYERS.log_softmax = simple("nn.log_softmax", function(L) return { axis = L.axis or -1 } end)
LAYERS.dropout = simple("nn.dropout", function(L) return { rate = L.rate or 0.5 } end)
LAYERS.batch_flatten = simple("nn.batch_flatten")
LAYERS.flatten = LAYERS.batch_flatten
LAYERS.reshape = simple("reshape", function(L) return { newshape = L.newshape } end)

local function pool_layer(fn, rank)
  return function(L, ins, _, o)
    local R = require "tunelua.relay"
    local layout = L.layout or o.layout
    need_rank(ins[1], { rank }, L[1])
    if not L.pool_size then error(L[1] .. " needs pool_size", 0) end
    local nsp = rank - 2
    local attrs = {
      pool_size = layers.tuple(L.pool_size, nsp, "pool_size"),
      strides = layers.tuple(L.strides or 1, nsp, "strides"),
      padding = layers.tuple(L.padding or 0, nsp, "padding"),
      layout = layout, ceil_mode = L.ceil_mode or false }
    if fn:match("^avg") then attrs.count_include_pad = L.count_include_pad or false end
    return R.nn[fn](ins[1], attrs)
  end
end
LAYERS.max_pool2d = pool_layer("max_pool2d", 4)
LAYERS.avg_pool2d = pool_layer("avg_pool2d", 4)
LAYERS.max_pool3d = pool_layer("max_pool3d", 5)
LAYERS.avg_pool3d = pool_layer("avg_pool3d", 5)

local function global_pool(fn)
  return function(L, ins, _, o)
    local R = require "tunelua.relay"
    need_rank(ins[1], { 4 }, L[1])
    return R.nn[fn](ins[1], { layout = L.layout or o.layout })
  end
end
LAYERS.global_avg_pool2d = global_pool("global_avg_pool2d")
LAYERS.global_max_pool2d = global_pool("global_max_pool2d")

local function broadcast_ok(a, b)
  local n = math.max(#a, #b)
  for i = 0, n - 1 do
    local x, y = a[#a - i] or 1, b[#b - i] or 1
    if x ~= y and x ~= 1 and y ~= 1 then return false end
  end
  return true
end

local function binary(fn)
  return function(L, ins)
    local R = require "tunelua.relay"
    if #ins ~= 2 then
      error(string.format("%s needs 2 inputs, got %d", L[1], #ins), 0)
    end
    local a, c = layers.shape(ins[1]), layers.shape(ins[2])
    if not broadcast_ok(a, c) then
      error(string.format("input shapes %s and %s do not line up", shape_str(a), shape_str(c)), 0)
    end
    return R[fn](ins[1], ins[2])
  end
end
LAYERS.add = binary("add")
LAYERS.subtract = binary("subtract")
LAYERS.multiply = binary("multiply")
LAYERS.maximum = binary("maximum")

function LAYERS.concatenate(L, ins, _, o)
  local R = require "tunelua.relay"
  local s0 = layers.shape(ins[1])
  local axis = L.axis
  if axis == nil then axis = (#s0 == #o.layout and o.layout:find("C") or 2) - 1 end
  local ax = axis < 0 and #s0 + axis + 1 or axis + 1
  for k = 2, #ins do
    local s = layers.shape(ins[k])
    local ok = #s == #s0
    for i = 1, #s0 do
      if i ~= ax and s[i] ~= s0[i] then ok = false end
    end
    if not ok then
      error(string.format("input shapes %s and %s do not line up outside axis %d",
                          shape_str(s0), shape_str(s), axis), 0)
    end
  end
  return R.concatenate(ins, { axis = axis })
end

-- attributes each layer kind accepts (besides op, name, input, inputs)
local CONV = { "channels", "kernel_size", "strides", "padding", "dilation", "groups", "use_bias",
               "layout", "data_layout", "kernel_layout" }
local POOL = { "pool_size", "strides", "padding", "layout", "ceil_mode", "count_include_pad" }
local ATTRS = {
  conv2d = CONV, conv3d = CONV, dense = { "units", "use_bias" },
  batch_norm = { "axis", "epsilon", "scale", "center" }, bias_add = { "axis" },
  leaky_relu = { "alpha" }, softmax = { "axis" }, log_softmax = { "axis" }, dropout = { "rate" },
  reshape = { "newshape" }, max_pool2d = POOL, avg_pool2d = POOL, max_pool3d = POOL,
  avg_pool3d = POOL, global_avg_pool2d = { "layout" }, global_max_pool2d = { "layout" },
  concatenate = { "axis" },
}
local COMMON = { [1] = true, op = true, name = true, input = true, inputs = true }

local function check_attrs(op, L)
  local ok = {}
  for _, a in ipairs(ATTRS[op] or {}) do ok[a] = true end
  for k in pairs(L) do
    if not COMMON[k] and not ok[k] then
      local list = ATTRS[op] and table.concat(ATTRS[op], ", ") or "none"
      return string.format("unknown attribute '%s' for %s (expected %s)", tostring(k), op, list)
    end
  end
end

local function op_list()
  local t = {}
  for k in pairs(LAYERS) do t[#t + 1] = k end
  table.sort(t)
  return table.concat(t, ", ")
end

--- The layer kinds from_table knows.
function networks.table_ops()
  local t = {}
  for k in pairs(LAYERS) do t[#t + 1] = k end
  table.sort(t)
  return t
end

local FT_ALLOWED = { input_shape = true, layout = true, dtype = true, seed = true,
                     input_name = true, init_params = true, init = true }

--- from_table(spec, opts) -> mod, params, input_shape, output_shape.
--- spec: a list of layers {op, name = ..., input = "name" | inputs = {...}, attrs...};
--- a layer reads the previous layer's output unless it names its inputs.
--- opts: input_shape (required), layout ("NCHW"), dtype, seed, input_name ("data").
function networks.from_table(spec, opts)
  if type(spec) ~= "table" then
    error("from_table: expected a list of layers, got " .. type(spec), 2)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if not FT_ALLOWED[k] then
      error(string.format("from_table: unknown option '%s' (expected input_shape, layout, " ..
                          "dtype, seed, init, input_name or init_params)", tostring(k)), 2)
    end
  end
  if type(opts.input_shape) ~= "table" then
    error("from_table: opts.input_shape is required (e.g. {1, 3, 224, 224})", 2)
  end
  if #spec == 0 then error("from_table: the network has no layers", 2) end
  local o = { layout = opts.layout or (#opts.input_shape == 5 and "NCDHW" or "NCHW") }
  local b = layers.builder(opts)
  local input_name = opts.input_name or "data"
  local data = b:input(input_name, opts.input_shape)
  local named = { [input_name] = data }
  local prev = data
  for i, L in ipairs(spec) do
    if type(L) ~= "table" then
      error(string.format("network layer %d: expected a table such as {\"relu\"}, got %s", i,
                          type(L)), 2)
    end
    local op = L[1] or L.op
    local name = L.name or (tostring(op) .. "_" .. i)
    local where = string.format("network layer %d '%s'", i, name)
    if type(op) ~= "string" then
      error(string.format("%s: missing op name (the first entry, e.g. {\"conv2d\", ...})",
                          where), 2)
    end
    local build = LAYERS[op]
    if not build then
      error(string.format("%s: unknown op '%s' (expected one of %s)", where, op, op_list()), 2)
    end
    local bad = check_attrs(op, L)
    if bad then error(where .. ": " .. bad, 2) end
    if named[name] then
      error(string.format("%s: the name '%s' is already used by an earlier layer", where, name),
            2)
    end
    local refs = L.inputs or (L.input and { L.input })
    local ins = {}
    if refs and (type(refs) ~= "table" or #refs == 0) then
      error(string.format("%s: inputs must be a non-empty list of layer names", where), 2)
    end
    if refs then
      for k, r in ipairs(refs) do
        ins[k] = named[r]
        if not ins[k] then
          error(string.format("%s: input '%s' is neither the network input '%s' nor the name " ..
                              "of an earlier layer", where, tostring(r), input_name), 2)
        end
      end
    else
      ins[1] = prev
    end
    local layer = {}
    for k, v in pairs(L) do layer[k] = v end
    layer[1], layer.name = op, name
    local ok, res = pcall(build, layer, ins, b, o)
    if not ok then error(where .. ": " .. strip_position(res), 2) end
    named[name] = res
    prev = res
  end
  local mod, params = b:finish(prev, { input_name = input_name, init_params = opts.init_params })
  local in_shape = {}
  for k, d in ipairs(opts.input_shape) do in_shape[k] = d end
  return mod, params, in_shape, layers.shape(prev)
end

return networks
