--- SimplifyExpr: the rewrites that matter after batch-norm folding:
--   add(add(x, c1), c2)           -> add(x, c1 + c2)
--   multiply(multiply(x, c1), c2) -> multiply(x, c1 * c2)
--   add(x, c1) * c2               -> x * c2 + c1 * c2
-- (c1, c2 constants; only when the result type is unchanged) and reshape /
-- expand_dims-free identities: reshape to the same shape, transpose with the identity
-- permutation, layout_transform with equal layouts.
local util = require "tunelua.relay.pass.util"

local M = {}

local function cst(x) return x.kind == "const" end

local function split_const(n)
  if cst(n.args[2]) and not cst(n.args[1]) then return n.args[1], n.args[2] end
  if cst(n.args[1]) and not cst(n.args[2]) then return n.args[2], n.args[1] end
  return nil
end

local function transform(f)
  local relay = require "tunelua.relay"
  local fc = require "tunelua.relay.pass.FoldConstant"
  local uses = util.uses(f.body)
  local body = relay.mutate(f.body, function(n, old)
    if n.kind ~= "call" or type(n.op) ~= "string" then return nil end
    local op = n.op
    local r
    if op == "add" or op == "multiply" then
      local x, c2 = split_const(n)
      if x and x.kind == "call" and (uses[old.args[1]] or 0) + (uses[old.args[2]] or 0) >= 1 then
        local x0, c1 = nil, nil
        if x.op == op then x0, c1 = split_const(x) end
        if x0 then
          r = relay.call(op, { x0, relay.call(op, { c1, c2 }) })
        elseif op == "multiply" and x.op == "add" then
          local y, c = split_const(x)
          if y then r = relay.add(relay.multiply(y, c2), relay.multiply(c, c2)) end
        end
      end
    elseif op == "reshape" or op == "squeeze" or op == "expand_dims" then
      if relay.types_equal(n.type, n.args[1].type) then r = n.args[1] end
    elseif op == "layout_transform" then
      if n.attrs.src_layout == n.attrs.dst_layout then r = n.args[1] end
    elseif op == "transpose" then
      if n.attrs.axes then
        local id = true
        for i, a in ipairs(n.attrs.axes) do if a ~= i - 1 then id = false end end
        if id then r = n.args[1] end
      end
    end
    if r and relay.types_equal(r.type, n.type) then return r end
  end)
  return fc.transform(util.refunction(f, body))
end

M.transform = transform
M.pass = util.make("SimplifyExpr", transform)
return M
