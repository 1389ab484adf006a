-- Benchmark: one 3x3 stride-1 NHWC conv layer auto-scheduled as Winograd (conv2d_winograd_nhwc,
-- the task an auto-scheduled network gets for it; tunelua.auto_scheduler.winograd) against the
-- same layer auto-scheduled as the direct conv2d NHWC, for the same number of measured trials,
-- in the same run on this host's CPU ("llvm"), batch 1 fp32.
--
-- Per layer: the best time of each search after N trials (the LocalRunner's measurement, mean
-- of its repeats), GFLOPS counted as the direct conv's FLOPs for both, and the ratio direct /
-- winograd (> 1: Winograd is faster); then the two best states are re-timed interleaved in 7
-- rounds (median wall time and process CPU time per call, all threads), which a shared
-- machine's load changes disturb less than the searches' own figures. The Winograd weight is transformed at build time and not
-- part of the measured kernel (as in a network).
--
--   tunelua scripts/bench/ansor_winograd.lua [--trials=64] [--layers=56x64,28x128,14x256]
--       [--population=2048] [--per-round=16] [--model=xgb|random] [--number=3]
--       [--min-repeat-ms=50] [--seed=1] [--logdir=DIR]
--
-- --layers: HxC (H x H input, C input and output channels, padding 1; m from the x86 rule:
-- F(4x4) from 28x28 outputs up, else F(2x2)). --logdir keeps the logs (DIR/<kind>-<layer>.json);
-- a rerun with the same DIR resumes them. Threads: TUNELUA_NUM_THREADS (else every online CPU).
local tl = require "tunelua"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local winograd = require "tunelua.auto_scheduler.winograd"
local file = require "tunelua.file"
local search_mod = require "tunelua.auto_scheduler.search"
local median = require("tunelua.stats").median
local C = require("tunelua.core").C

local opts = { trials = "64", layers = "56x64", population = "2048", ["per-round"] = "16", model = "xgb",
               number = "3", ["min-repeat-ms"] = "50", seed = "1" }
local KNOWN = { trials = 1, layers = 1, population = 1, ["per-round"] = 1, model = 1, number = 1,
                ["min-repeat-ms"] = 1, seed = 1, logdir = 1 }
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-([%w-]+)=(.*)$")
  if not k or not KNOWN[k] then error("ansor_winograd: unknown option " .. a .. " (see the header of this script)", 0) end
  opts[k] = v
end
local function count(name)
  local n = tonumber(opts[name])
  if not n or n < 1 or n % 1 ~= 0 then error("ansor_winograd: --" .. name .. " must be a positive integer", 0) end
  return n
end
local trials, population, per_round = count("trials"), count("population"), count("per-round")
local number, min_ms, seed = count("number"), count("min-repeat-ms"), count("seed")
if opts.model ~= "xgb" and opts.model ~= "random" then error("ansor_winograd: --model must be xgb or random", 0) end
local layers = {}
for h, c in opts.layers:gmatch("(%d+)x(%d+)") do layers[#layers + 1] = { H = tonumber(h), C = tonumber(c) } end
if #layers == 0 then error("ansor_winograd: --layers must be HxC[,HxC...], e.g. 56x64", 0) end

local tmp = opts.logdir == nil
local dir = opts.logdir or file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-ansor-winograd")
if opts.logdir then file.mkdirs(dir) end

local function search(task, log)
  local model = opts.model == "xgb" and auto_scheduler.XGBModel() or auto_scheduler.RandomModel()
  local policy = auto_scheduler.SketchPolicy(task, { seed = seed, program_cost_model = model,
    params = { evolutionary_search_population = population,
               sample_init_min_population = math.min(50, math.ceil(population / 4)) } })
  local t0 = os.time()
  local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = trials, num_measures_per_round = per_round,
    verbose = 0, builder = auto_scheduler.LocalBuilder({ timeout = 30 }),
    runner = auto_scheduler.LocalRunner({ number = number, ["repeat"] = 3, min_repeat_ms = min_ms, timeout = 30 }),
    measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policy)
  return r.best_cost, os.time() - t0
end

print(string.format("ansor_winograd: %d trials per search, population %d, model %s, threads %s", trials, population,
                    opts.model, os.getenv("TUNELUA_NUM_THREADS") or "all"))
print(string.format("%-14s %-6s %12s %9s %12s %9s %8s", "layer", "tile", "direct ms", "GFLOPS", "winograd ms",
                    "GFLOPS", "ratio"))
for _, L in ipairs(layers) do
  local H, Cn = L.H, L.C
  local name = string.format("%dx%dx%d", H, H, Cn)
  local x = te.placeholder({ 1, H, H, Cn }, "float32", "data")
  local w = te.placeholder({ 3, 3, Cn, Cn }, "float32", "kernel")
  local direct = topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
  local f = { CI = Cn, CO = Cn, H = H, W = H, OH = H, OW = H }
  local m = winograd.tile_size(f)
  local u = te.placeholder({ m + 2, m + 2, Cn, Cn }, "float32", "kernel_pack")
  local wg = topi.op("conv2d_winograd_nhwc", { x, u }, { padding = { 1, 1, 1, 1 } })[1]
  local td = auto_scheduler.SearchTask{ compute_dag = direct, target = "llvm" }
  local tw = auto_scheduler.SearchTask{ compute_dag = wg, target = "llvm" }
  local logd, logw = dir .. "/direct-" .. name .. ".json", dir .. "/winograd-" .. name .. ".json"
  local cd, sd = search(td, logd)
  local cw, sw = search(tw, logw)
  local flop = td.flop
  print(string.format("%-14s F(%dx%d) %12.3f %9.1f %12.3f %9.1f %7.2fx   (search %ds, %ds)", name, m, m, cd * 1e3,
                      flop / cd / 1e9, cw * 1e3, flop / cw / 1e9, cd / cw, sd, sw))
  -- the two best states again, interleaved in rounds here (a load change hits both alike):
  -- the median wall time and the process's CPU time per call (all threads)
  local runs = {}
  for i, t in ipairs({ td, tw }) do
    local st = t:apply_best(i == 1 and logd or logw)
    local f = st:build()
    runs[i] = { f = f, args = search_mod.random_args(t, f.device), wall = {}, cpu = 0, n = 0 }
  end
  for _ = 1, 7 do
    for _, r in ipairs(runs) do
      r.f(unpack(r.args))
      local c0, t0 = os.clock(), C.tl_now()
      for _ = 1, 10 do r.f(unpack(r.args)) end
      r.wall[#r.wall + 1] = (C.tl_now() - t0) / 10
      r.cpu, r.n = r.cpu + (os.clock() - c0), r.n + 10
    end
  end
  local wd, ww = median(runs[1].wall), median(runs[2].wall)
  local ud, uw = runs[1].cpu / runs[1].n, runs[2].cpu / runs[2].n
  print(string.format("%-14s  re-timed, interleaved: wall %.3f vs %.3f ms (%.2fx), CPU %.3f vs %.3f ms (%.2fx)", "",
                      wd * 1e3, ww * 1e3, wd / ww, ud * 1e3, uw * 1e3, ud / uw))
end
if tmp then file.remove(dir) end
