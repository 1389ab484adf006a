-- expect: tunelua: tests/lua/errors/relay_dense_units.lua:7: relay: nn.dense (layer fc1_weight): units=10 but the weight has 12 rows; argument types Tensor[(1, 16), float32], Tensor[(12, 16), float32]
local relay = require "tunelua.relay"

-- a dense layer whose weight rows disagree with units: the message names the op, the
-- layer (the weight var) and the argument types
local x = relay.var("data", {shape = {1, 16}})
local y = relay.nn.dense(x, relay.var("fc1_weight", {shape = {12, 16}}), {units = 10})
