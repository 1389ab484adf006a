--- ConvertLayout({["nn.conv2d"] = {"NHWC", "default"}}): convert conv2d (and what
--- follows it) between NCHW and NHWC.
--
-- A conv2d listed in desired_layouts gets the new data layout (its input goes through
-- layout_transform when it is not already in that layout) and the kernel layout given
-- ("default": HWIO for NHWC, HWOI for a depthwise NHWC conv, OIHW for NCHW); its
-- weight is layout_transform'ed (FoldConstant makes that a constant). Layout-agnostic
-- ops follow their input's layout: element-wise ops, broadcast ops (a per-channel
-- constant is re-laid out to match), bias_add / batch_norm (axis moved), pools and
-- global pools (layout attr), concatenate (axis), nn.pad (pad_width permuted). Any
-- other op gets its inputs transformed back to the original layout, as does the
-- function's output. Pools and global pools may be listed too
-- ({["nn.max_pool2d"] = {"NHWC"}}): they then convert even after an unconverted op.
local util = require "tunelua.relay.pass.util"

local M = {}

local function perm_of(src, dst)
  local p = {}
  for i = 1, #dst do p[i] = src:find(dst:sub(i, i), 1, true) end
  return p
end

local ELEMWISE = { ["nn.relu"] = true, ["nn.leaky_relu"] = true, sigmoid = true, tanh = true,
                   clip = true, cast = true, exp = true, log = true, sqrt = true, rsqrt = true,
                   negative = true, abs = true, copy = true, floor = true, ceil = true,
                   round = true, erf = true }
local BINARY = { add = true, subtract = true, multiply = true, divide = true, maximum = true,
                 minimum = true, power = true }
local POOLS = { ["nn.max_pool2d"] = true, ["nn.avg_pool2d"] = true,
                ["nn.global_avg_pool2d"] = true, ["nn.global_max_pool2d"] = true }

