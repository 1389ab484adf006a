-- expect: tunelua: tests/lua/errors/relay_bind_params.lua:9: relay.bind_params: param 'fc_weight' is Tensor[(10, 4), float32] but the value is Tensor[(10, 5), float32]
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"

-- a parameter value whose shape differs from its var
local x = relay.var("data", {shape = {1, 4}})
local w = relay.var("fc_weight", {shape = {10, 4}})
local mod = relay.Module(relay.nn.dense(x, w, {units = 10}))
mod = relay.bind_params(mod, {fc_weight = nd.zeros({10, 5})})
