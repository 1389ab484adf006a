-- Benchmark: resnet18_v1's packed conv2d layers (the 10 conv2d_packed.vta tasks of the VTA
-- tutorial: every conv after the first, batch 1, NCHW1n16c int8) on vta-sim's cycle model at
-- the default configuration (100 MHz; peak 256 MACs/cycle = 51.2 GOPS). Per layer, in one run:
--   default  config index 0 (TVM's fallback for these knobs: every tile of 1)
--   tophub   the record of TopHub's vta_v0.10 log for this workload (pynq_1x16 model), if any
--   tuned    the best of an XGBTuner (knob features) run of N trials, LocalRunner (each trial a
--            forked child: the stream simulated and checked against the CPU reference)
-- with simulated cycles and GOPS, the tuned/default ratio and the share of cycles the GEMM core
-- is busy. Then the simulator's speed: simulated MACs per host second (in-process runs) and the
-- trials per second of the tuning runs.
--
--   tunelua scripts/bench/vta_conv.lua [N=100] [layer]
--
-- --tophub: every conv2d_packed.vta record of TopHub's vta_v0.10 log run on the simulator (its
-- own configuration: pynq 1x16 or 4x8), checked against the CPU reference; GOPS per record.
--
--   tunelua scripts/bench/vta_conv.lua --tophub
local autotvm = require "tunelua.autotvm"
local vta = require "tunelua.vta"

