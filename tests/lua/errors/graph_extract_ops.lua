-- expect: tunelua: tests/lua/errors/graph_extract_ops.lua:7: extract: ops must be a list of op names such as {"nn.conv2d"}, got number
local relay = require "tunelua.relay"
local extract = require "tunelua.graph.extract"

-- ops must be a list of op names
local x = relay.var("data", { shape = { 1, 4 } })
extract.autotvm(relay.Module(relay.Function({ x }, relay.nn.relu(x))), { target = "llvm", ops = 5 })
