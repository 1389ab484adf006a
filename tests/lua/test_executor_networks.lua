-- Graph executor on more benchmark networks at reduced image size (batch 1, 10 classes),
-- default schedules, against the reference interpreter (fp32 rel. error < 1e-4), both
-- layouts where both apply. The first run compiles the kernels (cached on disk after).
-- Deeper networks: test_executor_networks2.lua; full size: scripts/bench/network_memory.lua
-- for the memory plan.
local nd = require "tunelua.nd"
local networks = require "networks"
local reference = require "networks.reference"
local executor = require "tunelua.graph.executor"

local function check_network(name, layout, size)
  local mod, params, ishape = networks.get_network(name, { layout = layout, image_size = size, num_classes = 10 })
  local lib = executor.build(mod, { target = "llvm", params = params, quiet = true })
  local m = executor.GraphModule(lib)
  local x = nd.random_uniform(ishape, { seed = 3 })
  m:set_input("data", x)
  m:run()
  local ref = reference.run(mod, params, { data = x })[1]
  reference.assert_close(m:get_output(0), ref, { rtol = 1e-4, atol = 1e-6 })
  assert(lib.planned_bytes < lib.intermediate_bytes, name .. ": buffers are reused")
  print(string.format("%-16s %-5s %3d: %2d kernels, planned %d of %d bytes", name, layout, size,
                      #lib.kernels, lib.planned_bytes, lib.intermediate_bytes))
end

check_network("mobilenet", "NCHW", 32)
check_network("resnet-18", "NHWC", 32)
check_network("squeezenet_v1.1", "NCHW", 32)
check_network("vgg-11-bn", "NCHW", 32)

print("test_executor_networks: ok")
