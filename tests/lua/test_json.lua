-- tunelua.json: the one JSON codec. Compact text for the C side and the RPC wire, the
-- Python json.dumps form of the AutoTVM log, the decoder, and one null for every module.
local json = require "tunelua.json"

local function eq(got, want, what)
  assert(got == want, string.format("%s: got %s, want %s", what, tostring(got), tostring(want)))
end

-- one null: records, strategies and the RPC layer share it
eq(require("tunelua.autotvm.record").null, json.null, "record.null")
eq(require("tunelua.graph.strategy").null, json.null, "strategy.null")
eq(require("tunelua.rpc").json, json, "rpc.json")

-- compact and Python forms of the same value
local v = { { "TENSOR", { 1, 512 }, "float32" }, json.null, 0.5, true, "a\"b\\c\n\t\1" }
eq(json.encode(v), '[["TENSOR",[1,512],"float32"],null,0.5,true,"a\\"b\\\\c\\n\\t\\u0001"]', "encode")
eq(json.dumps(v), '[["TENSOR", [1, 512], "float32"], null, 0.5, true, "a\\"b\\\\c\\n\\t\\u0001"]', "dumps")
eq(json.encode({ b = 1, a = { 2 } }), '{"a":[2],"b":1}', "encode sorts keys")
eq(json.dumps({ b = 1, a = { 2 } }), '{"a": [2], "b": 1}', "dumps sorts keys")
eq(json.dumps({ __order = { "z", "a", "m" }, a = 1, z = 2 }), '{"z": 2, "a": 1, "m": null}', "__order")

-- empty tables: an object in encode, a list in dumps; json.array marks a list
eq(json.encode({}), "{}", "encode {}")
eq(json.dumps({}), "[]", "dumps {}")
eq(json.encode(json.array({})), "[]", "encode json.array")
eq(json.encode(json.decode("[]")), "[]", "a decoded empty array stays an array")
eq(json.encode(json.decode("{}")), "{}", "a decoded empty object stays an object")

-- numbers: integers as integers; floats %.17g (compact) or Python's repr (dumps)
eq(json.encode(0.1), "0.10000000000000001", "encode float")
eq(json.dumps(0.1), "0.1", "dumps float")
eq(json.dumps(json.float(2)), "2.0", "json.float")
eq(json.dumps(1e15), "1000000000000000", "integral")
eq(json.dumps(json.float(1e16)), "1e+16", "repr exponent")
eq(json.encode(math.huge), "1e308", "encode infinity")
eq(json.dumps(-math.huge), "-Infinity", "dumps infinity")
eq(json.encode(require("ffi").new("int64_t", 7)), "7", "cdata number")
assert(not pcall(json.encode, 0 / 0), "NaN has no compact form")
assert(not pcall(json.encode, print), "a function is refused")

-- decode
local o = json.decode(' {"a": [1, -2.5e3, "x\\u00e9\\n"], "b": null, "c": false, "d": NaN} ')
eq(o.a[2], -2500, "number")
eq(o.a[3], "x\195\169\n", "escapes")
eq(o.b, json.null, "null")
eq(o.c, false, "false")
assert(o.d ~= o.d, "NaN")
for _, bad in ipairs({ "[1, 2", '{"a" 1}', '"abc', "[1] x", '"\\q"', "" }) do
  local ok, err = pcall(json.decode, bad)
  assert(not ok and err:match("^invalid JSON: .* at offset %d+$"), "malformed " .. bad .. ": " .. tostring(err))
end

-- round trip of an AutoTVM log line through decode and dumps
local line = '{"input": ["llvm", "dense_nopack.x86", [["TENSOR", [1, 8], "float32"], null, "float32"], {}], ' ..
  '"config": {"index": 3, "code_hash": null, "entity": [["tile_x", "sp", [-1, 4]]]}}'
local d = json.decode(line)
d.__order = { "input", "config" }
d.input[4].__order = {}
d.config.__order = { "index", "code_hash", "entity" }
eq(json.dumps(d), line, "log line round trip")
print("test_json: ok")
