-- Benchmark: the conv2d layers of resnet-18 (batch 1, fp32) with the x86
-- AutoTVM template conv2d_NCHWc.x86 on the host CPU, against PyTorch's conv2d
-- for the same layer measured in the same run (a /usr/bin/python3 subprocess,
-- torch.set_num_threads(<threads>); TUNELUA_PYTHON names another interpreter). Per layer: the fallback config, the best of
-- a random sample of N configs, PyTorch, and the ratios (PyTorch time / ours).
--
--   tunelua scripts/bench/conv_x86.lua [N=16] [repeats=5] [layer]
--
-- --depthwise: mobilenet's 9 depthwise layers with depthwise_conv2d_NCHWc.x86
-- against torch conv2d(groups=C).
-- --mobilenet: end to end, mobilenet batch 1 fp32 untuned (fallback configs,
-- default schedules) through relay.build + GraphModule:benchmark, against
-- scripts/bench/torch_peer.py --network mobilenet in the same run
-- (TUNELUA_NO_PEER=1: without it; TUNELUA_PROFILE=1: ms per kind of step,
-- TUNELUA_PROFILE=steps: also every step).
--
--   tunelua scripts/bench/conv_x86.lua --depthwise [N=16] [repeats=5] [layer]
--   tunelua scripts/bench/conv_x86.lua --mobilenet [repeats=30]
local tl = require "tunelua"
local autotvm = require "tunelua.autotvm"

local MODE = "conv"
if arg[1] == "--depthwise" or arg[1] == "--mobilenet" then
  MODE = arg[1]:sub(3)
  table.remove(arg, 1)
end
local DW = MODE == "depthwise"
local NSAMPLE = tonumber(arg[1]) or 16
local REPEATS = tonumber(arg[2]) or 5
local ONLY = tonumber(arg[3])
local TARGET = "llvm"   -- the host CPU's vectors and registers
local THREADS = tonumber(os.getenv("TUNELUA_NUM_THREADS") or "") or tl.num_cores()
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"

-- resnet-18's distinct conv2d workloads: C, H(=W), O, K, stride, pad
local LAYERS = {
  {3, 224, 64, 7, 2, 3}, {64, 56, 64, 3, 1, 1}, {64, 56, 128, 3, 2, 1}, {64, 56, 128, 1, 2, 0},
  {128, 28, 128, 3, 1, 1}, {128, 28, 256, 3, 2, 1}, {128, 28, 256, 1, 2, 0},
  {256, 14, 256, 3, 1, 1}, {256, 14, 512, 3, 2, 1}, {256, 14, 512, 1, 2, 0},
  {512, 7, 512, 3, 1, 1},
}
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
local function torch_times()
  local specs = {}
  for i, L in ipairs(LAYERS) do specs[i] = "(" .. table.concat(L, ",") .. ")" end
  local py = string.format([[
import torch, time, statistics, json
torch.set_num_threads(%d)
out = []
with torch.no_grad():
    for (C, H, O, K, S, P) in [%s]:
        g = C if %s else 1
        x = torch.rand(1, C, H, H); w = torch.rand(O, C // g, K, K)
        f = lambda: torch.nn.functional.conv2d(x, w, None, S, P, 1, g)
        for _ in range(3): f()
        ts = []
        for _ in range(%d):
            n = 0; t0 = time.perf_counter()
            while True:
                f(); n += 1
                if time.perf_counter() - t0 > 0.02: break
            ts.append((time.perf_counter() - t0) / n)
        out.append(statistics.median(ts))
print(json.dumps(out))
]], THREADS, table.concat(specs, ","), DW and "True" or "False", REPEATS)
  local path = os.tmpname()
  local fh = assert(io.open(path, "w")); fh:write(py); fh:close()
  local p = io.popen(PYTHON .. " " .. path .. " 2>/dev/null")
  local txt = p:read("*a"); p:close(); os.remove(path)
  local t = {}
  for v in txt:gmatch("[%d%.eE%-]+") do t[#t + 1] = tonumber(v) end
  return #t == #LAYERS and t or nil
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

math.randomseed(42)
print(string.format(TEMPLATE .. " on " .. (DW and "mobilenet depthwise" or "resnet-18") .. " layers, %d threads, %d random configs, median of %d",
                    THREADS, NSAMPLE, REPEATS))
local tt = torch_times()
print(string.format("%-22s %9s %7s %9s %7s %9s %7s %7s", "layer (C,HW,O,K,S,P)", "fallback", "GFLOPS",
                    "best-of-N", "GFLOPS", "torch", "GFLOPS", "torch/best"))
local sum_fb, sum_best, sum_t = 0, 0, 0
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
    print(string.format("%-22s %7.3fms %7.1f %7.3fms %7.1f %7s %7s %7s", table.concat(L, ","),
                        tf * 1e3, gf / tf, best * 1e3, gf / best,
                        tp and string.format("%.3fms", tp * 1e3) or "-",
                        tp and string.format("%.1f", gf / tp) or "-",
                        tp and string.format("%.2f", tp / best) or "-"))
    sum_fb, sum_best, sum_t = sum_fb + tf, sum_best + best, sum_t + (tp or 0)
  end
end
print(string.format("%-22s %7.3fms %7s %7.3fms %7s %7.3fms %7s %7.2f", "sum (distinct layers)",
                    sum_fb * 1e3, "", sum_best * 1e3, "", sum_t * 1e3, "", sum_t / sum_best))
