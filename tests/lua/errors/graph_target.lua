-- expect: tunelua: tests/lua/errors/graph_target.lua:7: executor.build: only CPU targets ('llvm', 'c') run here, got 'opencl -device=mali'
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"

-- the executor runs CPU targets only; the message names the target
local x = relay.var("data", { shape = { 1, 4 } })
executor.build(relay.Module(relay.Function({ x }, relay.nn.relu(x))), { target = "opencl -device=mali" })
