-- Benchmark: the auto-scheduler's search on this host's CPU ("llvm"), batch 1 fp32, against
-- peers measured in the same run. Workloads: resnet-18's distinct conv2d layers (NHWC for the
-- auto-scheduler) and a 1024^3 matmul. Per workload:
--
--   ansor     the auto-scheduler's best kernel after N measured trials (SketchPolicy with
--             the cost model of --model: xgb = auto_scheduler.XGBModel(), random)
--   autotvm   the x86 AutoTVM template's best after the same N trials with the XGB tuner
--             (conv2d_NCHWc.x86 on the same layer, NCHW; the matmul has no template)
--   peer      PyTorch conv2d (a /usr/bin/python3 subprocess, same threads; TUNELUA_PYTHON
--             names another interpreter) or OpenBLAS sgemm (the matmul, in this process);
--             on OpenCL, cuDNN fp32 with TF32 off (scripts/device/torch_conv.py)
--
-- and the time of one search round (population P, 4 generations with the xgb model; 2 with
-- random scores) per task. Ratios are peer time / ours (> 1: ours is faster).
--
--   tunelua scripts/bench/ansor_cpu.lua [N=64] [--population=2048] [--model=xgb|random]
--                                       [--layers=1,2,...] [--no-matmul] [--no-autotvm]
--                                       [--target=llvm]
--
-- scripts/bench/ansor_gpu.lua runs the auto-scheduler part on OpenCL device 0 (--target=opencl).
local tl = require "tunelua"
local ffi = require "ffi"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local median = require("tunelua.stats").median

