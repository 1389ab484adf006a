-- topi.default_schedule: every operator, and chains of operators in one DAG
-- (conv2d -> bias_add -> relu, dense -> add, pool -> flatten, ...), built
-- with the default CPU schedule on shapes large enough for the parallel and
-- vectorized paths, must give the numbers of the empty schedule (which
-- test_topi.lua checks against naive references). Also checks the shape of
-- the default schedules (inlined producers, the anchor computed at its
-- consumer, parallel and vectorized loops) and the target errors.
local tl = require "tunelua"
local te, nd, topi, testing = tl.te, tl.nd, tl.topi, tl.testing
local schedule = require "tunelua.schedule"
local ffi = require "ffi"
local C = tl.core.C
local create_schedule = te.create_schedule or schedule.create

local seed = 500
local function rand(shape, dtype)
  seed = seed + 1
  if dtype and dtype ~= "float32" then
    return nd.random_uniform(shape, { low = -8, high = 8, dtype = dtype, seed = seed })
  end
  return nd.random_uniform(shape, { low = -1, high = 1, seed = seed })
end

local uid = 0
local function ph(shape, dtype)
  uid = uid + 1
  return te.placeholder(shape, dtype or "float32", "p" .. uid)
end

local build_run = require("tests.lua.lib.topi_check").build_run

local count = 0
-- default schedule vs empty schedule on the same inputs
local function compare(name, ins, outs, tol)
  local arrays = {}
  for i, t in ipairs(ins) do arrays[i] = rand(t.shape, t.dtype) end
  local sd = topi.default_schedule(outs, "llvm")
  local got = build_run(sd, ins, outs, arrays)
  local want = build_run(create_schedule(outs), ins, outs, arrays)
  for i = 1, #outs do
    local ok, err = pcall(testing.assert_allclose, got[i], want[i], { rtol = tol or 1e-5, atol = tol or 1e-5 })
    if not ok then error(name .. " (output " .. i .. "): " .. tostring(err) .. "\n" .. tostring(sd), 2) end
  end
  count = count + 1
  return sd
end

