-- The graph executor's memory plan (batch 1, full size): planned activation arena against
-- the sum of all intermediate tensors (target: planned <= 30%), and the whole footprint of a
-- run -- peak = planned arena + weights (as deployed: packed, each array once) + inputs and
-- outputs -- against the sum of every tensor in its own buffer. Both layouts of the x86
-- build: the blocked graph (AlterOpLayout's NCHW[x]c between convs, the default) and
-- layouts = false (NCHW between convs, each conv packing its own weight copy).
--
--   tunelua scripts/bench/network_memory.lua [name[:layout] ...]
--
-- Only plans memory: the groups' DAGs are built and the plan computed as
-- executor.build does it (fallback configs), without compiling kernels
-- (executor.plan_memory).
local executor = require "tunelua.graph.executor"
local networks = require "networks"

local list = {}
for i = 1, #arg do list[#list + 1] = arg[i] end
if #list == 0 then list = { "resnet-50:NCHW", "resnet-50:NHWC", "inception_v3:NCHW" } end

local MiB = 2 ^ 20
local worst = 0
print(string.format("%-14s %-5s %-7s %6s %14s %14s %8s %10s %10s %12s %12s %8s", "network", "data", "graph",
                    "steps", "intermediates", "planned", "(%)", "weights", "in+out", "peak", "all tensors",
                    "(%)"))
for _, spec in ipairs(list) do
  local name, layout = spec:match("^([^:]+):?(.*)$")
  if layout == "" then layout = networks.layouts(name)[1] end
  local mod, params = networks.get_network(name, { layout = layout, batch_size = 1 })
  for _, blocked in ipairs({ true, false }) do
    local r = executor.plan_memory(mod, { target = "llvm", params = params, layouts = blocked })
    local pct = 100 * r.planned / r.intermediates
    if pct > worst then worst = pct end
    local peak, all = r.planned + r.weights + r.io, r.intermediates + r.weights + r.io
    print(string.format("%-14s %-5s %-7s %6d %10.2f MiB %10.2f MiB %7.1f%% %6.2f MiB %6.2f MiB %8.2f MiB %8.2f MiB %7.1f%%",
                        name, layout, blocked and "blocked" or "NCHW", r.steps, r.intermediates / MiB,
                        r.planned / MiB, pct, r.weights / MiB, r.io / MiB, peak / MiB, all / MiB,
                        100 * peak / all))
  end
end
print(string.format("worst: planned %.1f%% of the intermediates (target <= 30%%)", worst))
