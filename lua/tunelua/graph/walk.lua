--- tunelua.graph.walk: traversal helpers over relay expressions (tunelua.relay).
--
-- Works on relay's nodes and on plain tables of the same shape (kind = "var", "const",
-- "call", "tuple", "tuple_get"; a call's `.op` is an op name or a function table with
-- `.params` and `.body`; a module has `.main`).
local relay = require "tunelua.relay"

local walk = {}

--- The main function of a module (mod.main, mod["main"], or mod itself when it is one).
function walk.main(mod, level)
  if type(mod) ~= "table" then
    error("expected a relay module, got " .. type(mod), (level or 1) + 1)
  end
  local f = mod.main
  if f == nil and rawget(mod, "body") then f = mod end
  if type(f) ~= "table" or f.body == nil then
    error("expected a relay module with a main function (mod.main)", (level or 1) + 1)
  end
  return f
end

function walk.is_function(x)
  return type(x) == "table" and x.body ~= nil and x.params ~= nil
end

--- The constant value feeding argument 2 (the weight) of node, a call inside the group call
--- `call` (a constant in the group's body, or a parameter whose argument is a constant), or nil.
function walk.weight_const(call, node)
  local w = node.args[2]
  if not w then return nil end
  if w.kind == "const" then return w.value end
  if w.kind == "var" and walk.is_function(call.op) then
    for i, p in ipairs(call.op.params) do
      if p == w then
        local a = call.args[i]
        if a and a.kind == "const" then return a.value end
      end
    end
  end
  return nil
end

--- Is this call a fused group (a call of a Primitive function)?
function walk.is_fused_call(node)
  return node.kind == "call" and walk.is_function(node.op)
end

-- The one walker is relay's: children of a node (call args, tuple fields, a tuple_get's
-- tuple) and the post-order list of the nodes reachable from an expression (each once,
-- arguments left to right; iterative, networks are deep).
walk.kids = relay.kids
walk.postorder = relay.post_order

--- Every op call in evaluation order, descending into fused functions: calls f(node)
--- for calls whose op is a string.
function walk.each_op_call(expr, f)
  for _, n in ipairs(walk.postorder(expr)) do
    if n.kind == "call" then
      if walk.is_function(n.op) then
        walk.each_op_call(n.op.body, f)
      else
        f(n)
      end
    end
  end
end

--- Shape and dtype of a node ({shape, dtype}); a tuple type's first field for tuples.
function walk.ttype(node)
  local t = node.type or node.checked_type
  if t and t.fields then t = t.fields[1] end
  return t
end

return walk
