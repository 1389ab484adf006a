-- expect: tunelua: tests/lua/errors/rpc_runner_wait_interval.lua:5: RPCRunner: wait_report_interval must be a number of seconds > 0
local autotvm = require "tunelua.autotvm"

-- the interval of the waiting line must be a positive number of seconds
autotvm.RPCRunner("rk3399", "127.0.0.1", 9190, {wait_report_interval = 0})
