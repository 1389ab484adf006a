--- tunelua.graph.ops: relay op -> topi operator call, for building fused groups' DAGs.
--
-- The relay op registry (`relay.op.get(name)`) is the authority: its `topi` name and
-- `to_topi(attrs, arg_types)`. This module asks it first and falls back to a built-in
-- table (relay attribute names map onto topi's almost one to one) for ops the registry
-- gives no topi call.
local ops = {}

local function relay_get(name) return require("tunelua.relay").op.get(name) end

local function copy(t)
  local r = {}
  if t then for k, v in pairs(t) do r[k] = v end end
  return r
end

local function drop_name(a)
  a.name = nil
  return a
end

local function conv_attrs(attrs, arg_types)
  local a = drop_name(copy(attrs))
  a.layout = a.data_layout or a.layout or "NCHW"
  a.data_layout = nil
  a.channels, a.kernel_size, a.out_layout = nil, nil, nil
  if a.out_dtype == "" then a.out_dtype = nil end
  local groups = a.groups or 1
  if groups > 1 then
    local d = arg_types[1].shape
    local cin = a.layout == "NHWC" and d[4] or d[2]
    if groups == cin then
      a.groups = nil
      return "depthwise_conv2d", a
    end
  end
  return "conv2d", a
end

-- name -> function(attrs, arg_types) -> topi name, topi attrs
local fallback = {
  ["nn.conv2d"] = conv_attrs,
  ["nn.dense"] = function(a) a = drop_name(copy(a)); a.units = nil
    if a.out_dtype == "" then a.out_dtype = nil end
    return "dense", a end,
  ["nn.batch_matmul"] = function(a) return "batch_matmul", drop_name(copy(a)) end,
  ["nn.bias_add"] = function(a) return "bias_add", drop_name(copy(a)) end,
  ["nn.relu"] = function() return "relu", {} end,
  ["nn.leaky_relu"] = function(a) return "leaky_relu", drop_name(copy(a)) end,
  ["nn.softmax"] = function(a) return "softmax", drop_name(copy(a)) end,
  ["nn.log_softmax"] = function(a) return "log_softmax", drop_name(copy(a)) end,
  ["nn.max_pool2d"] = function(a) return "max_pool2d", drop_name(copy(a)) end,
  ["nn.avg_pool2d"] = function(a) return "avg_pool2d", drop_name(copy(a)) end,
  ["nn.global_avg_pool2d"] = function(a) return "global_avg_pool2d", drop_name(copy(a)) end,
  ["nn.global_max_pool2d"] = function(a) return "global_max_pool2d", drop_name(copy(a)) end,
  ["nn.batch_flatten"] = function() return "flatten", {} end,
  ["nn.batch_norm"] = function(a) return "batch_norm", drop_name(copy(a)) end,
  ["nn.pad"] = function(a) return "pad", drop_name(copy(a)) end,
  ["clip"] = function(a) return "clip", drop_name(copy(a)) end,
  ["concatenate"] = function(a) return "concatenate", drop_name(copy(a)) end,
  ["reshape"] = function(a) return "reshape", drop_name(copy(a)) end,
  ["transpose"] = function(a) return "transpose", drop_name(copy(a)) end,
  ["squeeze"] = function(a) return "squeeze", drop_name(copy(a)) end,
  ["expand_dims"] = function(a) return "expand_dims", drop_name(copy(a)) end,
  ["layout_transform"] = function(a) return "layout_transform", drop_name(copy(a)) end,
  ["cast"] = function(a) return "cast", drop_name(copy(a)) end,
}
for _, n in ipairs({ "add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                     "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "negative", "abs" }) do
  fallback[n] = function() return n, {} end
end

--- topi name and attrs table for a call node (arg_types: list of {shape, dtype}).
function ops.to_topi(node, arg_types, level)
  local r = relay_get(node.op)
  if r and r.to_topi then
    local a, tname = r.to_topi(node.attrs or {}, arg_types)
    local name = tname or r.topi
    if name then return name, a or {} end
  end
  local f = fallback[node.op]
  if not f then
    error(string.format("graph: op '%s' has no topi implementation (layer %s)", tostring(node.op),
                        tostring(node.attrs and node.attrs.name or "?")), (level or 1) + 1)
  end
  return f(node.attrs or {}, arg_types)
end

return ops
