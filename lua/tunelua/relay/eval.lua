--- tunelua.relay.eval: evaluate relay calls on tl.nd arrays.
--
--   local eval = require "tunelua.relay.eval"
--   local outs = eval.call(call_node, {a, b})      -- list of tl.nd arrays
--   local r = eval.run(expr_or_mod, {data = x})    -- the value of the whole expression
--
-- Small element-wise, broadcast and data-movement ops (what constant folding
-- meets: arithmetic on batch-norm parameters, expand_dims, reshape, transpose,
-- layout_transform of weights) are computed in Lua; every other op goes through
-- its topi operator with a naive schedule built for the C target ("c"), cached
-- per (op, attrs, argument types). Used by FoldConstant and the tests.
local ffi = require "ffi"
local nd = require "tunelua.nd"
local ops = require "tunelua.relay.ops"

local eval = {}

local function numel(s)
  local n = 1
  for _, d in ipairs(s) do n = n * d end
  return n
end

local function strides_of(s)
  local st, acc = {}, 1
  for i = #s, 1, -1 do st[i] = acc; acc = acc * s[i] end
  return st
end

local function new_arr(ty) return nd.empty(ty.shape, ty.dtype) end

local FLOATS = { float32 = true, float64 = true }

-- ---- Lua kernels --------------------------------------------------------------------------

local binfn = {
  add = function(a, b) return a + b end,
  subtract = function(a, b) return a - b end,
  multiply = function(a, b) return a * b end,
  divide = function(a, b) return a / b end,
  maximum = function(a, b) return a > b and a or b end,
  minimum = function(a, b) return a < b and a or b end,
  power = function(a, b) return a ^ b end,
}
local unfn = {
  ["nn.relu"] = function(a) return a > 0 and a or 0 end,
  sqrt = math.sqrt,
  rsqrt = function(a) return 1 / math.sqrt(a) end,
  negative = function(a) return -a end,
  exp = math.exp,
  log = math.log,
  abs = math.abs,
  sigmoid = function(a) return 1 / (1 + math.exp(-a)) end,
  tanh = function(a) local e = math.exp(2 * a); return (e - 1) / (e + 1) end,
  copy = function(a) return a end,
}

local function bcast_offsets(ishape, oshape)
  -- per output dim, the input stride (0 where broadcast)
  local n, m = #oshape, #ishape
  local ist = strides_of(ishape)
  local r = {}
  for i = 1, n do
    local j = i - (n - m)
    if j >= 1 and ishape[j] ~= 1 then r[i] = ist[j] else r[i] = 0 end
  end
  return r
end

local function lua_binary(f, a, b, ty)
  local out = new_arr(ty)
  local os = ty.shape
  local n = numel(os)
  local pa, pb, po = a:data_ptr(), b:data_ptr(), out:data_ptr()
  local sa, sb = bcast_offsets(a:shape(), os), bcast_offsets(b:shape(), os)
  local nd_ = #os
  if nd_ == 0 then
    po[0] = f(pa[0], pb[0])
    return out
  end
  local idx = {}
  for i = 1, nd_ do idx[i] = 0 end
  local oa, ob = 0, 0
  for k = 0, n - 1 do
    po[k] = f(pa[oa], pb[ob])
    -- increment the multi-index
    local d = nd_
    while d >= 1 do
      idx[d] = idx[d] + 1
      oa, ob = oa + sa[d], ob + sb[d]
      if idx[d] < os[d] then break end
      oa, ob = oa - sa[d] * os[d], ob - sb[d] * os[d]
      idx[d] = 0
      d = d - 1
    end
  end
  return out
end

local function lua_unary(f, a, ty)
  local out = new_arr(ty)
  local pa, po = a:data_ptr(), out:data_ptr()
  for k = 0, numel(ty.shape) - 1 do po[k] = f(pa[k]) end
  return out
end

local function lua_copy(a, ty)
  local out = new_arr(ty)
  ffi.copy(out:data_ptr(), a:data_ptr(), a:nbytes())
  return out
end

-- out[...] = in[perm]: out dim i is input dim perm[i] (1-based)
local function lua_transpose(a, perm, ty)
  local out = new_arr(ty)
  local ishape = a:shape()
  local ist = strides_of(ishape)
  local os = ty.shape
  local n = #os
  local st = {}
  for i = 1, n do st[i] = ist[perm[i]] end
  local pa, po = a:data_ptr(), out:data_ptr()
  local idx = {}
  for i = 1, n do idx[i] = 0 end
  local off = 0
  for k = 0, numel(os) - 1 do
    po[k] = pa[off]
    local d = n
    while d >= 1 do
      idx[d] = idx[d] + 1
      off = off + st[d]
      if idx[d] < os[d] then break end
      off = off - st[d] * os[d]
      idx[d] = 0
      d = d - 1
    end
  end
  return out
end

-- layout_transform between two permutations of the same primal axes
local function layout_perm(src, dst)
  if #src ~= #dst or src:find("%d") or dst:find("%d") then return nil end
  local perm = {}
  for i = 1, #dst do
    local p = src:find(dst:sub(i, i), 1, true)
    if not p then return nil end
    perm[i] = p
  end
  return perm
end
eval.layout_perm = layout_perm

