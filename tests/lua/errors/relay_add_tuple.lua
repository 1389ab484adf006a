-- expect: tunelua: tests/lua/errors/relay_add_tuple.lua:7: relay: add (after layer stem_weight): argument 2 must be a tensor, got (Tensor[(1, 2, 8, 8), float32], Tensor[(1, 2, 8, 8), float32]); argument types Tensor[(1, 4, 8, 8), float32], (Tensor[(1, 2, 8, 8), float32], Tensor[(1, 2, 8, 8), float32])
local relay = require "tunelua.relay"

-- a tuple where a tensor is needed, after a layer: the message names the layer upstream
local x = relay.var("data", {shape = {1, 3, 8, 8}})
local y = relay.nn.conv2d(x, relay.var("stem_weight", {shape = {4, 3, 3, 3}}), {padding = 1})
local z = relay.add(y, relay.split(y, 2, 1))
