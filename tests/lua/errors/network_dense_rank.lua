-- expect: tunelua: tests/lua/errors/network_dense_rank.lua:3: network layer 2 'fc': dense needs a 2-d input, got shape (1, 8, 16, 16)
local networks = require "networks"
local mod = networks.from_table({
  { "conv2d", name = "conv1", channels = 8, kernel_size = 3, padding = 1 },
  { "dense", name = "fc", units = 10 },
}, { input_shape = { 1, 3, 16, 16 } })
