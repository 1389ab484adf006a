--- tunelua.auto_scheduler.weights: the constant weights an auto-scheduled task takes in a layout
--- of its own, transformed once, when the task is made or the network is built.
--
--   - 3x3 stride-1 NHWC convs as Winograd, on the transformed kernel (tunelua.auto_scheduler.winograd).
--   - On CPU targets, nn.dense with a constant float32 weight [N, K] as matmul(data [M, K],
--     weight [K, N]): the weight transposed, so that a state vectorizing the outputs reads
--     each weight row contiguously. On the weight as given, the same vector gathers one float
--     from each of its lanes' rows (a 4-lane vector read 4 rows 4 KiB apart on every step of
--     k): mobilenet's classifier (1024 -> 1000) took 0.070 ms at its best state, 0.020 on the
--     transposed weight (docs/auto_scheduler.md). TVM's auto-scheduler gets
--     there by rewriting the layouts of constant inputs after the search; the transposed
--     weight is that rewrite for dense, fixed before the search, so the search measures it.
--
-- extract_tasks and the build of a graph with an ApplyHistoryBest context both build each fused
-- group with M.hook, so a task's DAG (and its workload key) is the one with the rewritten weight.
local walk = require "tunelua.graph.walk"
local group = require "tunelua.graph.group"
local winograd = require "tunelua.auto_scheduler.winograd"

local M = {}

--- M.dense_facts(node) -> {M, K, N} of an nn.dense call on float32 [M, K] data and a [N, K]
--- weight, or nil.
function M.dense_facts(node)
  if node.op ~= "nn.dense" then return nil end
  local d, w = node.args[1] and node.args[1].type, node.args[2] and node.args[2].type
  if not d or not w or #d.shape ~= 2 or #w.shape ~= 2 then return nil end
  if (d.dtype or "float32") ~= "float32" or (w.dtype or "float32") ~= "float32" then return nil end
  local a = node.attrs or {}
  if a.out_dtype and a.out_dtype ~= "" and a.out_dtype ~= "float32" then return nil end
  if d.shape[2] ~= w.shape[2] then return nil end
  return { M = d.shape[1], K = d.shape[2], N = w.shape[1] }
end

--- M.dense_weight(value) -> the transposed weight [K, N] (float32) of a constant [N, K] weight.
function M.dense_weight(value)
  local sh = value:shape()
  if #sh ~= 2 or value:dtype() ~= "float32" then
    error("auto_scheduler.weights.dense_weight: expected a float32 weight [N, K], got " .. value:dtype() ..
          " [" .. table.concat(sh, ", ") .. "]", 2)
  end
  local relay = require "tunelua.relay"
  return require("tunelua.relay.eval").run(relay.Function({}, relay.transpose(relay.const(value), { 1, 0 })), {})
end

local function dense_hook(call)
  return function(dag, node, in_ids, _)
    if not M.dense_facts(node) or #in_ids ~= 2 then return nil end
    local w = walk.weight_const(call, node)
    if not w then return nil end
    return group.emit_on_constant(dag, "matmul", in_ids[1], "weight_kn", M.dense_weight(w), nil,
                                  "auto_scheduler.weights")
  end
end

--- M.hook(call, winograd_mode, cpu) -> an anchor_hook for tunelua.graph.group.build, or nil:
--- Winograd convs as winograd.hook says, and on CPU targets the dense of a constant weight.
function M.hook(call, wmode, cpu)
  local wh = winograd.hook(call, wmode, cpu)
  local dh = cpu and dense_hook(call) or nil
  if not wh or not dh then return wh or dh end
  return function(dag, node, in_ids, arg_types)
    local r, extra = wh(dag, node, in_ids, arg_types)
    if r then return r, extra end
    return dh(dag, node, in_ids, arg_types)
  end
end

return M
