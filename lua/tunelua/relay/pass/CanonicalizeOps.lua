--- CanonicalizeOps: nn.bias_add(x, b, axis) -> add(x, expand_dims(b)) with b
--- expanded to line up with axis in a right-aligned broadcast.
local util = require "tunelua.relay.pass.util"

local M = {}

local function transform(f)
  local relay = require "tunelua.relay"
  local body = relay.mutate(f.body, function(n)
    if n.kind == "call" and n.op == "nn.bias_add" then
      local x, b = n.args[1], n.args[2]
      local ndim = #x.type.shape
      local axis = n.attrs.axis < 0 and n.attrs.axis + ndim or n.attrs.axis
      local pad = ndim - axis - 1
      if pad > 0 then b = relay.expand_dims(b, 1, pad) end
      return relay.add(x, b)
    end
  end)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("CanonicalizeOps", transform)
return M
