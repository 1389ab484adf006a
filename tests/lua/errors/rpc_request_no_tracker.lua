-- expect: tunelua: tests/lua/errors/rpc_request_no_tracker.lua:6: RPC tracker: cannot connect to 127.0.0.1:1: Connection refused
local rpc = require "tunelua.rpc"

-- port 1 on loopback: nothing listens there
local _ = rpc
rpc.request_remote("rk3399", "127.0.0.1", 1, {timeout = 2})
