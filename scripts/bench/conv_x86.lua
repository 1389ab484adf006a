-- Benchmark: the conv2d layers of resnet-18 (batch 1, fp32) with the x86
-- AutoTVM template conv2d_NCHWc.x86 on the host CPU, against PyTorch's conv2d
-- for the same layer measured in the same run (a /usr/bin/python3 subprocess,
-- torch.set_num_threads(<threads>); TUNELUA_PYTHON names another interpreter). Per layer: the fallback config, the best of
-- a random sample of N configs, PyTorch, and the ratios (PyTorch time / ours).
--
--   tunelua scripts/bench/conv_x86.lua [N=16] [repeats=5] [layer]
--
-- --depthwise: mobilenet's 9 depthwise layers with depthwise_conv2d_NCHWc.x86
-- against torch conv2d(groups=C); besides the NCHW task's configs, a "blocked" column:
-- the fallback config on NCHW[b]c data as the network runs it (the input read in place,
-- borders by loop partitioning, no padded copy), its GFLOPS (per output, so stride 1 and
-- 2 compare), and torch / blocked.
-- --mobilenet: end to end, mobilenet batch 1 fp32 untuned (fallback configs,
-- default schedules) through relay.build + GraphModule:benchmark, against
-- scripts/bench/torch_peer.py --network mobilenet in the same run
-- (TUNELUA_NO_PEER=1: without it; TUNELUA_PROFILE=1: ms per kind of step,
-- TUNELUA_PROFILE=steps: also every step).
--
--   tunelua scripts/bench/conv_x86.lua --depthwise [N=16] [repeats=5] [layer]
--   tunelua scripts/bench/conv_x86.lua --mobilenet [repeats=30]
--
-- --peak: the machine's own FMA peak and each resnet-18 layer as the network runs it.
-- The peak is a hand-written loop of independent vector FMAs (the target's vector width,
-- 12 accumulators, no loads) compiled with the target's C flags and run on <threads>
-- threads at once (and on one, for the per-core figure). Each layer is a one-conv graph
-- built as executor.build builds a network (AlterOpLayout: the blocked conv2d_NCHWc with
-- its pre-packed weight, fused into nothing, layout transforms at the graph's edges
-- excluded): the conv step's median time over <repeats> profiles (checked against the
-- reference conv first), its GFLOPS and share of the measured peak, and PyTorch's conv2d
-- (oneDNN) for the same layer in the same run. Configs: the fallback's, or --log's best
-- records, or TopHub's with --tophub.
--
--   taskset -c 0,1 tunelua scripts/bench/conv_x86.lua --peak [repeats=20] [layer]
--       [--target "llvm -mcpu=core-avx2"] [--cflags "-O3 ..."] [--log file] [--tophub]
--       [--mobilenet-1x1]
-- (--mobilenet-1x1: mobilenet's nine distinct 1x1 layers instead of resnet-18's.)
-- (a target's -mcpu gives its kernels and the peak loop that machine's -march, e.g. AVX2
-- code on an AVX-512 machine; --cflags replaces those flags.) The share of peak is against <threads> x the per-core peak measured with thread
-- CPU time, which a busy machine does not lower; the wall-clock peak of the threads together
-- is printed beside it. TUNELUA_NO_PEER=1: no PyTorch column.
local tl = require "tunelua"
local autotvm = require "tunelua.autotvm"

local MODE = "conv"
if arg[1] == "--depthwise" or arg[1] == "--mobilenet" or arg[1] == "--peak" then
  MODE = arg[1]:sub(3)
  table.remove(arg, 1)
