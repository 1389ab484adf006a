--- SimplifyInference: nn.batch_norm -> x * scale + shift, nn.dropout -> x.
--
-- scale = gamma / sqrt(moving_var + eps) (1 / sqrt(...) when scale=false), shift =
-- beta - moving_mean * scale (no beta when center=false), both expanded with
-- expand_dims so the per-channel vector lines up with the batch-norm axis in a
-- right-aligned broadcast ([C, 1, 1] for axis 1 of a 4-D tensor). The arithmetic on
-- the parameters stays in the graph; FoldConstant turns it into constants.
local util = require "tunelua.relay.pass.util"

local M = {}

local function expand_to_axis(relay, v, ndim, axis)
  local pad = ndim - axis - 1
  if pad > 0 then return relay.expand_dims(v, 1, pad) end
  return v
end

function M.unpack_batch_norm(relay, call)
  local a = call.attrs
  local data, gamma, beta, mean, var = call.args[1], call.args[2], call.args[3], call.args[4], call.args[5]
  local dt = data.type.dtype
  local ndim = #data.type.shape
  local axis = a.axis < 0 and a.axis + ndim or a.axis
  local eps = relay.const(a.epsilon, dt)
  local sqrt_var = relay.sqrt(relay.add(var, eps))
  local scale = relay.divide(relay.const(1, dt), sqrt_var)
  if a.scale == true or a.scale == 1 then scale = relay.multiply(scale, gamma) end
  local shift = relay.multiply(relay.negative(mean), scale)
  if a.center == true or a.center == 1 then shift = relay.add(shift, beta) end
  scale = expand_to_axis(relay, scale, ndim, axis)
  shift = expand_to_axis(relay, shift, ndim, axis)
  return relay.add(relay.multiply(data, scale), shift)
end

local function transform(f)
  local relay = require "tunelua.relay"
  local body = relay.mutate(f.body, function(n)
    if n.kind == "tuple_get" and n.tuple.kind == "call" then
      local c = n.tuple
      if c.op == "nn.batch_norm" then
        if n.index == 0 then return M.unpack_batch_norm(relay, c) end
        return c.args[n.index + 3]
      elseif c.op == "nn.dropout" then
        return c.args[1]
      end
    end
  end)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("SimplifyInference", transform)
return M
