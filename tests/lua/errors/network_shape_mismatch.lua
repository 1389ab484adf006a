-- expect: tunelua: tests/lua/errors/network_shape_mismatch.lua:3: network layer 4 'residual': input shapes (1, 16, 8, 8) and (1, 8, 16, 16) do not line up
local networks = require "networks"
local mod = networks.from_table({
  { "conv2d", name = "conv1", channels = 8, kernel_size = 3, padding = 1 },
  { "relu", name = "act1" },
  { "conv2d", name = "conv2", channels = 16, kernel_size = 3, strides = 2, padding = 1 },
  { "add", name = "residual", inputs = { "conv2", "act1" } },
}, { input_shape = { 1, 3, 16, 16 } })
