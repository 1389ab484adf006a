-- Planned activation memory of the graph executor vs the sum of all intermediate
-- tensors, for resnet-50 and inception_v3 (batch 1, full size; target: planned <= 30%).
--
--   tunelua scripts/bench/network_memory.lua [name[:layout] ...]
--
-- Only plans memory: the groups' DAGs are built and the plan computed as
-- executor.build does it, without compiling kernels (executor.plan_memory).
local executor = require "tunelua.graph.executor"
local networks = require "networks"

local list = {}
for i = 1, #arg do list[#list + 1] = arg[i] end
if #list == 0 then list = { "resnet-50:NCHW", "resnet-50:NHWC", "inception_v3:NCHW" } end

local worst = 0
for _, spec in ipairs(list) do
  local name, layout = spec:match("^([^:]+):?(.*)$")
  if layout == "" then layout = networks.layouts(name)[1] end
  local mod, params = networks.get_network(name, { layout = layout, batch_size = 1 })
  local r = executor.plan_memory(mod, { target = "llvm", params = params })
  local pct = 100 * r.planned / r.intermediates
  if pct > worst then worst = pct end
  print(string.format("%-14s %-5s %3d groups  intermediates %8.2f MiB  planned %7.2f MiB  (%.1f%%)  largest %.2f MiB",
                      name, layout, r.groups, r.intermediates / 2 ^ 20, r.planned / 2 ^ 20, pct,
                      r.largest / 2 ^ 20))
end
print(string.format("worst: %.1f%% of the intermediates (target <= 30%%)", worst))