local opts = { population = "2048", model = "xgb", target = "llvm" }
local pos = {}
for _, a in ipairs(arg) do
  local k, v = a:match("^%-%-([%w-]+)=(.*)$")
  if k then opts[k] = v
  elseif a:match("^%-%-") then opts[a:sub(3)] = true
  else pos[#pos + 1] = a end
end
local N = tonumber(pos[1]) or 64
local P = tonumber(opts.population)
local TGT = opts.target
local GPU = TGT:find("opencl") ~= nil
local THREADS = tonumber(os.getenv("TUNELUA_NUM_THREADS") or "") or tl.num_cores()
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"

-- resnet-18's distinct conv2d workloads: C, H(=W), O, K, stride, pad
local LAYERS = {
  {3, 224, 64, 7, 2, 3}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 0},
  {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
  {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
  {512, 7, 512, 3, 1, 1},
}
local which = {}
if opts.layers then
  for s in tostring(opts.layers):gmatch("%d+") do which[#which + 1] = tonumber(s) end
else
  for i = 1, #LAYERS do which[i] = i end
end

local function model()
  if opts.model == "random" then return auto_scheduler.RandomModel() end
  if not auto_scheduler.XGBModel then
    error("ansor_cpu: --model=xgb needs auto_scheduler.XGBModel (core/ansor/feature.h); use --model=random", 0)
  end
  return auto_scheduler.XGBModel()
end

-- ---- the auto-scheduler ------------------------------------------------------------------------

local dir = require("tunelua.file").tmpdir(os.getenv("TMPDIR") or "/tmp", "tunelua-bench-ansor")
local function ansor(task, seed)
  local probe = auto_scheduler.SketchPolicy(task, { seed = seed, program_cost_model = model(),
    params = { evolutionary_search_population = P } })
  local _, round_s = probe:next_batch(1)
  if N == 0 then return nil, round_s end
  local log = string.format("%s/task%d.json", dir, seed)
  local errors = {}   -- error message (first line) -> count, printed when every trial failed
  local function count_errors(_, _, res)
    if res.error_no ~= 0 then
      local m = tostring(res.error_msg or require("tunelua.autotvm.measure").error_name(res.error_no))
      m = m:match("^[^\n]*"):sub(1, 160)
      errors[m] = (errors[m] or 0) + 1
    end
  end
  local r = task:tune(auto_scheduler.TuningOptions{ num_measure_trials = N,
    num_measures_per_round = math.min(64, N), verbose = 0,
    runner = auto_scheduler.LocalRunner({ number = 3, min_repeat_ms = 50 }),
    measure_callbacks = { auto_scheduler.RecordToFile(log), count_errors } },
    auto_scheduler.SketchPolicy(task, { seed = seed, program_cost_model = model(),
                                        params = { evolutionary_search_population = P } }))
  if r.best_cost == math.huge then
    local lines = {}
    for m, c in pairs(errors) do lines[#lines + 1] = { m, c } end
    table.sort(lines, function(a, b) return a[2] > b[2] end)
    io.write(string.format("  all %d trials failed:\n", r.trials))
    for _, l in ipairs(lines) do io.write(string.format("  %5d x %s\n", l[2], l[1])) end
    return nil, round_s
  end
  -- the best kernel, timed like the peers
  local st = task:apply_best(log)
  local f = st:build()
  local args = search.random_args(task, f.device)
  local t = f:time_evaluator({ number = 5, repeats = 5 })(unpack(args))
  return median(t.results), round_s
end

-- ---- the AutoTVM template ------------------------------------------------------------------------

local function autotvm_best(L)
  if opts["no-autotvm"] or GPU then return nil end
  local autotvm = require "tunelua.autotvm"
  local tuner_mod = require "tunelua.autotvm.tuner"
  local C_, H, K, S, Pd = L[1], L[2], L[4], L[5], L[6]
  local args = {{"TENSOR", {1, C_, H, H}, "float32"}, {"TENSOR", {L[3], C_, K, K}, "float32"},
                {S, S}, {Pd, Pd, Pd, Pd}, {1, 1}, "NCHW", "NCHW", "float32"}
  local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
  local mo = autotvm.measure_option({ builder = autotvm.LocalBuilder(),
                                      runner = autotvm.LocalRunner({ number = 3, min_repeat_ms = 50 }) })
  local best = math.huge
  local t = tuner_mod.by_name("xgb", task, { seed = 1 })
  t:tune({ n_trial = math.min(N, #task.config_space), measure_option = mo,
           callbacks = { function(_, _, res)
             for _, r in ipairs(res) do
               if r.error_no == 0 then
                 local m = 0
                 for _, c in ipairs(r.costs) do m = m + c end
                 best = math.min(best, m / #r.costs)
               end
             end
           end } })
  return best < math.huge and best or nil
end

-- ---- peers ----------------------------------------------------------------------------------------

local function torch_times()
  local path = dir .. "/peer.py"
  local f = assert(io.open(path, "w"))
  f:write(string.format([[
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
  f:close()
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
  for r = 1, 8 do
    local t0 = now()
    blas.cblas_sgemm(101, 111, 111, M, M, M, 1.0, a, M, b, M, 0.0, c, M)
    if r > 2 then ts[#ts + 1] = now() - t0 end
  end
  return median(ts)
end

-- ---- main -----------------------------------------------------------------------------------------

print(string.format("auto-scheduler on %s: %d trials per workload, population %d, model %s, %d threads",
                    TGT, N, P, opts.model, THREADS))
print(string.format("%-28s %8s %9s %11s %11s %11s %9s %9s", "workload", "GFLOP", "round s",
                    "ansor ms", "autotvm ms", "peer ms", "peer/an", "atvm/an"))
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
  local f = assert(io.open(path, "w"))
  f:write(json.encode(shapes))
  f:close()
  local script = (debug.getinfo(1, "S").source:sub(2):gsub("bench/ansor_cpu%.lua$", "device/torch_conv.py"))
  local p = io.popen(PYTHON .. " " .. script .. " " .. path .. " 2>/dev/null")
  local ok, v = pcall(json.decode, p:read("*a"))
  p:close()
  local out = {}
  if not ok or type(v) ~= "table" or not v.ok then
    print("cuDNN peer: n/a (" .. tostring(ok and type(v) == "table" and v.reason or "no output") .. ")")
    return out
  end
  print(string.format("cuDNN peer: torch %s, cudnn %s, %s", tostring(v.torch), tostring(v.cudnn), tostring(v.device)))
  for k, r in ipairs(v.results) do
    local ms = r.graph_ms ~= json.null and r.graph_ms or r.ms
    out[k] = type(ms) == "number" and ms / 1e3 or nil
  end
  return out
end
local torch = opts["no-peer"] and {} or (GPU and cudnn_times() or torch_times())
local logs = { peer = 0, atvm = 0, np = 0, na = 0, rounds = {} }
local function row(name, flop, round_s, ta, tt, tp)
  local function ms(t) return t and string.format("%.3f", t * 1e3) or "-" end
  local function ratio(x, y) return (x and y) and string.format("%.2f", x / y) or "-" end
  print(string.format("%-28s %8.3f %9.2f %11s %11s %11s %9s %9s", name, flop / 1e9, round_s,
                      ms(ta), ms(tt), ms(tp), ratio(tp, ta), ratio(tt, ta)))
  logs.rounds[#logs.rounds + 1] = round_s
  if ta and tp then logs.peer, logs.np = logs.peer + math.log(tp / ta), logs.np + 1 end
  if ta and tt then logs.atvm, logs.na = logs.atvm + math.log(tt / ta), logs.na + 1 end
end
for k, i in ipairs(which) do
  local L = LAYERS[i]
  local C_, H, O, K, S, Pd = L[1], L[2], L[3], L[4], L[5], L[6]
  local x = te.placeholder({ 1, H, H, C_ }, "float32", "data")
  local w = te.placeholder({ K, K, C_, O }, "float32", "kernel")
  local y = topi.nn.conv2d_nhwc(x, w, { strides = S, padding = { Pd, Pd, Pd, Pd }, dilation = 1 })
  local task = auto_scheduler.SearchTask{ compute_dag = y, target = TGT }
  local ta, round_s = ansor(task, i)
  row(string.format("conv %d: %dx%d c%d->%d k%d s%d", i, H, H, C_, O, K, S), task.flop, round_s, ta,
      autotvm_best(L), torch[k])
end
if not opts["no-matmul"] then
  local A = te.placeholder({ 1024, 1024 }, "float32", "A")
  local B = te.placeholder({ 1024, 1024 }, "float32", "B")
  local task = auto_scheduler.SearchTask{ compute_dag = topi.matmul(A, B), target = TGT }
  local ta, round_s = ansor(task, 100)
  row("matmul 1024^3", task.flop, round_s, ta, nil, not GPU and openblas_time(1024) or nil)
end
table.sort(logs.rounds)
print(string.format("search round: median %.2f s over %d workloads (population %d)",
                    logs.rounds[math.ceil(#logs.rounds / 2)], #logs.rounds, P))
if logs.np > 0 then print(string.format("geomean peer time / ansor time: %.2f", math.exp(logs.peer / logs.np))) end
if logs.na > 0 then print(string.format("geomean autotvm time / ansor time: %.2f", math.exp(logs.atvm / logs.na))) end
require("tunelua.file").remove(dir)
