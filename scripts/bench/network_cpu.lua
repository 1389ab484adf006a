--- End-to-end networks on the host CPU: tunelua untuned, TopHub and tuned against PyTorch and
--- ONNX Runtime, same run.
--
--   tunelua scripts/bench/network_cpu.lua                      -- resnet-18 and mobilenet
--   tunelua scripts/bench/network_cpu.lua --log r18.log        -- tuned records from a log
--   tunelua scripts/bench/network_cpu.lua --log mob.log --graph-tuner yes
--                                       -- and a "graph" column: the graph tuner over the
--                                       -- log's trials (mob.log.trials from tune_relay_x86)
--   tunelua scripts/bench/network_cpu.lua --n-trial 32 --threads 2 --repeat 30
--   tunelua scripts/bench/network_cpu.lua --target "llvm -mcpu=core-avx2" --log none
--                                       -- (default target "llvm": the host CPU's vectors)
--   tunelua scripts/bench/network_cpu.lua --target "llvm -mcpu=core-avx2" --peer-isa avx2
--                                       -- AVX2 against AVX2 on an AVX-512 host: PyTorch's
--                                       -- ATen and oneDNN capped to AVX2 too (ONNX Runtime
--                                       -- has no such cap: it keeps its AVX-512 kernels)
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
-- log is given (--log none: no tuned column); with --graph-tuner yes also "graph": the
-- graph tuner (autotvm.graph_tuner.DPTuner, the executor's layout model) over every trial
-- of the log (LOG and LOG.trials), one config per conv for the whole network, its layout
-- transforms counted. The peers are PyTorch on the same networks
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
-- column of a cycle alike. Each peer is one process per network (torch_peer.py --serve),
-- set up before the first cycle and asked for --repeat runs right after tunelua's in each.
-- --profile N: after the table, each network's tunelua columns profiled (N runs of the
-- executor's per-step profile, mean ms per step): time per kind of step (the fused
-- function's name without its number: convs, layout transforms, pools, dense, softmax...)
-- and its share of the steps' total, largest first.
-- --scaling CPUS (with --profile N): each network's first column profiled per step on one
-- thread pinned to the first CPU of the list and on one thread per CPU of the list (e.g.
-- "0,1"), N rounds alternating between the two, each step's fastest round kept (the minimum:
-- a shared machine inflates single timings); prints, per kind of step and for the steps that
-- lose most, both times, the speedup and the time lost against a perfect speedup
-- (t_n - t_1 / n). The table is printed as soon as each network is done; from the first
-- one on, the process (and the peers it starts) stays pinned to CPUS.
-- --ort-profile DIR: the ONNX Runtime peer's first cycle also profiles ONNX Runtime per node
-- (torch_peer.py --ort-profile DIR/ort_profile.<net>.json); with --profile N, each network's
-- first tunelua column and ONNX Runtime are then compared per layer: steps and nodes grouped
-- by kind (conv, pool, dense, concat, softmax, other) and logical output shape (NCHW[x]c as
-- NCHW), mean ms of each side and the ratio ORT / tunelua (> 1: tunelua faster).
local tl = require "tunelua"
local ffi = require "ffi"
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local json = require "tunelua.json"
local file = require "tunelua.file"
local networks = require "networks"

local opts = { networks = "resnet-18,mobilenet", threads = 2, ["repeat"] = 30, n_trial = 16,
               log = nil, target = "llvm", python = "/usr/bin/python3", layouts = "blocked", rounds = 5,
               ansor_trials = nil, profile = nil, cycles = 1, scaling = nil, scaling_top = 25,
               ort_profile = nil, peer_isa = nil, graph_tuner = false }
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
    elseif a == "--scaling" then opts.scaling = v
    elseif a == "--scaling-top" then opts.scaling_top = tonumber(v)
    elseif a == "--ort-profile" then opts.ort_profile = v
    elseif a == "--peer-isa" then opts.peer_isa = v
    elseif a == "--graph-tuner" then opts.graph_tuner = v == "yes"
      if v ~= "yes" and v ~= "no" then error("network_cpu: --graph-tuner expects yes or no", 0) end
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
if opts.scaling and not opts.profile then
  error("network_cpu: --scaling needs --profile N (the rounds of each thread count)", 0)
end
if opts.ort_profile and not opts.profile then
  error("network_cpu: --ort-profile needs --profile N (the tunelua side of the comparison)", 0)
end
if opts.ort_profile then file.mkdirs(opts.ort_profile) end
-- --peer-isa avx2: the environment that caps PyTorch's own kernels (ATen) and oneDNN's
local peer_env = ""
if opts.peer_isa == "avx2" then
  peer_env = "ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 "
elseif opts.peer_isa ~= nil then
  error("network_cpu: --peer-isa expects avx2 (PyTorch capped to AVX2), got " .. opts.peer_isa, 0)
end
local scaling_cpus = {}
if opts.scaling then
  for c in opts.scaling:gmatch("[^,]+") do scaling_cpus[#scaling_cpus + 1] = c end
  if #scaling_cpus < 2 or not opts.scaling:match("^[%d,]+$") then
    error("network_cpu: --scaling expects a comma-separated list of at least two CPU numbers " ..
          "(e.g. 0,1), got " .. opts.scaling, 0)
  end
end
tl.set_num_threads(opts.threads)
local median = require("tunelua.stats").median

local function script_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  return src:match("^(.*)/[^/]*$") or "."
end

-- The median of a peer (runtime "torch" or "onnxruntime"), and its version; nil and the
-- peer's output when it could not run.
local function peer_ms(name, runtime, extra)
  local cmd = string.format("%s%s %s/torch_peer.py --network %s --threads %d --repeat %d " ..
                            "--runtime %s%s 2>&1", peer_env, opts.python, script_dir(), name, opts.threads,
                            opts["repeat"], runtime, extra or "")
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  local med = out:match('"median_ms": ([%d%.e%-]+)')
  local ver = out:match('"version": "([^"]+)"')
  if not med then return nil, out:gsub("\n", " ") end
  local isa = out:match('"isa": "([^"]+)"')
  return tonumber(med), isa and string.format("%s (%s)", ver, isa) or ver
end

-- A persistent peer (torch_peer.py --serve) for one network and runtime: set up once, then
-- asked for runs between tunelua's, so that both sides of a ratio are timed seconds apart on
-- a host whose speed drifts (one process per figure put a model export and a session setup,
-- half a minute, between them). Its stdin and stdout are FIFOs in a directory of its own.
-- peer_start -> peer, or nil and the reason; peer_runs(peer, n) -> median ms, or nil and the
-- reason; peer_stop(peer) ends it and removes the directory.
pcall(ffi.cdef, [[
int mkfifo(const char *path, unsigned int mode);
typedef void (*tl_bench_sighandler)(int);
tl_bench_sighandler signal(int signum, tl_bench_sighandler handler);
]])
ffi.C.signal(13, ffi.cast("tl_bench_sighandler", 1))   -- SIGPIPE ignored: a dead peer is an error

local function peer_stop(p)
  if p.w then p.w:write("quit\n"); p.w:close() end
  if p.r then p.r:close() end
  if p.proc then p.proc:close() end
  file.remove(p.dir)
end

local function peer_start(name, runtime)
  local dir = file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-peer")
  local p = { dir = dir }
  local fin, fout, ferr = dir .. "/in", dir .. "/out", dir .. "/err"
  if ffi.C.mkfifo(fin, 384) ~= 0 or ffi.C.mkfifo(fout, 384) ~= 0 then
    peer_stop(p)
    return nil, "cannot make the peer's FIFOs in " .. dir
  end
  p.proc = io.popen(string.format("%s%s %s/torch_peer.py --serve --network %s --threads %d --runtime %s " ..
                                  "< %s > %s 2> %s", peer_env, opts.python, script_dir(), name, opts.threads,
                                  runtime, fin, fout, ferr))
  -- the shell opens the peer's stdin, then its stdout: the same order here
  p.w, p.r = io.open(fin, "w"), io.open(fout, "r")
  local line = p.r and p.r:read("*l")
  if not line or not line:find('"ready": true', 1, true) then
    local ef = io.open(ferr, "r")
    local err = ef and ef:read("*a") or ""
    if ef then ef:close() end
    peer_stop(p)
    local why = ((line and line .. " " or "") .. err):gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")
    return nil, why
  end
  local ver, isa = line:match('"version": "([^"]+)"'), line:match('"isa": "([^"]+)"')
  p.ver = isa and string.format("%s (%s)", ver, isa) or ver
  return p
end

local function peer_runs(p, n)
  local ok = p.w:write("run ", n, "\n") and p.w:flush()
  local line = ok and p.r:read("*l")
  local med = line and line:match('"median_ms": ([%d%.e%-]+)')
  if not med then return nil, "the peer stopped answering" .. (line and (": " .. line) or "") end
  return tonumber(med)
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

-- The logical shape of a step's output (its last argument): NCHW[x]c as N, C*x, H, W.
local function logical_shape(sh)
  if #sh == 5 then return { sh[1], sh[2] * sh[5], sh[3], sh[4] } end
  return sh
end
local function shape_str(sh)
  local p = {}
  for i, d in ipairs(sh) do p[i] = tostring(d) end
  return table.concat(p, "x")
end

-- --scaling: per-step minima on 1 thread (first CPU) and on #scaling_cpus threads (all of
-- them), rounds alternating; after it the process stays pinned to all of them (the peers of
-- the next network run there too) with the benchmark's thread count.
local function scaling_table(name, col)
  local m, steps = col.b.m, col.b.m.lib.steps
  local n = #scaling_cpus
  local lo = { {}, {} }
  for i = 1, #steps do lo[1][i], lo[2][i] = math.huge, math.huge end
  local configs = { { cpus = scaling_cpus[1], threads = 1 }, { cpus = opts.scaling, threads = n } }
  for _ = 1, opts.profile do
    for k, c in ipairs(configs) do
      tl.pin_cpus(c.cpus)
      tl.set_num_threads(c.threads)
      m:run()
      for i, st in ipairs(m:profile(1)) do lo[k][i] = math.min(lo[k][i], st.seconds) end
    end
  end
  tl.pin_cpus(opts.scaling)
  tl.set_num_threads(opts.threads)
  local by, order, t1, tn = {}, {}, 0, 0
  local rows_ = {}
  for i, st in ipairs(steps) do
    local a, b = lo[1][i], lo[2][i]
    t1, tn = t1 + a, tn + b
    local k = st.name:gsub("_?%d+$", "")
    if not by[k] then by[k] = { 0, 0, 0 }; order[#order + 1] = k end
    by[k][1], by[k][2], by[k][3] = by[k][1] + a, by[k][2] + b, by[k][3] + 1
    local out = st.args[#st.args]
    rows_[#rows_ + 1] = { i = i, name = st.name, a = a, b = b, lost = b - a / n,
                          shape = out and out.shape and shape_str(logical_shape(out.shape)) or "?" }
  end
  print(string.format("\n%s, %s: per-step scaling, 1 thread (CPU %s) against %d threads (CPUs %s), " ..
                      "fastest of %d alternating rounds; lost = t%d - t1/%d",
                      name, col.name, scaling_cpus[1], n, opts.scaling, opts.profile, n, n, n))
  print(string.format("  steps in all: %.3f ms on 1 thread, %.3f ms on %d: %.2fx, %.3f ms lost",
                      t1 * 1e3, tn * 1e3, n, t1 / tn, (tn - t1 / n) * 1e3))
  table.sort(order, function(a, b) return by[a][2] - by[a][1] / n > by[b][2] - by[b][1] / n end)
  print(string.format("  %-52s %5s %9s %9s %7s %9s", "kind of step", "steps", "1T ms", n .. "T ms",
                      "speedup", "lost ms"))
  for _, k in ipairs(order) do
    local v = by[k]
    print(string.format("  %-52s %5d %9.3f %9.3f %7.2f %9.3f", k:sub(1, 52), v[3], v[1] * 1e3,
                        v[2] * 1e3, v[1] / v[2], (v[2] - v[1] / n) * 1e3))
  end
  table.sort(rows_, function(a, b) return a.lost > b.lost end)
  print(string.format("  the %d steps that lose most:", math.min(opts.scaling_top, #rows_)))
  print(string.format("  %4s %-44s %-16s %8s %8s %7s %8s", "step", "name", "output", "1T ms", n .. "T ms",
                      "speedup", "lost ms"))
  for j = 1, math.min(opts.scaling_top, #rows_) do
    local r = rows_[j]
    print(string.format("  %4d %-44s %-16s %8.3f %8.3f %7.2f %8.3f", r.i, r.name:sub(1, 44), r.shape,
                        r.a * 1e3, r.b * 1e3, r.a / r.b, r.lost * 1e3))
  end
  io.stdout:flush()
end

-- ---- --ort-profile: tunelua's steps against ONNX Runtime's nodes, per layer ----------------
local function ort_profile_path(name)
  return string.format("%s/ort_profile.%s.json", opts.ort_profile, name)
end

-- the kind of a tunelua step (its fused function's name) or an ONNX Runtime node (op type)
local function step_kind(n)
  if n:find("conv2d") then return "conv" end
  if n:find("pool") then return "pool" end
  if n:find("dense") then return "dense" end
  if n:find("concatenate") then return "concat" end
  if n:find("softmax") then return "softmax" end
  return "other"
end
local ORT_KIND = { Conv = "conv", FusedConv = "conv", ConvTranspose = "conv", MaxPool = "pool",
                   AveragePool = "pool", GlobalAveragePool = "pool", GlobalMaxPool = "pool",
                   Gemm = "dense", FusedGemm = "dense", MatMul = "dense", FusedMatMul = "dense",
                   Concat = "concat", Softmax = "softmax" }

-- per (kind, logical output shape): tunelua's mean ms (steps: the column's per-step profile)
-- against ONNX Runtime's (its per-node summary), largest tunelua time first
local function ort_compare(name, col, steps)
  local path = ort_profile_path(name)
  if not file.exists(path) then
    io.stderr:write("network_cpu: no ONNX Runtime profile ", path, " (the peer did not run): ",
                    "no per-layer comparison for ", name, "\n")
    return
  end
  local fh = assert(io.open(path, "rb"))
  local ok, doc = pcall(json.decode, fh:read("*a"))
  fh:close()
  if not ok or type(doc) ~= "table" or type(doc.nodes) ~= "table" then
    error("network_cpu: " .. path .. ": expected torch_peer.py's ONNX Runtime profile (an object with nodes)", 0)
  end
  local groups, order = {}, {}
  local function group(kind, shape)
    local key = kind .. " " .. shape
    if not groups[key] then
      groups[key] = { kind = kind, shape = shape, tn = 0, tms = 0, on = 0, oms = 0 }
      order[#order + 1] = key
    end
    return groups[key]
  end
  local tt, ot = 0, 0
  for i, st in ipairs(col.b.m.lib.steps) do
    local out = st.args[#st.args]
    local g = group(step_kind(st.name), out and out.shape and shape_str(logical_shape(out.shape)) or "?")
    g.tn, g.tms = g.tn + 1, g.tms + steps[i].seconds * 1e3
    tt = tt + steps[i].seconds * 1e3
  end
  for _, n in ipairs(doc.nodes) do
    local sh = type(n.shape) == "table" and n.shape or {}
    local g = group(ORT_KIND[n.op] or "other", #sh > 0 and shape_str(logical_shape(sh)) or "?")
    g.on, g.oms = g.on + 1, g.oms + (tonumber(n.mean_us) or 0) / 1e3
    ot = ot + (tonumber(n.mean_us) or 0) / 1e3
  end
  table.sort(order, function(a, b)
    local x, y = groups[a], groups[b]
    if x.tms ~= y.tms then return x.tms > y.tms end
    return x.oms > y.oms
  end)
  print(string.format("\n%s, %s against ONNX Runtime %s per layer (%s; tunelua: mean of %d executor " ..
                      "profiles, ONNX Runtime: mean of %s profiled runs), by kind and output shape",
                      name, col.name, tostring(doc.version), path, opts.profile, tostring(doc.runs)))
  print(string.format("  %-8s %-16s %6s %9s %6s %9s %8s", "kind", "output", "steps", "ms", "nodes",
                      "ORT ms", "ORT/tl"))
  for _, key in ipairs(order) do
    local g = groups[key]
    print(string.format("  %-8s %-16s %6d %9.3f %6d %9.3f %8s", g.kind, g.shape, g.tn, g.tms, g.on, g.oms,
                        (g.tms > 0 and g.on > 0) and string.format("%.2f", g.oms / g.tms) or "-"))
  end
  print(string.format("  %-25s %6d %9.3f %6d %9.3f %8.2f", "all", #col.b.m.lib.steps, tt, #doc.nodes, ot,
                      tt > 0 and ot / tt or 0))
  io.stdout:flush()
end

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
    local runner = autotvm.LocalRunner({ number = 4, ["repeat"] = 3 })
    require("tunelua.flow").keep_trials(runner, log)   -- every trial in LOG.trials
    autotvm.tune_tasks(tasks, autotvm.measure_option({ builder = autotvm.LocalBuilder(), runner = runner }),
                       { tuner = "xgb", n_trial = opts.n_trial, early_stopping = opts.n_trial, log_filename = log })
  end
  local cols = {}
  for _, v in ipairs(variants) do
    cols[#cols + 1] = { name = "untuned" .. v.suffix, b = build(mod, params, nil, false, v.layouts) }
    cols[#cols + 1] = { name = "TopHub" .. v.suffix, b = build(mod, params, nil, true, v.layouts) }
    if log then
      cols[#cols + 1] = { name = "tuned" .. v.suffix,
                          b = build(mod, params, autotvm.apply_history_best(log), true, v.layouts) }
      if opts.graph_tuner then
        -- the graph tuner over every trial of the log: one config per conv for the network
        local gt = autotvm.graph_tuner.tune_log(mod, { target = opts.target, params = params, log = log })
        cols[#cols + 1] = { name = "graph" .. v.suffix,
                            b = build(mod, params, gt:pin(autotvm.apply_history_best(log)), true, v.layouts) }
      end
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
  if opts.ort_profile then
    -- ONNX Runtime's per-node profile: a run of its own (its figure is not a cycle's)
    local ms, info = peer_ms(name, "onnxruntime", " --ort-profile " .. ort_profile_path(name))
    if not ms then io.stderr:write("network_cpu: ONNX Runtime profile: ", tostring(info), "\n") end
  end
  for _, p in ipairs(peers) do
    local proc, why = peer_start(name, p.runtime)
    if proc then p.proc, p.ver = proc, proc.ver
    else
      p.failed = true
      io.stderr:write("network_cpu: ", p.label, " peer: ", tostring(why), "\n")
    end
  end
  local ts = {}
  for c = 1, opts.cycles do
    local tc = time_all(cols)
    local best = math.huge
    for _, v in pairs(tc) do best = math.min(best, v) end
    for _, p in ipairs(peers) do
      if not p.failed then
        local ms, why = peer_runs(p.proc, opts["repeat"])
        if ms then
          p.ms[#p.ms + 1], p.x[#p.x + 1] = ms, ms / best
        else
          p.failed = true
          io.stderr:write("network_cpu: ", p.label, " peer: ", tostring(why), "\n")
        end
      end
    end
    ts[c] = tc
  end
  for _, p in ipairs(peers) do
    if p.proc then peer_stop(p.proc) end
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
      prof[#prof + 1] = { name = c.name, by = by, total = total, steps = c.b.m:profile(opts.profile) }
    end
  end
  if prof and opts.ort_profile then ort_compare(name, cols[1], prof[1].steps) end
  if opts.scaling then scaling_table(name, cols[1]) end
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
  if opts.graph_tuner then heads[#heads + 1] = "graph" .. v.suffix end
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
    for _, h in ipairs({ "untuned", "TopHub", "tuned", "graph" }) do
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
