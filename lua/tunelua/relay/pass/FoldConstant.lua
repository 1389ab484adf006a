--- FoldConstant: evaluate every call whose arguments are all constants (and tuple
--- fields of constant tuples) into a constant (tunelua.relay.eval: small ops in Lua,
--- the rest through topi + a naive schedule). Fused calls are left alone.
local util = require "tunelua.relay.pass.util"

local M = {}

local function transform(f)
  local relay = require "tunelua.relay"
  local eval = require "tunelua.relay.eval"
  local body = relay.mutate(f.body, function(n)
    if n.kind == "call" and type(n.op) == "string" and #n.args > 0 then
      for _, a in ipairs(n.args) do if a.kind ~= "const" then return nil end end
      local vals = {}
      for i, a in ipairs(n.args) do vals[i] = a.value end
      local r = eval.call(n, vals)
      if n.type.fields then
        local cs = {}
        for i, v in ipairs(r) do cs[i] = relay.const(v) end
        return relay.tuple(cs)
      end
      return relay.const(r[1])
    elseif n.kind == "tuple_get" and n.tuple.kind == "tuple" then
      local fld = n.tuple.fields[n.index + 1]
      if fld.kind == "const" then return fld end
    end
  end)
  return util.refunction(f, body)
end

M.transform = transform
M.pass = util.make("FoldConstant", transform)
return M
