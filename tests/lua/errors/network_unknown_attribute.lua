-- expect: tunelua: tests/lua/errors/network_unknown_attribute.lua:3: network layer 1 'conv1': unknown attribute 'kernal_size' for conv2d (expected channels, kernel_size, strides, padding, dilation, groups, use_bias, layout, data_layout, kernel_layout)
local networks = require "networks"
local mod = networks.from_table({
  { "conv2d", name = "conv1", channels = 8, kernal_size = 3, padding = 1 },
}, { input_shape = { 1, 3, 16, 16 } })
