-- expect: tunelua: tests/lua/errors/graph_pack_stop.lua:13: graph_pack: the stop operator 'nn.global_avg_pool2d' is not in the graph after the start operator 'nn.max_pool2d'
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"

-- no global average pool after the max pool
local mod, params = networks.from_table({
  { "conv2d", name = "stem", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
  { "max_pool2d", pool_size = 2, strides = 2 },
  { "conv2d", name = "c1", channels = 16, kernel_size = 3, padding = 1 }, { "relu" },
}, { input_shape = { 1, 3, 16, 16 } })
local qmod = quantize.quantize(mod, params)
graph_pack.graph_pack(qmod)
