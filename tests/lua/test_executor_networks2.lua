-- Graph executor on more benchmark networks at reduced image size (batch 1, 10 classes),
-- default schedules, against the reference interpreter (fp32 rel. error < 1e-4), both
-- layouts where both apply. The first run compiles the kernels (cached on disk after).
-- Here inception_v3 at 75x75 and squeezenet 1.0; with TUNELUA_TEST_ALL_NETWORKS=1 every
-- network of networks.list() in each of its layouts (minutes: the reference interpreter
-- dominates, e.g. resnet-152 at 32x32 ~60 s on a loaded machine).

local networks = require "networks"
local check_network = require("tests.lua.lib.executor_check").report_network

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
