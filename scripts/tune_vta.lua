--- Seed 002 in its smallest form: tune resnet18_v1's packed convolutions for VTA on the local
--- simulator, compile the network with the tuned log (TopHub's vta package as fallback), run
--- it with the packed conv groups on vta-sim and the rest on this machine's CPU.
--
--   tunelua scripts/tune_vta.lua                    -- 8 xgb trials per task, 224x224
--   tunelua scripts/tune_vta.lua --n-trial 50 --early-stopping 20 --image-size 64
--   tunelua scripts/tune_vta.lua --tutorial         -- the seed's settings (n_trial 1000,
--                                                      early_stopping None)
--
-- Options: --n-trial N, --early-stopping N, --tuner xgb|random|ga|gridsearch, --image-size S,
-- --log FILE (default vta_resnet18_v1.log in a temporary directory), --no-tune (compile with
-- TopHub only), --runs N (inferences measured). Not built here: tuning through an RPC
-- tracker, transfer learning from the .tmp log. The network has random weights (no model
-- weights to download), so its top-5 classes are those of random logits.
local autotvm = require "tunelua.autotvm"
local record = require "tunelua.autotvm.record"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"
local extract = require "tunelua.graph.extract"
local executor = require "tunelua.graph.executor"
local vta_groups = require "tunelua.graph.vta_groups"
local vta = require "tunelua.vta"
local nd = require "tunelua.nd"
local core = require "tunelua.core"

local o = { n_trial = 8, early_stopping = nil, tuner = "xgb", image_size = 224, runs = 3, tune = true }
local i = 1
while i <= #arg do
  local a = arg[i]
  local function val()
    i = i + 1
    if arg[i] == nil then error("tune_vta.lua: " .. a .. " needs a value", 0) end
    return arg[i]
  end
  local function num()
    local v = val()
    local n = tonumber(v)
    if not n or n < 1 or n ~= math.floor(n) then
      error("tune_vta.lua: " .. a .. " expects a positive integer, got '" .. v .. "'", 0)
    end
    return n
  end
  if a == "--n-trial" then o.n_trial = num()
  elseif a == "--early-stopping" then o.early_stopping = num()
  elseif a == "--tuner" then o.tuner = val()
  elseif a == "--image-size" then o.image_size = num()
  elseif a == "--log" then o.log = val()
  elseif a == "--runs" then o.runs = num()
  elseif a == "--no-tune" then o.tune = false
  elseif a == "--tutorial" then o.n_trial, o.early_stopping = 1000, nil
  else error("tune_vta.lua: unknown option '" .. a .. "' (see the header of scripts/tune_vta.lua)", 0) end
  i = i + 1
end
local tuners = { xgb = true, random = true, ga = true, gridsearch = true }
if not tuners[o.tuner] then error("tune_vta.lua: --tuner expects xgb, random, ga or gridsearch, got '" .. o.tuner .. "'", 0) end

local env = vta.get_env()
print(string.format("VTA %s, %s, cycle model at %g MHz", env.TARGET, env.MODEL, env.CLOCK_MHZ))
local mod, params = networks.get_network("resnet18_v1", { image_size = o.image_size })
local qmod = quantize.quantize(mod, params, quantize.qconfig { global_scale = 8.0, skip_conv_layers = { 0 } })
local pmod = graph_pack.graph_pack(qmod, { env = env, start_name = "nn.max_pool2d",
                                           stop_name = "nn.global_avg_pool2d" })

local dir
local log = o.log
if not log then
  local p = io.popen("mktemp -d")
  dir = p:read("*l")
  p:close()
  log = dir .. "/vta_resnet18_v1.log"
end
local tmp_log = log .. ".tmp"

