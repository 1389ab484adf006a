-- Benchmark: the auto-scheduler's search on this host's CPU ("llvm"), batch 1 fp32, against
-- peers measured in the same run. Workloads: resnet-18's distinct conv2d layers (NHWC for the
-- auto-scheduler) and a 1024^3 matmul. Per workload and per trial count N of --trials:
--
--   ansor     the auto-scheduler's best after N measured trials (SketchPolicy with the cost
--             model of --model: xgb = auto_scheduler.XGBModel(), random)
--   autotvm   the x86 AutoTVM template's best after the same N trials with the XGB tuner
--             (conv2d_NCHWc.x86 on the same layer, NCHW; the matmul has no template)
--   peer      PyTorch conv2d (a /usr/bin/python3 subprocess, same threads; TUNELUA_PYTHON
--             names another interpreter) or OpenBLAS sgemm (the matmul, in this process);
--             on OpenCL, cuDNN fp32 with TF32 off (scripts/device/torch_conv.py)
--
-- One run of max(--trials) trials per tuner gives every N: the best so far after the first N
-- records of its log. Both tuners are measured by the same LocalRunner (--number runs of at
-- least --min-repeat-ms, 3 repeats); the times in the table are those measurements (mean of
-- the repeats), so ansor and autotvm are compared on equal terms. The peers are timed once,
-- in the same process (median of 15 calls). Ratios: > 1 means ansor is faster.
--
-- Also per workload: the search round's time (the median over the run's rounds, population
-- --population, 4 generations, features and prediction) -- the issue's search-cost target --
-- as wall-clock seconds ("round s") and as the process's CPU seconds over all threads
-- ("cpu s"; on a machine shared with other jobs, cpu s / threads is what the round would
-- take on idle cores).
--
--   tunelua scripts/bench/ansor_cpu.lua [--trials=64[,256,512]] [--layers=2,3,11|all|none]
--       [--no-matmul | --matmul-only] [--dense=MxKxN[,...]] [--no-autotvm] [--no-ansor] [--no-peer]
--       [--population=2048] [--model=xgb|random] [--per-round=64] [--number=3]
--       [--min-repeat-ms=50] [--build-timeout=10] [--logdir=DIR] [--time-limit=S] [--seed=1]
--       [--target=llvm] [--build-jobs=N]
--
-- --dense adds dense workloads (topi.nn.dense, batch M, reduction K, N outputs; no template, no
-- peer): small-batch ones such as resnet-18's classifier 1x512x1000 are where the GPU search's
-- cross-thread reduction applies (docs/auto_scheduler.md), as for conv layers 9-11 (7x7
-- outputs). (a bare number N is --trials=N.) --logdir keeps the logs (DIR/ansor-<workload>.json,
-- DIR/autotvm-<workload>.json, and the search rounds' times DIR/rounds-<workload>.txt): a rerun with the same DIR resumes an interrupted run of either
-- tuner from its log (its records count, are never measured again and train the model),
-- skips a tuner whose log already holds max(--trials) records, and so can rebuild the whole
-- table from logs written by several shorter commands (e.g. one layer per command under a
-- time limit, then one command over all of them). Without --logdir the logs go to a
-- temporary directory removed at the end. --build-timeout: seconds per kernel compile (a
-- loaded machine may need more than the default 10). --time-limit=S (with --logdir): tune in
-- runs of --per-round trials and start no new run once S seconds would be passed; the table
-- then shows what the logs hold (a count not reached yet is "-") and the same command run
-- again continues. E.g. under a 10-minute limit per command:
--
--   taskset -c 2,3 tunelua scripts/bench/ansor_cpu.lua --trials=64,256,512 --layers=2,3,4 \
--       --no-matmul --logdir=ansor-cpu-logs --time-limit=500     (repeat until complete)
--
-- --build-jobs=N: parallel kernel compiles (default: the threads). With TUNELUA_MEASURE_CPUS
-- (a CPU list, e.g. 2,3) every measurement child times on those CPUs and the peers are timed
-- on them at the end, while the search and the compiles use the rest of the machine; with
-- several groups (2,3;4,5;6,7) each round's trials are timed on all of them at once (one child
-- per group) and the peers on the first group:
--
--   TUNELUA_NUM_THREADS=2 TUNELUA_MEASURE_CPUS=2,3 tunelua scripts/bench/ansor_cpu.lua \
--       --build-jobs=12 ...
--
-- Threads: TUNELUA_NUM_THREADS (else every online CPU) sizes the kernels' thread pool, the
-- parallel compiles, PyTorch and OpenBLAS; under taskset set it to the CPUs given, e.g.
-- `TUNELUA_NUM_THREADS=2 taskset -c 2,3 tunelua scripts/bench/ansor_cpu.lua ...`.
--
-- scripts/bench/ansor_gpu.lua runs the auto-scheduler part on OpenCL device 0 (--target=opencl).
local tl = require "tunelua"
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local records = require "tunelua.auto_scheduler.records"
local file = require "tunelua.file"
local median = require("tunelua.stats").median

