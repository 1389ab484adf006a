-- Graph executor on more benchmark networks at reduced image size (batch 1, 10 classes),
-- default schedules, against the reference interpreter (fp32 rel. error < 1e-4), both
-- layouts where both apply. The first run compiles the kernels (cached on disk after).
-- Deeper networks: test_executor_networks2.lua; full size: scripts/bench/network_memory.lua
-- for the memory plan.
local check_network = require("tests.lua.lib.executor_check").report_network

check_network("mobilenet", "NCHW", 32)
check_network("resnet-18", "NHWC", 32)
check_network("squeezenet_v1.1", "NCHW", 32)
check_network("vgg-11-bn", "NCHW", 32)

print("test_executor_networks: ok")
