-- Task extraction: AutoTVM tasks (tunelua.graph.extract) and auto-scheduler tasks
-- (tunelua.auto_scheduler) from the benchmark networks, against the task lists TVM gives
-- (specs/networks.md §9a-§9c, seeds 000 and 003): names, args as TVM prints them, shapes,
-- fused op chains and weights.
local networks = require "networks"
local extract = require "tunelua.graph.extract"
local strategy = require "tunelua.graph.strategy"
local auto_scheduler = require "tunelua.auto_scheduler"

local function eq(a, b, what)
  if a ~= b then error(string.format("%s: expected %s, got %s", what, tostring(b), tostring(a)), 2) end
end

-- ---- strategy: target parsing and serialization -------------------------------------

eq(strategy.parse_target("llvm -mcpu=core-avx2").family, "x86", "llvm family")
eq(strategy.parse_target("c").family, "x86", "c family")
eq(strategy.parse_target("opencl -device=mali").family, "mali", "mali family")
eq(strategy.parse_target("opencl").family, "opencl", "opencl family")
eq(strategy.args_str({ { "TENSOR", { 1, 64, 56, 56 }, "float32" }, { "TENSOR", { 64, 64, 3, 3 }, "float32" },
                       { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "float32" }),
   "(('TENSOR',(1,64,56,56),'float32'), ('TENSOR',(64,64,3,3),'float32'), (1,1), (1,1,1,1), (1,1), 'float32')",
   "args_str")
eq(strategy.args_json({ { "TENSOR", { 1, 512 }, "float32" }, strategy.null, "float32" }),
   '[["TENSOR", [1, 512], "float32"], null, "float32"]', "args_json")
eq(table.concat(strategy.pad4({ 1, 2 }), ","), "1,2,1,2", "pad4")

-- ---- AutoTVM: resnet-18 NCHW on mali (§9c) ---------------------------------------------

local mod, params = networks.get_network("resnet-18", { layout = "NCHW" })
local mali = "opencl -device=mali"
local tasks = extract.autotvm(mod, { target = mali, params = params, ops = { "nn.conv2d" } })
eq(#tasks, 16, "resnet-18 mali conv2d task count")
local nsp, nwino = 0, 0
local wino_shapes = {}
for _, t in ipairs(tasks) do
  if t.name == "conv2d_nchw_spatial_pack.mali" then nsp = nsp + 1
  elseif t.name == "conv2d_nchw_winograd.mali" then
    nwino = nwino + 1
    local d, k = t.args[1][2], t.args[2][2]
    wino_shapes[#wino_shapes + 1] = string.format("%dx%d@%d", k[2], k[1], d[3])
    eq(t.args[3][1], 1, "winograd stride")
    eq(k[3], 3, "winograd kernel")
  else error("unexpected task " .. tostring(t.name)) end
  eq(#t.args, 6, "mali conv2d arg count")
  eq(t.args[1][1], "TENSOR", "arg 1 is a tensor")
  eq(#t.args[4], 4, "padding has 4 values")
  eq(t.args[6], "float32", "out_dtype")
end
eq(nsp, 12, "spatial-pack tasks")
eq(nwino, 4, "winograd tasks")
eq(table.concat(wino_shapes, " "), "64x64@56 128x128@28 256x256@14 512x512@7", "winograd shapes")
-- the first task is the 7x7 stem, printed as TVM prints it
eq(tasks[1].name, "conv2d_nchw_spatial_pack.mali", "task 1 name")
eq(strategy.args_str(tasks[1].args),
   "(('TENSOR',(1,3,224,224),'float32'), ('TENSOR',(64,3,7,7),'float32'), (2,2), (3,3,3,3), (1,1), 'float32')",
   "task 1 args")
-- the 3x3 64->64 conv gives spatial-pack then winograd, one after the other
eq(strategy.args_str(tasks[2].args),
   "(('TENSOR',(1,64,56,56),'float32'), ('TENSOR',(64,64,3,3),'float32'), (1,1), (1,1,1,1), (1,1), 'float32')",
   "task 2 args")
eq(tasks[3].name, "conv2d_nchw_winograd.mali", "task 3 name")
-- the 12 spatial-pack shapes of §9c (distinct, no duplicates)
local seen = {}
for _, t in ipairs(tasks) do
  local k = t.name .. strategy.args_json(t.args)
  assert(not seen[k], "duplicate task " .. k)
  seen[k] = true
end

local tasks17 = extract.autotvm(mod, { target = mali, params = params, ops = { "nn.conv2d", "nn.dense" } })
eq(#tasks17, 17, "resnet-18 mali conv2d+dense task count")
local last = tasks17[17]
eq(last.name, "dense.mali", "17th task")
eq(strategy.args_str(last.args), "(('TENSOR',(1,512),'float32'), ('TENSOR',(1000,512),'float32'), None, 'float32')",
   "dense.mali args")

-- x86: one conv2d_NCHWc.x86 task per distinct conv (12), args with layouts, and a
-- conv2d_NCHWc_winograd.x86 task after each of the 4 distinct 3x3 stride-1 ones (16)
local x86 = extract.autotvm(mod, { target = "llvm -mcpu=core-avx2", params = params, ops = { "nn.conv2d" } })
eq(#x86, 16, "resnet-18 x86 conv2d task count")
eq(x86[1].name, "conv2d_NCHWc.x86", "x86 template")
do
  local n = { ["conv2d_NCHWc.x86"] = 0, ["conv2d_NCHWc_winograd.x86"] = 0 }
  for i, t in ipairs(x86) do
    n[t.name] = n[t.name] + 1
    if t.name == "conv2d_NCHWc_winograd.x86" then
      eq(x86[i - 1].name, "conv2d_NCHWc.x86", "the winograd task follows its direct one")
      eq(strategy.args_json(t.args), strategy.args_json(x86[i - 1].args), "winograd task args")
      eq(t.args[2][2][3] .. "x" .. t.args[2][2][4] .. " s" .. t.args[3][1], "3x3 s1", "winograd only for 3x3 stride 1")
    end
  end
  eq(n["conv2d_NCHWc.x86"] .. "+" .. n["conv2d_NCHWc_winograd.x86"], "12+4", "direct + winograd tasks")
end
eq(strategy.args_json(x86[1].args),
   '[["TENSOR", [1, 3, 224, 224], "float32"], ["TENSOR", [64, 3, 7, 7], "float32"], [2, 2], [3, 3, 3, 3], [1, 1], "NCHW", "NCHW", "float32"]',
   "x86 args as in TopHub logs")
local x86d = extract.autotvm(mod, { target = "llvm", params = params, ops = { "nn.dense" } })
eq(#x86d, 2, "x86 dense tasks")
eq(x86d[1].name .. " " .. x86d[2].name, "dense_nopack.x86 dense_pack.x86", "x86 dense templates")
-- generic opencl has no templates
eq(#extract.autotvm(mod, { target = "opencl", params = params, ops = { "nn.conv2d" } }), 0, "generic opencl")

-- nothing to tune is never silent: a named warning on stderr for the calls no template serves
local function warnings(f)
  local said, stderr = {}, io.stderr
  io.stderr = { write = function(_, ...) for _, x in ipairs({ ... }) do said[#said + 1] = x end end }
  local ok, r = pcall(f)
  io.stderr = stderr
  assert(ok, r)
  return table.concat(said), r
end
do
  local said, n = warnings(function()
    return #extract.autotvm(mod, { target = "opencl", params = params, ops = { "nn.conv2d" } })
  end)
  eq(n, 0, "generic opencl tasks")
  assert(said:match("^warning: opencl: no templates for this target %(nn%.conv2d%); 21 calls would run " ..
    "untuned"), said)
  said, n = warnings(function()
    return #extract.autotvm(mod, { target = "llvm -device=arm_cpu", params = params, ops = { "nn.conv2d" } })
  end)
  eq(n, 16, "arm_cpu tasks: 12 spatial pack + 4 winograd")
  eq(said, "", "arm_cpu: no warning")
  said = warnings(function() return extract.autotvm(mod, { target = mali, params = params, ops = { "nn.conv2d" } }) end)
  eq(said, "", "mali NCHW: no warning")
  said = warnings(function() return extract.autotvm(mod, { target = mali, params = params, ops = { "nn.batch_matmul" } }) end)
  assert(said:match("no calls of nn%.batch_matmul: nothing to tune"), said)
  local hmod, hparams = networks.get_network("resnet-18", { layout = "NHWC", image_size = 32 })
  said = warnings(function() return extract.autotvm(hmod, { target = mali, params = hparams, ops = { "nn.conv2d" } }) end)
  assert(said:match("warning: mali: no templates for nn%.conv2d in layout NHWC on this target"), said)
end

-- mobilenet NCHW on mali: 10 spatial-pack (stem + 9 pointwise) + 9 depthwise = 19 (§10)
local mmod, mparams = networks.get_network("mobilenet", { layout = "NCHW" })
local mt = extract.autotvm(mmod, { target = mali, params = mparams, ops = { "nn.conv2d" } })
local nm = { }
for _, t in ipairs(mt) do nm[t.name] = (nm[t.name] or 0) + 1 end
eq(#mt, 19, "mobilenet mali task count")
eq(nm["conv2d_nchw_spatial_pack.mali"], 10, "mobilenet spatial-pack")
eq(nm["depthwise_conv2d_nchw.mali"], 9, "mobilenet depthwise")

-- ---- auto-scheduler: mobilenet NHWC on mali (§9a, seed 003) ------------------------------

local function shapes_of(key)
  -- ["hash", [..], [..]] -> "[..] [..]"
  return (key:gsub('^%["[0-9a-f]+", ', ""):gsub("%]$", ""))
end

-- shapes with leading 1s dropped: constants expanded to full rank by layout inference
-- ([1, 1, 1, 64]) compare equal to the vectors ([64])
local function squeeze_shapes(s)
  s = s:gsub("%[1, ", "["):gsub("%[1, ", "["):gsub("%[1, ", "[")
  return s
end

local function multiset(tasks_, weights, loose)
  local r = {}
  for i, t in ipairs(tasks_) do
    local chain = t.desc[1]:gsub("^fused_", "")
    local sh = shapes_of(t.workload_key)
    if loose then sh = squeeze_shapes(sh) end
    r[#r + 1] = chain .. " " .. sh .. " w" .. weights[i]
  end
  table.sort(r)
  return r
end

local function check_multiset(got, want, what)
  table.sort(want)
  eq(#got, #want, what .. " count")
  for i = 1, #want do
    if got[i] ~= want[i] then
      error(string.format("%s: entry %d: expected\n  %s\ngot\n  %s", what, i, want[i], got[i]), 2)
    end
  end
end

local nmod, nparams = networks.get_network("mobilenet", { layout = "NHWC" })
local at, aw = auto_scheduler.extract_tasks(nmod, nparams, mali)
eq(#at, 22, "mobilenet NHWC mali auto-scheduler tasks")
local total = 0
for _, w in ipairs(aw) do total = total + w end
eq(total, 30, "mobilenet sum of weights")

local want = {
  "nn_conv2d_multiply_add_nn_relu [1, 224, 224, 3], [3, 3, 3, 32], [1, 112, 1, 1], [1, 112, 1, 1], [1, 112, 112, 32] w1",
  "nn_global_avg_pool2d [1, 7, 7, 1024], [1, 1, 1, 1024] w1",
  "nn_dense_add [1, 1024], [1000, 1024], [1000], [1, 1000] w1",
  "nn_softmax [1, 1000], [1, 1000] w1",
}
-- depthwise: (C, H, stride), 512@14 s1 five times
for _, d in ipairs({ { 32, 112, 1 }, { 64, 112, 2 }, { 128, 56, 1 }, { 128, 56, 2 }, { 256, 28, 1 },
                     { 256, 28, 2 }, { 512, 14, 1 }, { 512, 14, 2 }, { 1024, 7, 1 } }) do
  local c, h, s = d[1], d[2], d[3]
  local o = math.floor(h / s)
  want[#want + 1] = string.format(
    "nn_conv2d_add_nn_relu [1, %d, %d, %d], [3, 3, %d, 1], [1, 1, 1, %d], [1, %d, %d, %d] w%d",
    h, h, c, c, c, o, o, c, (c == 512 and s == 1) and 5 or 1)
end
for _, p in ipairs({ { 32, 64, 112 }, { 64, 128, 56 }, { 128, 128, 56 }, { 128, 256, 28 }, { 256, 256, 28 },
                     { 256, 512, 14 }, { 512, 512, 14 }, { 512, 1024, 7 }, { 1024, 1024, 7 } }) do
  local ci, co, h = p[1], p[2], p[3]
  want[#want + 1] = string.format(
    "nn_conv2d_add_nn_relu [1, %d, %d, %d], [1, 1, %d, %d], [1, 1, 1, %d], [1, %d, %d, %d] w%d",
    h, h, ci, ci, co, co, h, h, co, (ci == 512 and co == 512) and 5 or 1)
end
check_multiset(multiset(at, aw), want, "mobilenet tasks")

-- printing a task shows its compute DAG (seed 003's print(task.compute_dag))
local softmax
for _, t in ipairs(at) do if t.desc[1] == "fused_nn_softmax" then softmax = t end end
local text = tostring(softmax.compute_dag)
assert(text:find("= PLACEHOLDER [1, 1000]", 1, true), text)
assert(text:find("T_softmax_maxelem", 1, true) and text:find("T_softmax_norm", 1, true), text)
eq(tostring(softmax), text, "tostring(task)")
local ntext = select(2, text:gsub("\n", "\n"))
assert(ntext >= 4, "softmax DAG has its 5 ops:\n" .. text)
-- 1x1 convs share one structure hash, stride-1 depthwise another (§8)
local hashes = {}
for _, t in ipairs(at) do
  local h = t.workload_key:match('^%["([0-9a-f]+)"')
  hashes[h] = true
end
assert(next(hashes), "workload keys start with a hash")

-- ---- auto-scheduler: resnet-18 NHWC on llvm (§9b) ---------------------------------------

local rmod, rparams = networks.get_network("resnet-18", { layout = "NHWC" })
-- the direct convs (winograd = "never"); the Winograd tasks of the default ("auto") below
local rt, rw = auto_scheduler.extract_tasks(rmod, rparams, "llvm", { winograd = "never" })
eq(#rt, 24, "resnet-18 NHWC llvm tasks")
total = 0
for _, w in ipairs(rw) do total = total + w end
eq(total, 25, "resnet-18 sum of weights")
local rwant = {
  "nn_conv2d_add_nn_relu [1, 224, 224, 3], [7, 7, 3, 64], [64], [1, 112, 112, 64] w1",
  "nn_max_pool2d_add_nn_relu [1, 112, 112, 64], [1, 1, 1, 64], [1, 56, 56, 64] w1",
  "nn_conv2d_add_nn_relu [1, 56, 56, 64], [3, 3, 64, 64], [64], [1, 56, 56, 64] w2",
  "nn_conv2d [1, 56, 56, 64], [1, 1, 64, 64], [1, 56, 56, 64] w1",
  "nn_conv2d_add [1, 56, 56, 64], [3, 3, 64, 64], [1, 56, 56, 64], [1, 56, 56, 64] w1",
  "nn_conv2d_add_add_nn_relu [1, 56, 56, 64], [3, 3, 64, 64], [1, 56, 56, 64], [1, 1, 1, 64], [1, 56, 56, 64] w1",
  "nn_global_avg_pool2d [1, 7, 7, 512], [1, 1, 1, 512] w1",
  -- on CPU targets the dense takes its constant weight transposed, [K, N] (Mali above: [N, K])
  "nn_dense_add [1, 512], [512, 1000], [1000], [1, 1000] w1",
  "nn_softmax [1, 1000], [1, 1000] w1",
}
for _, s in ipairs({ { 64, 128, 56 }, { 128, 256, 28 }, { 256, 512, 14 } }) do
  local ci, co, h = s[1], s[2], s[3]
  local o = math.floor(h / 2)
  rwant[#rwant + 1] = string.format("nn_conv2d_add_nn_relu [1, %d, %d, %d], [3, 3, %d, %d], [%d], [1, %d, %d, %d] w1",
                                    h, h, ci, ci, co, co, o, o, co)
  rwant[#rwant + 1] = string.format("nn_conv2d [1, %d, %d, %d], [1, 1, %d, %d], [1, %d, %d, %d] w1",
                                    h, h, ci, ci, co, o, o, co)
  rwant[#rwant + 1] = string.format("nn_conv2d_add [1, %d, %d, %d], [3, 3, %d, %d], [1, %d, %d, %d], [1, %d, %d, %d] w1",
                                    o, o, co, co, co, o, o, co, o, o, co)
  rwant[#rwant + 1] = string.format("nn_conv2d_add_nn_relu [1, %d, %d, %d], [3, 3, %d, %d], [%d], [1, %d, %d, %d] w1",
                                    o, o, co, co, co, co, o, o, co)
  if co == 512 then
    rwant[#rwant + 1] = "nn_conv2d_add_multiply_add_nn_relu [1, 7, 7, 512], [3, 3, 512, 512], [1, 7, 7, 512], [512], [512], [1, 7, 7, 512] w1"
  else
    rwant[#rwant + 1] = string.format(
      "nn_conv2d_add_add_nn_relu [1, %d, %d, %d], [3, 3, %d, %d], [1, %d, %d, %d], [1, 1, 1, %d], [1, %d, %d, %d] w1",
      o, o, co, co, co, o, o, co, co, o, o, co)
  end
end
for i, w in ipairs(rwant) do rwant[i] = squeeze_shapes(w) end
check_multiset(multiset(rt, rw, true), rwant, "resnet-18 NHWC tasks")
for _, t in ipairs(rt) do
  if t.desc[1]:find("dense", 1, true) then
    local text = tostring(t.compute_dag)
    assert(text:find("weight_kn = PLACEHOLDER [512, 1000]", 1, true) and text:find("T_matmul", 1, true),
           "the llvm dense task is a matmul on the transposed weight:\n" .. text)
  end
end

-- "auto" (the default): the same tasks, where a 3x3 stride-1 conv of at least 32 channels on
-- an input of at least 14x14 takes the transformed weight [a, a, C, C] (F(4x4): a = 6 from
-- 28x28 outputs up, F(2x2): a = 4 below) instead of [3, 3, C, C]
local wt, ww = auto_scheduler.extract_tasks(rmod, rparams, "llvm")
local wwant, nwg = {}, 0
for i, w in ipairs(rwant) do
  local h, c = w:match("^%S+ %[(%d+), %d+, (%d+)%], %[3, 3, %d+, %d+%]")
  local same = c and w:find(string.format("[3, 3, %s, %s]", c, c), 1, true) and
               w:find(string.format("], [%s, %s, %s] w", h, h, c), 1, true)
  if same and tonumber(c) >= 32 and tonumber(h) >= 14 then
    local a = tonumber(h) >= 28 and 6 or 4
    w = w:gsub("%[3, 3, " .. c .. ", " .. c .. "%]", string.format("[%d, %d, %s, %s]", a, a, c, c))
    nwg = nwg + 1
  end
  wwant[i] = w
end
eq(nwg, 9, "resnet-18 NHWC Winograd tasks")
check_multiset(multiset(wt, ww, true), wwant, "resnet-18 NHWC tasks with Winograd")

-- the transposed dense weight: every element in place, and a weight it cannot take named
do
  local ffi = require "ffi"
  local nd = require "tunelua.nd"
  local weights = require "tunelua.auto_scheduler.weights"
  local w = nd.random_uniform({ 7, 5 }, { low = -1, high = 1, seed = 9 })
  local t = weights.dense_weight(w)
  eq(table.concat(t:shape(), "x"), "5x7", "transposed weight shape")
  local pw, pt = ffi.cast("float *", w:data_ptr()), ffi.cast("float *", t:data_ptr())
  for n = 0, 6 do
    for k = 0, 4 do
      assert(pt[k * 7 + n] == pw[n * 5 + k], string.format("transposed weight [%d, %d]", k, n))
    end
  end
  local ok, err = pcall(weights.dense_weight, nd.zeros({ 2, 3, 4 }))
  assert(not ok and tostring(err):find("expected a float32 weight [N, K], got float32 [2, 3, 4]", 1, true),
         tostring(err))
  assert(weights.hook({}, "never", false) == nil, "no rewrite for a GPU target without Winograd")
end

print("test_extract: ok")
