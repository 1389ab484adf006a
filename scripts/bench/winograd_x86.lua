-- Winograd on x86 against the direct conv and PyTorch, per 3x3 stride-1 layer of resnet-18
-- and vgg-16 (batch 1, fp32), as the network runs each layer: a one-conv graph built by
-- executor.build (AlterOpLayout's blocked conv; an identity 1x1 conv before it so its data
-- arrives blocked, as inside a network; only the 3x3 step is timed), checked against the reference conv, the conv step timed
-- by the executor's profile (median of --repeat profiles). Columns: the direct conv2d_NCHWc
-- (fallback configs, or TopHub's with --tophub), conv2d_NCHWc_winograd (its fallback config:
-- the tile size by shape, or each of --tiles, or the best of a --tune N trial xgb run), and
-- PyTorch's conv2d on the same layer in the same run (/usr/bin/python3, or TUNELUA_PYTHON;
-- torch.set_num_threads(threads)). GFLOPS are effective: the direct conv's FLOPs / time.
--
--   taskset -c 0,1 tunelua scripts/bench/winograd_x86.lua [--repeat 15] [--threads 2]
--       [--layers resnet|vgg|all] [--tiles 2,4,6] [--tune N] [--tophub] [--target "llvm ..."]
--
-- --networks: whole resnet-18 and vgg-16 (224x224, TopHub configs for the direct convs) built
-- with winograd = "never" and "auto" (the rule), GraphModule:benchmark medians of --repeat
-- runs, against PyTorch (scripts/bench/torch_peer.py) and, with --ort, ONNX Runtime on the
-- same architectures in the same run.
local ffi = require "ffi"
local tl = require "tunelua"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local autotvm = require "tunelua.autotvm"

local REPEAT, THREADS, WHICH, TILES, TUNE, TOPHUB = 15, tonumber(os.getenv("TUNELUA_NUM_THREADS") or "2"), "all",
  nil, 0, false
