#!/usr/bin/env bash
# scripts/tune_vta.lua through the device farm, as seed 002 runs it: a tracker on loopback and
# a server of key "sim" (any tunelua RPC server hosts the VTA simulator); the 10 packed conv
# tasks of resnet18_v1 (32x32) tuned with two random trials each on the server, the final log
# picked, the network compiled and run with all 19 packed conv groups on a local vta-sim, then
# on the server (exported, graph_load with a vta-sim of the server's): its output equal to the
# local run bit for bit and each group's simulated cycles equal to the local simulator's (the
# script checks both and fails otherwise; the server's log shows the graph ops). The log holds TVM-shaped AutoTVM records: ext_dev target, conv2d_packed.vta, the task's args,
# the entity of TVM's knobs, simulated seconds.
#   bash tests/e2e/test_tune_vta_rpc.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init tunevtarpc 30 "${1:-}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
KEY=sim

start_tracker tracker --port 0; PORT=$LPORT
start_server 1
query_until "$KEY 1 1 0" 10 || fail "the server did not register"

cd "$W"
"$T" "$SRC/scripts/tune_vta.lua" --tracker 127.0.0.1:$PORT --key $KEY --tuner random --n-trial 2 \
  --image-size 32 --runs 1 --log "$W/vta.log" > "$W/tune.out" 2>&1 || fail "tune_vta.lua through the tracker failed"
for want in "Tuning on the simulators of key 'sim' at 127.0.0.1:$PORT" "[Task 10/10]" \
            "29 groups, 19 on VTA" "Mean inference time (std dev), VTA part from the cycle model" \
            "Top-5 classes of a synthetic input" \
            "Output on server:$KEY at 127.0.0.1:" "equals this machine's run bit for bit" \
            "Simulated cycles on server:$KEY at 127.0.0.1:" "equal this machine's simulator, group by group (19 groups)" \
            "Host wall time of a whole run on server:$KEY"; do
  grep -qF "$want" "$W/tune.out" || fail "the output lacks: $want"
