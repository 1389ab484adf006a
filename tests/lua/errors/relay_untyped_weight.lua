-- expect: tunelua: tests/lua/errors/relay_untyped_weight.lua:6: relay: nn.conv2d (layer conv0_weight): argument 2 (%conv0_weight) has no type and none can be inferred; argument types Tensor[(1, 3, 8, 8), float32], ?
local relay = require "tunelua.relay"

-- an untyped weight var whose shape the conv cannot infer (no channels / kernel_size)
local x = relay.var("data", {shape = {1, 3, 8, 8}})
local y = relay.nn.conv2d(x, relay.var("conv0_weight"), {padding = 1})
