--- tunelua.graph.strategy: which AutoTVM templates implement a graph op on a target.
--
--   local strategy = require "tunelua.graph.strategy"
--   local tgt = strategy.parse_target("opencl -device=mali")   -- tunelua.target.parse
--   for _, impl in ipairs(strategy.templates(call_node, tgt)) do
--     print(impl.name, strategy.args_repr(impl.args))
--   end
--
-- A call node is a relay call (tunelua.relay): `.op` (e.g. "nn.conv2d"), `.args` (nodes with
-- `.type = {shape, dtype}`), `.attrs` (TVM attribute names). The result lists every
-- tunable implementation the target's strategy offers, in the order the strategy adds
-- them (TVM's AutoTVM extraction records all of them), each {name = template name,
-- args = Lua list as the log serializes it (formats §1.2)}. The strategy is data of the
-- target's family (targets/<family>/target.c: rows of op variant, template, args form,
-- condition); today:
--
--   x86 ("llvm ...", "c"):  nn.conv2d NCHW groups 1 -> conv2d_NCHWc.x86
--                           nn.conv2d NCHW depthwise -> depthwise_conv2d_NCHWc.x86
--                             args (data, kernel, strides, padding[4], dilation, layout,
--                                   out_layout, out_dtype)
--                           nn.dense -> dense_nopack.x86, dense_pack.x86
--                             args (data, weight, None, out_dtype)
--   mali ("opencl -device=mali"): nn.conv2d NCHW groups 1 -> conv2d_nchw_spatial_pack.mali,
--                             + conv2d_nchw_winograd.mali for 3x3, stride 1, dilation 1;
--                             depthwise -> depthwise_conv2d_nchw.mali
--                             args (data, kernel, strides, padding[4], dilation, out_dtype)
--                           nn.dense -> dense.mali (data, weight, None, out_dtype)
--   generic opencl and other targets: no templates.
--   packed convs (data_layout NCHW{b}n{c}c, from tunelua.relay.graph_pack) look up the
--   op variant "conv2d_packed", args form "conv_packed" (data, kernel, strides,
--   padding[2], dilation, layout, out_dtype): conv2d_packed.vta's.
-- NHWC convolutions have no AutoTVM template on these targets (TVM warns and uses a
-- plain compute), so they give none.
local targets = require "tunelua.target"
local json = require "tunelua.json"

local strategy = {}

--- Python's None inside args (JSON null): tunelua.json's null, as in tasks and logs.
strategy.null = json.null
local null = json.null

--- The parsed target (tunelua.target) of a target string or table; errors raise at level.
function strategy.parse_target(t, level)
  local r, msg = targets.try_parse(t)
  if not r then error("strategy: " .. msg, (level or 1) + 1) end
  return r
end

local function copy_list(t)
  local r = {}
  for i = 1, #t do r[i] = t[i] end
  return r
end

local function tensor_arg(ty)
  return { "TENSOR", copy_list(ty.shape), ty.dtype or "float32" }
end

local function pair(v, dflt)
  if v == nil then return { dflt, dflt } end
  if type(v) == "number" then return { v, v } end
  if #v == 1 then return { v[1], v[1] } end
  return { v[1], v[2] }
end

--- Padding as TVM normalizes it: 4 values (top, left, bottom, right).
function strategy.pad4(p)
  if p == nil then return { 0, 0, 0, 0 } end
  if type(p) == "number" then return { p, p, p, p } end
  if #p == 1 then return { p[1], p[1], p[1], p[1] } end
  if #p == 2 then return { p[1], p[2], p[1], p[2] } end
  return { p[1], p[2], p[3], p[4] }
end

local function out_dtype(attrs, ty)
  local od = attrs and attrs.out_dtype
  if od == nil or od == "" then return ty.dtype or "float32" end
  return od
end

-- conv2d facts: layouts, groups, kernel size, depthwise or not.
local function conv_info(node)
  local a = node.attrs or {}
  local dty, kty = node.args[1].type, node.args[2].type
  local layout = a.data_layout or "NCHW"
  local klayout = a.kernel_layout or (layout == "NHWC" and "HWIO" or "OIHW")
  local groups = a.groups or 1
  local cin
  local packed = layout:match("^NCHW%d+n%d+c$") ~= nil       -- VTA's NCHW{b}n{c}c
  if packed then cin = dty.shape[2] * dty.shape[6]
  elseif layout == "NCHW" then cin = dty.shape[2] else cin = dty.shape[4] end
  local kh, kw
  local ks = klayout
  kh = kty.shape[ks:find("H", 1, true)]
  kw = kty.shape[ks:find("W", 1, true)]
  local depthwise = groups > 1 and groups == cin
  return {
    layout = layout, klayout = klayout, groups = groups, depthwise = depthwise, packed = packed,
    strides = pair(a.strides, 1), dilation = pair(a.dilation, 1), padding = strategy.pad4(a.padding),
    kh = kh, kw = kw, data = dty, kernel = kty, out_dtype = out_dtype(a, dty),
  }
end

-- The args of a template, by the args form its strategy row names.
local args_of = {
  conv_layout = function(ci)
    return { tensor_arg(ci.data), tensor_arg(ci.kernel), ci.strides, ci.padding, ci.dilation, "NCHW",
             "NCHW", ci.out_dtype }
  end,
  conv = function(ci)
    return { tensor_arg(ci.data), tensor_arg(ci.kernel), copy_list(ci.strides), copy_list(ci.padding),
             copy_list(ci.dilation), ci.out_dtype }
  end,
  dense = function(di) return { tensor_arg(di.data), tensor_arg(di.weight), null, di.out_dtype } end,
  -- conv2d_packed.vta: 6-D data and kernel, padding as (top, left), the data layout
  conv_packed = function(ci)
    return { tensor_arg(ci.data), tensor_arg(ci.kernel), copy_list(ci.strides),
             { ci.padding[1], ci.padding[2] }, copy_list(ci.dilation), ci.layout, ci.out_dtype }
  end,
}

