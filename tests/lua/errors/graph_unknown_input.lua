-- expect: tunelua: tests/lua/errors/graph_unknown_input.lua:9: set_input: no input named 'image' (inputs: data)
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"

-- set_input names the unknown input and lists the graph's inputs
local x = relay.var("data", { shape = { 1, 4 } })
local lib = executor.build(relay.Module(relay.Function({ x }, relay.nn.relu(x))), { quiet = true })
local m = executor.GraphModule(lib)
m:set_input("image", { { 1, 2, 3, 4 } })