local function transform(f, opts)
  local relay = require "tunelua.relay"
  local desired = opts.desired_layouts or opts
  local lay = {}        -- old node -> {src = original layout, dst = current layout}
  local function to(x, src, dst)
    if src == dst then return x end
    return relay.layout_transform(x, src, dst)
  end
  -- the new value of old arg a in its original layout
  local back = {}
  local function orig(a, map)
    local l = lay[a]
    if l then
      local r = back[a]
      if not r then r = to(map[a], l.dst, l.src); back[a] = r end
      return r
    end
    return map[a]
  end
  -- a broadcast operand (original layout src, rank <= 4) re-laid out to dst
  local function relay_operand(a, map, src, dst)
    local l = lay[a]
    if l then
      if l.src == src and l.dst == dst then return map[a] end
      return to(orig(a, map), src, dst)
    end
    local x = map[a]
    local r = #x.type.shape
    if r == 0 then return x end
    if r < #src then
      local total = 1
      for _, d in ipairs(x.type.shape) do total = total * d end
      if total == 1 then return x end
      x = relay.reshape(x, (function()
        local s = {}
        for i = 1, #src - r do s[i] = 1 end
        for _, d in ipairs(x.type.shape) do s[#s + 1] = d end
        return s
      end)())
    end
    return to(x, src, dst)
  end
  local body = relay.mutate_pre(f.body, function(old, map)
    if old.kind == "tuple_get" then
      local l = lay[old.tuple]
      if l and old.index == 0 then lay[old] = l end
      return nil
    end
    if old.kind ~= "call" or type(old.op) ~= "string" then
      -- tuples and fused calls: inputs back in their original layout
      if old.kind == "tuple" or old.kind == "call" then
        local changed, new = false, {}
        for i, a in ipairs(relay.kids(old)) do
          new[i] = orig(a, map)
          if lay[a] then changed = true end
        end
        if changed then return relay.with_args(old, new) end
      end
      return nil
    end
    local op = old.op
    local a1 = old.args[1]
    local l1 = a1 and lay[a1]
    local want = desired[op]
    if op == "nn.conv2d" and want then
      local src = old.attrs.data_layout
      local dst = want[1]
      if (src == "NCHW" or src == "NHWC") and (dst == "NCHW" or dst == "NHWC") and dst ~= src then
        local kl = want[2]
        if kl == nil or kl == "default" then
          local ops = require "tunelua.relay.ops"
          local dw = ops.is_depthwise(old.attrs, a1.type, old.args[2].type)
          if dst == "NHWC" then kl = dw and "HWOI" or "HWIO" else kl = "OIHW" end
        end
        local data
        if l1 and l1.dst == dst then data = map[a1] else data = to(orig(a1, map), src, dst) end
        local w = to(map[old.args[2]], old.attrs.kernel_layout, kl)
        local attrs = {}
        for k, v in pairs(old.attrs) do attrs[k] = v end
        attrs.data_layout, attrs.kernel_layout = dst, kl
        local p = attrs.padding
        attrs.padding = { p[1], p[2], p[3], p[4] }
        lay[old] = { src = src, dst = dst }
        return relay.call(op, { data, w }, attrs)
      end
      -- same layout: inputs back in their original layout
    end
    if POOLS[op] then
      local src = old.attrs.layout
      local dst
      if l1 and l1.src == src then dst = l1.dst
      elseif want and want[1] ~= src then dst = want[1] end
      if dst and dst ~= src and (src == "NCHW" or src == "NHWC") and (dst == "NCHW" or dst == "NHWC") then
        local data
        if l1 and l1.dst == dst then data = map[a1] else data = to(orig(a1, map), src, dst) end
        local attrs = {}
        for k, v in pairs(old.attrs) do attrs[k] = v end
        attrs.layout = dst
        lay[old] = { src = src, dst = dst }
        return relay.call(op, { data }, attrs)
      end
    end
    if ELEMWISE[op] and l1 then
      lay[old] = l1
      return relay.call(op, { map[a1] }, old.attrs)
    end
    if BINARY[op] then
      local la, lb = lay[old.args[1]], lay[old.args[2]]
      local l = la or lb
      if l and #old.type.shape == #l.src then
        local x = relay_operand(old.args[1], map, l.src, l.dst)
        local y = relay_operand(old.args[2], map, l.src, l.dst)
        lay[old] = l
        return relay.call(op, { x, y }, old.attrs)
      end
    end
    if (op == "nn.bias_add" or op == "nn.batch_norm") and l1 then
      local n4 = #a1.type.shape
      local ax = old.attrs.axis < 0 and old.attrs.axis + n4 or old.attrs.axis
      local ch = l1.src:sub(ax + 1, ax + 1)
      local attrs = {}
      for k, v in pairs(old.attrs) do attrs[k] = v end
      attrs.axis = l1.dst:find(ch, 1, true) - 1
      local args = { map[a1] }
      for i = 2, #old.args do args[i] = map[old.args[i]] end
      lay[old] = l1
      return relay.call(op, args, attrs)
    end
    if op == "concatenate" and l1 then
      local same = true
      for _, a in ipairs(old.args) do
        local l = lay[a]
        if not l or l.src ~= l1.src or l.dst ~= l1.dst then same = false end
      end
      local args = {}
      for i, a in ipairs(old.args) do
        args[i] = same and map[a] or relay_operand(a, map, l1.src, l1.dst)
      end
      local n4 = #old.type.shape
      local ax = old.attrs.axis < 0 and old.attrs.axis + n4 or old.attrs.axis
      local ch = l1.src:sub(ax + 1, ax + 1)
      lay[old] = l1
      return relay.call(op, args, { axis = l1.dst:find(ch, 1, true) - 1 })
    end
    if op == "nn.pad" and l1 then
      local p = perm_of(l1.src, l1.dst)
      local pw = {}
      for i = 1, #p do pw[i] = old.attrs.pad_width[p[i]] end
      local attrs = {}
      for k, v in pairs(old.attrs) do attrs[k] = v end
      attrs.pad_width = pw
      lay[old] = l1
      return relay.call(op, { map[a1] }, attrs)
    end
    -- anything else: every converted input back to its original layout
    local changed, new = false, {}
    for i, a in ipairs(old.args) do
      new[i] = orig(a, map)
      if lay[a] then changed = true end
    end
    if changed then return relay.with_args(old, new) end
    return nil
  end)
  local l = lay[f.body]
  if l then body = to(body, l.dst, l.src) end
  return util.refunction(f, body)
end

M.transform = transform
--- ConvertLayout(desired_layouts) -> pass
M.pass = function(desired, opts)
  opts = opts or {}
  local o = { desired_layouts = desired or { ["nn.conv2d"] = { "NHWC", "default" } },
              dump = opts.dump }
  return util.make("ConvertLayout", transform)(o)
end
return M
