#!/usr/bin/env bash
# VTA tuning through the device farm: a tracker and a server of key "vta-sim" (any tunelua RPC
# server hosts the VTA simulator: measure kind "vta"), and an XGBTuner (knob features) on a
# conv2d_packed.vta task with LocalBuilder and RPCRunner. Every trial is run on the server's
# simulator and checked against the CPU reference; the log holds TVM-shaped AutoTVM records
# (ext_dev target, conv2d_packed.vta, the entity of TVM's knobs) whose costs are the cycle
# model's simulated seconds, the same as a local measurement of the same config gives.
#   bash tests/e2e/test_vta_rpc_tune.sh [path/to/tunelua]
. "$(dirname "$0")/lib_rpc.sh"
rpc_init vtarpc 20 "${1:-}"
KEY=vta-sim

start_tracker tracker --port 0; PORT=$LPORT
start_server 1
query_until "$KEY 1 1 0" 10 || fail "the server did not register"

cat > "$W/tune.lua" <<'EOF'
local autotvm = require "tunelua.autotvm"
local vta = require "tunelua.vta"
local json = require "tunelua.json"
local port, key, log = tonumber(arg[1]), arg[2], arg[3]
local env = vta.get_env()
local args = { { "TENSOR", { 1, 2, 8, 8, 1, 16 }, "int8" }, { "TENSOR", { 4, 2, 3, 3, 16, 16 }, "int8" },
  { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" }
local task = autotvm.task.create("conv2d_packed.vta", args, env.target)
local tuner = autotvm.tuner.XGBTuner(task, { feature_type = "knob", plan_size = 8 })
local option = autotvm.measure_option {
  builder = autotvm.LocalBuilder(),
  runner = autotvm.RPCRunner(key, "127.0.0.1", port, { number = 1, ["repeat"] = 1, timeout = 20,
    cooldown_interval = 0, wait_limit = 30 }),
}
tuner:tune { n_trial = 16, measure_option = option, callbacks = { autotvm.callback.log_to_file(log) } }
-- the records: TVM's shape, simulated seconds, a local measurement of the best agrees
local n, ok, best, best_idx = 0, 0, math.huge, nil
for line in io.lines(log) do
  local r = json.decode(line)
  n = n + 1
  assert(r.input[1] == env.target and r.input[2] == "conv2d_packed.vta", line)
  assert(#r.config.entity == 7 and r.config.entity[6][1] == "oc_nthread", line)
  assert(r.version == 0.2 and #r.result == 4, line)
  if r.result[2] == 0 then
    ok = ok + 1
    if r.result[1][1] < best then best, best_idx = r.result[1][1], r.config.index end
  else
    assert(r.result[2] == 1, "only configs that overflow an SRAM may fail: " .. line)
  end
end
assert(n == 16, "16 records, got " .. n)
assert(ok >= 8, "most trials succeed, got " .. ok)
local st = vta.task(env, args):run(best_idx)
assert(math.abs(st.seconds - best) <= 1e-12, string.format("local %.9g vs remote %.9g", st.seconds, best))
print(string.format("vta rpc tune: %d records, %d measured, best %.1f us (%.2f GOPS, config %d)",
  n, ok, best * 1e6, task.flop / best / 1e9, best_idx))
EOF
"$T" "$W/tune.lua" $PORT $KEY "$W/vta.log" > "$W/tune.out" 2>&1 || fail "tuning through the server failed"
cat "$W/tune.out" | tail -3
echo "PASS"
