--- Seed 002: tune resnet18_v1's packed convolutions for VTA and run the network.
--
--   tunelua scripts/tune_vta.lua                          -- local simulator, no setup
--   tunelua scripts/tune_vta.lua --tracker 127.0.0.1:9190 --key sim
--                                                         -- trials and the network on servers
--                                                            of key "sim"
--   tunelua scripts/tune_vta.lua --tutorial               -- the seed's options (random tuner,
--                                                            n_trial 1000, early_stopping None)
--
-- The flow is the seed's (specs/vta.md §6.1, §7): resnet18_v1 (1x3xSxS) quantized (global
-- scale 8, conv 0 skipped), graph_pack'ed between nn.max_pool2d and nn.global_avg_pool2d, its
-- 10 conv2d_packed.vta tasks extracted and tuned with autotvm.tune_tasks (the seed's
-- tune_tasks: reversed order, min(n_trial, space) trials each, transfer learning from the
-- .tmp log, pick_best into the final log, the .tmp log removed); then the network is
-- compiled with the tuned log, TopHub's vta package as fallback (then config 0), its 19
-- packed conv groups on vta-sim and the rest on this machine's CPU, and evaluated: the mean
-- inference time of the VTA part from the cycle model, the host CPU part's and a whole run's
-- wall time (each labelled), per-layer simulated cycles and the top-5 classes of a synthetic
-- input. The network has random weights (there are no trained weights to download), so its
-- classes are those of random logits.
--
-- With --tracker, every trial runs on an RPC server of --key registered at the tracker (any
-- `tunelua rpc server` hosts the simulator); the network is evaluated on this machine, then
-- on a server of the key: exported (CPU kernels and VTA groups), loaded there with a vta-sim
-- of its own (remote:graph_module, graph_load), its output checked bit for bit and each
-- group's simulated cycles checked against this machine's run, and the server's mean
-- inference time from the cycle model and its wall time of a whole run printed, labelled.
--
-- Options: --tuner NAME (xgb_knob; any of autotvm's tuner names: xgb, xgb_knob, ga, random,
-- gridsearch, ...), --n-trial N (100), --early-stopping N (none), --log FILE
-- (vta.resnet18_v1.log), --tracker HOST:PORT, --key KEY (env.TARGET: sim), --image-size S
-- (224), --runs N (10, the seed's repeat), --no-tune (compile with the log as it is and
-- TopHub), --tutorial (tuner random, n_trial 1000, early_stopping none).
local autotvm = require "tunelua.autotvm"
local tuner_mod = require "tunelua.autotvm.tuner"
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

local env = vta.get_env()
local o = { n_trial = 100, early_stopping = nil, tuner = "xgb_knob", image_size = 224, runs = 10,
            tune = true, log = "vta.resnet18_v1.log", key = env.TARGET }
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
  elseif a == "--tracker" then o.tracker = val()
  elseif a == "--key" then o.key = val()
  elseif a == "--no-tune" then o.tune = false
  elseif a == "--tutorial" then o.tuner, o.n_trial, o.early_stopping = "random", 1000, nil
  else error("tune_vta.lua: unknown option '" .. a .. "' (see the header of scripts/tune_vta.lua)", 0) end
  i = i + 1
end
local tuner_name = autotvm.recipe.tuner_name(o.tuner)
if not tuner_name then
  error("tune_vta.lua: --tuner expects one of " .. table.concat(tuner_mod.NAMES, ", ") .. ", got '" ..
        o.tuner .. "'", 0)
end
local host, port
if o.tracker then
  host, port = o.tracker:match("^(.+):(%d+)$")
  if not host then error("tune_vta.lua: --tracker expects HOST:PORT, got '" .. o.tracker .. "'", 0) end
  port = tonumber(port)
end

print(string.format("VTA %s, %s, cycle model at %g MHz", env.TARGET, env.MODEL, env.CLOCK_MHZ))
print("Extract tasks...")
local mod, params = networks.get_network("resnet18_v1", { image_size = o.image_size })
local qmod = quantize.quantize(mod, params, quantize.qconfig { global_scale = 8.0, skip_conv_layers = { 0 } })
local pmod = graph_pack.graph_pack(qmod, { env = env, start_name = "nn.max_pool2d",
                                           stop_name = "nn.global_avg_pool2d" })
