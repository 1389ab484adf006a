--- tunelua.graph.vta_groups: which fused groups of a packed network run on VTA, and how.
--
-- A group runs on VTA when it is a packed conv2d (data layout NCHW{b}n{c}c, int8 x int8 ->
-- int32, symmetric padding, dilation 1) followed by an ending VTA's ALU computes in the
-- accumulator and a cast to int8, the only element VTA stores:
--
--   add(bias (C/c, 1, 1, 1, c) int32)         -> LOAD ACC + ALU ADD (tensor)      "bias"
--   add(residual, shaped as the output, int32)-> LOAD ACC + ALU ADD (tensor)      "res32"
--   add(left_shift(cast(residual int8), k))   -> LOAD ACC8 + ALU SHR -k + ADD     "res" k
--   add(scalar), right_shift, left_shift      -> ALU ADD / SHR immediates         "add" "shr" "shl"
--   nn.relu, clip(lo, hi)                     -> ALU MAX 0; MAX lo, MIN hi
--   cast(int8)                                -> the STORE's truncation (last)
--
-- vta_groups.match(call) -> nil, or { args = conv2d_packed.vta task args, epilogue = list of
-- {op[, value]}, inputs = {data, kernel[, bias][, residual]} as indices into the call's
-- arguments }. Groups that end in int32 or float stay on the CPU: VTA stores 8-bit values
-- only (the quantizer's store_lowbit_output makes every conv group of a ResNet end in int8).
local walk = require "tunelua.graph.walk"
local strategy = require "tunelua.graph.strategy"

local vta_groups = {}

local function scalar(node)
  if not node or node.kind ~= "const" then return nil end
  local t = walk.ttype(node)
  if t and #t.shape > 0 then
    local n = 1
    for _, d in ipairs(t.shape) do n = n * d end
    if n ~= 1 then return nil end
  end
  local v = node.value
  if type(v) == "number" then return v end
  local f = v:flat()
  local x = f[1]
  if x ~= math.floor(x) then return nil end
  return x
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- A residual operand: a parameter (int8 or int32), an int8 one cast to int32, either
-- shifted left by a scalar: -> the parameter, the shift; else nil.
local function residual(node, pidx)
  local k = 0
  if node and node.kind == "call" and node.op == "left_shift" then
    k = scalar(node.args[2])
    if not k or k < 0 or k > 31 then return nil end
    node = node.args[1]
  end
  if node and node.kind == "call" and node.op == "cast" and node.attrs.dtype == "int32" then
    node = node.args[1]
    if node.kind ~= "var" or walk.ttype(node).dtype ~= "int8" then return nil end
  end
  if node and node.kind == "var" and pidx[node] then return node, k end
  return nil
end

function vta_groups.match(call)
  if not walk.is_fused_call(call) then return nil end
  local f = call.op
  local pidx = {}
  for i, p in ipairs(f.params) do pidx[p] = i end
  -- the chain from the body down to the conv, each op's first argument the chain
  local chain, x = {}, f.body
  while x and x.kind == "call" and x.op ~= "nn.conv2d" do
    if type(x.op) ~= "string" then return nil end
    -- add is commutative: the chain is the operand that is not a parameter or a residual
    local first, other = x.args[1], x.args[2]
    if x.op == "add" and first and other and residual(first, pidx) and not residual(other, pidx) then
      first, other = other, first
    end
    chain[#chain + 1] = { node = x, other = other }
    x = first
  end
  if not x or x.kind ~= "call" or x.op ~= "nn.conv2d" then return nil end
  local conv = x
  local args = strategy.packed_conv_args(conv)
  if not args then return nil end
  local a = conv.attrs or {}
  local pad = strategy.pad4(a.padding)
  if pad[1] ~= pad[3] or pad[2] ~= pad[4] or (a.groups or 1) ~= 1 then return nil end
  for _, d in ipairs(args[5]) do if d ~= 1 then return nil end end
  local dt, kt = walk.ttype(conv.args[1]), walk.ttype(conv.args[2])
  if dt.dtype ~= "int8" or kt.dtype ~= "int8" or (a.out_dtype or "int32") ~= "int32" then return nil end
  local di, ki = pidx[conv.args[1]], pidx[conv.args[2]]
  if not di or not ki then return nil end
  local out_t = walk.ttype(conv)
  local inputs = { di, ki }
  local epi, bias, res = {}, nil, nil
  -- the chain from the conv upwards (the last op is the cast)
  for i = #chain, 1, -1 do
    local n, other = chain[i].node, chain[i].other
    local op = n.op
    if i == 1 then
      if op ~= "cast" or (n.attrs.dtype ~= "int8") then return nil end
      break
    end
    if op == "add" then
      local s = scalar(other)
      if s then
        epi[#epi + 1] = { "add", s }
      elseif residual(other, pidx) then
        local v, k = residual(other, pidx)
        local t = walk.ttype(v)
        -- a per-channel bias: (C/c, 1, 1, 1, c), or with a leading 1 as constant folding
        -- leaves it; one accumulator vector per channel block (batch block 1)
        local bs = t.shape
        if #bs == 6 and bs[1] == 1 then bs = { bs[2], bs[3], bs[4], bs[5], bs[6] } end
        if v == other and t.dtype == "int32" and #bs == 5 and not bias and bs[1] == out_t.shape[2]
           and bs[5] == out_t.shape[6] and bs[2] == 1 and bs[3] == 1 and bs[4] == 1
           and out_t.shape[5] == 1 then
          bias = pidx[other]
          epi[#epi + 1] = { "bias" }
        elseif not res and same_shape(t.shape, out_t.shape) and (t.dtype == "int32" or v ~= other) then
          -- an int32 residual, or an int8 one widened (LOAD ACC8), shifted left by k
          res = pidx[v]
          epi[#epi + 1] = { t.dtype == "int8" and "res" or "res32", k }
        else
          return nil
        end
      else
        return nil
      end
    elseif op == "right_shift" or op == "left_shift" then
      local s = scalar(other)
      if not s or s < 0 or s > 31 then return nil end
      epi[#epi + 1] = { op == "right_shift" and "shr" or "shl", s }
    elseif op == "nn.relu" then
      epi[#epi + 1] = { "max", 0 }
    elseif op == "clip" then
      local lo, hi = n.attrs.a_min, n.attrs.a_max
      if lo ~= math.floor(lo) or hi ~= math.floor(hi) then return nil end
      epi[#epi + 1] = { "max", lo }
      epi[#epi + 1] = { "min", hi }
    else
      return nil
    end
  end
  for _, e in ipairs(epi) do
    if e[2] and (e[2] < -32768 or e[2] > 32767) then return nil end
  end
  if bias then inputs[#inputs + 1] = bias end
  if res then inputs[#inputs + 1] = res end
  -- every parameter of the group is one of the inputs
  if #inputs ~= #f.params then return nil end
  return { args = args, epilogue = epi, inputs = inputs, conv = conv }
end

-- A workload key: data and kernel shapes, strides, padding (top, left).
local function workload_key(args)
  local json = require "tunelua.json"
  local pad = args[4] or {}
  return json.encode({ args[1][2], args[2][2], args[3], { pad[1], pad[2] } })
end
vta_groups.workload_key = workload_key

--- vta_groups.config_picker({log = path, tophub = path}) -> function(task, match) -> index,
--- source: the config a VTA group uses: the best valid record of the tuned log for the
--- workload, else TopHub's vta record (the `tophub` log, as tunelua.vta.tophub_map reads
--- it), else config 0 (TVM's fallback: every tile 1), with "tuned", "tophub" or "default",
--- and the candidates after the first ({{index, source}}: TopHub's after a tuned one), which
--- the executor tries when a config does not fit with the group's ending.
function vta_groups.config_picker(opts)
  local record = require "tunelua.autotvm.record"
  local vta = require "tunelua.vta"
  local tuned, tophub = {}, {}
  if opts.log then
    for _, r in ipairs(record.load_from_file(opts.log)) do
      if r.inp.task_name == "conv2d_packed.vta" and r.res.error_no == 0 then
        local k = workload_key(r.inp.args)
        local c = record.mean_cost(r.res)
        if not tuned[k] or c < tuned[k].cost then tuned[k] = { cost = c, entity = r.inp.config.entity } end
      end
    end
  end
  if opts.tophub then
    for _, e in ipairs(vta.tophub_map(opts.tophub).entries) do
      local k = workload_key(e.record.input[3])
      tophub[e.task.env.BITSTREAM .. k] = e.record.config.entity
    end
  end
  return function(task, m)
    local k = workload_key(m.args)
    local found = {}
    for _, src in ipairs { { "tuned", tuned[k] and tuned[k].entity },
                           { "tophub", tophub[task.env.BITSTREAM .. k] } } do
      if src[2] then
        local ok, idx = pcall(task.index_of, task, src[2])
        if ok and task:check(idx) then found[#found + 1] = { idx, src[1] } end
      end
    end
    if not found[1] then return 0, "default" end
    local alts = {}
    for i = 2, #found do alts[#alts + 1] = found[i] end
    return found[1][1], found[1][2], alts
  end
end

--- vta_groups.smaller_configs(task, args, index) -> a list of config indices near index that
--- need less on-chip memory, in the order the executor tries them when config index does not
--- fit with a group's ending (the bias and residual tiles join the conv's in the accumulator):
--- the same tiles with fewer virtual threads (h_nthread, then oc_nthread, then both to 1),
--- then, with one thread each, tile_w and then tile_h stepped down through the divisors of the
--- output's width and height. Only configs of the space that fit the plain template.
function vta_groups.smaller_configs(task, args, index)
  local ent = task:entity(index)
  local pos = {}
  for i, k in ipairs(ent) do pos[k[1]] = i end
  if not (pos.tile_h and pos.tile_w and pos.oc_nthread and pos.h_nthread) then return {} end
  local function copy(e)
    local c = {}
    for i, k in ipairs(e) do
      c[i] = { k[1], k[2], type(k[3]) == "table" and { k[3][1], k[3][2] } or k[3] }
    end
    return c
  end
  local out, seen = {}, { [index] = true }
  local function try(e)
    local ok, idx = pcall(task.index_of, task, e)
    if ok and idx and not seen[idx] and task:check(idx) then
      seen[idx] = true
      out[#out + 1] = idx
    end
  end
  local function threads(e, oc, h)
    local c = copy(e)
    if oc then c[pos.oc_nthread][3] = oc end
    if h then c[pos.h_nthread][3] = h end
    return c
  end
  try(threads(ent, nil, 1))
  try(threads(ent, 1, nil))
  local base = threads(ent, 1, 1)
  try(base)
  local d, k = args[1][2], args[2][2]
  local pad, st = args[4], args[3]
  local oh = math.floor((d[3] + 2 * pad[1] - k[3]) / st[1]) + 1
  local ow = math.floor((d[4] + 2 * pad[2] - k[4]) / st[2]) + 1
  for _, knob in ipairs { { "tile_w", ow }, { "tile_h", oh } } do
    local e = copy(base)
    local cur = e[pos[knob[1]]][3][2]
    for f = cur - 1, 1, -1 do
      if knob[2] % f == 0 then
        e[pos[knob[1]]][3] = { -1, f }
        try(copy(e))
      end
    end
  end
  return out
end

return vta_groups
