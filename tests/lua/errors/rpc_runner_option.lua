-- expect: tunelua: tests/lua/errors/rpc_runner_option.lua:5: number: expected a number, got string
local autotvm = require "tunelua.autotvm"

-- RPCRunner checks its options like LocalRunner
autotvm.RPCRunner("rk3399", "127.0.0.1", 9190, {number = "four"})
