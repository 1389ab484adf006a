#!/usr/bin/env bash
# scripts/tune_vta.lua through the device farm, as seed 002 runs it: a tracker on loopback and
# a server of key "sim" (any tunelua RPC server hosts the VTA simulator); the 10 packed conv
# tasks of resnet18_v1 (32x32) tuned with two random trials each on the server, the final log
# picked, the network compiled and run with all 19 packed conv groups on a local vta-sim. The
# log holds TVM-shaped AutoTVM records: ext_dev target, conv2d_packed.vta, the task's args,
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
            "Top-5 classes of a synthetic input"; do
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
echo "PASS"
