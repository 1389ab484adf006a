-- expect: tunelua: tests/lua/errors/topi_default_schedule_opencl.lua:5: default_schedule: target 'opencl' is not supported yet (only "cpu")
-- the OpenCL default schedules do not exist yet
local tl = require "tunelua"
local X = tl.te.placeholder({ 4, 8 }, "float32", "X")
tl.topi.default_schedule(tl.topi.nn.relu(X), "opencl -device=mali")