done
[ ! -e "$W/vta.log.tmp" ] || fail "the .tmp log was left"
cat > "$W/check.lua" <<'LUA'
local json = require "tunelua.json"
local vta = require "tunelua.vta"
local env = vta.get_env()
local n, keys = 0, {}
for line in io.lines(arg[1]) do
  local r = json.decode(line)
  n = n + 1
  assert(r.input[1] == env.target and r.input[2] == "conv2d_packed.vta", line)
  local a = r.input[3]
  assert(a[1][1] == "TENSOR" and #a[1][2] == 6 and a[1][3] == "int8" and a[6] == "NCHW1n16c" and a[7] == "int32", line)
  assert(#r.config.entity == 7 and r.config.entity[6][1] == "oc_nthread", line)
  assert(r.version == 0.2 and #r.result == 4 and r.result[2] == 0 and r.result[1][1] > 0, line)
  local k = json.encode(a)
  assert(not keys[k], "pick_best keeps one record per workload: " .. line)
  keys[k] = true
  -- the cost is the cycle model's: a local run of the same config gives the same seconds
  local st = vta.task(env, a):run(r.config.index)
  assert(math.abs(st.seconds - r.result[1][1]) <= 1e-12, line)
end
assert(n >= 1 and n <= 10, "records: " .. n)
print("records: " .. n)
LUA
"$T" "$W/check.lua" "$W/vta.log" > "$W/check.out" 2>&1 || fail "the log: $(cat "$W/check.out")"
cat "$W/check.out"

# a malformed VTA kernel in an uploaded network: graph_load replies an error naming the field and
# the session goes on; the same network unchanged then loads and runs on the server's vta-sim
cat > "$W/bad.lua" <<'LUA'
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local executor = require "tunelua.graph.executor"
local json = require "tunelua.json"
local vta = require "tunelua.vta"
local env = vta.get_env()
local x = nd.random_uniform({ 1, 2, 6, 6, 1, 16 }, { seed = 3, low = -128, high = 128 }):astype("int8")
local w = nd.random_uniform({ 2, 2, 3, 3, 16, 16 }, { seed = 4, low = -128, high = 128 }):astype("int8")
local data = relay.var("data", { shape = x:shape(), dtype = "int8" })
local e = relay.nn.conv2d(relay.cast(relay.clip(relay.cast(data, "int32"), -100, 100), "int8"),
  relay.const(w), { channels = 32, kernel_size = 3, padding = 1, out_dtype = "int32",
  data_layout = "NCHW1n16c", kernel_layout = "OIHW16o16i" })
e = relay.cast(relay.clip(relay.right_shift(e, relay.const(8, "int32")), -127, 127), "int8")
local lib = executor.build(relay.Module(e), { target = "llvm", quiet = true, vta = { env = env } })
assert(#lib:vta_cycles() == 1, "one VTA group")
local m = executor.GraphModule(lib)
m:set_input("data", x)
m:run()
local host, port = arg[2]:match("^(.+):(%d+)$")
if arg[3] then
  -- a server simulating another configuration (--vta-config) refuses the network, naming both
  local remote = require("tunelua.rpc").request_remote(arg[3], host, tonumber(port), { timeout = 20 })
  local ok, err = pcall(remote.graph_module, remote, lib)
  local want = "graph_load: the network's VTA groups were built for " .. env.MODEL ..
               ", this server simulates " .. arg[4] .. " (--vta-config)"
  assert(not ok and tostring(err):find(want, 1, true), "expected '" .. want .. "', got: " .. tostring(err))
  print("refused: " .. tostring(err))
  remote:close()
  return
end
local dir = arg[1]
local files = executor.export(lib, dir, "bad-")
local f = assert(io.open(dir .. "/bad-graph.json", "rb"))
local g = json.decode(f:read("*a"))
f:close()
local k
for i, kk in ipairs(g.kernels) do if kk.vta then k = i - 1; kk.vta.config = 999999 end end
require("tunelua.file").write_all(dir .. "/bad-graph.json", json.encode(g))
local remote = require("tunelua.rpc").request_remote("sim", host, tonumber(port), { timeout = 20 })
for _, name in ipairs(files) do remote:upload(dir .. "/" .. name, name) end
local ok, err = pcall(remote.call, remote, { op = "graph_load", name = files[1], params = files[2] })
local want = string.format("graph_load: graph artifact: kernels[%d].vta: config: expected an integer in [0, ", k)
assert(not ok and tostring(err):find(want, 1, true), "expected '" .. want .. "', got: " .. tostring(err))
print("refused: " .. tostring(err))
local rm = remote:graph_module(lib)   -- the same session goes on
rm:set_input("data", x)
rm:run()
local a, b = rm:get_output(0), m:get_output(0)
assert(require("ffi").string(a:data_ptr(), a:nbytes()) == require("ffi").string(b:data_ptr(), b:nbytes()),
  "the server's output equals the local run")
local rc, total = rm:vta_cycles()
assert(#rc == 1 and total == lib:vta_cycles()[1].cycles and total > 0, "the server's cycles")
print(string.format("after the refusal: output equal, %d cycles on the server", total))
remote:close()
LUA
mkdir -p "$W/bad"
"$T" "$W/bad.lua" "$W/bad" 127.0.0.1:$PORT > "$W/bad.out" 2>&1 || fail "a malformed VTA artifact: $(cat "$W/bad.out")"
cat "$W/bad.out"

# a server that simulates another VTA configuration (--vta-config: LOG_UOP_BUFF_SIZE 14) refuses
# the network built for the default one, naming both models
sed 's/"LOG_UOP_BUFF_SIZE" : 15/"LOG_UOP_BUFF_SIZE" : 14/' "$SRC/targets/vta/vta_config.json" > "$W/other.json"
KEY=sim14
"$T" rpc server --tracker 127.0.0.1:$PORT --key $KEY --host 127.0.0.1 --port 0 --vta-config "$W/other.json" \
  > "$W/server2.out" 2>&1 &
SPID=$!; disown $SPID; PIDS+=($SPID)
wait_for "$W/server2.out" "bind to" 5 || fail "the server with --vta-config did not start"
query_until "$KEY 1 1 0" 10 || fail "the server with --vta-config did not register"
"$T" "$W/bad.lua" "$W/bad" 127.0.0.1:$PORT $KEY sim_1x16_i8w8a32_14_15_18_17 > "$W/bad2.out" 2>&1 \
  || fail "a network for another VTA configuration: $(cat "$W/bad2.out")"
cat "$W/bad2.out"
echo "PASS"