-- stage facts of a default schedule
local function ann_of(s, name)
  local h = s.handle
  local id = C.tl_sched_stage_find(h, name)
  assert(id >= 0, "no stage " .. name)
  local anns = {}
  for i = 0, C.tl_sched_num_iters(h, id) - 1 do anns[#anns + 1] = C.tl_sched_iter_annotation(h, id, i) end
  return anns, C.tl_sched_stage_compute_at(h, id, nil, nil)
end
local function has(list, v) for _, x in ipairs(list) do if x == v then return true end end return false end

-- ---- the fused conv2d + bias_add + relu group -----------------------------------------------

do
  local X, W, B = ph({ 1, 16, 20, 24 }), ph({ 24, 16, 3, 3 }), ph({ 24 })
  local conv = topi.nn.conv2d(X, W, { padding = { 1, 1, 1, 1 } })
  local Y = topi.nn.relu(topi.nn.bias_add(conv, B))
  local s = compare("conv2d+bias+relu", { X, W, B }, { Y })
  local anns = ann_of(s, Y.op.name)
  assert(anns[1] == C.TL_ANN_PARALLEL, "the fused outer loop of the output is parallel")
  assert(anns[#anns] == C.TL_ANN_VECTORIZE, "the innermost loop of the output is vectorized")
  local canns, ca = ann_of(s, conv.op.name)
  assert(ca == C.TL_CA_ITER, "conv2d is computed at the relu")
  assert(canns[#canns] == C.TL_ANN_VECTORIZE)
  local _, bca = ann_of(s, "T_add")
  assert(bca == C.TL_CA_INLINED, "bias_add is inlined")
  -- NHWC, strided, grouped, odd channels
  local Xn, Wn = ph({ 2, 17, 15, 12 }), ph({ 3, 3, 4, 18 })
  local Bn = ph({ 18 })
  local Yn = topi.nn.relu(topi.add(topi.nn.conv2d(Xn, Wn, { layout = "NHWC", strides = { 2, 1 },
                                                        padding = { 1, 0, 2, 1 }, groups = 3 }), Bn))
  compare("conv2d NHWC grouped + add + relu", { Xn, Wn, Bn }, { Yn })
end

-- ---- pools read their input's borders in NCHW[x]c: the pad is inlined ---------------------------

do
  -- resnet's 3x3/2 max pool and inception's 3x3/1 average pool (borders not counted) on blocked
  -- data: the pad stage is inlined (its bounds test sits outside the 16 lanes of the block)
  local X = ph({ 1, 2, 23, 21, 16 })
  local mp = topi.nn.max_pool2d(X, { kernel = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1, 1, 1 },
                                     layout = "NCHW16c" })
  local s = compare("max_pool2d NCHW16c", { X }, { mp })
  local _, ca = ann_of(s, "pad_temp")
  assert(ca == C.TL_CA_INLINED, "the NCHW16c max pool's pad is inlined")
  local anns = ann_of(s, mp.op.name)
  assert(anns[#anns] == C.TL_ANN_VECTORIZE, "the channel block of the pool is vectorized")
  local X2 = ph({ 1, 3, 17, 17, 16 })
  local ap = topi.nn.relu(topi.nn.avg_pool2d(X2, { kernel = { 3, 3 }, strides = { 1, 1 }, padding = { 1, 1, 1, 1 },
                                                   layout = "NCHW16c" }))
  local s2 = compare("avg_pool2d NCHW16c + relu", { X2 }, { ap })
  local _, ca2 = ann_of(s2, "pad_temp")
  assert(ca2 == C.TL_CA_INLINED, "the NCHW16c average pool's pad is inlined")
  -- NCHW pads its innermost axis: the pad stays a stage of its own
  local X3 = ph({ 1, 8, 23, 21 })
  local s3 = compare("max_pool2d NCHW", { X3 }, { topi.nn.max_pool2d(X3, { kernel = { 3, 3 }, strides = { 2, 2 },
                                                                            padding = { 1, 1, 1, 1 } }) })
  local _, ca3 = ann_of(s3, "pad_temp")
  assert(ca3 == C.TL_CA_ROOT, "the NCHW max pool's pad stays a root stage")
end

-- ---- every operator ---------------------------------------------------------------------------

local cases = {
  { "conv2d 1x1 stride 2", function()
      local X, W = ph({ 2, 7, 17, 16 }), ph({ 9, 7, 1, 1 })
      return { X, W }, { topi.nn.conv2d(X, W, { strides = { 2, 2 } }) } end },
  { "conv2d dilated, padding > border", function()
      local X, W = ph({ 1, 5, 9, 8 }), ph({ 6, 5, 3, 3 })
      return { X, W }, { topi.nn.conv2d(X, W, { dilation = { 2, 2 }, padding = { 4, 3, 4, 5 } }) } end },
  { "conv2d int8 -> int32", function()
      local X, W = ph({ 1, 8, 12, 16 }, "int8"), ph({ 8, 8, 3, 3 }, "int8")
      return { X, W }, { topi.nn.conv2d(X, W, { padding = { 1, 1, 1, 1 }, out_dtype = "int32" }) } end },
  { "depthwise NCHW multiplier 2 + relu", function()
      local X, W = ph({ 1, 6, 18, 16 }), ph({ 6, 2, 3, 3 })
      return { X, W }, { topi.nn.relu(topi.nn.depthwise_conv2d(X, W, { padding = { 1, 1, 1, 1 } })) } end },
  { "depthwise NHWC stride 2", function()
      local X, W = ph({ 2, 15, 16, 8 }), ph({ 3, 3, 8, 1 })
      return { X, W }, { topi.nn.depthwise_conv2d(X, W, { layout = "NHWC", strides = { 2, 2 }, padding = { 1, 1, 1, 1 } }) } end },
  { "conv2d_transpose + bias", function()
      local X, W, B = ph({ 1, 8, 7, 8 }), ph({ 8, 5, 3, 3 }), ph({ 5 })
      return { X, W, B }, { topi.nn.bias_add(topi.nn.conv2d_transpose(X, W, { strides = { 2, 2 }, padding = { 1, 1, 1, 1 },
                                                                             output_padding = { 1, 1 } }), B) } end },
  { "conv2d_transpose NHWC (HWOI) + relu", function()
      local X, W = ph({ 1, 9, 8, 16 }), ph({ 3, 3, 8, 16 })
      return { X, W }, { topi.nn.relu(topi.nn.conv2d_transpose_nhwc(X, W, { strides = { 2, 2 }, padding = { 1, 1, 1, 1 } })) } end },
  { "conv3d_transpose NCDHW", function()
      local X, W = ph({ 1, 4, 4, 5, 8 }), ph({ 4, 3, 2, 3, 3 })
      return { X, W }, { topi.nn.conv3d_transpose(X, W, { strides = { 1, 2, 2 }, padding = { 0, 1, 1, 1, 1, 0 }, output_padding = { 0, 1, 1 } }) } end },
  { "winograd F(4x4,3x3)", function()
      local X, W = ph({ 1, 4, 14, 16 }), ph({ 8, 4, 3, 3 })
      return { X, W }, { topi.nn.conv2d_winograd(X, W, { tile_size = 4, padding = { 1, 1, 1, 1 } }) } end, 1e-4 },
  { "conv3d NCDHW + bias + relu", function()
      local X, W, B = ph({ 1, 4, 6, 10, 16 }), ph({ 8, 4, 3, 3, 3 }), ph({ 8 })
      return { X, W, B }, { topi.nn.relu(topi.nn.bias_add(topi.nn.conv3d(X, W, { padding = { 1, 1, 1, 1, 1, 1 } }), B)) } end },
  { "conv3d NDHWC grouped strided", function()
      local X, W = ph({ 1, 7, 9, 8, 6 }), ph({ 3, 3, 3, 3, 8 })
      return { X, W }, { topi.nn.conv3d(X, W, { layout = "NDHWC", groups = 2, strides = { 2, 1, 2 }, padding = 1 }) } end },
  { "max_pool3d -> global avg pool 3-D", function()
      local X = ph({ 2, 4, 8, 9, 16 })
      return { X }, { topi.nn.global_pool(topi.nn.max_pool3d(X, { kernel = { 2, 3, 3 }, strides = 2, padding = 1 }), "avg") } end },
  { "dense + bias", function()
      local X, W, B = ph({ 3, 64 }), ph({ 40, 64 }), ph({ 40 })
      return { X, W, B }, { topi.nn.dense(X, W, B) } end },
  { "dense -> add", function()
      local X, W, A = ph({ 1, 96 }), ph({ 64, 96 }), ph({ 1, 64 })
      return { X, W, A }, { topi.add(topi.nn.dense(X, W), A) } end },
  { "batch_matmul", function()
      local X, Y = ph({ 3, 16, 24 }), ph({ 3, 20, 24 })
      return { X, Y }, { topi.nn.batch_matmul(X, Y) } end },
  { "matmul 1-D", function()
      local X, Y = ph({ 24 }), ph({ 24, 9 })
      return { X, Y }, { topi.matmul(X, Y) } end },
  { "matmul scalar", function()
      local X, Y = ph({ 24 }), ph({ 24 })
      return { X, Y }, { topi.matmul(X, Y) } end },
  { "max_pool2d -> flatten", function()
      local X = ph({ 2, 8, 17, 16 })
      return { X }, { topi.nn.flatten(topi.nn.max_pool2d(X, { kernel = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1, 1, 1 } })) } end },
  { "avg_pool2d ceil_mode NHWC", function()
      local X = ph({ 1, 15, 15, 16 })
      return { X }, { topi.nn.avg_pool2d(X, { kernel = { 2, 2 }, strides = { 2, 2 }, ceil_mode = true, layout = "NHWC" }) } end },
  { "global_pool avg -> flatten -> dense", function()
      local X, W = ph({ 2, 16, 9, 9 }), ph({ 10, 16 })
      return { X, W }, { topi.nn.dense(topi.nn.flatten(topi.nn.global_pool(X, "avg")), W) } end },
  { "adaptive_pool max", function()
      local X = ph({ 1, 8, 13, 16 })
      return { X }, { topi.nn.adaptive_pool(X, { 3, 4 }, "max") } end },
  { "softmax axis 1, log_softmax", function()
      local X = ph({ 4, 33, 16 })
      return { X }, { topi.nn.softmax(X, { axis = 1 }), topi.nn.log_softmax(X) } end },
  { "batch_norm -> relu", function()
      local X, g, b, m, v = ph({ 2, 8, 16, 16 }), ph({ 8 }), ph({ 8 }), ph({ 8 }), ph({ 8 })
      return { X, g, b, m, v }, { topi.nn.relu(topi.nn.batch_norm(X, g, b, m, v)) } end },
  { "unary chain", function()
      local X = ph({ 2, 3, 40, 64 })
      return { X }, { topi.clip(topi.tanh(topi.sigmoid(topi.nn.leaky_relu(X, 0.1))), -0.5, 0.5) } end },
  { "broadcast binary", function()
      local A, B = ph({ 4, 1, 32 }), ph({ 5, 1 })
      return { A, B }, { topi.maximum(topi.multiply(topi.subtract(A, B), A), B) } end },
  { "cast", function()
      local X = ph({ 7, 64 })
      return { X }, { topi.cast(X, "int32") } end, 0 },
  { "concatenate, split", function()
      local A, B = ph({ 2, 3, 16 }), ph({ 2, 5, 16 })
      local cc = topi.concatenate({ A, B }, 1)
      local parts = topi.split(cc, { 2, 6 }, 1)
      return { A, B }, { parts[1], parts[2], parts[3] } end },
  { "reshape, transpose, squeeze, expand_dims", function()
      local X = ph({ 4, 6, 1, 16 })
      return { X }, { topi.expand_dims(topi.transpose(topi.squeeze(topi.reshape(X, { 2, 12, 1, 16 }), 2), { 2, 0, 1 }), 0) } end },
  { "pad -> relu", function()
      local X = ph({ 3, 8, 13 })
      return { X }, { topi.nn.relu(topi.nn.pad(X, { 0, 1, 2 }, { 1, 2, 1 }, -1)) } end },
  { "layout_transform NCHW -> NCHW8c", function()
      local X = ph({ 1, 16, 9, 8 })
      return { X }, { topi.layout_transform(X, "NCHW", "NCHW8c") } end },
  { "conv2d -> max_pool2d -> relu (two anchors)", function()
      local X, W = ph({ 1, 8, 16, 16 }), ph({ 8, 8, 3, 3 })
      return { X, W }, { topi.nn.relu(topi.nn.max_pool2d(topi.nn.conv2d(X, W, { padding = { 1, 1, 1, 1 } }), { kernel = { 2, 2 }, strides = { 2, 2 } })) } end },
  { "two outputs sharing a conv", function()
      local X, W = ph({ 1, 4, 12, 16 }), ph({ 8, 4, 3, 3 })
      local c = topi.nn.conv2d(X, W, {})
      return { X, W }, { topi.nn.relu(c), topi.sigmoid(c) } end },
}

for _, case in ipairs(cases) do
  local ins, outs = case[2]()
  compare(case[1], ins, outs, case[3])
end

-- ---- a blocked layout read back, batch 1 ------------------------------------------------------

-- NCHW16c -> NCHW: the channel axis split by the block, its inner part inside the row loop (one
-- block row serves the block's 16 channels from cache; in the output's own order each channel
-- re-read its chunk's whole block), the outer loop parallel
do
  local X = ph({ 1, 8, 24, 32, 16 })
  local Y = topi.layout_transform(X, "NCHW16c", "NCHW")
  local sd = compare("layout_transform NCHW16c -> NCHW", { X }, { Y })
  local text = tostring(tl.lower(sd, { X, Y }))
  local rows, inner = text:find("for (i2, 0, 24)", 1, true), text:find("for (i1.inner, 0, 16)", 1, true)
  assert(text:find("parallel (", 1, true), "the outer loop of the transform is parallel:\n" .. text)
  assert(rows and inner and rows < inner, "the block's inner channels inside the row loop:\n" .. text)
end
-- one block (32 channels, no split) and NHWC -> NCHW: the channel axis moved inside the rows
-- (the rows fused into the parallel loop; the channel loop just outside the vectorized one)
for _, case in ipairs({ { { 1, 1, 40, 48, 32 }, "NCHW32c" }, { { 1, 40, 48, 32 }, "NHWC" } }) do
  local X = ph(case[1])
  local Y = topi.layout_transform(X, case[2], "NCHW")
  local sd = compare("layout_transform " .. case[2] .. " -> NCHW", { X }, { Y })
  local text = tostring(tl.lower(sd, { X, Y }))
  local par, chans, vec = text:find("parallel (i0.i2.fused, 0, 40)", 1, true), text:find("for (i1, 0, 32)", 1, true),
                          text:find("vectorized (i3.inner", 1, true)
  assert(par and chans and vec and par < chans and chans < vec,
         case[2] .. " -> NCHW: the rows parallel, the channels just outside the vector loop:\n" .. text)
end

-- batch 1 with less than a chunk of work per channel (64 x 56 x 56): the batch and channel
-- axes fused into one parallel loop (the batch alone, one iteration, ran serially)
do
  local X = ph({ 1, 64, 56, 56 })
  local Y = topi.nn.relu(X)
  local sd = compare("relu on 1x64x56x56", { X }, { Y })
  local anns = ann_of(sd, Y.op.name)
  assert(anns[1] == C.TL_ANN_PARALLEL, "the fused outer loop of a batch-1 relu is parallel:\n" .. tostring(sd))
end

-- ---- targets ------------------------------------------------------------------------------------

do
  local X = ph({ 4, 8 })
  local Y = topi.nn.relu(X)
  -- opencl: work-group bound loops (the numerics are checked on a device in test_mali.lua)
  local sg = topi.default_schedule(Y, "opencl -device=mali")
  local text = tostring(require("tunelua").lower(sg, { X, Y }))
  assert(text:find("launch_thread threadIdx.x", 1, true), text)
  local ok, err = pcall(topi.default_schedule, Y, "cuda")
  assert(not ok and tostring(err):find("default_schedule: unknown target 'cuda'", 1, true), tostring(err))
  ok, err = pcall(topi.default_schedule, {}, "llvm")
  assert(not ok and tostring(err):find("expected a tensor or a list of tensors", 1, true), tostring(err))
  -- "c", "llvm -mcpu=..." and "cpu" are the same class
  local a = topi.default_schedule(Y, "c"):steps()
  assert(a == topi.default_schedule(Y, "llvm -mcpu=core-avx2"):steps())
  assert(a == topi.default_schedule(Y, "cpu"):steps())
end

print(string.format("test_topi_schedule: %d default schedules match the empty ones", count))