local TARGET = "llvm"
local NETWORKS, ORT = false, false
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--repeat" then REPEAT = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--threads" then THREADS = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--layers" then WHICH = arg[i + 1]; i = i + 1
  elseif a == "--tiles" then
    TILES = {}
    for t in arg[i + 1]:gmatch("%d+") do TILES[#TILES + 1] = tonumber(t) end
    i = i + 1
  elseif a == "--tune" then TUNE = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--tophub" then TOPHUB = true
  elseif a == "--networks" then NETWORKS = true
  elseif a == "--ort" then ORT = true
  elseif a == "--target" then TARGET = arg[i + 1]; i = i + 1
  else
    error("winograd_x86: unknown option " .. a .. " (--repeat, --threads, --layers, --tiles, --tune, --tophub, " ..
          "--target, --networks, --ort)", 0)
  end
  i = i + 1
end
assert(REPEAT and REPEAT >= 1 and THREADS and THREADS >= 1, "winograd_x86: --repeat and --threads take positive numbers")
if WHICH ~= "resnet" and WHICH ~= "vgg" and WHICH ~= "all" then error("winograd_x86: --layers resnet|vgg|all", 0) end
local PYTHON = os.getenv("TUNELUA_PYTHON") or "/usr/bin/python3"

-- (C, HW, K): the distinct 3x3 stride-1 pad-1 layers whose data is blocked in the network
local LAYERS = {}
if WHICH ~= "vgg" then
  for _, L in ipairs({ { 64, 56, 64 }, { 128, 28, 128 }, { 256, 14, 256 }, { 512, 7, 512 } }) do
    L.net = "resnet-18"; LAYERS[#LAYERS + 1] = L
  end
end
if WHICH ~= "resnet" then
  for _, L in ipairs({ { 64, 224, 64 }, { 64, 112, 128 }, { 128, 112, 128 }, { 128, 56, 256 }, { 256, 56, 256 },
                       { 256, 28, 512 }, { 512, 28, 512 }, { 512, 14, 512 } }) do
    L.net = "vgg-16"; LAYERS[#LAYERS + 1] = L
  end
end

local median = require("tunelua.stats").median

-- PyTorch: one subprocess timing every layer (3x3, stride 1, padding 1)
local torch_conv = dofile((debug.getinfo(1, "S").source:sub(2):gsub("winograd_x86%.lua$", "torch_conv_cpu.lua")))
local function torch_times()
  local layers = {}
  for k, L in ipairs(LAYERS) do layers[k] = { L[1], L[2], L[3], 3, 1, 1 } end
  return torch_conv(PYTHON, THREADS, REPEAT, layers)
end

local ref_f = {}
local function reference(C, H, K)
  local key = C .. "," .. H .. "," .. K
  if not ref_f[key] then
    local te, topi = tl.te, tl.topi
    local A = te.placeholder({ 1, C, H, H }, "float32", "A")
    local W = te.placeholder({ K, C, 3, 3 }, "float32", "W")
    local O = topi.nn.conv2d(A, W, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    ref_f[key] = tl.build(topi.default_schedule({ O }, "cpu"), { A, W, O }, "llvm")
  end
  return ref_f[key]
end

-- A dispatch context that gives the Winograd task of a layer config index (and nothing else).
local function force_context(index_of)
  return { query_task = function(_, task)
    if task.name ~= "conv2d_NCHWc_winograd.x86" then return nil end
    return index_of(task)
  end, query = function() return nil end }
end

local function tile_index(m)
  return function(task)
    local sp = task.config_space
    local d = sp:fallback_digits()
    for k, kb in ipairs(sp:knobs()) do
      if kb.name == "tile_size" then
        for j = 0, kb.dim - 1 do if sp:entity_value(k, j) == m then d[k] = j end end
      end
    end
    return sp:knob2point(d)
  end
end

-- the identity as a 1x1 conv's weight [C, C, 1, 1]
local identities = {}
local function identity(C)
  if not identities[C] then
    local a = tl.nd.empty({ C, C, 1, 1 })
    local p = ffi.cast("float *", a:data_ptr())
    for i = 0, C * C - 1 do p[i] = 0 end
    for c = 0, C - 1 do p[c * C + c] = 1 end
    identities[C] = a
  end
  return identities[C]
end

-- the conv step's median seconds of layer L built with opts; checked against the reference
local function run_layer(L, opts, a, w, ref)
  local C, H, K = L[1], L[2], L[3]
  local dv = relay.var("data", { shape = { 1, C, H, H } })
  local iv = relay.var("id", { shape = { C, C, 1, 1 } })
  local wv = relay.var("w", { shape = { K, C, 3, 3 } })
  local x = relay.nn.conv2d(dv, iv, { channels = C, kernel_size = { 1, 1 } })
  local y = relay.nn.conv2d(x, wv, { padding = { 1, 1, 1, 1 }, channels = K, kernel_size = { 3, 3 } })
  local mod = relay.Module(relay.Function({ dv, iv, wv }, y))
  local o = { target = TARGET, params = { w = w, id = identity(C) }, quiet = true, tophub = TOPHUB }
  for k, v in pairs(opts) do o[k] = v end
  local lib = executor.build(mod, o)
  local m = executor.GraphModule(lib)
  m:set_input("data", a)
  m:run()
  -- the reference (an identity 1x1 conv first); tolerance as tests/lua/test_winograd_x86.lua
  tl.testing.assert_allclose(m:get_output(0), ref, { rtol = 1e-3, atol = 1.2e-7 * 9 * C * 256 })
  local step, name
  for si, st in ipairs(lib.steps) do
    if st.name:find("conv2d", 1, true) then step, name = si, st.kernel and st.kernel.key or st.name end
  end
  assert(step, "winograd_x86: no conv2d step")
  local ts = {}
  local flop = 2 * K * C * 9 * H * H
  for _ = 1, REPEAT do
    local prof = m:profile(math.max(1, math.floor(2e8 / flop)))
    ts[#ts + 1] = prof[step].seconds
  end
  return median(ts), name
end

local function tuned_history(L)
  local C, H, K = L[1], L[2], L[3]
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { K, C, 3, 3 }, "float32" }, { 1, 1 },
                 { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create("conv2d_NCHWc_winograd.x86", args, TARGET)
  task:set_blocked(true)
  local log = os.tmpname()
  local tuner = autotvm.tuner.XGBTuner(task)
  tuner:tune({ n_trial = TUNE, early_stopping = TUNE,
               measure_option = autotvm.measure_option({ builder = autotvm.LocalBuilder(),
                 runner = autotvm.LocalRunner({ number = 3, ["repeat"] = 3 }) }),
               callbacks = { autotvm.callback.log_to_file(log) } })
  return autotvm.apply_history_best(log), log
end

tl.set_num_threads(THREADS)

if NETWORKS then
  local networks = require "networks"
  local src = debug.getinfo(1, "S").source:sub(2)
  local dir = src:match("^(.*)/[^/]*$") or "."
  local function peer(net, runtime)
    if os.getenv("TUNELUA_NO_PEER") then return nil end
    local p = io.popen(string.format("%s %s/torch_peer.py --network %s --threads %d --repeat %d --runtime %s 2>&1",
                                     PYTHON, dir, net, THREADS, REPEAT, runtime))
    local out = p:read("*a"); p:close()
    return tonumber(out:match('"median_ms": ([%d%.e%-]+)') or "")
  end
  print(string.format("whole networks, batch 1, fp32, 224x224, %d threads, target %s, TopHub configs, median of " ..
                      "%d runs (ms); peers in the same run", THREADS, TARGET, REPEAT))
  print(string.format("%-10s %10s %10s %9s %9s %9s %8s %8s", "network", "direct", "winograd", "x direct", "PyTorch",
                      "x torch", "ORT", "x ORT"))
  for _, net in ipairs({ "resnet-18", "vgg-16" }) do
    local mod, params, ishape = networks.get_network(net, { batch_size = 1 })
    local x = tl.nd.random_uniform(ishape, { seed = 1 })
    local ms, outs = {}, {}
    for k, mode in ipairs({ "never", "auto" }) do
      local lib = executor.build(mod, { target = TARGET, params = params, quiet = true, winograd = mode })
      local m = executor.GraphModule(lib)
      m:set_input("data", x)
      m:run()
      outs[k] = m:get_output(0)
      local r = m:benchmark({ number = 1, ["repeat"] = REPEAT, quiet = true })
      ms[k] = (r.median or r.median_ms / 1e3) * 1e3
    end
    tl.testing.assert_allclose(outs[2], outs[1], { rtol = 1e-3, atol = 1e-5 })
    local tp = peer(net, "torch")
    local to = ORT and peer(net, "onnxruntime") or nil
    print(string.format("%-10s %8.2fms %8.2fms %9.2f %9s %9s %8s %8s", net, ms[1], ms[2], ms[1] / ms[2],
                        tp and string.format("%.2fms", tp) or "-", tp and string.format("%.2f", tp / ms[2]) or "-",
                        to and string.format("%.2fms", to) or "-", to and string.format("%.2f", to / ms[2]) or "-"))
    io.stdout:flush()
  end
  return
end

local tt = torch_times()
local wcols = TILES or { "fb" }
print(string.format("3x3 stride-1 layers, batch 1, fp32, %d threads, target %s, median of %d profiles; direct: %s " ..
                    "configs; winograd: %s; PyTorch conv2d in the same run%s", THREADS, TARGET, REPEAT,
                    TOPHUB and "TopHub" or "fallback",
                    TUNE > 0 and ("best of " .. TUNE .. " xgb trials") or TILES and "tile sizes forced" or
                    "fallback config", tt and "" or " (PyTorch: not available)"))
local hdr = string.format("%-10s %-14s %9s %7s", "network", "layer (C,HW,K)", "direct", "GFLOPS")
for _, t in ipairs(wcols) do hdr = hdr .. string.format(" %12s %7s %6s", "winograd" .. (t ~= "fb" and ("F" .. t) or ""), "GFLOPS", "x dir") end
hdr = hdr .. string.format(" %9s %7s %8s", "torch", "GFLOPS", "x torch")
print(hdr)
local sum_d, sum_w, sum_t = 0, 0, 0
for k, L in ipairs(LAYERS) do
  local C, H, K = L[1], L[2], L[3]
  local flop = 2 * K * C * 9 * H * H
  local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 1 })
  local w = tl.nd.random_uniform({ K, C, 3, 3 }, { seed = 2 })
  local ref = tl.nd.empty({ 1, K, H, H })
  reference(C, H, K)(a, w, ref)
  local td = run_layer(L, { winograd = "never" }, a, w, ref)
  local line = string.format("%-10s %-14s %7.3fms %7.1f", L.net, string.format("%d,%d,%d", C, H, K), td * 1e3,
                             flop / td / 1e9)
  local best = math.huge
  for _, t in ipairs(wcols) do
    local opts = { winograd = "always" }
    local log
    if TUNE > 0 then opts.history, log = tuned_history(L)
    elseif t ~= "fb" then opts.history = force_context(tile_index(t)) end
    local tw, name = run_layer(L, opts, a, w, ref)
    if log then os.remove(log) end
    assert(name:find("winograd", 1, true), "winograd_x86: the layer did not run as winograd: " .. name)
    best = math.min(best, tw)
    line = line .. string.format(" %10.3fms %7.1f %6.2f", tw * 1e3, flop / tw / 1e9, td / tw)
  end
  local tp = tt and tt[k]
  line = line .. string.format(" %9s %7s %8s", tp and string.format("%.3fms", tp * 1e3) or "-",
                               tp and string.format("%.1f", flop / tp / 1e9) or "-",
                               tp and string.format("%.2f", tp / best) or "-")
  print(line)
  io.stdout:flush()
  sum_d, sum_w, sum_t = sum_d + td, sum_w + best, sum_t + (tp or 0)
end
print(string.format("%-10s %-14s %7.3fms %7s %10.3fms (best winograd column) x dir %.2f; torch %.3fms, x torch %s",
                    "sum", "", sum_d * 1e3, "", sum_w * 1e3, sum_d / sum_w, sum_t * 1e3,
                    tt and string.format("%.2f", sum_t / sum_w) or "-"))