if arg[1] == "--tophub" then
  local map = vta.tophub_map((os.getenv("TUNELUA_TOPHUB_DIR") or "data/tophub") .. "/vta_v0.10.log")
  print(string.format("TopHub vta_v0.10: %d lines, %d records, %d conv2d_packed.vta accepted " ..
    "(%d with TVM's index), %d fit the SRAMs", map.lines, map.records, map.accepted,
    map.same_index, map.fits))
  local ok, gops = 0, {}
  for i, e in ipairs(map.entries) do
    local good, st = pcall(e.task.run, e.task, e.index)
    if good then
      ok = ok + 1
      gops[#gops + 1] = st.gops
      print(string.format("%3d %-32s %s %10d cycles %6.2f GOPS gemm %3.0f%%", i, e.task.env.MODEL,
        require("tunelua.json").encode(e.record.input[3][1][2]), st.cycles, st.gops, st.gemm_busy * 100))
    else
      print(string.format("%3d FAILED: %s", i, tostring(st)))
    end
  end
  table.sort(gops)
  print(string.format("%d of %d records ran and matched the CPU reference; GOPS min %.2f median %.2f max %.2f",
    ok, #map.entries, gops[1] or 0, gops[math.floor((#gops + 1) / 2)] or 0, gops[#gops] or 0))
  return
end

local N = tonumber(arg[1]) or 100
local ONLY = tonumber(arg[2])
local env = vta.get_env()

-- C (input channels), H (= W), O (output channels), K, stride, pad
local LAYERS = {
  { 64, 56, 64, 3, 1, 1 }, { 64, 56, 128, 3, 2, 1 }, { 64, 56, 128, 1, 2, 0 },
  { 128, 28, 128, 3, 1, 1 }, { 128, 28, 256, 3, 2, 1 }, { 128, 28, 256, 1, 2, 0 },
  { 256, 14, 256, 3, 1, 1 }, { 256, 14, 512, 3, 2, 1 }, { 256, 14, 512, 1, 2, 0 },
  { 512, 7, 512, 3, 1, 1 },
}

local function args_of(l)
  local C, H, O, K, s, p = l[1], l[2], l[3], l[4], l[5], l[6]
  return { { "TENSOR", { 1, C / 16, H, H, 1, 16 }, "int8" }, { "TENSOR", { O / 16, C / 16, K, K, 16, 16 }, "int8" },
           { s, s }, { p, p, p, p }, { 1, 1 }, "NCHW1n16c", "int32" }
end

-- TopHub's records by workload (the args' JSON) for the default configuration's shape
local tophub = {}
local map = vta.tophub_map((os.getenv("TUNELUA_TOPHUB_DIR") or "data/tophub") .. "/vta_v0.10.log")
for _, e in ipairs(map.entries) do
  if e.task.env.BATCH == env.BATCH and e.task.env.BLOCK_IN == env.BLOCK_IN then
    tophub[require("tunelua.json").encode(e.record.input[3])] = e.record.config.entity
  end
end

local sim_macs, sim_s = 0, 0
local function run(task, idx)
  local t0 = os.clock()
  local st = task:run(idx)
  sim_s = sim_s + (os.clock() - t0)
  sim_macs = sim_macs + st.macs
  return st
end

local function cell(st)
  if not st then return string.format("%10s %7s", "-", "-") end
  return string.format("%10d %7.2f", st.cycles, st.gops)
end

print(string.format("vta-sim cycle model, %s, %g MHz, peak %.1f GOPS; tuned = best of %d xgb trials",
  env.MODEL, env.CLOCK_MHZ, 2 * env.BATCH * env.BLOCK_IN * env.BLOCK_OUT * env.CLOCK_MHZ / 1e3, N))
print(string.format("%-22s %9s | %10s %7s | %10s %7s | %10s %7s | %6s %5s",
  "layer (C,H,O,K,s)", "MMACs", "default", "GOPS", "tophub", "GOPS", "tuned", "GOPS", "x def", "gemm"))
local trials, trial_s = 0, 0
local ratios, busy3 = {}, {}
for li, l in ipairs(LAYERS) do
  if not ONLY or ONLY == li then
    local args = args_of(l)
    local vt = vta.task(env, args)
    local d = run(vt, 0)
    local th
    local ent = tophub[require("tunelua.json").encode(args)]
    if ent then th = run(vt, vt:index_of(ent)) end
    local task = autotvm.task.create("conv2d_packed.vta", args, env.target)
    local tuner = autotvm.tuner.XGBTuner(task, { feature_type = "knob" })
    local option = autotvm.measure_option { builder = autotvm.LocalBuilder(),
      runner = autotvm.LocalRunner { number = 1, ["repeat"] = 1, timeout = 60, cooldown_interval = 0 } }
    local t0 = os.time()
    local c0 = require("tunelua.core").C.tl_now()
    tuner:tune { n_trial = math.min(N, #task.config_space), measure_option = option }
    trial_s = trial_s + (require("tunelua.core").C.tl_now() - c0)
    trials = trials + math.min(N, #task.config_space)
    local best = tuner.best_config and run(vt, tuner.best_config.index) or nil
    local ratio = best and d.cycles / best.cycles or 0
    ratios[#ratios + 1] = ratio
    if l[4] == 3 and best then busy3[#busy3 + 1] = best.gemm_busy end
    print(string.format("%-22s %9.1f | %s | %s | %s | %6.2f %4.0f%%",
      string.format("%d,%d,%d,%d,%d", l[1], l[2], l[3], l[4], l[5]), d.macs / 1e6, cell(d), cell(th),
      cell(best), ratio, best and best.gemm_busy * 100 or 0))
    io.stdout:flush()
    local _ = t0
  end
end
table.sort(ratios)
local med = ratios[math.floor((#ratios + 1) / 2)]
local minb = math.huge
for _, b in ipairs(busy3) do minb = math.min(minb, b) end
print(string.format("tuned vs default: median %.2fx, min %.2fx; GEMM busy on 3x3 layers: min %.0f%%",
  med or 0, ratios[1] or 0, (minb < math.huge and minb or 0) * 100))
print(string.format("simulator: %.2f G simulated MACs per host second (in-process runs, one core); " ..
  "tuning: %.2f trials/s (%d trials, %.1f s)", sim_macs / sim_s / 1e9, trials / trial_s, trials, trial_s))
