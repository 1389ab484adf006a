-- Benchmark: resnet18_v1 end to end on vta-sim (seed 002's network), quantized (global scale
-- 8, conv 0 skipped) and packed for the default VTA configuration, its 19 packed conv groups on
-- the simulator and the rest (stem, max pool, the pack/unpack and dequantization, the three
-- fusion boundaries, the head) on this machine's CPU, with three sets of configs in one run:
--   default  config 0 of every group (TVM's fallback for conv2d_packed.vta: every tile 1)
--   tophub   TopHub's vta_v0.10 record for each workload (tunelua.autotvm.tophub), else 0
--            (a record that does not fit with its group's ending, the bias and residual
--            tiles joining the conv's in the accumulator, is replaced by its nearest smaller
--            config: "tophub-fit")
--   tuned    a tuned log (--log FILE, or made here: autotvm.tune_tasks, xgb_knob, N trials a
--            task on the local simulator), then TopHub, then 0
-- Per set: the VTA part's simulated time at the configuration's clock (cycle model), the host
-- CPU part (this machine's wall time, the median over runs of the per-step profile), the VTA
-- share of their sum, the VTA part's GOPS (2 x MACs of the 19 convs / simulated time), and
-- the output checked bit for bit against the plain CPU run of the same quantized graph. Then
-- tuned vs default and tophub, and the seed's sample output (PYNQ boards) beside ours.
--
--   tunelua scripts/bench/vta_network.lua [--n-trial N=50] [--log FILE] [--runs R=5]
--                                        [--image-size S=224]
local autotvm = require "tunelua.autotvm"
local tophub = require "tunelua.autotvm.tophub"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"
local extract = require "tunelua.graph.extract"
local executor = require "tunelua.graph.executor"
local vta_groups = require "tunelua.graph.vta_groups"
local vta = require "tunelua.vta"
local nd = require "tunelua.nd"
local core = require "tunelua.core"
local file = require "tunelua.file"
local median = require("tunelua.stats").median

local o = { n_trial = 50, runs = 5, image_size = 224 }
local i = 1
while i <= #arg do
  local a, v = arg[i], arg[i + 1]
  if a == "--log" and v then o.log = v
  elseif (a == "--n-trial" or a == "--runs" or a == "--image-size") and tonumber(v) and tonumber(v) >= 1 then
    o[a:sub(3):gsub("%-", "_")] = math.floor(tonumber(v))
  else
    error("vta_network.lua: bad argument '" .. tostring(a) .. "' (--n-trial N, --log FILE, --runs R, --image-size S)", 0)
  end
  i = i + 2
end

local env = vta.get_env()
local S = o.image_size
local mod, params = networks.get_network("resnet18_v1", { image_size = S })
local qmod = quantize.quantize(mod, params, quantize.qconfig { global_scale = 8.0, skip_conv_layers = { 0 } })
local pmod = graph_pack.graph_pack(qmod, { env = env })
print(string.format("resnet18_v1 1x3x%dx%d int8 on vta-sim (%s, cycle model at %g MHz, peak %.1f GOPS); host CPU: this machine",
  S, S, env.MODEL, env.CLOCK_MHZ, 2 * env.BATCH * env.BLOCK_IN * env.BLOCK_OUT * env.CLOCK_MHZ / 1e3))

local log, dir = o.log, nil
local tune_s
if not log then
  local p = io.popen("mktemp -d")
  dir = p:read("*l")
  p:close()
  log = dir .. "/vta.resnet18_v1.log"
  local tasks = extract.packed_conv2d(pmod, { target = env.target })
  local option = autotvm.measure_option { builder = autotvm.LocalBuilder(),
    runner = autotvm.LocalRunner { number = 1, ["repeat"] = 1, timeout = 60, cooldown_interval = 0 } }
  local t0 = core.C.tl_now()
  autotvm.tune_tasks(tasks, option, { tuner = "xgb_knob", n_trial = o.n_trial, log_filename = log,
                                      resume = false, quiet = true, seed = 1 })
  tune_s = core.C.tl_now() - t0
  print(string.format("tuned: %d tasks x %d xgb_knob trials on the local simulator in %.1f s", #tasks, o.n_trial, tune_s))
else
  if not file.exists(log) then error("vta_network.lua: --log " .. log .. ": no such file", 0) end
  print("tuned: the log " .. log)
end

local cpu = executor.GraphModule(executor.build(qmod, { target = "llvm", quiet = true }))
local x = nd.random_uniform({ 1, 3, S, S }, { seed = 7, low = 0, high = 1 })
cpu:set_input("data", x)
cpu:run()
local want = cpu:get_output(0):flat()

local tophub_log = tophub.file_for(env.target)
local sets = {
  { "default", nil },
  { "tophub", vta_groups.config_picker { tophub = tophub_log } },
  { "tuned", vta_groups.config_picker { log = log, tophub = tophub_log } },
}
local res = {}
for _, set in ipairs(sets) do
  local lib = executor.build(pmod, { target = "llvm", quiet = true, vta = { env = env, config = set[2] } })
  local m = executor.GraphModule(lib)
  m:set_input("data", x)
  local t0 = core.C.tl_now()
  m:run()
  local run_s = core.C.tl_now() - t0
  local got = m:get_output(0):flat()
  local exact = #got == #want
  for k = 1, #want do if got[k] ~= want[k] then exact = false break end end
  local cpus = {}
  for r = 1, o.runs do
    local c = 0
    for si, p in ipairs(m:profile(1)) do if not lib.steps[si].vta then c = c + p.seconds end end
    cpus[r] = c
  end
  local rows, cycles, secs = lib:vta_cycles()
  local macs, src = 0, {}
  for _, r in ipairs(rows) do
    macs = macs + r.macs
    src[r.source] = (src[r.source] or 0) + 1
  end
  res[set[1]] = { rows = rows, cycles = cycles, secs = secs, cpu = median(cpus), macs = macs,
                  exact = exact, src = src, run_s = run_s, ncpu = #lib.steps - #rows }
end

print(string.format("\n%-8s %6s %14s %12s %12s %10s %8s %8s %10s  %s", "configs", "groups", "VTA cycles",
  "VTA ms", "host CPU ms", "sum ms", "VTA %", "GOPS", "run (s)", "bit-exact / sources"))
for _, set in ipairs(sets) do
  local r = res[set[1]]
  local srcs = {}
  for _, k in ipairs { "tuned", "tuned-fit", "tophub", "tophub-fit", "default" } do
    if r.src[k] then srcs[#srcs + 1] = r.src[k] .. " " .. k end
  end
  print(string.format("%-8s %6d %14d %12.2f %12.2f %10.2f %7.1f%% %8.2f %10.2f  %s; %s", set[1], #r.rows,
    r.cycles, r.secs * 1e3, r.cpu * 1e3, (r.secs + r.cpu) * 1e3, 100 * r.secs / (r.secs + r.cpu),
    2 * r.macs / r.secs / 1e9, r.run_s, r.exact and "yes" or "NO", table.concat(srcs, ", ")))
end

print(string.format("\nper layer (simulated cycles; GOPS):"))
print(string.format("  %-20s %-22s %12s %7s %12s %7s %12s %7s %7s", "group", "data, kernel", "default", "GOPS",
  "tophub", "GOPS", "tuned", "GOPS", "x def"))
local function gops(r) return 2 * r.macs / (r.cycles / (env.CLOCK_MHZ * 1e6)) / 1e9 end
local lo, hi = math.huge, 0
for k, r in ipairs(res.tuned.rows) do
  local d, t = res.default.rows[k], res.tophub.rows[k]
  local g = gops(r)
  lo, hi = math.min(lo, g), math.max(hi, g)
  print(string.format("  %-20s %-22s %12d %7.2f %12d %7.2f %12d %7.2f %7.2f", r.name,
    string.format("(%s) k%d s%d", table.concat(r.args[1][2], ",", 2, 4), r.args[2][2][3], r.args[3][1]),
    d.cycles, gops(d), t.cycles, gops(t), r.cycles, g, d.cycles / r.cycles))
end
local d, t, u = res.default, res.tophub, res.tuned
print(string.format("\ntuned VTA part vs default configs: %.2fx (simulated); vs TopHub: %.2fx", d.secs / u.secs, t.secs / u.secs))
print(string.format("seed 002's sample output (6 PYNQ boards, tuner random, 1000 trials): mean inference time 621.79 ms " ..
  "(host wall time of the board: ARM host + FPGA), per-task best 2.18-31.26 GFLOPS"))
print(string.format("here, tuned: VTA part %.2f ms simulated at %g MHz + host CPU part %.2f ms (x86 wall time) = %.2f ms; " ..
  "per-group %.2f-%.2f GOPS", u.secs * 1e3, env.CLOCK_MHZ, u.cpu * 1e3, (u.secs + u.cpu) * 1e3, lo, hi))
if dir then
  os.remove(log)
  os.remove(dir)
end
