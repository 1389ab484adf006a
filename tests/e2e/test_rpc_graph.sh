#!/usr/bin/env bash
# The remote graph runtime on a loopback device farm: a tracker and a server (-v, logging to a
# file); scripts/tune_relay_x86.lua --tracker tunes resnet-18's dense tasks (32x32, 2 trials) on
# that server, uploads the tuned and the untuned network and evaluates both there: the flow
# prints the device beside the times and checks the remote output against a run on this machine,
# and the server's log shows the graphs loaded, run and timed. Then the session's graph ops by
# hand: a network's outputs equal the local GraphModule's, and bad requests (an unknown graph, a
# wrong input size, a file name outside the work directory, a broken description) get error
# replies naming the problem while the session goes on. Only 127.0.0.1 and ports the OS hands
# out are used.
#   bash tests/e2e/test_rpc_graph.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init rpcgraph 30 "${1:-}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
KEY=graphkey

start_tracker tracker --port 0; PORT=$LPORT
"$T" rpc server --tracker 127.0.0.1:$PORT --key $KEY --host 127.0.0.1 --port 0 -v > "$W/server.out" 2>&1 &
SPID=$!; PIDS+=($SPID); disown $SPID
wait_for "$W/server.out" "bind to" 5 || fail "the server did not start"
SPORT=$(bound_port "$W/server.out")

# 1. the flow: tuning through the tracker, the final evaluation on the server
cd "$W"
timeout 600 "$T" "$SRC/scripts/tune_relay_x86.lua" --tracker 127.0.0.1:$PORT --key $KEY \
  --ops nn.dense --n-trial 2 --repeat 2 --log "$W/flow.log" > "$W/flow.out" 2>&1 \
  || fail "the flow failed (rc $?)"
grep -q "Upload to server:$KEY at 127.0.0.1:$SPORT" "$W/flow.out" || fail "no upload line"
grep -q "^Output on server:$KEY matches this machine's run" "$W/flow.out" || fail "no output check"
grep -q "^Mean inference time (std dev): .* ms (.* ms) on server:$KEY at 127.0.0.1:$SPORT$" "$W/flow.out" \
  || fail "the time does not name the device"
grep -q "^Untuned network: .* on server:$KEY at 127.0.0.1:$SPORT): speedup" "$W/flow.out" \
  || fail "the comparison does not name the device"
grep -q "no remote graph runtime\|runs on this machine" "$W/flow.out" && fail "the network ran locally"
[ -s "$W/flow.log" ] || fail "no tuning log"
# tuning went through the server too: a measure session before the graph session
wait_for "$W/server.out" "graph_time graph 1" 10 || fail "the server's log has no graph_time of graph 1"
for pat in "graph_load 'g1-graph.json': graph 0, [0-9]* steps, 1 inputs, 1 outputs" \
           "graph_load 'g2-graph.json': graph 1" "graph_run graph 0: [0-9]* steps in" \
           "graph_time graph 0: " "graph_time graph 1: "; do
  grep -q "rpc server: $pat" "$W/server.out" || fail "the server's log lacks '$pat'"
done
# the tuning trials were measured by the server: sessions before the graph session
n=$(grep -c "rpc server: session start" "$W/server.out")
[ "$n" -ge 2 ] || fail "one session only: the tuning did not measure on the server"
echo "flow:"; grep -E "Upload|Output on|Mean inference|Untuned network" "$W/flow.out"
echo "server log:"; grep "rpc server: graph_" "$W/server.out" | head -8

# 2. the graph ops by hand
cat > "$W/graph.lua" <<'LUA'
local ffi = require "ffi"
local rpc = require "tunelua.rpc"
local nd = require "tunelua.nd"
local executor = require "tunelua.graph.executor"
local port, key, work = tonumber(arg[1]), arg[2], arg[3]
local mod, params, ishape = require("networks").get_network("mobilenet", { image_size = 32, num_classes = 10 })
local lib = executor.build(mod, { target = "llvm", params = params, quiet = true })
local remote = rpc.request_remote(key, "127.0.0.1", port, { timeout = 60 })
local m = remote:graph_module(lib)
assert(m.device == "server:" .. key and m:get_num_inputs() == 1 and m:get_num_outputs() == 1)
local here = executor.GraphModule(lib)
for seed = 1, 2 do
  local x = nd.random_uniform(ishape, { seed = seed, low = -1, high = 1 })
  m:set_input("data", x)
  here:set_input("data", x)
  m:run()
  here:run()
  local a, b = m:get_output(0), here:get_output(0)
  assert(ffi.string(a:data_ptr(), a:nbytes()) == ffi.string(b:data_ptr(), b:nbytes()),
         "remote and local outputs differ")
