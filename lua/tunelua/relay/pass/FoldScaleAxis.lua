--- FoldScaleAxis: fold per-channel constant scales into conv2d weights.
--
-- Backward: conv2d -> [bias_add / add(const)] -> [relu] -> multiply(c), with c a constant
--   that varies only along the conv's output-channel axis (per its data layout),
--   becomes conv2d(data, W * c on the kernel's O axis) -> [add(const * c)] -> [relu]
--   (crossing relu needs c > 0). Every value on the chain must have exactly one
--   consumer.
-- Forward: multiply(x, c) -> [add(const)] -> [relu] -> conv2d(s), with c along the
--   conv's input-channel axis, becomes [add(x, const / c)] -> [relu] ->
--   conv2d(W * c on the I axis; the O axis of a depthwise kernel). Crossing relu needs
--   c > 0. The last value of the chain may feed several convs, only if each takes it
--   as its data with a matching layout; the others must have one consumer.
-- Scales along a non-channel axis stay. Then FoldConstant folds W * c.
local util = require "tunelua.relay.pass.util"

local M = {}

local function channel_axis(layout) return (layout:find("C", 1, true)) end

-- If const c (shape cs) varies only along axis ax (1-based) of an n-D tensor with C
-- channels there: its values as a list of C numbers (a scalar is repeated); else nil.
local function channel_values(c, n, ax, C)
  if c.kind ~= "const" then return nil end
  local cs = c.type.shape
  if #cs > n then return nil end
  local total = 1
  for _, d in ipairs(cs) do total = total * d end
  local vals = c.value:flat()
  if total == 1 then
    local r = {}
    for i = 1, C do r[i] = vals[1] end
    return r
  end
  local off = n - #cs
  for i = 1, #cs do
    local d = cs[i]
    local axis = i + off
    if axis == ax then
      if d ~= C then return nil end
    elseif d ~= 1 then
      return nil
    end
  end
  return vals
end

local function all_positive(v)
  for _, x in ipairs(v) do if not (x > 0) then return false end end
  return true
end

-- A const of shape s (n-D) with the values along axis ax (1-based).
local function axis_const(relay, vals, n, ax, dtype)
  local nd = require "tunelua.nd"
  local shape = {}
  for i = 1, n do shape[i] = 1 end
  shape[ax] = #vals
  local a = nd.empty(shape, dtype)
  local p = a:data_ptr()
  for i, v in ipairs(vals) do p[i - 1] = v end
  return relay.const(a)
end

-- Is conv `c` scalable on its output channels (returns the kernel axis)?
local function kernel_axis(conv, which)
  local kl = conv.attrs.kernel_layout
  local ops = require "tunelua.relay.ops"
  local dw = ops.is_depthwise(conv.attrs, conv.args[1].type, conv.args[2].type)
  if which == "O" or dw then return kl:find("O", 1, true) end
  return kl:find("I", 1, true)
end

local function scale_weight(relay, conv, vals, which)
  local w = conv.args[2]
  local ax = kernel_axis(conv, which)
  if not ax then return nil end
  if #vals ~= w.type.shape[ax] then return nil end
  return relay.multiply(w, axis_const(relay, vals, #w.type.shape, ax, w.type.dtype))
end

local function is_conv(n)
  return n.kind == "call" and n.op == "nn.conv2d"
end

-- ---- backward ---------------------------------------------------------------------------

local function backward(relay, f)
  local uses = util.uses(f.body)
  local body = relay.mutate(f.body, function(n, old, map)
    if not (old.kind == "call" and old.op == "multiply") then return nil end
    local x, c = old.args[1], old.args[2]
    if x.kind == "const" then x, c = c, x end
    if c.kind ~= "const" or x.kind ~= "call" then return nil end
    -- walk back through relu / add(const) to a conv2d
    local chain, cur = {}, x
    while true do
      if (uses[cur] or 0) ~= 1 then return nil end
      if cur.kind ~= "call" then return nil end
      if is_conv(cur) then break end
      if cur.op == "nn.relu" then
        chain[#chain + 1] = cur
        cur = cur.args[1]
      elseif cur.op == "add" and (cur.args[2].kind == "const" or cur.args[1].kind == "const") then
        chain[#chain + 1] = cur
        cur = cur.args[2].kind == "const" and cur.args[1] or cur.args[2]
      elseif cur.op == "nn.bias_add" and cur.args[2].kind == "const" then
        chain[#chain + 1] = cur
        cur = cur.args[1]
      else
        return nil
      end
    end
    local conv = cur
    local n4 = #conv.type.shape
    local cax = channel_axis(conv.attrs.data_layout)
    local C = conv.type.shape[cax]
    local vals = channel_values(c, n4, cax, C)
    if not vals then return nil end
    for _, op in ipairs(chain) do
      if op.op == "nn.relu" and not all_positive(vals) then return nil end
      if op.op == "add" then
        local b = op.args[2].kind == "const" and op.args[2] or op.args[1]
        if not channel_values(b, n4, cax, C) then return nil end
      end
      if op.op == "nn.bias_add" then
        local ax = op.attrs.axis < 0 and op.attrs.axis + n4 or op.attrs.axis
        if ax + 1 ~= cax then return nil end
      end
    end
    local nw = scale_weight(relay, conv, vals, "O")
    if not nw then return nil end
    local nc = relay.with_args(conv, { map[conv.args[1]], nw })
    local sc = axis_const(relay, vals, n4, cax, c.type.dtype)
    local y = nc
    for i = #chain, 1, -1 do
      local op = chain[i]
      if op.op == "nn.relu" then
        y = relay.nn.relu(y)
      elseif op.op == "nn.bias_add" then
        local b = op.args[2]
        y = relay.nn.bias_add(y, relay.multiply(b, relay.const(axis_const(relay, vals, 1, 1, b.type.dtype).value)), op.attrs)
      else
        local b = op.args[2].kind == "const" and op.args[2] or op.args[1]
        y = relay.add(y, relay.multiply(b, sc))
      end
    end
    if not relay.types_equal(y.type, n.type) then return nil end
    return y
  end)
  return body
end

-- ---- forward ----------------------------------------------------------------------------

local function forward(relay, f)
  local cons = util.consumers(f.body)
  local uses = util.uses(f.body)
  -- plan: multiply node -> rewrite info; conv node -> scale values for its weight
  local conv_scale, drop = {}, {}
  for _, n in ipairs(relay.post_order(f.body)) do
    if n.kind == "call" and n.op == "multiply" then
      local x, c = n.args[1], n.args[2]
      if x.kind == "const" then x, c = c, x end
      if c.kind == "const" and x.kind ~= "const" and #n.type.shape >= 3 then
        local chain, cur = { n }, n
        local ok = true
        local final
        while true do
          local cl = cons[cur] or {}
          if #cl == 1 and cl[1].node.kind == "call" and (uses[cur] or 0) == 1 and
             (cl[1].node.op == "nn.relu" or
              (cl[1].node.op == "add" and (cl[1].node.args[2].kind == "const" or cl[1].node.args[1].kind == "const"))) and
             #chain < 3 then
            cur = cl[1].node
            chain[#chain + 1] = cur
          else
            final = cur
            break
          end
        end
        -- every consumer of the final value: a conv2d taking it as data
        local cl = cons[final] or {}
        if #cl == 0 or (uses[final] or 0) ~= #cl then ok = false end
        local layout, vals
        for _, u in ipairs(cl) do
          local cv = u.node
          if not (is_conv(cv) and u.arg == 1) then ok = false; break end
          if layout and layout ~= cv.attrs.data_layout then ok = false; break end
          layout = cv.attrs.data_layout
        end
        if ok and layout then
          local n4 = #n.type.shape
          local cax = channel_axis(layout)
          vals = channel_values(c, n4, cax, n.type.shape[cax])
          if not vals then ok = false end
          if ok then
            for _, op in ipairs(chain) do
              if op.op == "nn.relu" and not all_positive(vals) then ok = false end
              if op.op == "add" then
                local b = op.args[2].kind == "const" and op.args[2] or op.args[1]
                if not channel_values(b, n4, cax, n.type.shape[cax]) then ok = false end
              end
            end
          end
          if ok then
            for _, u in ipairs(cl) do
              local cv = u.node
              local ax = kernel_axis(cv, "I")
              if not ax or cv.args[2].type.shape[ax] ~= #vals then ok = false end
            end
          end
          if ok then
            drop[n] = { x = x, vals = vals, cax = cax, n4 = n4, dtype = c.type.dtype }
            for _, op in ipairs(chain) do
              if op.op == "add" then drop[op] = drop[op] or { add_of = drop[n] } end
            end
            for _, u in ipairs(cl) do conv_scale[u.node] = vals end
          end
        end
      end
    end
  end
  if next(drop) == nil then return f.body end
  local body = relay.mutate(f.body, function(n, old, map)
    local d = drop[old]
    if d and d.x then
      return map[d.x]
    elseif d and d.add_of then
      local a = d.add_of
      local bi = old.args[2].kind == "const" and 2 or 1
      local b = old.args[bi]
      local sc = axis_const(relay, a.vals, a.n4, a.cax, a.dtype)
      local other = map[old.args[3 - bi]]
      return relay.add(other, relay.divide(b, sc))
    elseif conv_scale[old] then
      local nw = scale_weight(relay, n, conv_scale[old], "I")
      return relay.with_args(n, { n.args[1], nw })
    end
  end)
  return body
end

local function transform(f, opts)
  local relay = require "tunelua.relay"
  local fc = require "tunelua.relay.pass.FoldConstant"
  local body = backward(relay, f)
  f = util.refunction(f, body)
  f = fc.transform(f)
  body = forward(relay, f)
  f = util.refunction(f, body)
  return fc.transform(f)
end

M.transform = transform
M.pass = util.make("FoldScaleAxis", transform)
return M