local function try_lua(n, vals)
  local ty = n.type
  if not ty or not ty.shape or not FLOATS[ty.dtype] then return nil end
  for _, v in ipairs(vals) do if v:dtype() ~= ty.dtype then return nil end end
  local op = n.op
  if binfn[op] then return lua_binary(binfn[op], vals[1], vals[2], ty) end
  if unfn[op] then return lua_unary(unfn[op], vals[1], ty) end
  if op == "expand_dims" or op == "reshape" or op == "squeeze" or op == "nn.batch_flatten" then
    return lua_copy(vals[1], ty)
  end
  if op == "transpose" then
    local nd_ = #ty.shape
    local perm = {}
    local axes = n.attrs.axes
    for i = 1, nd_ do
      if axes then
        local a = axes[i]
        perm[i] = (a < 0 and a + nd_ or a) + 1
      else
        perm[i] = nd_ - i + 1
      end
    end
    return lua_transpose(vals[1], perm, ty)
  end
  if op == "layout_transform" then
    local perm = layout_perm(n.attrs.src_layout, n.attrs.dst_layout)
    if perm then return lua_transpose(vals[1], perm, ty) end
  end
  return nil
end

-- ---- topi kernels ----------------------------------------------------------------------------

local kcache = {}

local function topi_kernel(n, vals)
  local te = require "tunelua.te"
  local tl_build = require "tunelua.build"
  local entry = ops.get(n.op)
  local types = {}
  for i, a in ipairs(n.args) do types[i] = a.type end
  local key = {}
  key[1] = n.op
  local ok, ea = pcall(require("tunelua.topi").encode_attrs, (function()
    local a = ops.copy(n.attrs); a.name = nil; return a end)())
  key[2] = ok and ea or tostring(n)
  for i, t in ipairs(types) do key[#key + 1] = t.dtype .. ops.shape_str(t.shape) end
  local k = table.concat(key, "|")
  local f = kcache[k]
  if not f then
    local ins = {}
    for i, t in ipairs(types) do ins[i] = te.placeholder(t.shape, t.dtype, "p" .. (i - 1)) end
    local outs = entry.compute(ins, n.attrs, types)
    if n.op == "nn.batch_norm" then outs = { outs[1] } end
    local opl = {}
    for i, o in ipairs(outs) do opl[i] = o.op end
    local s = te.create_schedule(opl)
    -- inputs the computation does not read (batch_norm's gamma with
    -- scale = false, beta with center = false) are not kernel arguments
    local args, used = {}, {}
    for i, t in ipairs(ins) do
      if pcall(s.tensor_id, s, t, 1) then
        args[#args + 1] = t
        used[#used + 1] = i
      end
    end
    for _, t in ipairs(outs) do args[#args + 1] = t end
    local fn = tl_build.build(s, args, "c", { name = "relay_eval" })
    f = { fn = fn, outs = outs, used = used }
    kcache[k] = f
  end
  local res, args = {}, {}
  for j, i in ipairs(f.used) do args[j] = vals[i] end
  for i, o in ipairs(f.outs) do
    res[i] = nd.empty(o.shape, o.dtype)
    args[#args + 1] = res[i]
  end
  f.fn(unpack(args))
  if n.op == "nn.batch_norm" then
    res[2], res[3] = vals[4]:copy(), vals[5]:copy()
  end
  return res
end

--- eval.call(node, values) -> list of tl.nd arrays (one per output; tuple-typed ops give
--- several). node: a call whose op is a name; values: its argument values.
function eval.call(n, vals)
  if n.op == "nn.dropout" then return { vals[1]:copy(), vals[1]:copy() } end
  local r = try_lua(n, vals)
  if r then return { r } end
  return topi_kernel(n, vals)
end

--- eval.call_topi(node, values): always through the topi operator (no Lua kernel).
function eval.call_topi(n, vals)
  if n.op == "nn.dropout" then return { vals[1]:copy(), vals[1]:copy() } end
  return topi_kernel(n, vals)
end

--- eval.run(expr_or_mod, inputs) -> value (tl.nd array, or a list for a tuple): evaluates
--- the (unfused or fused) graph node by node. inputs: var name -> tl.nd array.
function eval.run(x, inputs)
  local relay = require "tunelua.relay"
  local f = relay.main_of(x, "eval.run", 2)
  local env = {}
  local function value(n, penv)
    local v = (penv or env)[n]
    return v
  end
  local function run_body(body, penv)
    for _, n in ipairs(relay.post_order(body)) do
      local k = n.kind
      local v
      if k == "var" then
        v = penv[n]
        if v == nil then v = inputs[n.name] end
        if v == nil then error("eval.run: no value for %" .. n.name, 3) end
      elseif k == "const" then
        v = n.value
      elseif k == "tuple" then
        v = {}
        for i, a in ipairs(n.fields) do v[i] = penv[a] end
      elseif k == "tuple_get" then
        v = penv[n.tuple][n.index + 1]
      elseif k == "call" then
        local vals = {}
        for i, a in ipairs(n.args) do vals[i] = penv[a] end
        if relay.is_function(n.op) then
          local sub = {}
          for i, p in ipairs(n.op.params) do sub[p] = vals[i] end
          v = run_body(n.op.body, sub)
        else
          local r = eval.call(n, vals)
          if n.type.fields then v = r else v = r[1] end
        end
      end
      penv[n] = v
    end
    return penv[body]
  end
  local _ = value
  return run_body(f.body, env)
end

return eval
