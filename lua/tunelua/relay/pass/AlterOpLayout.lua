--- AlterOpLayout: what TVM's AlterOpLayout does to the ops tunelua has (no target
--- rewrites a conv2d into another layout here): layout inference for broadcast ops.
--
-- Ops with a data layout (conv2d, conv3d, conv2d_transpose, pools, global pools,
-- layout_transform) give their output a layout; element-wise ops, nn.pad and
-- broadcast ops whose full-rank input has a layout pass it on. A broadcast op
-- (add, multiply, ...) with one input carrying a layout and the other of lower rank
-- gets that operand expanded to full rank (expand_dims at axis 0: a [C] shift of an
-- NHWC conv becomes [1, 1, 1, C], a [C, 1, 1] one of an NCHW conv [1, C, 1, 1]), as
-- TVM's layout inference does. FoldConstant folds the expansion of constants.
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

M.transform = transform
M.pass = util.make("AlterOpLayout", transform)
return M