if o.tune then
  local tasks = extract.packed_conv2d(pmod, { target = env.target })
  print(string.format("Extracted %d conv2d_packed.vta tasks; tuning each with %s, n_trial %d%s",
    #tasks, o.tuner, o.n_trial, o.early_stopping and (", early_stopping " .. o.early_stopping) or ""))
  os.remove(tmp_log)
  local option = autotvm.measure_option { builder = autotvm.LocalBuilder(),
    runner = autotvm.LocalRunner { number = 1, ["repeat"] = 1, timeout = 60, cooldown_interval = 0 } }
  local make = { xgb = function(t) return autotvm.tuner.XGBTuner(t, { feature_type = "knob" }) end,
                 random = autotvm.tuner.RandomTuner, ga = autotvm.tuner.GATuner,
                 gridsearch = autotvm.tuner.GridSearchTuner }
  for k = #tasks, 1, -1 do   -- the seed tunes in reversed order
    local t = tasks[k]
    local prefix = string.format("[Task %2d/%2d] ", #tasks - k + 1, #tasks)
    local n = math.min(o.n_trial, #t.config_space)
    make[o.tuner](t):tune { n_trial = n, early_stopping = o.early_stopping, measure_option = option,
      callbacks = { autotvm.callback.progress_bar(n, { prefix = prefix }),
                    autotvm.callback.log_to_file(tmp_log) } }
  end
  record.pick_best(tmp_log, log)
  os.remove(tmp_log)
end

local tophub = require("tunelua.autotvm.tophub").dir() .. "/vta_v0.10.log"
local picker = vta_groups.config_picker { log = o.tune and log or nil,
                                          tophub = io.open(tophub) and tophub or nil }
local t0 = core.C.tl_now()
local lib = executor.build(pmod, { target = env.target_host, quiet = true,
                                   vta = { env = env, config = picker } })
print(string.format("Compiled in %.1f s: %d groups, %d on VTA", core.C.tl_now() - t0, lib.num_groups,
                    #(lib.vta_kernels or {})))
local m = executor.GraphModule(lib)
local x = nd.random_uniform({ 1, 3, o.image_size, o.image_size }, { seed = 1, low = -1, high = 1 })
m:set_input("data", x)
m:run()
local host = {}
for r = 1, o.runs do
  local s = core.C.tl_now()
  m:run()
  host[r] = core.C.tl_now() - s
end
table.sort(host)
local rows, total, secs = lib:vta_cycles()
local prof = m:profile(1)
local cpu_s = 0
for si, p in ipairs(prof) do
  if not lib.steps[si].vta then cpu_s = cpu_s + p.seconds end
end
print("\nPer VTA layer (simulated cycles of one inference):")
print(string.format("  %-22s %-28s %12s %8s %7s", "group", "data shape", "cycles", "GOPS", "config"))
for _, r in ipairs(rows) do
  local d = r.args[1][2]
  print(string.format("  %-22s %-28s %12d %8.2f %7s", r.name,
    string.format("(%s) k%d s%d", table.concat(d, ","), r.args[2][2][3], r.args[3][1]), r.cycles,
    2 * r.macs / (r.cycles / (env.CLOCK_MHZ * 1e6)) / 1e9, r.source))
end
print(string.format("\nMean inference time, VTA part (cycle model, %g MHz): %.2f ms (%d cycles)",
  env.CLOCK_MHZ, secs * 1e3, total))
print(string.format("Host CPU part (this machine's wall time, %d groups): %.2f ms",
  #lib.steps - #rows, cpu_s * 1e3))
print(string.format("Simulated VTA + host CPU part: %.2f ms", secs * 1e3 + cpu_s * 1e3))
print(string.format("Host wall time of a whole run, simulator included (median of %d): %.2f ms",
  o.runs, host[math.floor((o.runs + 1) / 2)] * 1e3))
local logits = m:get_output(0):flat()
local idx = {}
for k = 1, #logits do idx[k] = k end
table.sort(idx, function(a, b) return logits[a] > logits[b] end)
local top = {}
for k = 1, 5 do top[k] = string.format("%d (%.3f)", idx[k] - 1, logits[idx[k]]) end
print("Top-5 classes of the synthetic input (random weights, no trained model): " .. table.concat(top, ", "))
if dir then
  os.remove(log)
  os.remove(dir)
end
