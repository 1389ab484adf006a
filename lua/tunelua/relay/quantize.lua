--- tunelua.relay.quantize: post-training quantization to int8 (TVM's relay.quantize with
--- calibrate_mode "global_scale"; specs/vta.md §6.1).
--
--   local quantize = require "tunelua.relay.quantize"
--   local cfg = quantize.qconfig { global_scale = 8.0, skip_conv_layers = {0} }
--   local qmod = quantize.quantize(mod, params, cfg)    -- params bound, float in, float out
--
-- Prerequisites first (weights become constants): SimplifyInference, FoldConstant,
-- FoldScaleAxis, CanonicalizeOps, FoldConstant, so every batch norm is folded into its
-- conv's weight and an add of a per-channel constant. Then one rewrite realizes the
-- integer graph directly (TVM's annotate -> calibrate -> realize, with the scales known up
-- front because the calibration is a global scale):
--
--   * activations entering a conv are int8 at scale s_a = global_scale / 2^(nbit_input-1)
--     (8 / 128 = 1/16): a float tensor is quantized by multiply(1/s_a), round,
--     clip(-127, 127), cast int8; an int32 one is requantized (below) and cast;
--   * conv weights are int8 at scale s_w = 2^ceil(log2(max|w|)) / 2^(nbit_weight-1)
--     (power of two), w_q = clip(round(w / s_w), -127, 127) (round half away from zero);
--     the conv accumulates in int32 (out_dtype) at scale s_a * s_w;
--   * an add of a constant (a folded batch norm's shift) adds it as int32 at the
--     accumulator's scale, round(c / scale) (TVM quantizes it to 8 bits first);
--   * an add of two quantized values shifts the coarser one left to the finer scale and adds
--     in int32 (a float operand is first quantized to int8 at s_a, as TVM's add does); with
--     store_lowbit_output (the default), only the last int32 operand (the conv chain whose
--     group ends with the sum) keeps its 32 bits: the other operand (a residual: a block's
--     output, a downsample conv) is stored as int8 at s_a first, so every conv's group ends
--     in int8 as VTA stores it (TVM's partition inserts the same int8 casts); false keeps
--     both operands in int32;
--   * requantizing int32 from scale s to s' > s (both powers of two) is add(2^(k-1)) (round
--     for shift), right_shift(k), clip(-127, 127), k = log2(s'/s); to a finer scale,
--     left_shift;
--   * relu and max_pool2d run on the integers;
--   * global_avg_pool2d stops quantization (as TVM's stop_quantize): its input is stored as
--     int8 at s_a, then dequantized (cast float32, multiply s_a); everything after it is
--     float, and so is nn.dense (skip_dense_layer);
--   * conv2d calls are counted in post order from 0; those in skip_conv_layers (default
--     {0}: the stem) stay float, and so does everything before the first quantized conv;
--   * any other op consuming a quantized value gets it dequantized.
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"

local quantize = {}

local DEFAULTS = {
  nbit_input = 8, nbit_weight = 8, nbit_activation = 32,
  dtype_input = "int8", dtype_weight = "int8", dtype_activation = "int32",
  calibrate_mode = "global_scale", global_scale = 8.0, weight_scale = "power2",
  skip_conv_layers = { 0 }, skip_dense_layer = true, round_for_shift = true,
  store_lowbit_output = true,
}
local ORDER = { "nbit_input", "nbit_weight", "nbit_activation", "dtype_input", "dtype_weight",
                "dtype_activation", "calibrate_mode", "global_scale", "weight_scale",
                "skip_conv_layers", "skip_dense_layer", "round_for_shift", "store_lowbit_output" }

local QConfig = {}
QConfig.__index = QConfig
QConfig.__tostring = function(c)
  local p = {}
  for _, k in ipairs(ORDER) do
    local v = c[k]
    if type(v) == "table" then
      local l = {}
      for i, x in ipairs(v) do l[i] = tostring(x) end
      v = "[" .. table.concat(l, ", ") .. "]"
    end
    p[#p + 1] = k .. "=" .. tostring(v)
  end
  return "qconfig(" .. table.concat(p, ", ") .. ")"
end

local function bad(key, want, got, level)
  error(string.format("quantize.qconfig: %s must be %s, got %s", key, want, tostring(got)), level + 1)
end

--- quantize.qconfig(opts) -> a configuration (TVM's qconfig keys and defaults). Supported:
--- 8-bit int8 inputs and weights, 32-bit int32 activations, calibrate_mode "global_scale"
--- (global_scale > 0), weight_scale "power2", skip_conv_layers (a list of conv indices),
--- skip_dense_layer (true), round_for_shift, store_lowbit_output (a boolean).
function quantize.qconfig(opts)
  opts = opts or {}
  if type(opts) ~= "table" then bad("the options", "a table", type(opts), 2) end
  local c = setmetatable({}, QConfig)
  for k, v in pairs(DEFAULTS) do c[k] = v end
  for k, v in pairs(opts) do
    if DEFAULTS[k] == nil then
      error(string.format("quantize.qconfig: unknown option '%s' (expected one of %s)",
                          tostring(k), table.concat(ORDER, ", ")), 2)
    end
    c[k] = v
  end
  if c.nbit_input ~= 8 or c.dtype_input ~= "int8" then bad("nbit_input/dtype_input", "8/int8", c.nbit_input .. "/" .. tostring(c.dtype_input), 2) end
  if c.nbit_weight ~= 8 or c.dtype_weight ~= "int8" then bad("nbit_weight/dtype_weight", "8/int8", c.nbit_weight .. "/" .. tostring(c.dtype_weight), 2) end
  if c.nbit_activation ~= 32 or c.dtype_activation ~= "int32" then
    bad("nbit_activation/dtype_activation", "32/int32", c.nbit_activation .. "/" .. tostring(c.dtype_activation), 2)
  end
  if c.calibrate_mode ~= "global_scale" then bad("calibrate_mode", "\"global_scale\"", c.calibrate_mode, 2) end
  if type(c.global_scale) ~= "number" or not (c.global_scale > 0) or c.global_scale == math.huge then
    bad("global_scale", "a positive number", c.global_scale, 2)
  end
  if c.weight_scale ~= "power2" then bad("weight_scale", "\"power2\"", c.weight_scale, 2) end
  if type(c.skip_conv_layers) ~= "table" then bad("skip_conv_layers", "a list of conv indices", c.skip_conv_layers, 2) end
  for i, x in ipairs(c.skip_conv_layers) do
    if type(x) ~= "number" or x < 0 or x ~= math.floor(x) then
      bad(string.format("skip_conv_layers[%d]", i), "a non-negative integer", x, 2)
    end
  end
  if c.skip_dense_layer ~= true then bad("skip_dense_layer", "true (dense layers stay float)", c.skip_dense_layer, 2) end
  if type(c.store_lowbit_output) ~= "boolean" then bad("store_lowbit_output", "a boolean", c.store_lowbit_output, 2) end
  if type(c.round_for_shift) ~= "boolean" then bad("round_for_shift", "a boolean", c.round_for_shift, 2) end
  return c
end

--- The activation scale of a configuration: global_scale / 2^(nbit_input - 1).
function quantize.activation_scale(cfg)
  return cfg.global_scale / 2 ^ (cfg.nbit_input - 1)
end

-- round half away from zero
local function round(x)
  if x >= 0 then return math.floor(x + 0.5) end
  return -math.floor(-x + 0.5)
end

local function clamp(x, lo, hi)
  if x < lo then return lo end
  if x > hi then return hi end
  return x
end

--- The power-of-two scale of a weight array: 2^ceil(log2(max|w|)) / 2^(nbit - 1) (max|w| = 0
--- counts as 1), and the int8 array clip(round(w / scale), -(2^(nbit-1) - 1), 2^(nbit-1) - 1).
function quantize.quantize_weight(w, nbit)
  nbit = nbit or 8
  local n = w:numel()
  local p = w:astype("float32"):data_ptr()
  local m = 0
  for i = 0, n - 1 do
    local a = math.abs(p[i])
    if a > m then m = a end
  end
  if m == 0 then m = 1 end
  local e = math.ceil(math.log(m) / math.log(2))
  if 2 ^ (e - 1) >= m then e = e - 1 end          -- exact powers of two
  local scale = 2 ^ e / 2 ^ (nbit - 1)
  local q = nd.empty(w:shape(), "int8")
  local qp = q:data_ptr()
  local lim = 2 ^ (nbit - 1) - 1
  for i = 0, n - 1 do qp[i] = clamp(round(p[i] / scale), -lim, lim) end
  return q, scale
end

-- a constant (any shape) divided by scale and rounded, as int32
local function const_int32(c, scale)
  local v = c.value:astype("float32")
  local n = v:numel()
  local p = v:data_ptr()
  local q = nd.empty(v:shape(), "int32")
  local qp = q:data_ptr()
  for i = 0, n - 1 do qp[i] = clamp(round(p[i] / scale), -2 ^ 31, 2 ^ 31 - 1) end
  return relay.const(q)
end

-- Every conv2d whose weight is a var gets attrs.name = the var's name without "_weight", so
-- errors after the weights became constants (here, graph_pack) still name the layer.
local function name_convs(mod)
  local f = relay.main_of(mod, "quantize", 3)
  local body = relay.mutate(f.body, function(n)
    if n.kind == "call" and n.op == "nn.conv2d" and not n.attrs.name and n.args[2].kind == "var" then
      local a = {}
      for k, v in pairs(n.attrs) do a[k] = v end
      a.name = n.args[2].name:gsub("_weight$", "")
      return relay.call(n.op, n.args, a)
    end
  end)
  return relay.Module(relay.Function(f.params, body, f.attrs))
end

--- The prerequisite passes (params bound first): returns the module quantize rewrites.
function quantize.prerequisite(mod, params)
  local m = relay.bind_params(name_convs(mod), params or {})
  for _, p in ipairs { "SimplifyInference", "FoldConstant", "FoldScaleAxis", "CanonicalizeOps",
                       "FoldConstant" } do
    m = relay.transform[p]()(m)
  end
  return m
end

local function log2_int(r, what)
  local k = math.log(r) / math.log(2)
  local ki = math.floor(k + 0.5)
  if math.abs(k - ki) > 1e-9 then
    error(string.format("quantize: %s: scale ratio %g is not a power of two", what, r), 0)
  end
  return ki
end

local function layer_name(n)
  local l = relay.layer_of(n.op, n.args, n.attrs)
  return l or n.op
end

-- The rewrite. A value is {e = expr, s = scale or nil (float), dt = dtype}.
local function realize(f, cfg)
  local sa = quantize.activation_scale(cfg)
  local lim = 2 ^ (cfg.nbit_input - 1) - 1
  local skip = {}
  for _, i in ipairs(cfg.skip_conv_layers) do skip[i] = true end
  local val, as_input, uses = {}, {}, {}
  local nconv, stopped = 0, false
  local info = { convs = {} }

  local function i32(v)
    if v.dt == "int32" then return v.e end
    return relay.cast(v.e, "int32")
  end
  local function deq(v)
    if not v.s then return v.e end
    return relay.multiply(relay.cast(v.e, "float32"), relay.const(v.s, "float32"))
  end
  -- int32 at scale s_out (shift), clipped to the int8 range when clip
  local function requant(v, s_out, clip, what)
    local e = i32(v)
    if v.s ~= s_out then
      local k = log2_int(s_out / v.s, what)
      if k > 0 then
        if cfg.round_for_shift then e = relay.add(e, relay.const(2 ^ (k - 1), "int32")) end
        e = relay.right_shift(e, relay.const(k, "int32"))
      else
        e = relay.left_shift(e, relay.const(-k, "int32"))
      end
    end
    if clip then e = relay.clip(e, -lim, lim) end
    return e
  end
  -- the int8 value at s_a of node a (shared by every consumer)
  local function input_of(a, what)
    local r = as_input[a]
    if r then return r end
    local v = val[a]
    local e
    if not v.s then
      e = relay.multiply(v.e, relay.const(1 / sa, "float32"))
      e = relay.clip(relay.round(e), -lim, lim)
      e = relay.cast(e, "int8")
    elseif v.dt == "int8" and v.s == sa then
      e = v.e
    else
      e = relay.cast(requant(v, sa, true, what), "int8")
    end
    r = { e = e, s = sa, dt = "int8" }
    as_input[a] = r
    return r
  end
  local function float_call(n)
    local args = {}
    for i, a in ipairs(n.args) do args[i] = deq(val[a]) end
    return { e = relay.with_args(n, args) }
  end

  local rules = {}
  rules["nn.conv2d"] = function(n)
    local idx = nconv
    nconv = nconv + 1
    local what = layer_name(n)
    if skip[idx] or stopped then
      info.convs[#info.convs + 1] = { index = idx, layer = what, quantized = false }
      return float_call(n)
    end
    local w = n.args[2]
    if w.kind ~= "const" then
      error(string.format("quantize: conv2d %d (%s): the weight is not a constant (pass the params)",
                          idx, what), 0)
    end
    local x = input_of(n.args[1], what)
    local wq, sw = quantize.quantize_weight(w.value, cfg.nbit_weight)
    local attrs = {}
    for k, v in pairs(n.attrs) do attrs[k] = v end
    attrs.out_dtype = cfg.dtype_activation
    info.convs[#info.convs + 1] = { index = idx, layer = what, quantized = true, weight_scale = sw }
    return { e = relay.nn.conv2d(x.e, relay.const(wq), attrs), s = sa * sw, dt = "int32" }
  end
  rules["add"] = function(n)
    local a, b = n.args[1], n.args[2]
    local va, vb = val[a], val[b]
    if not va.s and not vb.s then return { e = relay.with_args(n, { va.e, vb.e }) } end
    local what = layer_name(n)
    if va.s and b.kind == "const" then
      return { e = relay.add(i32(va), const_int32(b, va.s)), s = va.s, dt = "int32" }
    elseif vb.s and a.kind == "const" then
      return { e = relay.add(const_int32(a, vb.s), i32(vb)), s = vb.s, dt = "int32" }
    end
    if not va.s then va = input_of(a, what) end
    if not vb.s then vb = input_of(b, what) end
    if cfg.store_lowbit_output then
      -- the last int32 operand stays at its accumulator's precision (the conv chain the sum
      -- ends); every other operand is stored as int8 at s_a; one that nothing else reads
      -- gets a fusion boundary after its int8 cast, so that the int8 value ends its own
      -- conv's group instead of joining the sum's
      local function store(x, v)
        local q = input_of(x, what)
        if v.dt ~= "int32" or (uses[x] or 0) > 1 then return q end
        return { e = relay.call("annotation.stop_fusion", { q.e }, {}), s = q.s, dt = q.dt }
      end
      if vb.dt == "int32" then va = store(a, va) else vb = store(b, vb) end
    end
    local s = math.min(va.s, vb.s)
    return { e = relay.add(requant(va, s, false, what), requant(vb, s, false, what)), s = s,
             dt = "int32" }
  end
  local function same_ints(n)
    local v = val[n.args[1]]
    if not v.s then return { e = relay.with_args(n, { v.e }) } end
    return { e = relay.with_args(n, { v.e }), s = v.s, dt = v.dt }
  end
  rules["nn.relu"] = same_ints
  rules["nn.max_pool2d"] = same_ints
  rules["nn.global_avg_pool2d"] = function(n)
    local v = val[n.args[1]]
    stopped = true
    if not v.s then return { e = relay.with_args(n, { v.e }) } end
    local q = input_of(n.args[1], layer_name(n))
    return { e = relay.with_args(n, { deq(q) }) }
  end

  local body = f.body
  local order = relay.post_order(body)
  for _, n in ipairs(order) do
    for _, k in ipairs(relay.kids(n)) do uses[k] = (uses[k] or 0) + 1 end
  end
  for _, n in ipairs(order) do
    if n.kind == "var" or n.kind == "const" then
      val[n] = { e = n }
    elseif n.kind == "call" and type(n.op) == "string" then
      local rule = rules[n.op]
      val[n] = rule and rule(n) or float_call(n)
    else
      local kids = relay.kids(n)
      local new = {}
      for i, k in ipairs(kids) do new[i] = deq(val[k]) end
      val[n] = { e = relay.with_args(n, new) }
    end
  end
  info.activation_scale = sa
  return relay.Function(f.params, deq(val[body]), f.attrs), info
end

--- quantize.quantize(mod, params, cfg) -> the quantized module (float input and output,
--- integer inside), and info {convs = {{index, layer, quantized, weight_scale}},
--- activation_scale}. cfg: a qconfig (default quantize.qconfig()).
function quantize.quantize(mod, params, cfg)
  cfg = cfg or quantize.qconfig()
  if getmetatable(cfg) ~= QConfig then cfg = quantize.qconfig(cfg) end
  local m = quantize.prerequisite(mod, params)
  local ok, f, info = pcall(realize, m.main, cfg)
  if not ok then error(tostring(f), 2) end
  return relay.Module(f), info
end

return quantize
