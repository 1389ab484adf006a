--- End-to-end networks on the host CPU: tunelua untuned, TopHub and tuned against PyTorch and
--- ONNX Runtime, same run.
--
--   tunelua scripts/bench/network_cpu.lua                      -- resnet-18 and mobilenet
--   tunelua scripts/bench/network_cpu.lua --log r18.log        -- tuned records from a log
--   tunelua scripts/bench/network_cpu.lua --n-trial 32 --threads 2 --repeat 30
--   tunelua scripts/bench/network_cpu.lua --target "llvm -mcpu=core-avx2" --log none
--                                       -- (default target "llvm": the host CPU's vectors)
--   tunelua scripts/bench/network_cpu.lua --ansor-trials 2000  -- an "auto-sched" column: NHWC,
--                                       -- auto-scheduled with that trial budget per network
--                                       -- (log network_cpu.<net>.ansor.json; re-runs resume)
--   tunelua scripts/bench/network_cpu.lua --log none --layouts both
--                                       -- each column also with layouts = false (every
--                                       -- activation NCHW between convs): before/after of
--                                       -- the blocked layouts, measured interleaved
--
-- Batch 1, fp32, NCHW. "untuned" compiles with each template's fallback
-- config and the default schedules (no history, no TopHub); "TopHub" with
-- TVM's pre-tuned x86 records; "tuned" with the best records of --log, or of
-- a short tuning run this script does itself (--n-trial per task, xgb) when no
-- log is given (--log none: no tuned column). The peers are PyTorch on the same networks
-- and ONNX Runtime on the same networks exported to ONNX (scripts/bench/torch_peer.py,
-- --python: /usr/bin/python3 with Debian's python3-torch by default; ONNX Runtime
-- where that Python has it, else "n/a"), with the same thread count. Every figure is
-- the median of --repeat runs. Networks: --networks resnet-18,resnet-50,mobilenet,
-- vgg-16,inception_v3 for the whole table. The tunelua networks of one row are built
-- first and then timed in interleaved rounds (--rounds, default 5, --repeat/rounds runs
-- each per round), so that a load change on the machine hits every column alike.
-- --layouts blocked (default) builds as executor.build does (AlterOpLayout's NCHW[x]c
-- between convs); nchw with layouts = false; both prints both and their ratio.
-- --cycles N (1): the tunelua columns, PyTorch and ONNX Runtime measured N times in turn per
-- network; figures are medians over the cycles and each ratio the median of the cycles' own
-- ratios (their range printed under the table), so a host whose speed drifts moves every
-- column of a cycle alike.
-- --profile N: after the table, each network's tunelua columns profiled (N runs of the
-- executor's per-step profile, mean ms per step): time per kind of step (the fused
-- function's name without its number: convs, layout transforms, pools, dense, softmax...)
-- and its share of the steps' total, largest first.
local tl = require "tunelua"
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local networks = require "networks"

local opts = { networks = "resnet-18,mobilenet", threads = 2, ["repeat"] = 30, n_trial = 16,
               log = nil, target = "llvm", python = "/usr/bin/python3", layouts = "blocked", rounds = 5,
               ansor_trials = nil, profile = nil, cycles = 1 }
do
  local i = 1
  while i <= #arg do
    local a, v = arg[i], arg[i + 1]
    if a == "--networks" then opts.networks = v
    elseif a == "--threads" then opts.threads = tonumber(v)
    elseif a == "--repeat" then opts["repeat"] = tonumber(v)
    elseif a == "--n-trial" then opts.n_trial = tonumber(v)
    elseif a == "--log" then opts.log = v
    elseif a == "--target" then opts.target = v
    elseif a == "--python" then opts.python = v
    elseif a == "--layouts" then opts.layouts = v
    elseif a == "--rounds" then opts.rounds = tonumber(v)
    elseif a == "--ansor-trials" then opts.ansor_trials = tonumber(v)
    elseif a == "--profile" then opts.profile = tonumber(v)
    elseif a == "--cycles" then opts.cycles = tonumber(v)
    else error("network_cpu: unknown option " .. tostring(a) .. " (see the header of this script)", 0) end
    if v == nil then error("network_cpu: " .. a .. " expects a value", 0) end
    i = i + 2
  end
end
if opts.layouts ~= "blocked" and opts.layouts ~= "nchw" and opts.layouts ~= "both" then
  error("network_cpu: --layouts must be blocked, nchw or both, got " .. tostring(opts.layouts), 0)
end
if not opts.cycles or opts.cycles < 1 or opts.cycles % 1 ~= 0 then
  error("network_cpu: --cycles expects a positive integer", 0)
end
tl.set_num_threads(opts.threads)
local median = require("tunelua.stats").median

local function script_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/[^/]*$") or "."
end

-- The median of a peer (runtime "torch" or "onnxruntime"), and its version; nil and the
-- peer's output when it could not run.
local function peer_ms(name, runtime)
  local cmd = string.format("%s %s/torch_peer.py --network %s --threads %d --repeat %d " ..
                            "--runtime %s 2>&1", opts.python, script_dir(), name, opts.threads,
                            opts["repeat"], runtime)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  local med = out:match('"median_ms": ([%d%.e%-]+)')
  local ver = out:match('"version": "([^"]+)"')
  if not med then return nil, out:gsub("\n", " ") end
  return tonumber(med), ver
end

local function build(mod, params, history, tophub, layouts)
  local lib = executor.build(mod, { target = opts.target, params = params, history = history,
                                    tophub = tophub, layouts = layouts, quiet = true })
  local m = executor.GraphModule(lib)
  local shape = mod.main.params[1].type.shape
  m:set_input("data", tl.nd.random_uniform(shape, { seed = 1 }))
  m:run()
  return { m = m }
end

-- every built network of a row timed in rounds, interleaved: column name -> median ms
local function time_all(cols)
  local mods = {}
  for i, c in ipairs(cols) do mods[i] = c.b.m end
  local res, r = executor.benchmark_interleaved(mods, opts["repeat"], opts.rounds), {}
  for i, c in ipairs(cols) do r[c.name] = res[i].median * 1e3 end
  return r
end

local variants = {}
if opts.layouts ~= "nchw" then variants[#variants + 1] = { suffix = "", layouts = true } end
if opts.layouts ~= "blocked" then variants[#variants + 1] = { suffix = " NCHW", layouts = false } end

local rows = {}
for name in opts.networks:gmatch("[^,]+") do
  local mod, params = networks.get_network(name, { batch_size = 1 })
  local log = opts.log
  if log == "none" then
    log = nil
  elseif not log then
    log = string.format("network_cpu.%s.log", name)
    local tasks = autotvm.task.extract_from_program(mod, { target = opts.target, params = params,
      ops = { "nn.conv2d", "nn.dense" } })
    autotvm.tune_tasks(tasks, autotvm.measure_option({
      builder = autotvm.LocalBuilder(), runner = autotvm.LocalRunner({ number = 4, ["repeat"] = 3 }),
    }), { tuner = "xgb", n_trial = opts.n_trial, early_stopping = opts.n_trial, log_filename = log })
  end
  local cols = {}
  for _, v in ipairs(variants) do
    cols[#cols + 1] = { name = "untuned" .. v.suffix, b = build(mod, params, nil, false, v.layouts) }
    cols[#cols + 1] = { name = "TopHub" .. v.suffix, b = build(mod, params, nil, true, v.layouts) }
    if log then
      cols[#cols + 1] = { name = "tuned" .. v.suffix,
                          b = build(mod, params, autotvm.apply_history_best(log), true, v.layouts) }
    end
  end
  if opts.ansor_trials then
    -- the auto-scheduler's flow on the NHWC network (the layout it prefers): the task
    -- scheduler over the whole budget, then the best record of each task
    local auto_scheduler = require "tunelua.auto_scheduler"
    local nmod, nparams = networks.get_network(name, { batch_size = 1, layout = "NHWC" })
    local alog = string.format("network_cpu.%s.ansor.json", name)
    local tasks, weights = auto_scheduler.extract_tasks(nmod, nparams, opts.target)
    local tuner = auto_scheduler.TaskScheduler(tasks, weights, { load_log_file = alog, verbose = 0, callbacks = {} })
    tuner:tune(auto_scheduler.TuningOptions{ num_measure_trials = opts.ansor_trials, num_measures_per_round = 64,
                                             measure_callbacks = { auto_scheduler.RecordToFile(alog) } })
    cols[#cols + 1] = { name = "auto-sched", b = build(nmod, nparams, auto_scheduler.ApplyHistoryBest(alog), false, true) }
  end
  -- --cycles N: the tunelua columns and both peers measured N times in turn; each figure is
  -- the median over the cycles, each ratio the median of the cycles' own ratios
  -- (a peer that gave no figure is not asked again: its reason is printed once)
  local peers = { { runtime = "torch", label = "PyTorch", ms = {}, x = {} },
                  { runtime = "onnxruntime", label = "ONNX Runtime", ms = {}, x = {} } }
  local ts = {}
  for c = 1, opts.cycles do
    local tc = time_all(cols)
    local best = math.huge
    for _, v in pairs(tc) do best = math.min(best, v) end
    for _, p in ipairs(peers) do
      if not p.failed then
        local ms, info = peer_ms(name, p.runtime)
        if ms then
          p.ms[#p.ms + 1], p.x[#p.x + 1], p.ver = ms, ms / best, p.ver or info
        else
          p.failed = true
          io.stderr:write("network_cpu: ", p.label, " peer: ", tostring(info), "\n")
        end
      end
    end
    ts[c] = tc
  end
  local t = {}
  for _, col in ipairs(cols) do
    local l = {}
    for c = 1, #ts do l[c] = ts[c][col.name] end
    t[col.name] = median(l)
  end
  local torch, ort = median(peers[1].ms), median(peers[2].ms)
  local tver, over, xt, xo = peers[1].ver, peers[2].ver, peers[1].x, peers[2].x
  local prof
  if opts.profile then
    prof = {}
    for _, c in ipairs(cols) do
      local by, total = {}, 0
      for _, st in ipairs(c.b.m:profile(opts.profile)) do
        local k = st.name:gsub("_?%d+$", "")
        by[k] = (by[k] or 0) + st.seconds
        total = total + st.seconds
      end
      prof[#prof + 1] = { name = c.name, by = by, total = total }
    end
  end
  rows[#rows + 1] = { name = name, t = t, prof = prof, xt = xt, xo = xo,
                      torch = torch, torch_ver = torch and tver, ort = ort,
                      ort_ver = ort and over, log = log }
end

local function f2(x) return x and string.format("%.2f", x) or "n/a" end
print(string.format("\nbatch 1, fp32, %d threads, %s; median of %d runs (ms), tunelua interleaved in %d " ..
                    "rounds; x PyTorch = PyTorch / best tunelua, x ORT = ONNX Runtime / best tunelua",
                    opts.threads, opts.target, opts["repeat"], opts.rounds))
local heads = {}
for _, v in ipairs(variants) do
  heads[#heads + 1] = "untuned" .. v.suffix
  heads[#heads + 1] = "TopHub" .. v.suffix
  heads[#heads + 1] = "tuned" .. v.suffix
end
if opts.ansor_trials then heads[#heads + 1] = "auto-sched" end
local line = { string.format("%-12s", "network") }
for _, h in ipairs(heads) do line[#line + 1] = string.format("%12s", h) end
line[#line + 1] = string.format("%9s %9s %9s %7s", "PyTorch", "ORT", "xPyTorch", "xORT")
print(table.concat(line, " "))
for _, r in ipairs(rows) do
  local best = math.huge
  line = { string.format("%-12s", r.name) }
  for _, h in ipairs(heads) do
    local v = r.t[h]
    if v and v < best then best = v end
    line[#line + 1] = string.format("%12s", f2(v))
  end
  line[#line + 1] = string.format("%9s %9s %9s %7s", f2(r.torch), f2(r.ort),
                                  f2(#r.xt > 0 and median(r.xt) or nil), f2(#r.xo > 0 and median(r.xo) or nil))
  print(table.concat(line, " "))
  if opts.layouts == "both" then
    local parts = {}
    for _, h in ipairs({ "untuned", "TopHub", "tuned" }) do
      if r.t[h] and r.t[h .. " NCHW"] then
        parts[#parts + 1] = string.format("%s %.2fx", h, r.t[h .. " NCHW"] / r.t[h])
      end
    end
    print(string.format("%-12s blocked layouts over NCHW (NCHW / blocked): %s", "", table.concat(parts, ", ")))
  end
end
if opts.cycles > 1 then
  print(string.format("%d cycles; ratios are the median of the cycles' ratios (their range):", opts.cycles))
  for _, r in ipairs(rows) do
    local function range(l)
      if #l == 0 then return "n/a" end
      local lo, hi = math.huge, -math.huge
      for _, x in ipairs(l) do lo, hi = math.min(lo, x), math.max(hi, x) end
      return string.format("%.2f-%.2f", lo, hi)
    end
    print(string.format("  %-12s x PyTorch %s, x ORT %s", r.name, range(r.xt), range(r.xo)))
  end
end
for _, r in ipairs(rows) do
  if r.torch or r.ort then
    print(string.format("PyTorch %s; ONNX Runtime %s; tuned records: %s%s", r.torch_ver or "n/a",
                        r.ort_ver or "n/a", r.log or "none", opts.ansor_trials and string.format(
                        "; auto-sched: NHWC, %d trials of the task scheduler (network_cpu.<net>.ansor.json)",
                        opts.ansor_trials) or ""))
    break
  end
end
for _, r in ipairs(rows) do
  for _, p in ipairs(r.prof or {}) do
    print(string.format("\n%s, %s: per-step profile, mean of %d runs, by kind of step (%.2f ms in all)",
                        r.name, p.name, opts.profile, p.total * 1e3))
    local ks = {}
    for k in pairs(p.by) do ks[#ks + 1] = k end
    table.sort(ks, function(a, b) return p.by[a] > p.by[b] end)
    for _, k in ipairs(ks) do
      print(string.format("  %-56s %8.3f ms %5.1f%%", k, p.by[k] * 1e3, 100 * p.by[k] / p.total))
    end
  end
end
