--- tunelua.graph.winograd_x86: where an x86 graph runs a 3x3 stride-1 conv as Winograd
--- (conv2d_NCHWc_winograd.x86) rather than as the direct conv2d_NCHWc.x86, and the weight
--- it takes (transformed once, at build time).
--
-- The x86 strategy lists both templates for a float32 3x3, stride-1, dilation-1 conv. The
-- graph build (tunelua.graph.executor) orders them with M.order:
--   mode "never": the direct template only;
--   mode "always": Winograd first wherever it applies (blocked data, a constant weight);
--   mode "auto" (default): when a dispatch context (history, TopHub) has a record for the
--     Winograd task, the records' costs decide (the faster first, as TVM picks an
--     implementation); with none, M.use_winograd's rule by shape, measured on the
--     development machine (docs/performance.md, "Winograd on x86").
-- The weight: M.weight(value, m, ob) -> [m+2, m+2, K/ob, C, ob] from the graph's constant
-- (OIHW, or OIHW[b]o as AlterOpLayout folds it) by tl_topi_winograd_nchwc_weight.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"

local C, ctx, check = core.C, core.ctx, core.check

local M = {}

M.TEMPLATE = "conv2d_NCHWc_winograd.x86"
M.MODES = { auto = true, always = true, never = true }

--- M.pair(v, d) -> the two values of an attribute given as nil (d, d), a number or a list
function M.pair(v, d)
  if v == nil then return d, d end
  if type(v) == "number" then return v, v end
  return v[1], v[#v > 1 and 2 or 1]
end
local pair = M.pair

--- M.conv_facts(node) -> {C, K, H, W} of a conv2d / contrib_conv2d_NCHWc call that Winograd
--- can compute (float32, 3x3, stride 1, dilation 1, groups 1, NCHW or NCHW[x]c data), or nil.
function M.conv_facts(node)
  local a = node.attrs or {}
  local d, k = node.args[1].type, node.args[2].type
  if not d or not k or (d.dtype or "float32") ~= "float32" or (k.dtype or "float32") ~= "float32" then
    return nil
  end
  local s1, s2 = pair(a.strides, 1)
  local d1, d2 = pair(a.dilation, 1)
  if s1 ~= 1 or s2 ~= 1 or d1 ~= 1 or d2 ~= 1 or (a.groups or 1) ~= 1 then return nil end
  local ds, ks = d.shape, k.shape
  local Cin, H, W, K
  if node.op == "nn.conv2d" then
    if (a.data_layout or "NCHW") ~= "NCHW" or (a.kernel_layout or "OIHW") ~= "OIHW" or #ds ~= 4 then
      return nil
    end
    Cin, H, W, K = ds[2], ds[3], ds[4], ks[1]
    if ks[3] ~= 3 or ks[4] ~= 3 then return nil end
  elseif node.op == "nn.contrib_conv2d_NCHWc" then
    if #ds ~= 5 or #ks ~= 5 or ks[3] ~= 3 or ks[4] ~= 3 then return nil end
    Cin, H, W, K = ds[2] * ds[5], ds[3], ds[4], ks[1] * ks[5]
  else
    return nil
  end
  return { C = Cin, K = K, H = H, W = W }
end

--- M.use_winograd(f[, registers]) -> true when the rule by shape picks Winograd for an
--- untuned conv of facts f: enough input channels to amortize the transforms (C >= 32) and
--- an output of at least 14x14, or 7x7 on a target with fewer than 32 vector registers
--- (registers: the target's count; nil: 32). With 32 registers (AVX-512) the direct conv
--- wins on 7x7 (the transformed weights, 16/9 to 4x the direct ones, stream from memory:
--- resnet-18's 7x7x512 steps 0.55-0.60 ms direct against 0.75-0.80 as Winograd); with 16
--- (AVX2) a 7-wide row holds 7 accumulators of one vector and Winograd wins there
--- (1.30-1.37 against 1.56-1.64 ms, development machine, AVX2 code).
function M.use_winograd(f, registers)
  local min = (registers and registers > 0 and registers < 32) and 7 or 14
  return f.C >= 32 and f.K >= 32 and f.H >= min and f.W >= min
end

--- M.order(impls, node, mode, has_record[, registers]) -> impls reordered (or filtered) for
--- mode; has_record(impl) tells whether a dispatch context holds a record for impl's task;
--- registers: the target's vector registers (M.use_winograd).
function M.order(impls, node, mode, has_record, registers)
  local wi
  for i, impl in ipairs(impls) do if impl.name == M.TEMPLATE then wi = i end end
  if not wi then return impls end
  local rest = {}
  for i, impl in ipairs(impls) do if i ~= wi then rest[#rest + 1] = impl end end
  local f = M.conv_facts(node)
  -- the first conv of a graph reads its NCHW input in place: no blocked data to transform
  if not f or mode == "never" or (node.op == "nn.conv2d" and node.args[1].kind == "var") or f.C < 8 then
    return rest
  end
  local first
  if mode == "always" then
    first = true
  elseif has_record(impls[wi]) then
    return impls           -- the records decide (by cost)
  else
    first = M.use_winograd(f, registers)
  end
  if not first then return rest end
  local out = { impls[wi] }
  for _, impl in ipairs(rest) do out[#out + 1] = impl end
  return out
end

--- M.tile_size(task, index) -> m of config index (-1: the fallback) of a Winograd task.
function M.tile_size(task, index)
  local cfg = task:config(index)
  return math.floor(cfg["tile_size"].val)
end

--- M.weight(value, m, ob) -> the transformed weight [m+2, m+2, K/ob, C, ob] (float32) of a
--- constant 3x3 kernel value, OIHW [K, C, 3, 3] or OIHW[b]o [K/b, C, 3, 3, b].
function M.weight(value, m, ob)
  local sh = value:shape()
  local K, Cin, b
  if #sh == 4 then K, Cin, b = sh[1], sh[2], 1
  elseif #sh == 5 then K, Cin, b = sh[1] * sh[5], sh[2], sh[5]
  else error("winograd_x86.weight: expected a 4-D or 5-D 3x3 kernel, got " .. #sh .. "-D", 2) end
  if value:dtype() ~= "float32" or sh[3] ~= 3 or sh[4] ~= 3 then
    error("winograd_x86.weight: expected a float32 3x3 kernel", 2)
  end
  local a = m + 2
  if type(ob) ~= "number" or ob < 1 or type(m) ~= "number" or m < 1 or m > 6 then
    error("winograd_x86.weight: tile size must be 2, 4 or 6 and the block positive, got " .. tostring(m) ..
          " and " .. tostring(ob), 2)
  end
  -- the C side checks the blocks divide K (before writing anything)
  local u = nd.empty({ a, a, math.max(1, math.floor(K / ob)), Cin, ob }, "float32")
  check(C.tl_topi_winograd_nchwc_weight(ctx, m, K, Cin, b, ob, ffi.cast("const float *", value:data_ptr()),
                                        ffi.cast("float *", u:data_ptr())), 2)
  return u
end

return M
