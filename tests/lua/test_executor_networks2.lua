-- Graph executor on more benchmark networks at reduced image size (batch 1, 10 classes),
-- default schedules, against the reference interpreter (fp32 rel. error < 1e-4), both
-- layouts where both apply. The first run compiles the kernels (cached on disk after).
-- Here inception_v3 at 75x75 and squeezenet 1.0; with TUNELUA_TEST_ALL_NETWORKS=1 every
-- network of networks.list() in each of its layouts (minutes: the reference interpreter
-- dominates, e.g. resnet-152 at 32x32 ~60 s on a loaded machine).

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


check_network("inception_v3", "NCHW", 75)
check_network("squeezenet_v1.0", "NCHW", 32)

if os.getenv("TUNELUA_TEST_ALL_NETWORKS") == "1" then
  for _, name in ipairs(networks.list()) do
    for _, layout in ipairs(networks.layouts(name)) do
      local size = name == "inception_v3" and 75 or 32
      local ok, err = pcall(networks.get_network, name, { layout = layout, image_size = size, num_classes = 10 })
      if ok then
        check_network(name, layout, size)
      else
        print(string.format("%-16s %-5s: skipped, get_network failed: %s", name, layout, tostring(err)))
      end
    end
  end
end

print("test_executor_networks2: ok")
