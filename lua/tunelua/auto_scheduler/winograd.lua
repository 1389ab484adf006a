--- tunelua.auto_scheduler.winograd: where an auto-scheduled network computes a 3x3
--- stride-1 NHWC conv as Winograd (topi's conv2d_winograd_nhwc) rather than as the direct
--- conv2d, and the weight it takes (transformed once, when the task is made or the network
--- is built).
--
-- A conv qualifies when it is nn.conv2d with NHWC data and an HWIO kernel, float32, 3x3,
-- stride 1, dilation 1, groups 1, and its weight is a graph constant (params bound). Modes:
--   "never":  the direct conv;
--   "always": Winograd wherever a conv qualifies (any target);
--   "auto" (default): on CPU targets, where the x86 graph's rule by shape says Winograd wins
--     (tunelua.graph.winograd_x86.use_winograd: at least 32 input and output channels and a
--     14x14 input); never on other targets.
-- The tile size follows the x86 rule too: F(4x4) from 28x28 outputs up, else F(2x2).
--
-- extract_tasks and the build of an NHWC graph with an ApplyHistoryBest context both build
-- each fused group with M.hook, so a task's DAG (and its workload key) is the Winograd one,
-- with the transformed weight [m+2, m+2, CI, CO] as a constant input of the group.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local walk = require "tunelua.graph.walk"
local topi = require "tunelua.topi"
local x86 = require "tunelua.graph.winograd_x86"
local group = require "tunelua.graph.group"

local C, ctx, check = core.C, core.ctx, core.check

local M = {}

M.MODES = x86.MODES
local pair = x86.pair

--- M.check_mode(mode, what, level) -> mode (nil: "auto"), or an error naming what.
function M.check_mode(mode, what, level)
  if mode == nil then return "auto" end
  if not M.MODES[mode] then
    error(string.format("%s: winograd must be \"auto\", \"always\" or \"never\", got %s", what, tostring(mode)),
          (level or 1) + 1)
  end
  return mode
end

--- M.conv_facts(node) -> {CI, CO, H, W, OH, OW, pad = {t, l, b, r}} of an nn.conv2d call that
--- conv2d_winograd_nhwc computes (NHWC/HWIO, float32, 3x3, stride 1, dilation 1, groups 1), or nil.
function M.conv_facts(node)
  if node.op ~= "nn.conv2d" then return nil end
  local a = node.attrs or {}
  local d, k = node.args[1] and node.args[1].type, node.args[2] and node.args[2].type
  if not d or not k or #d.shape ~= 4 or #k.shape ~= 4 then return nil end
  if (d.dtype or "float32") ~= "float32" or (k.dtype or "float32") ~= "float32" then return nil end
  if (a.data_layout or "NCHW") ~= "NHWC" or (a.kernel_layout or "HWIO") ~= "HWIO" then return nil end
  if a.out_dtype and a.out_dtype ~= "" and a.out_dtype ~= "float32" then return nil end
  local s1, s2 = pair(a.strides, 1)
  local d1, d2 = pair(a.dilation, 1)
  if s1 ~= 1 or s2 ~= 1 or d1 ~= 1 or d2 ~= 1 or (a.groups or 1) ~= 1 then return nil end
  local ks = k.shape
  if ks[1] ~= 3 or ks[2] ~= 3 or ks[3] ~= d.shape[4] then return nil end
  local p = a.padding or 0
  if type(p) == "number" then p = { p, p, p, p }
  elseif #p == 1 then p = { p[1], p[1], p[1], p[1] }
  elseif #p == 2 then p = { p[1], p[2], p[1], p[2] } end
  local H, W = d.shape[2], d.shape[3]
  local OH, OW = H + p[1] + p[3] - 2, W + p[2] + p[4] - 2
  if OH < 1 or OW < 1 then return nil end
  return { CI = d.shape[4], CO = ks[4], H = H, W = W, OH = OH, OW = OW, pad = p }
end

--- M.tile_size(f) -> m: 4 for outputs of 28x28 and up, else 2 (the x86 rule).
function M.tile_size(f)
  return (f.OH >= 28 and f.OW >= 28) and 4 or 2
end

--- M.use(f, mode, cpu) -> whether a qualifying conv of facts f runs as Winograd.
function M.use(f, mode, cpu)
  if not f or mode == "never" then return false end
  if mode == "always" then return true end
  return cpu and x86.use_winograd({ C = f.CI, K = f.CO, H = f.H, W = f.W }) or false
end

--- M.weight(value, m) -> the transformed weight [m+2, m+2, CI, CO] (float32) of a constant
--- HWIO 3x3 kernel value [3, 3, CI, CO].
function M.weight(value, m)
  local sh = value:shape()
  if #sh ~= 4 or sh[1] ~= 3 or sh[2] ~= 3 or value:dtype() ~= "float32" then
    error("auto_scheduler.winograd.weight: expected a float32 HWIO kernel [3, 3, CI, CO], got " ..
          value:dtype() .. " [" .. table.concat(sh, ", ") .. "]", 2)
  end
  if m ~= 2 and m ~= 4 and m ~= 6 then
    error("auto_scheduler.winograd.weight: tile size must be 2, 4 or 6, got " .. tostring(m), 2)
  end
  local a = m + 2
  local u = nd.empty({ a, a, sh[3], sh[4] }, "float32")
  check(C.tl_topi_winograd_nhwc_weight(ctx, m, sh[3], sh[4], ffi.cast("const float *", value:data_ptr()),
                                       ffi.cast("float *", u:data_ptr())), 2)
  return u
end

--- M.hook(call, mode, cpu) -> an anchor_hook for tunelua.graph.group.build (nil when mode is
--- "never"): a qualifying conv of the group call becomes conv2d_winograd_nhwc on the
--- transformed weight, a new constant input of the group.
function M.hook(call, mode, cpu)
  if mode == "never" then return nil end
  return function(dag, node, in_ids, _)
    local f = M.conv_facts(node)
    if not M.use(f, mode, cpu) or #in_ids ~= 2 then return nil end
    local w = walk.weight_const(call, node)
    if not w then return nil end
    local m = M.tile_size(f)
    return group.emit_on_constant(dag, "conv2d_winograd_nhwc", in_ids[1], "kernel_pack", M.weight(w, m),
                                  topi.encode_attrs({ padding = f.pad }), "auto_scheduler.winograd")
  end
end

return M
