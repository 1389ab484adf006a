--- relay.optimize(mod, opts): the pass sequence TVM's build runs at opt_level=3 for
--- the ops tunelua has (specs/networks.md section 7).
--
--   opts.params           name -> tl.nd array: bound as constants first
--   opts.target           kept for the passes that would depend on it (none yet)
--   opts.desired_layouts  run ConvertLayout(desired_layouts) first (TVM users run it
--                         before building)
--   opts.disabled         {PassName = true, ...}: skip those passes
--   opts.dump             print the module after each pass (or TUNELUA_DUMP_PASSES=1)
--   opts.fuse = false     stop before FuseOps
--   opts.conv_blocks      function(conv2d call) -> ic_bn, oc_bn: AlterOpLayout turns the
--                         graph into the channel-blocked layout NCHW[x]c (the x86 graph
--                         build passes it; see AlterOpLayout.lua)
-- Sequence: SimplifyInference, EliminateCommonSubexpr, FoldConstant, FoldScaleAxis
-- (backward, forward, FoldConstant), SimplifyExpr, CanonicalizeOps, AlterOpLayout
-- (AutoTVM's extraction disables it: disabled = {AlterOpLayout = true}), FoldConstant,
-- FuseOps. Returns the module and the params that were not bound (none when all were).
local util = require "tunelua.relay.pass.util"

local M = {}

M.sequence = { "SimplifyInference", "EliminateCommonSubexpr", "FoldConstant", "FoldScaleAxis",
               "SimplifyExpr", "CanonicalizeOps", "AlterOpLayout", "FoldConstant", "FuseOps" }

function M.optimize(mod, opts)
  local relay = require "tunelua.relay"
  opts = opts or {}
  local disabled = opts.disabled or {}
  local dump = util.dump_enabled(opts)
  local f, was_mod = relay.main_of(mod, "relay.optimize", 3)
  local m = was_mod and mod or relay.Module(f)
  local rest = {}
  if opts.params then
    m = relay.bind_params(m, opts.params)
    for k, v in pairs(opts.params) do rest[k] = nil; local _ = v end
    if dump then util.dump("BindParams", m) end
  end
  if opts.desired_layouts and not disabled.ConvertLayout then
    m = relay.transform.ConvertLayout(opts.desired_layouts, { dump = dump })(m)
  end
  for _, name in ipairs(M.sequence) do
    if not disabled[name] and not (name == "FuseOps" and opts.fuse == false) then
      local p = require("tunelua.relay.pass." .. name)
      m = p.pass({ dump = dump, conv_blocks = opts.conv_blocks })(m)
    end
  end
  return m, rest
end

return M
