--- tunelua.relay.graph_pack: rewrite the quantized middle of a network into VTA's blocked
--- layouts (TVM's vta.top.graph_pack; specs/vta.md §6.1 step 3).
--
--   local graph_pack = require "tunelua.relay.graph_pack"
--   local packed = graph_pack.graph_pack(qmod, {bfactor = env.BATCH, cfactor = env.BLOCK_OUT,
--     weight_bits = env.WGT_WIDTH, start_name = "nn.max_pool2d",
--     stop_name = "nn.global_avg_pool2d"})
--
-- Packing starts at the output of the first call of start_name (post order) and ends at the
-- input of the first call of stop_name that depends on it; what lies outside (the stem conv,
-- the head) is left as it is and runs on the CPU. At the start, NCHW becomes
-- NCHW{b}n{c}c: reshape (N/b, b, C/c, c, H, W), transpose (0, 2, 4, 5, 1, 3) -> (N/b, C/c,
-- H, W, b, c); at the stop the inverse: transpose (0, 4, 1, 5, 2, 3), reshape (N, C, H, W).
-- When the stop's input is the dequantization of an int8 value (cast float32, multiply by a
-- scalar), the inverse comes before it: the packed region ends with the int8 value.
-- In between:
--
--   nn.conv2d (int8 x int8 -> int32, groups 1)  the constant OIHW weight is packed to
--       OIHW{c}o{c}i, (O/c, I/c, KH, KW, c, c), and the conv re-emitted with data_layout
--       NCHW{b}n{c}c, kernel_layout OIHW{c}o{c}i (its CPU kernel is topi's conv2d_packed);
--   a broadcast op with a per-channel constant (C, 1, 1)   the constant becomes
--       (C/c, 1, 1, 1, c), which broadcasts against the packed tensor;
--   nn.pad    two (0, 0) pairs appended;
--   annotation.stop_fusion    unchanged (the quantizer's fusion boundary);
--   other element-wise and broadcast ops (with scalars or two packed operands) unchanged.
--
-- Anything else inside the region is an error naming the op and the layer, as are a start or
-- stop op the graph lacks, channels not divisible by the block (cfactor), a batch not
-- divisible by bfactor, a float conv inside the region, and weight_bits other than 8 (bit
-- packing of narrower weights is not built).
local relay = require "tunelua.relay"
local ops = require "tunelua.relay.ops"
local nd = require "tunelua.nd"

local graph_pack = {}

local function fail(fmt, ...)
  error("graph_pack: " .. string.format(fmt, ...), 0)
end

local function layer_of(n)
  local l = relay.layer_of(n.op, n.args, n.attrs)
  if l and not (l:find("^after layer ") or l:find("^input ")) then l = "layer " .. l end
  return l and (" (" .. l .. ")") or ""
end

local function shape_of(n) return n.type.shape end

--- The packed data layout name, e.g. NCHW1n16c.
function graph_pack.data_layout(b, c) return string.format("NCHW%dn%dc", b, c) end
--- The packed kernel layout name, e.g. OIHW16o16i.
function graph_pack.kernel_layout(co, ci) return string.format("OIHW%do%di", co, ci) end

--- NCHW node -> NCHW{b}n{c}c node (reshape + transpose); what names it in errors.
function graph_pack.pack(x, b, c, what)
  local s = shape_of(x)
  if #s ~= 4 then fail("%s: the packed region must start on a 4-D NCHW tensor, got rank %d", what, #s) end
  if s[1] % b ~= 0 then fail("%s: batch %d is not divisible by BATCH %d", what, s[1], b) end
  if s[2] % c ~= 0 then fail("%s: %d channels are not divisible by BLOCK %d", what, s[2], c) end
  local r = relay.reshape(x, { math.floor(s[1] / b), b, math.floor(s[2] / c), c, s[3], s[4] })
  return relay.transpose(r, { 0, 2, 4, 5, 1, 3 })
end

--- NCHW{b}n{c}c node -> NCHW node (transpose + reshape).
function graph_pack.unpack(x)
  local s = shape_of(x)
  local t = relay.transpose(x, { 0, 4, 1, 5, 2, 3 })
  return relay.reshape(t, { s[1] * s[5], s[2] * s[6], s[3], s[4] })
end

--- An OIHW array -> (O/co, I/ci, KH, KW, co, ci).
function graph_pack.pack_weight(w, co, ci)
  local s = w:shape()
  local O, I, KH, KW = s[1], s[2], s[3], s[4]
  local p = nd.empty({ math.floor(O / co), math.floor(I / ci), KH, KW, co, ci }, w:dtype())
  local src, dst = w:data_ptr(), p:data_ptr()
  local k = 0
  for oo = 0, O / co - 1 do
    for io = 0, I / ci - 1 do
      for h = 0, KH - 1 do
        for x = 0, KW - 1 do
          for oi = 0, co - 1 do
            local obase = (oo * co + oi) * I
            for ii = 0, ci - 1 do
              dst[k] = src[((obase + io * ci + ii) * KH + h) * KW + x]
              k = k + 1
            end
          end
        end
      end
    end
  end
  return p
end

-- A per-channel constant (C, 1, 1) (or (1, C, 1, 1)) -> (C/c, 1, 1, 1, c); a scalar-like
-- constant (every dim 1) is kept; else nil.
local function pack_const(k, c, what)
  local s = shape_of(k)
  local total = 1
  for _, d in ipairs(s) do total = total * d end
  if total == 1 then return k end
  local C
  if #s == 3 and s[2] == 1 and s[3] == 1 then C = s[1]
  elseif #s == 4 and s[1] == 1 and s[3] == 1 and s[4] == 1 then C = s[2] end
  if not C then return nil end
  if C % c ~= 0 then fail("%s: %d channels are not divisible by BLOCK %d", what, C, c) end
  local v = k.value
  local p = nd.empty({ math.floor(C / c), 1, 1, 1, c }, v:dtype())
  local src, dst = v:data_ptr(), p:data_ptr()
  for i = 0, C - 1 do dst[i] = src[i] end      -- (C/c, c) in channel order
  return relay.const(p)
end

--- VTA's default configuration (vta_config.json: LOG_BATCH 0, LOG_BLOCK 4, LOG_WGT_WIDTH 3),
--- the factors graph_pack takes when neither opts nor opts.env give them; pass
--- env = require("tunelua.vta").get_env() to follow another configuration.
graph_pack.DEFAULT_ENV = { BATCH = 1, BLOCK_IN = 16, BLOCK_OUT = 16, WGT_WIDTH = 8 }

local CHECK = { bfactor = true, cfactor = true, weight_bits = true, start_name = true,
                stop_name = true, env = true }

--- graph_pack.graph_pack(mod, opts) -> the packed module. opts: bfactor (BATCH), cfactor
--- (BLOCK_OUT), weight_bits (WGT_WIDTH), start_name ("nn.max_pool2d"), stop_name
--- ("nn.global_avg_pool2d"); env (a table with BATCH, BLOCK_OUT, BLOCK_IN, WGT_WIDTH, such as
--- tunelua.vta's get_env()) gives the first three.
function graph_pack.graph_pack(mod, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not CHECK[k] then
      error(string.format("graph_pack: unknown option '%s' (expected bfactor, cfactor, weight_bits, " ..
                          "start_name, stop_name or env)", tostring(k)), 2)
    end
  end
  local env = opts.env or {}
  if env.BLOCK_IN and env.BLOCK_OUT and env.BLOCK_IN ~= env.BLOCK_OUT then
    error(string.format("graph_pack: BLOCK_IN (%d) must equal BLOCK_OUT (%d)", env.BLOCK_IN,
                        env.BLOCK_OUT), 2)
  end
  local dflt = graph_pack.DEFAULT_ENV
  local b = opts.bfactor or env.BATCH or dflt.BATCH
  local c = opts.cfactor or env.BLOCK_OUT or dflt.BLOCK_OUT
  local bits = opts.weight_bits or env.WGT_WIDTH or dflt.WGT_WIDTH
  local start_name = opts.start_name or "nn.max_pool2d"
  local stop_name = opts.stop_name or "nn.global_avg_pool2d"
  for _, v in ipairs { { "bfactor", b }, { "cfactor", c } } do
    if type(v[2]) ~= "number" or v[2] < 1 or v[2] ~= math.floor(v[2]) then
      error(string.format("graph_pack: %s must be a positive integer, got %s", v[1], tostring(v[2])), 2)
    end
  end
  if bits ~= 8 then
    error(string.format("graph_pack: weight_bits=%s: only 8-bit weights are supported (bit " ..
                        "packing of narrower weights is not built)", tostring(bits)), 2)
  end
  local f = relay.main_of(mod, "graph_pack", 2)
  local ok, r = pcall(graph_pack.rewrite, f, b, c, start_name, stop_name)
  if not ok then error(tostring(r), 2) end
  return relay.Module(r)
end

local function op_list(order)
  local seen, l = {}, {}
  for _, n in ipairs(order) do
    if n.kind == "call" and type(n.op) == "string" and not seen[n.op] then
      seen[n.op] = true
      l[#l + 1] = n.op
    end
  end
  return table.concat(l, ", ")
end

--- The rewrite of function f (see the top of the file); errors raised with level 0.
function graph_pack.rewrite(f, b, c, start_name, stop_name)
  local order = relay.post_order(f.body)
  local start
  for _, n in ipairs(order) do
    if n.kind == "call" and n.op == start_name then start = n break end
  end
  if not start then
    fail("the start operator '%s' is not in the graph (its ops: %s)", start_name, op_list(order))
  end
  -- the nodes that depend on the start
  local after = { [start] = true }
  local stop
  for _, n in ipairs(order) do
    if not after[n] then
      for _, k in ipairs(relay.kids(n)) do
        if after[k] then after[n] = true break end
      end
    end
    if after[n] and n ~= start and n.kind == "call" and n.op == stop_name and not stop then stop = n end
  end
  if not stop then
    fail("the stop operator '%s' is not in the graph after the start operator '%s'", stop_name,
         start_name)
  end
  -- The packed region ends at the last int8 value before the stop: a dequantization between
  -- it and the stop (cast to float, multiply by a scalar; each used once) runs after the
  -- unpack, in NCHW, so the conv group that stores the int8 value ends there.
  local uses = {}
  for _, n in ipairs(order) do
    for _, k in ipairs(relay.kids(n)) do uses[k] = (uses[k] or 0) + 1 end
  end
  local tail, chain = {}, {}
  local x = stop.args[1]
  while x and x.kind == "call" and type(x.op) == "string" and uses[x] == 1 and x.type.dtype ~= "int8"
        and (x.op == "cast" or (x.op == "multiply" and x.args[2].kind == "const" and #shape_of(x.args[2]) == 0)) do
    chain[#chain + 1] = x
    x = x.args[1]
  end
  if x and x ~= start and x.type and x.type.dtype == "int8" and after[x] then
    for _, n in ipairs(chain) do tail[n] = true end
  end
  local dl, kl = graph_pack.data_layout(b, c), graph_pack.kernel_layout(c, c)
  local packed = {}     -- old node -> true when its rewritten value is packed
  local map = {}
  local done = false    -- past the stop

  local function conv(n, args)
    local what = n.op .. layer_of(n)
    local a = n.attrs
    if (a.groups or 1) ~= 1 then fail("%s: groups=%d; only groups=1 is packed", what, a.groups) end
    if a.data_layout ~= "NCHW" or a.kernel_layout ~= "OIHW" then
      fail("%s: layouts %s/%s; graph_pack expects NCHW/OIHW", what, a.data_layout, a.kernel_layout)
    end
    local w = args[2]
    if n.args[1].type.dtype ~= "int8" or w.type.dtype ~= "int8" or a.out_dtype ~= "int32" then
      fail("%s is not quantized (%s x %s -> %s); graph_pack packs int8 x int8 -> int32 convs " ..
           "(run quantize first, or move start_name past it)", what, n.args[1].type.dtype,
           w.type.dtype, a.out_dtype ~= "" and a.out_dtype or n.args[1].type.dtype)
    end
    if w.kind ~= "const" then fail("%s: the weight is not a constant", what) end
    local ws = shape_of(w)
    if ws[1] % c ~= 0 then
      fail("%s: %d output channels are not divisible by BLOCK_OUT %d", what, ws[1], c)
    end
    if ws[2] % c ~= 0 then
      fail("%s: %d input channels are not divisible by BLOCK_IN %d", what, ws[2], c)
    end
    local attrs = {}
    for k, v in pairs(a) do attrs[k] = v end
    attrs.data_layout, attrs.kernel_layout = dl, kl
    return relay.nn.conv2d(args[1], relay.const(graph_pack.pack_weight(w.value, c, c)), attrs)
  end

  local function rewrite(n, args)
    if n.kind ~= "call" or type(n.op) ~= "string" then
      fail("a %s consumes a packed tensor; only operator calls can", n.kind == "call" and
           "fused function" or n.kind)
    end
    local what = n.op .. layer_of(n)
    if n.op == "nn.conv2d" then
      if not packed[n.args[1]] then fail("%s: the data is not packed but the weight is", what) end
      return conv(n, args)
    end
    if n.op == "nn.pad" then
      local a = {}
      for k, v in pairs(n.attrs) do a[k] = v end
      local pw = {}
      for i, p in ipairs(a.pad_width) do pw[i] = p end
      if #pw ~= 4 then fail("%s: pad_width of %d pairs (expected 4)", what, #pw) end
      pw[5], pw[6] = { 0, 0 }, { 0, 0 }
      a.pad_width = pw
      return relay.call("nn.pad", args, a)
    end
    if n.op == "annotation.stop_fusion" then return relay.with_args(n, args) end
    local e = ops.get(n.op)
    local pat = e and e.pattern
    if pat ~= "elemwise" and pat ~= "broadcast" then
      fail("%s is not supported inside the packed region (element-wise ops, broadcasts with " ..
           "per-channel constants, nn.pad and int8 nn.conv2d are)", what)
    end
    local new = {}
    for i, a in ipairs(n.args) do
      if packed[a] then
        new[i] = args[i]
      elseif a.kind == "const" then
        new[i] = pack_const(a, c, what)
        if not new[i] then
          fail("%s: constant of shape %s does not broadcast per channel", what,
               ops.shape_str(shape_of(a)))
        end
      else
        fail("%s: operand %d is computed outside the packed region", what, i)
      end
    end
    return relay.with_args(n, new)
  end

  for _, n in ipairs(order) do
    local kids = relay.kids(n)
    local args, any = {}, false
    for i, k in ipairs(kids) do
      args[i] = map[k]
      if packed[k] then any = true end
    end
    local cur
    if n == stop or tail[n] then
      for i, k in ipairs(kids) do if packed[k] then args[i] = graph_pack.unpack(args[i]) end end
      cur = relay.with_args(n, args)
      done = n == stop
    elseif any and not done then
      cur = rewrite(n, args)
      packed[n] = true
    elseif any then
      fail("%s consumes a packed tensor after the stop operator", n.op .. layer_of(n))
    else
      local changed = false
      for i, k in ipairs(kids) do if args[i] ~= k then changed = true end end
      cur = changed and relay.with_args(n, args) or n
    end
    if n == start then
      cur = graph_pack.pack(cur, b, c, start_name .. layer_of(n))
      packed[n] = true
    end
    map[n] = cur
  end
  return relay.Function(f.params, map[f.body], f.attrs)
end

return graph_pack
