-- expect: tunelua: tests/lua/errors/rpc_port_range.lua:5: rpc: port must be an integer in 1..65535, got 70000
local rpc = require "tunelua.rpc"

-- a port past 65535 is refused, not wrapped around (70000 would be 4464)
rpc.request_remote("rk3399", "127.0.0.1", 70000, {timeout = 2})
