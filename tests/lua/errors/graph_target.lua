-- expect: tunelua: tests/lua/errors/graph_target.lua:7: executor.build: only CPU targets ('llvm', 'c') and OpenCL ('opencl ...') run here, got 'cuda'
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"

-- the executor runs CPU and OpenCL targets only; the message names the target
local x = relay.var("data", { shape = { 1, 4 } })
executor.build(relay.Module(relay.Function({ x }, relay.nn.relu(x))), { target = "cuda" })
