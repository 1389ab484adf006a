-- The RPC layer's pure parts: the JSON codec and TVM's query text (formats §3.7).
local rpc = require "tunelua.rpc"
local json = rpc.json

-- codec round trip; arrays vs objects; escapes
local v = json.decode('[4, "rk3399", "", 1]')
assert(#v == 4 and v[1] == 4 and v[2] == "rk3399" and v[3] == "" and v[4] == 1)
assert(json.encode(v) == '[4,"rk3399","",1]')
local o = json.decode('{"key": "server:a\\"b", "addr": [null, 9090], "x": 1.5e-3, "t": true}')
assert(o.key == 'server:a"b' and o.addr[1] == json.null and o.addr[2] == 9090 and o.x == 1.5e-3 and o.t == true)
assert(json.encode({op = "hello"}) == '{"op":"hello"}')
assert(json.encode(json.array({})) == "[]")
assert(json.encode({a = {1, 2}, b = "x\ny"}) == '{"a":[1,2],"b":"x\\ny"}')
assert(not pcall(json.decode, "[1, 2"))
assert(not pcall(json.decode, '{"a" 1}'))

-- the query text: servers sorted by key, host:port right-aligned to 21 columns;
-- a queue row only when total or pending is non-zero
local data = json.decode([[{"queue_info": {"rk3399": {"free": 1, "pending": 0},
  "mali": {"free": 0, "pending": 2}, "gone": {"free": 0, "pending": 0}},
  "server_info": [{"key": "server:rk3399", "addr": ["10.0.0.7", 9090]},
                  {"key": "server:rk3399", "addr": ["10.0.0.8", 9091]}]}]])
local want = table.concat({
  "Server List",
  "------------------------------",
  "server-address           key",
  "------------------------------",
  "        10.0.0.7:9090    server:rk3399",
  "        10.0.0.8:9091    server:rk3399",
  "------------------------------",
  "",
  "Queue Status",
  "------------------------------",       -- TVM's quirk: one dash more than the title line
  "key      total  free  pending",
  "------------------------------",
  "mali     0      0     2      ",
  "rk3399   2      1     0      ",
  "------------------------------",
  "",
}, "\n")
local got = rpc.text_summary(data)
if got ~= want then print(got); print(want) end
assert(got == want)
print("test_rpc_format: ok")
