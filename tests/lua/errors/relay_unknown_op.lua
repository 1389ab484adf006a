-- expect: tunelua: tests/lua/errors/relay_unknown_op.lua:6: relay: unknown op 'nn.fancy'
local relay = require "tunelua.relay"

-- an op the registry does not know
local x = relay.var("data", {shape = {1, 3}})
local y = relay.call("nn.fancy", {x}, {})