local opts = { population = "2048", model = "xgb", target = "llvm", ["per-round"] = "64",
               number = "3", ["min-repeat-ms"] = "50", seed = "1", ["build-timeout"] = "10" }
local KNOWN = { population = 1, model = 1, target = 1, ["per-round"] = 1, number = 1,
                ["min-repeat-ms"] = 1, seed = 1, trials = 1, ["build-timeout"] = 1, ["time-limit"] = 1, layers = 1, logdir = 1,
                ["no-matmul"] = 1, ["matmul-only"] = 1, dense = 1, ["no-autotvm"] = 1, ["no-ansor"] = 1,
                ["no-peer"] = 1, ["build-jobs"] = 1 }
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-([%w-]+)=(.*)$")
  if not k and a:match("^%-%-") then k, v = a:sub(3), true end
  if k then
    if not KNOWN[k] then error("ansor_cpu: unknown option --" .. k .. " (see the header of this script)", 0) end
    opts[k] = v
  elseif tonumber(a) then
    opts.trials = a
  else
    error("ansor_cpu: unexpected argument '" .. a .. "' (see the header of this script)", 0)
  end
end
local function num_opt(k, lo)
  local v = tonumber(opts[k])
  if not v or v % 1 ~= 0 or v < lo then
    error(string.format("ansor_cpu: --%s=%s: expected an integer >= %d", k, tostring(opts[k]), lo), 0)
  end
  return v