--- The args of a packed conv2d call (data layout NCHW{b}n{c}c) as conv2d_packed.vta's
--- records give them: data, kernel, strides, padding (top, left), dilation, layout,
--- out_dtype; nil for another call.
function strategy.packed_conv_args(node)
  if node.op ~= "nn.conv2d" then return nil end
  local ci = conv_info(node)
  if not ci.packed then return nil end
  return args_of.conv_packed(ci)
end

-- The conditions a strategy row may name.
local conditions = {
  ["3x3s1"] = function(ci)
    return ci.kh == 3 and ci.kw == 3 and ci.strides[1] == 1 and ci.strides[2] == 1
      and ci.dilation[1] == 1 and ci.dilation[2] == 1
  end,
}

-- The implementations of variant op (with facts info) in the target's strategy, in order.
local function from_strategy(tgt, op, info)
  local res = {}
  for _, row in ipairs(tgt.strategy) do
    if row.op == op and (row.when == nil or conditions[row.when](info)) then
      res[#res + 1] = { name = row.template, args = args_of[row.args](info) }
    end
  end
  return res
end

local function conv_templates(node, tgt)
  local ci = conv_info(node)
  if ci.packed then return from_strategy(tgt, "conv2d_packed", ci) end
  if ci.layout ~= "NCHW" or ci.klayout ~= "OIHW" then return {} end
  if ci.groups > 1 and not ci.depthwise then return {} end
  return from_strategy(tgt, ci.depthwise and "depthwise_conv2d" or "conv2d", ci)
end

local function dense_templates(node, tgt)
  local dty, wty = node.args[1].type, node.args[2].type
  return from_strategy(tgt, "dense", { data = dty, weight = wty, out_dtype = out_dtype(node.attrs, dty) })
end

-- A channel-blocked conv (AlterOpLayout's NCHW[x]c form on x86) is the same task as the
-- NCHW conv it came from: its args name the NCHW data and OIHW kernel shapes.
local function nchwc_templates(depthwise)
  return function(node, tgt)
    local a = node.attrs or {}
    local dty, kty = node.args[1].type, node.args[2].type
    local d, k = dty.shape, kty.shape
    if #d == 4 then d = { d[1], d[2], d[3], d[4], 1 } end     -- NCHW data read in place
    local ci = {
      layout = "NCHW", klayout = "OIHW", groups = depthwise and d[2] * d[5] or 1, depthwise = depthwise,
      strides = pair(a.strides, 1), dilation = pair(a.dilation, 1), padding = strategy.pad4(a.padding),
      kh = k[3], kw = k[4], out_dtype = out_dtype(a, dty),
      data = { shape = { d[1], d[2] * d[5], d[3], d[4] }, dtype = dty.dtype },
      kernel = { shape = { k[1] * k[5], k[2], k[3], k[4] }, dtype = kty.dtype },
    }
    return from_strategy(tgt, depthwise and "depthwise_conv2d" or "conv2d", ci)
  end
end

local by_op = {
  ["nn.conv2d"] = conv_templates,
  ["nn.dense"] = dense_templates,
  ["nn.contrib_conv2d_NCHWc"] = nchwc_templates(false),
  ["nn.contrib_depthwise_conv2d_NCHWc"] = nchwc_templates(true),
}
-- the ops a relay program has before AlterOpLayout (what task extraction looks for)
local source_ops = { ["nn.conv2d"] = true, ["nn.dense"] = true }

--- The AutoTVM implementations (templates) of a call node on target: list of {name, args}.
function strategy.templates(node, target)
  local tgt = strategy.parse_target(target, 2)
  local f = by_op[node.op]
  if not f then return {} end
  return f(node, tgt)
end

--- The ops that have AutoTVM templates somewhere.
function strategy.tunable_ops()
  local r = {}
  for k in pairs(by_op) do if source_ops[k] then r[#r + 1] = k end end
  table.sort(r)
  return r
end

-- ---- serialization ------------------------------------------------------------------

local function is_list(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

local function num(v)
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  return string.format("%.17g", v)
end

--- args as JSON text (the log's args array).
function strategy.args_json(v) return json.dumps(v) end

--- A value as TVM prints it inside args (Python tuples, no blanks):
--- ('TENSOR',(1,64,56,56),'float32'), (1,1), None, 'float32'
function strategy.args_repr(v)
  if v == null or v == nil then return "None" end
  local tv = type(v)
  if tv == "number" then return num(v) end
  if tv == "boolean" then return v and "True" or "False" end
  if tv == "string" then return "'" .. v .. "'" end
  local parts = {}
  for i = 1, #v do parts[i] = strategy.args_repr(v[i]) end
  if #v == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ",") .. ")"
end

--- The printing TVM uses for a task's args list: elements separated by ", " at the
--- top level, "," inside.
function strategy.args_str(args)
  local parts = {}
  for i = 1, #args do parts[i] = strategy.args_repr(args[i]) end
  return "(" .. table.concat(parts, ", ") .. ")"
end

strategy.is_list = is_list
return strategy
