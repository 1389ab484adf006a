-- expect: tunelua: tests/lua/errors/graph_pack_channels.lua:15: graph_pack: nn.conv2d (layer c2): 24 output channels are not divisible by BLOCK_OUT 16
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"

-- a quantized conv of 24 output channels inside the packed region: the error names it
local mod, params = networks.from_table({
  { "conv2d", name = "stem", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
  { "max_pool2d", pool_size = 2, strides = 2 },
  { "conv2d", name = "c1", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
  { "conv2d", name = "c2", channels = 24, kernel_size = 1 }, { "relu" },
  { "global_avg_pool2d" }, { "batch_flatten" }, { "dense", name = "fc", units = 10 },
}, { input_shape = { 1, 3, 16, 16 } })
local qmod = quantize.quantize(mod, params)
graph_pack.graph_pack(qmod, { bfactor = 1, cfactor = 16, weight_bits = 8,
                              start_name = "nn.max_pool2d", stop_name = "nn.global_avg_pool2d" })