local tasks = extract.packed_conv2d(pmod, { target = env.target })
print(string.format("Extracted %d conv2d tasks:", #tasks))
for _, t in ipairs(tasks) do
  local d, k = t.args[1][2], t.args[2][2]
  -- the seed's line: (batch, height, width, in_filter, out_filter, hkernel, wkernel, hpad,
  -- wpad, hstride, wstride)
  print(string.format("    (%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d)", d[1] * d[5], d[3], d[4],
    d[2] * d[6], k[1] * k[5], k[3], k[4], t.args[4][1], t.args[4][2], t.args[3][1], t.args[3][2]))
end

if o.tune then
  local runner
  if o.tracker then
    print(string.format("Tuning on the simulators of key '%s' at %s (%s, n_trial %d%s)...", o.key,
      o.tracker, tuner_name, o.n_trial, o.early_stopping and (", early_stopping " .. o.early_stopping) or ""))
    runner = autotvm.RPCRunner(o.key, host, port, { number = 1, ["repeat"] = 1, timeout = 60,
                                                    cooldown_interval = 0 })
  else
    print(string.format("Tuning on the local simulator (%s, n_trial %d%s)...", tuner_name, o.n_trial,
      o.early_stopping and (", early_stopping " .. o.early_stopping) or ""))
    runner = autotvm.LocalRunner { number = 1, ["repeat"] = 1, timeout = 60, cooldown_interval = 0 }
  end
  -- the simulated time is the cycle model's: every repeat gives the same figure, so one run
  -- per trial (the seed's number=5, repeat=3 average a board's wall time)
  local option = autotvm.measure_option { builder = autotvm.LocalBuilder(), runner = runner }
  local t0 = core.C.tl_now()
  autotvm.tune_tasks(tasks, option, { tuner = tuner_name, n_trial = o.n_trial,
    early_stopping = o.early_stopping, log_filename = o.log, use_transfer_learning = true,
    resume = false })
  print(string.format("Tuned in %.1f s; best records in %s", core.C.tl_now() - t0, o.log))
end

print("Compile...")
local tophub_log = tophub.file_for(env.target)
local picker = vta_groups.config_picker { log = file.exists(o.log) and o.log or nil, tophub = tophub_log }
local t0 = core.C.tl_now()
local lib = executor.build(pmod, { target = env.target_host, quiet = true,
                                   vta = { env = env, config = picker } })
local rows, total, secs = lib:vta_cycles()
local count, names = {}, {}
for _, r in ipairs(rows) do
  if not count[r.source] then names[#names + 1] = r.source end
  count[r.source] = (count[r.source] or 0) + 1
end
local srcs = {}
for _, n in ipairs(names) do srcs[#srcs + 1] = count[n] .. " " .. n end
print(string.format("Compiled in %.1f s: %d groups, %d on VTA (configs: %s)",
  core.C.tl_now() - t0, lib.num_groups, #rows, table.concat(srcs, ", ")))

print("Evaluate inference time cost...")
local m = executor.GraphModule(lib)
local x = nd.random_uniform({ 1, 3, o.image_size, o.image_size }, { seed = 1, low = 0, high = 1 })
m:set_input("data", x)
m:run()
local function mean_std(l)
  local s, q = 0, 0
  for _, v in ipairs(l) do s = s + v end
  local mu = s / #l
  for _, v in ipairs(l) do q = q + (v - mu) ^ 2 end
  return mu, math.sqrt(q / #l)
end
local whole, cpu = {}, {}
for r = 1, o.runs do
  local s = core.C.tl_now()
  m:run()
  whole[r] = core.C.tl_now() - s
end
-- the host CPU part: the per-step profile, the VTA steps left out
for r = 1, o.runs do
  local c = 0
  for si, p in ipairs(m:profile(1)) do
    if not lib.steps[si].vta then c = c + p.seconds end
  end
  cpu[r] = c
end
rows, total, secs = lib:vta_cycles()
print("\nPer VTA layer (simulated cycles of one inference):")
print(string.format("  %-22s %-26s %12s %8s  %s", "group", "data shape", "cycles", "GOPS", "config"))
for _, r in ipairs(rows) do
  local d = r.args[1][2]
  print(string.format("  %-22s %-26s %12d %8.2f  %s", r.name,
    string.format("(%s) k%d s%d", table.concat(d, ","), r.args[2][2][3], r.args[3][1]), r.cycles,
    2 * r.macs / (r.cycles / (env.CLOCK_MHZ * 1e6)) / 1e9, r.source))
end
local cpu_mu, cpu_sd = mean_std(cpu)
local whole_mu, whole_sd = mean_std(whole)
print(string.format("\nMean inference time (std dev), VTA part from the cycle model at %g MHz: %.2f ms (0.00 ms), %d cycles",
  env.CLOCK_MHZ, secs * 1e3, total))
print(string.format("Host CPU part (this machine's wall time, %d groups, %d runs): %.2f ms (%.2f ms)",
  #lib.steps - #rows, o.runs, cpu_mu * 1e3, cpu_sd * 1e3))
print(string.format("Simulated VTA part + host CPU part: %.2f ms", secs * 1e3 + cpu_mu * 1e3))
print(string.format("Host wall time of a whole run, simulator included (%d runs): %.2f ms (%.2f ms)",
  o.runs, whole_mu * 1e3, whole_sd * 1e3))
local logits = m:get_output(0):flat()
local idx = {}
for k = 1, #logits do idx[k] = k end
table.sort(idx, function(a, b) return logits[a] > logits[b] end)
local top = {}
for k = 1, 5 do top[k] = string.format("%d (%.4f)", idx[k] - 1, logits[idx[k]]) end
print("Top-5 classes of a synthetic input (random weights, no trained model to download): " ..
      table.concat(top, ", "))

-- with a tracker, the compiled network (CPU kernels and VTA groups) runs on the server of the
-- key too: exported, uploaded, loaded there with a vta-sim of its own (graph_load), its output
-- and each group's simulated cycles checked against this machine's run
if o.tracker then
  local ffi = require "ffi"
  local remote = require("tunelua.rpc").request_remote(o.key, host, port, { timeout = 60 })
  local where = string.format("%s at %s", remote.key, remote.addr)
  print(string.format("\nUpload to %s...", where))
  local rm = remote:graph_module(lib)
  rm:set_input("data", x)
  rm:run()
  local ro, lo = rm:get_output(0), m:get_output(0)
  if ro:nbytes() ~= lo:nbytes() or ffi.string(ro:data_ptr(), ro:nbytes()) ~= ffi.string(lo:data_ptr(), lo:nbytes()) then
    error(string.format("tune_vta.lua: the output on %s differs from this machine's run", where), 0)
  end
  print(string.format("Output on %s equals this machine's run bit for bit (%d values)", where, #logits))
  local rc, rtotal, rsecs = rm:vta_cycles()
  if #rc ~= #rows then
    error(string.format("tune_vta.lua: %d VTA groups on %s, %d here", #rc, where, #rows), 0)
  end
  for i, r in ipairs(rows) do
    if rc[i] ~= r.cycles then
      error(string.format("tune_vta.lua: VTA group %s: %d simulated cycles on %s, %d here", r.name,
        rc[i], where, r.cycles), 0)
    end
  end
  print(string.format("Simulated cycles on %s equal this machine's simulator, group by group (%d groups)",
    where, #rc))
  local b = rm:benchmark({ number = 1, repeats = o.runs, quiet = true })
  print(string.format("Mean inference time (std dev) on %s, VTA part from the cycle model at %g MHz: %.2f ms (0.00 ms), %d cycles",
    where, env.CLOCK_MHZ, rsecs * 1e3, rtotal))
  print(string.format("Host wall time of a whole run on %s, simulator included (%d runs): %.2f ms (%.2f ms)",
    where, o.runs, b.mean * 1e3, b.std * 1e3))
  remote:close()
end
