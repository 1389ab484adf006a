-- expect: tunelua: tests/lua/errors/network_unknown_op.lua:3: network layer 3 'mystery': unknown op 'conv9d' (expected one of add, avg_pool2d, avg_pool3d, batch_flatten, batch_norm, bias_add, concatenate, conv2d, conv3d, dense, dropout, flatten, global_avg_pool2d, global_max_pool2d, leaky_relu, log_softmax, max_pool2d, max_pool3d, maximum, multiply, relu, reshape, sigmoid, softmax, subtract, tanh)
local networks = require "networks"
local mod = networks.from_table({
  { "conv2d", name = "conv1", channels = 8, kernel_size = 3, padding = 1 },
  { "relu" },
  { "conv9d", name = "mystery", channels = 8 },
}, { input_shape = { 1, 3, 16, 16 } })
