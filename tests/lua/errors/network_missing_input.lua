-- expect: tunelua: tests/lua/errors/network_missing_input.lua:3: network layer 4 'residual': input 'act9' is neither the network input 'data' nor the name of an earlier layer
local networks = require "networks"
local mod = networks.from_table({
  { "conv2d", name = "conv1", channels = 8, kernel_size = 3, padding = 1 },
  { "relu", name = "act1" },
  { "conv2d", name = "conv2", channels = 8, kernel_size = 3, padding = 1 },
  { "add", name = "residual", inputs = { "conv2", "act9" } },
}, { input_shape = { 1, 3, 16, 16 } })