end
local DW = MODE == "depthwise"
local TARGET = "llvm"   -- the host CPU's vectors and registers
local PEAK_LOG, PEAK_TOPHUB, PEAK_CFLAGS, PEAK_MOBILENET
if MODE == "peak" then
  local rest, i = {}, 1
  while i <= #arg do
    local a = arg[i]
    if a == "--target" or a == "--log" or a == "--cflags" then
      if arg[i + 1] == nil then error("conv_x86: " .. a .. " expects a value", 0) end
      if a == "--target" then TARGET = arg[i + 1] elseif a == "--log" then PEAK_LOG = arg[i + 1]
      else PEAK_CFLAGS = arg[i + 1] end
      i = i + 2
    elseif a == "--tophub" then
      PEAK_TOPHUB, i = true, i + 1
    elseif a == "--mobilenet-1x1" then
      PEAK_MOBILENET, i = true, i + 1
    elseif a:sub(1, 2) == "--" then
      error("conv_x86: unknown option " .. a .. " (see the header of this script)", 0)
    else
      rest[#rest + 1], i = a, i + 1
    end
  end
  arg = rest
end
local NSAMPLE = tonumber(arg[1]) or 16
local REPEATS = tonumber(arg[2]) or 5
local ONLY = tonumber(arg[3])
if MODE == "peak" then NSAMPLE, REPEATS, ONLY = 0, tonumber(arg[1]) or 20, tonumber(arg[2]) end
local THREADS = tonumber(os.getenv("TUNELUA_NUM_THREADS") or "") or tl.num_cores()
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"

-- resnet-18's distinct conv2d workloads: C, H(=W), O, K, stride, pad
local LAYERS = {
  {3, 224, 64, 7, 2, 3}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 0},
  {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
  {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
  {512, 7, 512, 3, 1, 1},
}
-- --peak --mobilenet-1x1: mobilenet's distinct 1x1 (pointwise) conv2d workloads instead
if PEAK_MOBILENET then
  LAYERS = {
    {32, 112, 64, 1, 1, 0}, {64, 56, 128, 1, 1, 0}, {128, 56, 128, 1, 1, 0}, {128, 28, 256, 1, 1, 0},
    {256, 28, 256, 1, 1, 0}, {256, 14, 512, 1, 1, 0}, {512, 14, 512, 1, 1, 0},
    {512, 7, 1024, 1, 1, 0}, {1024, 7, 1024, 1, 1, 0},
  }
end
-- mobilenet's depthwise layers (O = C, kernel [C, 1, 3, 3])
if DW then
  LAYERS = {
    {32, 112, 32, 3, 1, 1}, {64, 112, 64, 3, 2, 1}, {128, 56, 128, 3, 1, 1},
    {128, 56, 128, 3, 2, 1}, {256, 28, 256, 3, 1, 1}, {256, 28, 256, 3, 2, 1},
    {512, 14, 512, 3, 1, 1}, {512, 14, 512, 3, 2, 1}, {1024, 7, 1024, 3, 1, 1},
  }
end
local TEMPLATE = DW and "depthwise_conv2d_NCHWc.x86" or "conv2d_NCHWc.x86"
local function kshape(L) return DW and {L[1], 1, L[4], L[4]} or {L[3], L[1], L[4], L[4]} end

local median = require("tunelua.stats").median

local function args_of(L)
  local C, H, K, S, P = L[1], L[2], L[4], L[5], L[6]
  return {{"TENSOR", {1, C, H, H}, "float32"}, {"TENSOR", kshape(L), "float32"},
          {S, S}, {P, P, P, P}, {1, 1}, "NCHW", "NCHW", "float32"}
end

local function out_hw(L) return math.floor((L[2] + 2 * L[6] - L[4]) / L[5]) + 1 end

-- time one config: median seconds per call over REPEATS (nil, msg on failure)
local inputs = {}
local function time_config(task, idx, L, check_ref)
  local ok, s, targs = pcall(task.instantiate, task, idx)
  if not ok then return nil, s end
  local ok2, f = pcall(tl.build, s, targs, "c")
  if not ok2 then return nil, f end
  local key = table.concat(L, ",")
  if not inputs[key] then
    local oh = out_hw(L)
    inputs[key] = {tl.nd.random_uniform({1, L[1], L[2], L[2]}, {seed = 1}),
                   tl.nd.random_uniform(kshape(L), {seed = 2}),
                   tl.nd.empty({1, L[3], oh, oh})}
  end
  local a, w, o = inputs[key][1], inputs[key][2], inputs[key][3]
  -- the kernel input as the template is deployed (conv2d_NCHWc.x86: the weight packed once)
  local wd = require("tunelua.graph.executor").deploy_input(task.name, task.args, 2, w)
  f(a, wd, o)
  if check_ref then
    local ref = tl.nd.empty({1, L[3], out_hw(L), out_hw(L)})
    check_ref(a, w, ref)
    tl.testing.assert_allclose(o, ref, {rtol = 1e-3, atol = 1e-3})
  end
  local t = f:time_evaluator({number = 1, repeats = REPEATS, min_repeat_ms = 20})(a, wd, o)
  return median(t.results), f
end

-- PyTorch peer: one subprocess timing every layer
local torch_conv = dofile((debug.getinfo(1, "S").source:sub(2):gsub("conv_x86%.lua$", "torch_conv_cpu.lua")))
local function torch_times()
  local layers = {}
  for i, L in ipairs(LAYERS) do
    layers[i] = { L[1], L[2], L[3], L[4], L[5], L[6], DW and L[1] or 1 }
  end
  return torch_conv(PYTHON, THREADS, REPEATS, layers)
end

local ref_f = {}
local function reference(L)
  local key = table.concat(L, ",")
  if ref_f[key] then return ref_f[key] end
  local te, topi = tl.te, tl.topi
  local A = te.placeholder({1, L[1], L[2], L[2]}, "float32", "A")
  local W = te.placeholder(kshape(L), "float32", "W")
  local O = (DW and topi.nn.depthwise_conv2d or topi.nn.conv2d)(A, W,
    {strides = L[5], padding = {L[6], L[6], L[6], L[6]}, dilation = 1})
  local f = tl.build(topi.default_schedule({O}, "cpu"), {A, W, O}, "c")
  ref_f[key] = function(a, w, o) f(a, w, o) end
  return ref_f[key]
end

if MODE == "mobilenet" then
  local relay = require "tunelua.relay"
  local networks = require "networks"
  local reps = tonumber(arg[1]) or 30
  tl.set_num_threads(THREADS)
  local mod, params, ishape = networks.get_network("mobilenet", {batch_size = 1})
  local lib = relay.build(mod, {target = TARGET, params = params})
  local m = require("tunelua.graph.executor").GraphModule(lib)
  m:set_input("data", tl.nd.random_uniform(ishape, {seed = 1}))
  local r = m:benchmark({number = 1, ["repeat"] = reps, quiet = true})
  local ours = r.median or r.median_ms and r.median_ms / 1e3
  if os.getenv("TUNELUA_PROFILE") then
    -- per step mean ms, by kind (the step's name up to the first digit)
    local by, total = {}, 0
    for i, st in ipairs(m:profile(10)) do
      local k = st.name:gsub("_?%d+$", "")
      if os.getenv("TUNELUA_PROFILE") == "steps" then
        print(string.format("  %3d %-50s %8.3f ms", i, st.name, st.seconds * 1e3))
      end
      by[k] = (by[k] or 0) + st.seconds
      total = total + st.seconds
    end
    local ks = {}
    for k in pairs(by) do ks[#ks + 1] = k end
    table.sort(ks, function(a, b) return by[a] > by[b] end)
    for _, k in ipairs(ks) do print(string.format("  %-50s %8.3f ms", k, by[k] * 1e3)) end
    print(string.format("  %-50s %8.3f ms", "total", total * 1e3))
  end
  local src = debug.getinfo(1, "S").source:sub(2)
  local dir = src:match("^(.*)/[^/]*$") or "."
  local out = ""
  if not os.getenv("TUNELUA_NO_PEER") then
    local p = io.popen(string.format("%s %s/torch_peer.py --network mobilenet --threads %d --repeat %d 2>&1",
                                     PYTHON, dir, THREADS, reps))
    out = p:read("*a"); p:close()
  end
  local tms = tonumber(out:match('"median_ms": ([%d%.e%-]+)') or "")
  print(string.format("mobilenet b1 fp32 untuned, %d threads: ours %.2f ms, torch %s ms, torch/ours %s",
                      THREADS, ours * 1e3, tms and string.format("%.2f", tms) or "-",
                      tms and string.format("%.2f", tms / (ours * 1e3)) or "-"))
  return
end

-- ---- --peak: the FMA peak and each layer as the network runs it ----------------------------

-- The measured FMA peak: GFLOPS of `threads` threads, each running 12 independent vector FMA
-- chains of the target's width (no loads, no stores), compiled with the target's C flags.
local function fma_peak(tgt, threads)
  local ffi = require "ffi"
  local src = string.format([[
#include <pthread.h>
#include <time.h>
typedef float vf __attribute__((vector_size(%d)));
#define NACC 12
typedef struct { long iters; double secs; float sink; } job;
static void *run(void *p) {
  job *j = p;
  vf acc[NACC], a, b;
  for (int l = 0; l < %d; l++) { a[l] = 0.999f; b[l] = 1e-3f; }
  for (int i = 0; i < NACC; i++) acc[i] = a * (float)(i + 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  for (long n = 0; n < j->iters; n++) {
#pragma GCC unroll 12
    for (int i = 0; i < NACC; i++) acc[i] = acc[i] * a + b;
    __asm__ volatile("" : "+x"(a));
  }
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  j->secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  float s = 0;
  for (int i = 0; i < NACC; i++) for (int l = 0; l < %d; l++) s += acc[i][l];
  j->sink = s;
  return 0;
}
/* seconds of wall time for `threads` threads of iters iterations; cpu[i]: thread i's CPU time */
double tl_fma_peak(int threads, long iters, double *cpu) {
  pthread_t th[64]; job jobs[64];
  struct timespec t0, t1;
  if (threads > 64) threads = 64;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < threads; i++) { jobs[i].iters = iters; pthread_create(&th[i], 0, run, &jobs[i]); }
  for (int i = 0; i < threads; i++) { pthread_join(th[i], 0); cpu[i] = jobs[i].secs; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}
]], tgt.lanes * 4, tgt.lanes, tgt.lanes)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'") == 0 or true)
  local c, so = dir .. "/fma_peak.c", dir .. "/fma_peak.so"
  local fh = assert(io.open(c, "w")); assert(fh:write(src)); assert(fh:close())
  local cmd = string.format("%s %s -std=gnu11 -fPIC -shared -pthread -o '%s' '%s' 2>&1", tgt.cc or "cc",
                            PEAK_CFLAGS or tgt.cflags, so, c)
  local p = io.popen(cmd)
  local out = p:read("*a")
  local ok = p:close()
  local lib = (ok == true or ok == 0) and io.open(so) and ffi.load(so)
  if not lib then error("conv_x86: the FMA peak loop did not compile: " .. cmd .. "\n" .. out, 0) end
  pcall(ffi.cdef, "double tl_fma_peak(int threads, long iters, double *cpu);")
  local cpu = ffi.new("double[64]")
  local flop_iter = 12 * 2 * tgt.lanes
  -- calibrate: about 0.2 s of one chain set
  local iters = 1e6
  while true do
    lib.tl_fma_peak(1, iters, cpu)
    if cpu[0] > 0.05 then break end
    iters = iters * 4
  end
  iters = math.floor(iters * 0.2 / cpu[0])
  local walls, per_core = {}, {}
  for _ = 1, 5 do
    local w = lib.tl_fma_peak(threads, iters, cpu)
    walls[#walls + 1] = flop_iter * iters * threads / w / 1e9
    lib.tl_fma_peak(1, iters, cpu)
    per_core[#per_core + 1] = flop_iter * iters / cpu[0] / 1e9
  end
  os.remove(c); os.remove(so); os.remove(dir)
  return median(walls), median(per_core)
end

if MODE == "peak" then
  local relay = require "tunelua.relay"
  local executor = require "tunelua.graph.executor"
  local tgt = require("tunelua.target").parse(TARGET)
  tl.set_num_threads(THREADS)
  local wall_peak, core = fma_peak(tgt, THREADS)
  local peak = core * THREADS
  print(string.format("FMA peak (%s, %d-lane vectors, %s): %.1f GFLOPS per core (thread CPU time), x %d threads " ..
                      "= %.1f GFLOPS (the share's base); %.1f GFLOPS wall clock on %d threads together", TARGET,
                      tgt.lanes, PEAK_CFLAGS or tgt.cflags, core, THREADS, peak, wall_peak, THREADS))
  local history = PEAK_LOG and autotvm.apply_history_best(PEAK_LOG) or nil
  local tt = torch_times()
  print(string.format((PEAK_MOBILENET and "mobilenet 1x1" or "resnet-18") .. " conv layers as the network runs them (conv2d_NCHWc, %s configs), %d threads, " ..
                      "median of %d profiles; PyTorch conv2d in the same run",
                      PEAK_LOG and "tuned" or PEAK_TOPHUB and "TopHub" or "fallback", THREADS, REPEATS))
  print(string.format("%-22s %-30s %9s %7s %6s %9s %7s %6s %8s", "layer (C,HW,O,K,S,P)", "kernel", "tunelua",
                      "GFLOPS", "peak", "torch", "GFLOPS", "peak", "torch/us"))
  local sum_us, sum_t = 0, 0
  for i, L in ipairs(LAYERS) do
    if not ONLY or ONLY == i then
      local C, H, O, K, S, P = L[1], L[2], L[3], L[4], L[5], L[6]
      local dv = relay.var("data", { shape = { 1, C, H, H } })
      local wv = relay.var("w", { shape = { O, C, K, K } })
      local y = relay.nn.conv2d(dv, wv, { strides = { S, S }, padding = { P, P, P, P }, channels = O,
                                          kernel_size = { K, K } })
      local mod = relay.Module(relay.Function({ dv, wv }, y))
      local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 1 })
      local w = tl.nd.random_uniform({ O, C, K, K }, { seed = 2 })
      local lib = executor.build(mod, { target = TARGET, params = { w = w }, history = history,
                                        tophub = PEAK_TOPHUB or false, quiet = true, cflags = PEAK_CFLAGS })
      local m = executor.GraphModule(lib)
      m:set_input("data", a)
      m:run()
      local ok_ref, refn = pcall(reference, L)
      if ok_ref then
        local ref = tl.nd.empty({ 1, O, out_hw(L), out_hw(L) })
        refn(a, w, ref)
        tl.testing.assert_allclose(m:get_output(0), ref, { rtol = 1e-3, atol = 1e-3 })
      end
      -- the conv step: the one whose name holds "conv2d" (layout transforms excluded)
      local step
      for si, st in ipairs(lib.steps) do if st.name:find("conv2d", 1, true) then step = si end end
      assert(step, "conv_x86: no conv2d step in the layer's graph")
      local ts = {}
      for _ = 1, REPEATS do
        local prof = m:profile(math.max(1, math.floor(2e8 / (2 * O * C * K * K * out_hw(L) ^ 2))))
        ts[#ts + 1] = prof[step].seconds
      end
      local t = median(ts)
      local gf = 2 * O * C * K * K * out_hw(L) ^ 2 / 1e9
      local tp = tt and tt[i]
      print(string.format("%-22s %-30s %7.3fms %7.1f %5.0f%% %9s %7s %6s %8s", table.concat(L, ","),
                          lib.steps[step].name:sub(1, 30), t * 1e3, gf / t, 100 * gf / t / peak,
                          tp and string.format("%.3fms", tp * 1e3) or "-",
                          tp and string.format("%.1f", gf / tp) or "-",
                          tp and string.format("%.0f%%", 100 * gf / tp / peak) or "-",
                          tp and string.format("%.2f", tp / t) or "-"))
      sum_us, sum_t = sum_us + t, sum_t + (tp or 0)
    end
  end
  print(string.format("%-22s %-30s %7.3fms %7s %6s %7.3fms %7s %6s %8.2f", "sum (distinct layers)", "",
                      sum_us * 1e3, "", "", sum_t * 1e3, "", "", sum_t / sum_us))
  return
end

-- --depthwise: the fallback config of the blocked task (NCHW[b]c data, as the network runs
-- it): median seconds per call
local function time_blocked(L)
  local task = autotvm.task.create(TEMPLATE, args_of(L), TARGET)
  if not task:set_blocked(true) then return nil end
  local s, targs, shapes = task:instantiate(-1)
  local f = tl.build(s, targs, "c")
  local a = tl.nd.random_uniform(shapes[1], {seed = 1})
  local w = tl.nd.random_uniform(shapes[2], {seed = 2})
  local o = tl.nd.empty(shapes[3])
  f(a, w, o)
  return median(f:time_evaluator({number = 1, repeats = REPEATS, min_repeat_ms = 20})(a, w, o).results)
end

math.randomseed(42)
tl.set_num_threads(THREADS)
print(string.format(TEMPLATE .. " on " .. (DW and "mobilenet depthwise" or "resnet-18") .. " layers, %d threads, %d random configs, median of %d",
                    THREADS, NSAMPLE, REPEATS))
local tt = torch_times()
print(string.format("%-22s %9s %7s %9s %7s %9s %7s %7s" .. (DW and " %9s %7s %7s" or ""), "layer (C,HW,O,K,S,P)",
                    "fallback", "GFLOPS", "best-of-N", "GFLOPS", "torch", "GFLOPS", "torch/best", "blocked",
                    "GFLOPS", "torch/blk"))
local sum_fb, sum_best, sum_t, sum_blk = 0, 0, 0, 0
for i, L in ipairs(LAYERS) do
  if not ONLY or ONLY == i then
    local task = autotvm.task.create(TEMPLATE, args_of(L), TARGET)
    local ok_ref, refn = pcall(reference, L)
    local tf = assert(time_config(task, -1, L, ok_ref and refn or nil))
    local best = tf
    local n = #task.config_space
    for _ = 1, NSAMPLE do
      local t = time_config(task, math.random(0, n - 1), L)
      if t and t < best then best = t end
    end
    local gf = task.flop / 1e9
    local tp = tt and tt[i]
    local tb = DW and time_blocked(L)
    print(string.format("%-22s %7.3fms %7.1f %7.3fms %7.1f %7s %7s %7s", table.concat(L, ","),
                        tf * 1e3, gf / tf, best * 1e3, gf / best,
                        tp and string.format("%.3fms", tp * 1e3) or "-",
                        tp and string.format("%.1f", gf / tp) or "-",
                        tp and string.format("%.2f", tp / best) or "-") ..
          (DW and string.format(" %7s %7s %7s", tb and string.format("%.3fms", tb * 1e3) or "-",
                                tb and string.format("%.1f", gf / tb) or "-",
                                tb and tp and string.format("%.2f", tp / tb) or "-") or ""))
    sum_fb, sum_best, sum_t, sum_blk = sum_fb + tf, sum_best + best, sum_t + (tp or 0), sum_blk + (tb or 0)
  end
end
print(string.format("%-22s %7.3fms %7s %7.3fms %7s %7.3fms %7s %7.2f", "sum (distinct layers)",
                    sum_fb * 1e3, "", sum_best * 1e3, "", sum_t * 1e3, "", sum_t / sum_best) ..
      (DW and sum_blk > 0 and string.format(" %7.3fms %7s %7.2f", sum_blk * 1e3, "", sum_t / sum_blk) or ""))
