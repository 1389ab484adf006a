--- AlterOpLayout: what TVM's AlterOpLayout does to the ops tunelua has: layout inference
--- for broadcast ops, and (opts.conv_blocks, given by the x86 graph build) the
--- channel-blocked layout NCHW[x]c through the whole graph.
--
-- Ops with a data layout (conv2d, conv3d, conv2d_transpose, pools, global pools,
-- layout_transform) give their output a layout; element-wise ops, nn.pad and
-- broadcast ops whose full-rank input has a layout pass it on. A broadcast op
-- (add, multiply, ...) with one input carrying a layout and the other of lower rank
-- gets that operand expanded to full rank (expand_dims at axis 0: a [C] shift of an
-- NHWC conv becomes [1, 1, 1, C], a [C, 1, 1] one of an NCHW conv [1, C, 1, 1]), as
-- TVM's layout inference does. FoldConstant folds the expansion of constants.
--
-- Blocked layouts (opts.conv_blocks(call) -> ic_bn, oc_bn, or nil to leave the conv as it
-- is; the graph build answers from the conv's AutoTVM config: the last factors of tile_ic
-- and tile_oc of the record the dispatch context picks, or of the fallback config):
--   * an NCHW/OIHW float conv2d (groups 1) becomes nn.contrib_conv2d_NCHWc with data
--     NCHW[ic_bn]c, kernel OIHW[oc_bn]o (a layout_transform of the weight, which
--     FoldConstant folds) and output NCHW[oc_bn]c; its data keeps the block it comes in
--     (ic_bn only splits the reduction, the kernel's layout does not depend on it), and
--     NCHW data (the graph's input) is read in place; a depthwise one (multiplier 1)
--     nn.contrib_depthwise_conv2d_NCHWc on NCHW[oc_bn]c in and out;
--   * element-wise ops pass the block on; broadcast ops (bias, batch-norm-folded scale,
--     residual add) run blocked: a [1, C, 1, 1] or full-size NCHW operand is transformed to
--     the block (constants fold), a blocked operand of another block converted;
--   * max/avg/global pools run on NCHW[x]c (the block passes through); concatenate on the
--     channel axis runs blocked when every input's channels divide by the first blocked
--     input's block;
--   * every other op, and the function's result, takes NCHW: a layout_transform back.
-- So a layout_transform appears only at the graph's edges (before flatten/dense, the
-- outputs; a depthwise conv or a blocked op fed by NCHW data) and between two neighbours
-- whose blocks differ (a residual add, a concatenation); one
-- transform per (value, layout), shared by its consumers.
local util = require "tunelua.relay.pass.util"

local M = {}

local SOURCES = { ["nn.conv2d"] = true, ["nn.conv3d"] = true, ["nn.conv2d_transpose"] = true,
                  ["nn.max_pool2d"] = true, ["nn.avg_pool2d"] = true, ["nn.max_pool3d"] = true,
                  ["nn.avg_pool3d"] = true, ["nn.global_avg_pool2d"] = true,
                  ["nn.global_max_pool2d"] = true, layout_transform = true }
local FOLLOW = { ["nn.relu"] = true, ["nn.leaky_relu"] = true, sigmoid = true, tanh = true,
                 clip = true, cast = true, exp = true, log = true, sqrt = true, rsqrt = true,
                 negative = true, abs = true, copy = true, ["nn.pad"] = true, floor = true,
                 ceil = true, round = true, erf = true }
local BINARY = { add = true, subtract = true, multiply = true, divide = true, maximum = true,
                 minimum = true, power = true }

local function transform(f)
  local relay = require "tunelua.relay"
  local has = {}
  local body = relay.mutate(f.body, function(n, old)
    if n.kind ~= "call" or type(n.op) ~= "string" then return nil end
    local op = n.op
    if SOURCES[op] then has[old] = true; return nil end
    if FOLLOW[op] then has[old] = has[old.args[1]]; return nil end
    if BINARY[op] then
      local a, b = old.args[1], old.args[2]
      local ra, rb = #a.type.shape, #b.type.shape
      local full = #n.type.shape
      local ok_a = has[a] and ra == full
      local ok_b = has[b] and rb == full
      if not (ok_a or ok_b) then return nil end
      has[old] = true
      local x, y = n.args[1], n.args[2]
      if ok_a and rb < full and rb > 0 then
        y = relay.expand_dims(y, 0, full - rb)
      elseif ok_b and ra < full and ra > 0 then
        x = relay.expand_dims(x, 0, full - ra)
      else
        return nil
      end
      return relay.call(op, { x, y }, n.attrs)
    end
  end)
  return util.refunction(f, body)
end

local UNARY = {}
for k in pairs(FOLLOW) do if k ~= "nn.pad" then UNARY[k] = true end end
local POOLS = { ["nn.max_pool2d"] = true, ["nn.avg_pool2d"] = true, ["nn.global_avg_pool2d"] = true,
                ["nn.global_max_pool2d"] = true }

local function blocked_name(b) return "NCHW" .. b .. "c" end

local function all_ones(shape)
  for _, d in ipairs(shape) do if d ~= 1 then return false end end
  return true
end

local function is_float(ty) return ty.dtype == "float32" end

local function block_graph(f, conv_blocks)
  local relay = require "tunelua.relay"
  local blk = {}        -- rewritten node -> its channel block (the value is NCHW[b]c, 5-D)
  local memo = {}       -- rewritten node -> layout name -> the transform of it
  local function transform_to(x, src, dst)
    local m = memo[x]
    if not m then m = {}; memo[x] = m end
    if not m[dst] then m[dst] = relay.layout_transform(x, src, dst) end
    return m[dst]
  end
  local function plain(x)
    local b = blk[x]
    if not b then return x end
    return transform_to(x, blocked_name(b), "NCHW")
  end
  -- x (rewritten) in NCHW[b]c; x4 its original type: NCHW 4-D
  local function to_block(x, b)
    local cb = blk[x]
    if cb == b then return x end
    local r
    if cb then
      r = transform_to(x, blocked_name(cb), blocked_name(b))
    else
      r = transform_to(x, "NCHW", blocked_name(b))
    end
    blk[r] = b
    return r
  end
  -- can an NCHW 4-D value of shape s become NCHW[b]c?
  local function blockable(s, b) return #s == 4 and s[2] % b == 0 end

  local function conv(old, args)
    local a = old.attrs or {}
    local dty, kty = old.args[1].type, old.args[2].type
    if a.data_layout ~= "NCHW" or a.kernel_layout ~= "OIHW" or (a.out_layout or "") ~= "" then return nil end
    if #dty.shape ~= 4 or #kty.shape ~= 4 or not is_float(dty) or not is_float(kty) then return nil end
    local C, O = dty.shape[2], kty.shape[1]
    local g = a.groups or 1
    local depthwise = g > 1 and g == C and O == C and kty.shape[2] == 1
    if g ~= 1 and not depthwise then return nil end
    local ib, ob = conv_blocks(old)
    if not ib or not ob then return nil end
    if depthwise then ib = ob end
    if C % ib ~= 0 or O % ob ~= 0 then return nil end
    -- a conv reads its data in the block it comes in (the producer's): ic_bn only splits the
    -- reduction over input channels, and the kernel's layout OIHW[oc_bn]o does not depend on
    -- it, so two convs never disagree; a depthwise conv needs its own block
    local data
    if depthwise then
      data = to_block(args[1], ib)
    elseif blk[args[1]] then
      ib, data = blk[args[1]], args[1]
    else
      ib, data = nil, args[1]     -- NCHW data read in place (the graph's input)
    end
    local kernel = relay.layout_transform(args[2], "OIHW", "OIHW" .. ob .. "o")
    local op = depthwise and "nn.contrib_depthwise_conv2d_NCHWc" or "nn.contrib_conv2d_NCHWc"
    local r = relay.call(op, { data, kernel }, {
      strides = a.strides, padding = a.padding, dilation = a.dilation,
      data_layout = ib and blocked_name(ib) or "NCHW", kernel_layout = "OIHW" .. ob .. "o",
      out_layout = blocked_name(ob), out_dtype = a.out_dtype })
    blk[r] = ob
    return r
  end

  local function binary(old, args)
    local x, y = args[1], args[2]
    local b = blk[x] or blk[y]
    if not b then return nil end
    local full = old.type.shape
    local out = {}
    for i = 1, 2 do
      local v, ty = args[i], old.args[i].type
      if blk[v] then
        out[i] = to_block(v, b)
      elseif #ty.shape == 0 or all_ones(ty.shape) then
        out[i] = v
      elseif #ty.shape == 4 and #full == 4 and blockable(ty.shape, b) and ty.shape[1] == 1 and
             ty.shape[3] == 1 and ty.shape[4] == 1 then
        out[i] = transform_to(v, "NCHW", blocked_name(b))    -- [1, C, 1, 1]: bias, scale
      elseif #ty.shape == 4 and #full == 4 and blockable(ty.shape, b) and ty.shape[1] == full[1] and
             ty.shape[3] == full[3] and ty.shape[4] == full[4] then
        out[i] = to_block(v, b)                              -- a full NCHW operand
      else
        return relay.with_args(old, { plain(x), plain(y) })
      end
    end
    local r = relay.with_args(old, out)
    blk[r] = b
    return r
  end

  local function concat(old, args)
    local a = old.attrs or {}
    local first
    for _, v in ipairs(args) do if blk[v] then first = blk[v]; break end end
    if not first then return nil end
    local axis = a.axis or 0
    local ok = #old.type.shape == 4 and (axis == 1 or axis == -3)
    for i, v in ipairs(args) do
      if not (ok and blockable(old.args[i].type.shape, first)) then ok = false end
      local _ = v
    end
    local out = {}
    for i, v in ipairs(args) do out[i] = ok and to_block(v, first) or plain(v) end
    if not ok then return relay.with_args(old, out) end
    local attrs = {}
    for k, v in pairs(a) do attrs[k] = v end
    attrs.axis = 1
    local r = relay.call("concatenate", out, attrs)
    blk[r] = first
    return r
  end

  local body = relay.mutate_pre(f.body, function(old, map)
    if old.kind == "tuple" or old.kind == "tuple_get" then
      -- tuples hold NCHW values (no op of the networks here blocks through a tuple)
      local kids = relay.kids(old)
      local new, changed = {}, false
      for i, c in ipairs(kids) do
        new[i] = plain(map[c])
        if new[i] ~= c then changed = true end
      end
      if not changed then return nil end
      return relay.with_args(old, new)
    end
    if old.kind ~= "call" then return nil end
    local args = {}
    for i, c in ipairs(old.args) do args[i] = map[c] end
    local op = type(old.op) == "string" and old.op or nil
    if op == "nn.conv2d" then
      local r = conv(old, args)
      if r then return r end
    elseif op and UNARY[op] then
      local b = blk[args[1]]
      if b and #old.args == 1 then
        local r = relay.with_args(old, args)
        blk[r] = b
        return r
      end
    elseif op and BINARY[op] and #old.args == 2 then
      return binary(old, args)
    elseif op and POOLS[op] and blk[args[1]] and (old.attrs.layout or "NCHW") == "NCHW" then
      local attrs = {}
      for k, v in pairs(old.attrs) do attrs[k] = v end
      attrs.layout = blocked_name(blk[args[1]])
      local r = relay.call(op, { args[1] }, attrs)
      blk[r] = blk[args[1]]
      return r
    elseif op == "concatenate" then
      return concat(old, args)
    end
    -- every other op: NCHW operands
    local changed = false
    for i, v in ipairs(args) do
      local p = plain(v)
      if p ~= old.args[i] then changed = true end
      args[i] = p
    end
    if not changed then return nil end
    return relay.with_args(old, args)
  end)
  return util.refunction(f, plain(body))
end

--- M.block(f, conv_blocks) -> f with blocked layouts (see the top of this file).
M.block = block_graph

local function transform_opts(f, opts)
  local g = transform(f)
  if opts and opts.conv_blocks then g = block_graph(g, opts.conv_blocks) end
  return g
end

M.transform = transform
-- The op sets the blocked rewrite follows (the graph tuner's executor model reads them, so
-- that its account of the transforms is this pass's):
-- the unary ops that pass a block on, broadcast binaries, pools that run blocked.
M.UNARY, M.BINARY, M.POOLS = UNARY, BINARY, POOLS
M.pass = util.make("AlterOpLayout", transform_opts)
return M
