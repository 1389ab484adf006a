-- expect: tunelua: tests/lua/errors/relay_pool_attrs.lua:6: relay: nn.max_pool2d (layer pool1): pool_size is required
local relay = require "tunelua.relay"

-- a max pool without its window
local x = relay.var("data", {shape = {1, 3, 8, 8}})
local y = relay.nn.max_pool2d(x, {strides = 2, name = "pool1"})
