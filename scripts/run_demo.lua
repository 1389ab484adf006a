-- Placeholder main job until scripts/tune_mobile_gpu.lua exists: shows the runtime.
local tl = require "tunelua"
print("tunelua " .. tl.version .. " on " .. tl.num_cores() .. " cores")
