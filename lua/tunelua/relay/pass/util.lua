--- tunelua.relay.pass.util: what every pass shares.
--
-- util.make(name, transform) -> a pass constructor: Name(opts)(mod) runs
-- transform(func, opts) on mod.main and returns a new module; when opts.dump
-- or TUNELUA_DUMP_PASSES=1 it prints the module after the pass.
-- util.uses(body) -> node -> number of uses (the body's own output counts one).
local util = {}

local function relay() return require "tunelua.relay" end

function util.dump_enabled(opts)
  if opts and opts.dump ~= nil then return opts.dump and true or false end
  local e = os.getenv("TUNELUA_DUMP_PASSES")
  return e ~= nil and e ~= "" and e ~= "0"
end

function util.dump(name, mod)
  io.stdout:write(string.format("// ---- after %s ----\n%s\n", name, tostring(mod)))
end

function util.make(name, transform)
  return function(opts)
    opts = opts or {}
    return function(mod)
      local r = relay()
      local f, was_mod = r.main_of(mod, name, 2)
      local nf = transform(f, opts)
      local out = r.Module(nf)
      if util.dump_enabled(opts) then util.dump(name, out) end
      if not was_mod then return nf end
      return out
    end
  end
end

--- Rebuild a function over a new body (same params, attrs).
function util.refunction(f, body)
  local r = relay()
  return r.Function(f.params, body, f.attrs)
end

function util.uses(body)
  local r = relay()
  local cnt = {}
  for _, n in ipairs(r.post_order(body)) do
    for _, c in ipairs(r.kids(n)) do cnt[c] = (cnt[c] or 0) + 1 end
  end
  cnt[body] = (cnt[body] or 0) + 1
  return cnt
end

--- The consumers of every node: node -> list of {node = consumer, arg = position}.
function util.consumers(body)
  local r = relay()
  local cons = {}
  for _, n in ipairs(r.post_order(body)) do
    for i, c in ipairs(r.kids(n)) do
      local l = cons[c]
      if not l then l = {}; cons[c] = l end
      l[#l + 1] = { node = n, arg = i }
    end
  end
  return cons
end

function util.is_const(n) return n.kind == "const" end

function util.is_call(n, op) return n.kind == "call" and n.op == op end

--- Flat list of a const's values.
function util.values(c) return c.value:flat() end

return util