end
local r = m:benchmark({ number = 2, repeats = 3, quiet = true })
assert(#r.results == 3 and r.mean > 0)
local function refused(h, payload, want)
  local ok, err = pcall(remote.call, remote, h, payload)
  assert(not ok and tostring(err):find(want, 1, true), "expected '" .. want .. "', got " .. tostring(err))
end
refused({ op = "graph_run", graph = 7 }, nil, "graph_run: 'graph' is not the id of a loaded graph")
refused({ op = "graph_run", graph = m.id }, "abc", "graph_run: 3 bytes of inputs, the graph's inputs have 12288")
refused({ op = "graph_time", graph = m.id, ["repeat"] = 0 }, nil, "graph_time: number must be in")
refused({ op = "graph_load", name = "../x.json" }, nil, "graph_load: 'name' and 'params' must be uploaded file names")
refused({ op = "graph_load", name = "missing.json" }, nil, "graph_load: ")
local bad = work .. "/bad.json"
local f = assert(io.open(bad, "w")); f:write('{"format": "tunelua-graph", "version": 1, "arena": 0, "params_bytes": 0, "libs": [], "kernels": [], "slots": [], "steps": [{"kernel": 3, "args": []}], "inputs": [], "outputs": []}'); f:close()
remote:upload(bad, "bad.json")
os.remove(bad)
refused({ op = "graph_load", name = "bad.json" }, nil, "steps[0].kernel: expected an integer in [0, -1]")
m:run()   -- the session goes on
assert(remote:hello().version == 4)
-- an OpenCL network (Mali fallback configs, default GPU schedules) on the server's OpenCL device
local relay = require "tunelua.relay"
local function var(n, shape) return relay.var(n, { shape = shape, dtype = "float32" }) end
local x, w1, wf = var("data", { 1, 4, 8, 8 }), var("w1", { 8, 4, 3, 3 }), var("wf", { 10, 128 })
local y = relay.nn.relu(relay.nn.conv2d(x, w1, { padding = { 1, 1 }, channels = 8, kernel_size = { 3, 3 } }))
y = relay.nn.max_pool2d(y, { pool_size = { 2, 2 }, strides = { 2, 2 } })
y = relay.nn.dense(relay.nn.batch_flatten(y), wf, { units = 10 })
local oparams = { w1 = nd.random_uniform({ 8, 4, 3, 3 }, { seed = 1, low = -1, high = 1 }),
                  wf = nd.random_uniform({ 10, 128 }, { seed = 2, low = -0.2, high = 0.2 }) }
local olib = executor.build(relay.Module(relay.Function({ x, w1, wf }, y)),
  { target = "opencl -device=mali", params = oparams, quiet = true, tophub = false })
local om = remote:graph_module(olib)
local ohere = executor.GraphModule(olib)
local ox = nd.random_uniform({ 1, 4, 8, 8 }, { seed = 3 })
om:set_input("data", ox); om:run()
ohere:set_input("data", ox); ohere:run()
local a, b = om:get_output(0), ohere:get_output(0)
local pa, pb = ffi.cast("float *", a:data_ptr()), ffi.cast("float *", b:data_ptr())
for i = 0, 9 do
  assert(math.abs(pa[i] - pb[i]) <= 1e-5 * math.max(1, math.abs(pb[i])), "OpenCL output " .. i .. " differs")
end
assert(pa[0] ~= 0 or pa[1] ~= 0, "a real OpenCL output")
assert(om:benchmark({ number = 1, repeats = 2, quiet = true }).mean > 0)
remote:close()
print("graph ops: ok")
LUA
timeout 300 "$T" "$W/graph.lua" $PORT $KEY "$W" > "$W/graph.out" 2>&1 || fail "graph ops (rc $?)"
grep -q "graph ops: ok" "$W/graph.out" || fail "graph ops"
grep -q "rpc server: graph_load 'g2-graph.json': graph 1, [0-9]* steps, 1 inputs, 1 outputs, opencl" "$W/server.out" \
  || fail "no OpenCL graph in the server's log"
echo "PASS test_rpc_graph"