end
local TRIALS = {}
for s in tostring(opts.trials or "64"):gmatch("[^,]+") do
  local n = tonumber(s)
  if not n or n % 1 ~= 0 or n < 0 then error("ansor_cpu: --trials: '" .. s .. "' is not a trial count", 0) end
  TRIALS[#TRIALS + 1] = n
end
table.sort(TRIALS)
if #TRIALS == 0 then error("ansor_cpu: --trials: no trial count", 0) end
local NMAX = TRIALS[#TRIALS]
local P = num_opt("population", 1)
local PER_ROUND = num_opt("per-round", 1)
local NUMBER = num_opt("number", 1)
local MIN_REPEAT_MS = num_opt("min-repeat-ms", 0)
local SEED = num_opt("seed", 0)
local BUILD_TIMEOUT = num_opt("build-timeout", 1)
local TIME_LIMIT = opts["time-limit"] and num_opt("time-limit", 1) or nil
local TGT = opts.target
local GPU = TGT:find("opencl") ~= nil
local THREADS = tonumber(os.getenv("TUNELUA_NUM_THREADS") or "") or tl.num_cores()
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"
local BUILD_JOBS = opts["build-jobs"] and num_opt("build-jobs", 1) or THREADS
local MEASURE_CPUS = os.getenv("TUNELUA_MEASURE_CPUS")
if MEASURE_CPUS == "" then MEASURE_CPUS = nil end
-- several groups ("2,3;4,5"): the trials are timed on all of them at once, the peers on the first
if MEASURE_CPUS then MEASURE_CPUS = require("tunelua.autotvm.measure").parse_cpu_groups(MEASURE_CPUS)[1] end
if opts.model ~= "xgb" and opts.model ~= "random" then
  error("ansor_cpu: --model=" .. tostring(opts.model) .. ": expected xgb or random", 0)
end

-- resnet-18's distinct conv2d workloads: C, H(=W), O, K, stride, pad
local LAYERS = {
  {3, 224, 64, 7, 2, 3}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 0},
  {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
  {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
  {512, 7, 512, 3, 1, 1},
}
local which = {}
if opts["matmul-only"] or opts.layers == "none" then
  which = {}
elseif opts.layers and opts.layers ~= "all" then
  for s in tostring(opts.layers):gmatch("[^,]+") do
    local i = tonumber(s)
    if not i or not LAYERS[i] then
      error(string.format("ansor_cpu: --layers: '%s' is not a layer (1..%d)", s, #LAYERS), 0)
    end
    which[#which + 1] = i
  end
else
  for i = 1, #LAYERS do which[i] = i end
end
local MATMUL = not opts["no-matmul"]
local DENSE = {}
for s in tostring(opts.dense or ""):gmatch("[^,]+") do
  local m, k, n = s:match("^(%d+)x(%d+)x(%d+)$")
  if not m or tonumber(m) < 1 or tonumber(k) < 1 or tonumber(n) < 1 then
    error(string.format("ansor_cpu: --dense: '%s' is not MxKxN (e.g. 1x512x1000)", s), 0)
  end
  DENSE[#DENSE + 1] = { tonumber(m), tonumber(k), tonumber(n) }
end

local dir = opts.logdir and tostring(opts.logdir)
  or file.tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-ansor")
if opts.logdir then file.mkdirs(dir) end
if TIME_LIMIT and not opts.logdir then
  error("ansor_cpu: --time-limit needs --logdir (a later command continues from the logs)", 0)
end

local function model()
  if opts.model == "random" then return auto_scheduler.RandomModel() end
  return auto_scheduler.XGBModel()
end

-- Best so far after each N of TRIALS from costs in measurement order (math.huge: failed);
-- done: the tuner will measure no more (its space or search is exhausted), so a count past
-- #costs has the final best, else such a count is not reached yet (nil).
local function best_at(costs, done)
  local out = {}
  for k, n in ipairs(TRIALS) do
    local best = math.huge
    for i = 1, math.min(n, #costs) do best = math.min(best, costs[i]) end
    if (n <= #costs or done) and best < math.huge then out[k] = best end
  end
  return out
end

-- ---- the time limit ------------------------------------------------------------------------------

local now = tl.core.C.tl_now
local T_START = now()
local last_chunk, warned_time = 0, false   -- the last run's seconds (the next one's estimate)
-- --time-limit: no new run of trials once the elapsed time plus the last run's would pass it
local function out_of_time()
  if not TIME_LIMIT then return false end
  local over = now() - T_START + last_chunk > TIME_LIMIT
  if over and not warned_time then
    warned_time = true
    io.stderr:write(string.format("time limit: %d s reached; rerun the same command to continue\n", TIME_LIMIT))
  end
  return over
end

-- ---- the auto-scheduler ------------------------------------------------------------------------

-- The task's records in LOG, in measurement order ({} without a log).
local function search_records_of(task, log)
  if not file.exists(log) then return {} end
  return require("tunelua.auto_scheduler.search").task_records(task, log)
end

local XRED_BEST = {}   -- GPU: per workload, whether its best state reduces across threads
local function ansor(task, name, seed)
  if opts["no-ansor"] then return {}, nil end
  local log = string.format("%s/ansor-%s.json", dir, name)
  local rounds_file = string.format("%s/rounds-%s.txt", dir, name)
  local round_s
  local have = #search_records_of(task, log)
  local walls, cpus, exhausted = {}, {}, false
  local errors = {}   -- error message (first line) -> count, printed when every trial failed
  local function count_errors(_, _, res)
    if res.error_no ~= 0 then
      local m = tostring(res.error_msg or require("tunelua.autotvm.measure").error_name(res.error_no))
      m = m:match("^[^\n]*"):sub(1, 160)
      errors[m] = (errors[m] or 0) + 1
    end
  end
  -- without --time-limit one run to NMAX; with it, runs of one round each (each resumes from
  -- the log: its records restore the measured set and train a fresh model) while time is left
  while have < NMAX and not out_of_time() do
    local t0 = now()
    local r = task:tune(auto_scheduler.TuningOptions{
      num_measure_trials = TIME_LIMIT and math.min(NMAX, have + PER_ROUND) or NMAX,
      num_measures_per_round = math.min(PER_ROUND, NMAX), verbose = 0,
      builder = auto_scheduler.LocalBuilder({ timeout = BUILD_TIMEOUT, n_parallel = BUILD_JOBS }),
      runner = auto_scheduler.LocalRunner({ number = NUMBER, min_repeat_ms = MIN_REPEAT_MS }),
      measure_callbacks = { auto_scheduler.RecordToFile(log), count_errors } },
      auto_scheduler.SketchPolicy(task, { seed = seed, program_cost_model = model(),
                                          params = { evolutionary_search_population = P } }))
    local lines = {}
    for k, w in ipairs(r.round_seconds) do lines[k] = string.format("%.4f %.4f", w, r.round_cpu_seconds[k]) end
    if #lines > 0 then file.append_lines(rounds_file, lines) end
    local before = have
    have = #search_records_of(task, log)
    last_chunk = now() - t0
    if have == before then exhausted = true break end   -- nothing new to measure
  end
  -- every round of every command that tuned this workload (DIR/rounds-<workload>.txt)
  if file.exists(rounds_file) then
    for l in io.lines(rounds_file) do
      local w, c = l:match("^(%S+) (%S+)$")
      if w then walls[#walls + 1], cpus[#cpus + 1] = tonumber(w), tonumber(c) end
    end
  end
  if #walls > 0 then round_s = { median(walls), median(cpus) } end
  local costs, any_ok, logged = {}, false, {}
  for _, rec in ipairs(search_records_of(task, log)) do
    costs[#costs + 1] = rec.cost
    if rec.error_no == 0 then
      any_ok = true
    else   -- what a log from an earlier command says: error numbers only
      local m = require("tunelua.autotvm.measure").error_name(rec.error_no)
      logged[m] = (logged[m] or 0) + 1
    end
  end
  if GPU and any_ok then   -- which kind of state won: a cross-thread reduction or not
    local best = task:apply_best(log)
    XRED_BEST[#XRED_BEST + 1] = string.format("%s %s", name,
      best and tostring(best):find("reduce threadIdx.x", 1, true) and "yes" or "no")
  end
  if #costs > 0 and not any_ok then
    local lines = {}
    for m, c in pairs(next(errors) and errors or logged) do lines[#lines + 1] = { m, c } end
    table.sort(lines, function(a, b) return a[2] > b[2] end)
    io.write(string.format("  %s: all %d trials failed:\n", name, #costs))
    for _, l in ipairs(lines) do io.write(string.format("  %5d x %s\n", l[2], l[1])) end
  end
  return best_at(costs, exhausted), round_s
end

-- ---- the AutoTVM template ------------------------------------------------------------------------

local function autotvm_best(L, name)
  if opts["no-autotvm"] or GPU then return {} end
  local autotvm = require "tunelua.autotvm"
  local record = require "tunelua.autotvm.record"
  local tuner_mod = require "tunelua.autotvm.tuner"
  local C_, H, K, S, Pd = L[1], L[2], L[4], L[5], L[6]
  local args = {{"TENSOR", {1, C_, H, H}, "float32"}, {"TENSOR", {L[3], C_, K, K}, "float32"},
                {S, S}, {Pd, Pd, Pd, Pd}, {1, 1}, "NCHW", "NCHW", "float32"}
  local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
  local n = math.min(NMAX, #task.config_space)
  local log = string.format("%s/autotvm-%s.json", dir, name)
  local recs = file.exists(log) and record.load_from_file(log) or {}
  if #recs < n then
    -- resume: the log's configs are the tuner's history (never measured again), the rest is tuned
    local t = tuner_mod.by_name("xgb", task, { seed = SEED })
    local inps, ress = {}, {}
    for _, r in ipairs(recs) do
      inps[#inps + 1] = { task = task, config = task.config_space:get(tuner_mod.config_index(r.inp.config)) }
      ress[#ress + 1] = r.res
    end
    if #inps > 0 then t:add_history(inps, ress) end
    local mo = autotvm.measure_option({
      builder = autotvm.LocalBuilder({ timeout = BUILD_TIMEOUT, n_parallel = BUILD_JOBS }),
      runner = autotvm.LocalRunner({ number = NUMBER, min_repeat_ms = MIN_REPEAT_MS }) })
    -- in runs of PER_ROUND trials while time is left (--time-limit), the same tuner throughout
    local left = n - #recs
    while left > 0 and not out_of_time() do
      local t0 = now()
      local k = TIME_LIMIT and math.min(left, PER_ROUND) or left
      t:tune({ n_trial = k, measure_option = mo, callbacks = { autotvm.callback.log_to_file(log) } })
      left = left - k
      last_chunk = now() - t0
    end
    recs = file.exists(log) and record.load_from_file(log) or {}
  end
  local costs = {}
  for _, r in ipairs(recs) do
    costs[#costs + 1] = r.res.error_no == 0 and record.mean_cost(r.res) or math.huge
  end
  return best_at(costs, #recs >= n)
end

-- ---- peers ----------------------------------------------------------------------------------------

local function torch_times()
  local path = dir .. "/peer.py"
  file.write_all(path, string.format([[
import torch, time, statistics, json
torch.set_num_threads(%d)
L = %s
out = []
with torch.no_grad():
    for (C, H, O, K, S, P) in L:
        x = torch.rand(1, C, H, H); w = torch.rand(O, C, K, K)
        f = lambda: torch.nn.functional.conv2d(x, w, None, S, P)
        for _ in range(3): f()
        ts = []
        for _ in range(15):
            t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
        out.append(statistics.median(ts))
print(json.dumps(out))
]], THREADS, (function()
    local r = {}
    for _, i in ipairs(which) do r[#r + 1] = "(" .. table.concat(LAYERS[i], ",") .. ")" end
    return "[" .. table.concat(r, ",") .. "]"
  end)()))
  local p = io.popen(PYTHON .. " " .. path .. " 2>/dev/null")
  local txt = p:read("*a")
  p:close()
  local ok, v = pcall(require("tunelua.json").decode, txt)
  return ok and type(v) == "table" and v or {}
end

local function openblas_time(M)
  local ok, blas = pcall(ffi.load, "openblas")
  if not ok then return nil end
  pcall(ffi.cdef, [[
    void cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    void openblas_set_num_threads(int n);
  ]])
  blas.openblas_set_num_threads(THREADS)
  local a, b, c = ffi.new("float[?]", M * M), ffi.new("float[?]", M * M), ffi.new("float[?]", M * M)
  for i = 0, M * M - 1 do a[i], b[i] = (i % 7) * 0.1, (i % 5) * 0.1 end
  local now = tl.core.C.tl_now
  local ts = {}
  for r = 1, 17 do
    local t0 = now()
    blas.cblas_sgemm(101, 111, 111, M, M, M, 1.0, a, M, b, M, 0.0, c, M)
    if r > 2 then ts[#ts + 1] = now() - t0 end
  end
  return median(ts)
end

-- the cuDNN peer on the accelerator machine (scripts/device/torch_conv.py): kernel time of a
-- CUDA-graph replay when available (like our OpenCL event times), else the eager call
local function cudnn_times()
  local json = require "tunelua.json"
  local shapes = {}
  for _, i in ipairs(which) do
    local L = LAYERS[i]
    shapes[#shapes + 1] = { key = tostring(i), n = 1, ci = L[1], h = L[2], w = L[2], co = L[3], kh = L[4],
      kw = L[4], sh = L[5], sw = L[5], pt = L[6], pl = L[6], pb = L[6], pr = L[6], dh = 1, dw = 1 }
  end
  local path = dir .. "/shapes.json"
  file.write_all(path, json.encode(shapes))
  local script = (debug.getinfo(1, "S").source:sub(2):gsub("bench/ansor_cpu%.lua$", "device/torch_conv.py"))
  local p = io.popen(PYTHON .. " " .. script .. " " .. path .. " 2>/dev/null")
  local ok, v = pcall(json.decode, p:read("*a"))
  p:close()
  local out = {}
  if not ok or type(v) ~= "table" or not v.ok then
    print("cuDNN peer: n/a (" .. tostring(ok and type(v) == "table" and v.reason or "no output") .. ")")
    return out
  end
  print(string.format("cuDNN peer: torch %s, cudnn %s, %s", tostring(v.torch), tostring(v.cudnn),
                      tostring(v.device)))
  for k, r in ipairs(v.results) do
    local ms = r.graph_ms ~= json.null and r.graph_ms or r.ms
    out[k] = type(ms) == "number" and ms / 1e3 or nil
  end
  return out
end

-- ---- main -----------------------------------------------------------------------------------------

local tlist = table.concat(TRIALS, ",")
print(string.format("auto-scheduler on %s: trials %s per workload, population %d, model %s, %d threads, "
                    .. "runner number %d min_repeat_ms %d; logs in %s", TGT, tlist, P, opts.model,
                    THREADS, NUMBER, MIN_REPEAT_MS, dir))
local function peer_times()
  return (opts["no-peer"] or #which == 0) and {} or (GPU and cudnn_times() or torch_times())
end
-- With TUNELUA_MEASURE_CPUS the peers are timed at the end, once this process (and so
-- PyTorch's subprocess and OpenBLAS's threads) is pinned to those CPUs.
local torch = MEASURE_CPUS and {} or peer_times()

local rows = {}
local function add_row(name, kind, flop, round_s, ta, tt, tp)
  rows[#rows + 1] = { name = name, kind = kind, flop = flop, round_s = round_s, ta = ta, tt = tt, tp = tp }
end
for k, i in ipairs(which) do
  local L = LAYERS[i]
  local C_, H, O, K, S, Pd = L[1], L[2], L[3], L[4], L[5], L[6]
  local x = te.placeholder({ 1, H, H, C_ }, "float32", "data")
  local w = te.placeholder({ K, K, C_, O }, "float32", "kernel")
  local y = topi.nn.conv2d_nhwc(x, w, { strides = S, padding = { Pd, Pd, Pd, Pd }, dilation = 1 })
  local task = auto_scheduler.SearchTask{ compute_dag = y, target = TGT }
  local name = string.format("conv%d", i)
  local ta, round_s = ansor(task, name, SEED * 1000 + i)
  local tt = autotvm_best(L, name)
  add_row(string.format("conv %d: %dx%d c%d->%d k%d s%d", i, H, H, C_, O, K, S), "conv", task.flop,
          round_s, ta, tt, torch[k])
  io.stderr:write(string.format("done: %s\n", name))
end
for _, d in ipairs(DENSE) do
  local x = te.placeholder({ d[1], d[2] }, "float32", "data")
  local w = te.placeholder({ d[3], d[2] }, "float32", "weight")
  local task = auto_scheduler.SearchTask{ compute_dag = topi.nn.dense(x, w), target = TGT }
  local name = string.format("dense%dx%dx%d", d[1], d[2], d[3])
  local ta, round_s = ansor(task, name, SEED * 1000 + 200 + d[1] + d[2] + d[3])
  add_row(string.format("dense %dx%dx%d", d[1], d[2], d[3]), "dense", task.flop, round_s, ta, {}, nil)
  io.stderr:write(string.format("done: %s\n", name))
end
local function pin_for_peers()
  if not MEASURE_CPUS then return end
  tl.pin_cpus(MEASURE_CPUS)
  torch = peer_times()
  for k, r in ipairs(rows) do r.tp = torch[k] end
end
if MATMUL then
  local A = te.placeholder({ 1024, 1024 }, "float32", "A")
  local B = te.placeholder({ 1024, 1024 }, "float32", "B")
  local task = auto_scheduler.SearchTask{ compute_dag = topi.matmul(A, B), target = TGT }
  local ta, round_s = ansor(task, "matmul1024", SEED * 1000 + 100)
  pin_for_peers()
  add_row("matmul 1024^3", "matmul", task.flop, round_s, ta, {},
          not GPU and not opts["no-peer"] and openblas_time(1024) or nil)
end

if not MATMUL then pin_for_peers() end

local function ms(t) return t and string.format("%.3f", t * 1e3) or "-" end
local function ratio(x, y) return (x and y) and string.format("%.2f", x / y) or "-" end
print(string.format("%-28s %7s %8s %8s %6s %10s %10s %9s %10s %9s", "workload", "GFLOP", "round s",
                    "cpu s", "N", "ansor ms", "atvm ms", "atvm/an", "peer ms", "peer/an"))
local geo = {}
for k = 1, #TRIALS do geo[k] = { atvm = 0, na = 0, peer = 0, np = 0, mm = 0, nm = 0 } end
for _, r in ipairs(rows) do
  for k, n in ipairs(TRIALS) do
    local ta, tt = r.ta[k], r.tt[k]
    local function rs(j) return k == 1 and (r.round_s and string.format("%.2f", r.round_s[j]) or "-") or "" end
    print(string.format("%-28s %7s %8s %8s %6d %10s %10s %9s %10s %9s", k == 1 and r.name or "",
                        k == 1 and string.format("%.3f", r.flop / 1e9) or "", rs(1), rs(2),
                        n, ms(ta), ms(tt), ratio(tt, ta), ms(r.tp), ratio(r.tp, ta)))
    local g = geo[k]
    if ta and tt then g.atvm, g.na = g.atvm + math.log(tt / ta), g.na + 1 end
    if ta and r.tp and r.kind == "conv" then g.peer, g.np = g.peer + math.log(r.tp / ta), g.np + 1 end
    if ta and r.tp and r.kind == "matmul" then g.mm, g.nm = g.mm + math.log(r.tp / ta), g.nm + 1 end
  end
end
local rs, rc = {}, {}
for _, r in ipairs(rows) do
  if r.round_s then rs[#rs + 1], rc[#rc + 1] = r.round_s[1], r.round_s[2] end
end
if #rs > 0 then
  print(string.format("search round: median %.2f s wall, %.2f s CPU (all threads) over %d workloads "
                      .. "(population %d)", median(rs), median(rc), #rs, P))
end
for k, n in ipairs(TRIALS) do
  local g = geo[k]
  local parts = {}
  if g.na > 0 then parts[#parts + 1] = string.format("autotvm/ansor %.2f (%d convs)", math.exp(g.atvm / g.na), g.na) end
  if g.np > 0 then parts[#parts + 1] = string.format("torch/ansor %.2f (%d convs)", math.exp(g.peer / g.np), g.np) end
  if g.nm > 0 then parts[#parts + 1] = string.format("openblas/ansor %.2f (matmul)", math.exp(g.mm / g.nm)) end
  if #parts > 0 then print(string.format("geomean at %d trials: %s", n, table.concat(parts, ", "))) end
end
if #XRED_BEST > 0 then
  print("best state is a cross-thread reduction: " .. table.concat(XRED_BEST, ", "))
end
if not opts.logdir then file.remove(dir) end
