-- AutoTVM tasks, config spaces and the x86 templates: space sizes and index
-- mapping against TVM's logs, instantiation speed, numerics of lowered
-- kernels against a naive (unscheduled) reference for several configs.
local ffi = require "ffi"
local autotvm = require "tunelua.autotvm"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local nd = require "tunelua.nd"
local tl = require "tunelua"
local testing = require "tunelua.testing"
local record = require "tunelua.autotvm.record"
local executor = require "tunelua.graph.executor"
local util = require "tests.lua.lib.util"

local function T(shape) return { "TENSOR", shape, "float32" } end

-- ---- spaces match TVM's knob definitions ---------------------------------------------------
do
  local args = { T { 1, 3, 224, 224 }, T { 64, 3, 7, 7 }, { 2, 2 }, { 3, 3, 3, 3 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local t = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm -mcpu=skylake-avx512")
  -- tile_ic 2 (factors of 3) x tile_oc 7 x tile_ow 9 (factors of 112 with size <= 64) x unroll_kw 2
  assert(#t.config_space == 252, #t.config_space)
  local knobs = t.config_space:knobs()
  assert(knobs[1].name == "tile_ic" and knobs[3].dim == 9 and knobs[4].name == "unroll_kw")
  assert(tostring(t.config_space:get(193)) ==
         "[('tile_ic', [-1, 3]), ('tile_oc', [-1, 32]), ('tile_ow', [-1, 8]), ('unroll_kw', False)],None,193")
  assert(t:workload()[1] == "conv2d_NCHWc.x86" and t:workload()[3][2][1] == 64)
  -- flop (compute_flop rules): 2 * N*O*OH*OW * C*KH*KW plus the padding stage's compares
  local conv = 2 * 64 * 112 * 112 * 3 * 7 * 7
  assert(t.flop >= conv and t.flop < conv * 1.01, t.flop)
  -- fallback on 32 zmm registers: oc_bn 32 (two vectors), ic_bn 3, reg_n 14 (largest divisor
  -- of 112 <= 14: 28 accumulators), kw not unrolled around 14 positions
  assert(tostring(t.config_space:get(-1)) ==
         "[('tile_ic', [-1, 3]), ('tile_oc', [-1, 32]), ('tile_ow', [-1, 14]), ('unroll_kw', False)],None,207",
         tostring(t.config_space:get(-1)))
  -- knob features: split sizes including the -1, then the ot value
  local f = t.config_space:get(193):features()
  assert(table.concat(f, ",") == "-1,3,-1,32,-1,8,0", table.concat(f, ","))
  -- instantiation speed
  local t0 = os.clock()
  local n = 300
  for i = 0, n - 1 do t:instantiate(i % #t.config_space) end
  local per = (os.clock() - t0) / n * 1e3
  print(string.format("conv2d_NCHWc.x86 instantiate: %.3f ms per config", per))
  assert(per < 20)
end

-- ---- every line of TopHub's llvm log parses and maps into our spaces -----------------------
do
  local dir = require("tunelua.autotvm.tophub").dir()
  local path = dir and (dir .. "/llvm_v0.04.log")
  if not path then
    print("skip: no TopHub directory")
  else
    local recs = record.load_from_file(path)
    assert(#recs == 35, #recs)
    local tasks = {}
    for _, r in ipairs(recs) do
      local key = record.workload_key(r.inp.workload)
      tasks[key] = tasks[key] or autotvm.task.create(r.inp.task_name, r.inp.args, r.inp.target)
      local t = tasks[key]
      local idx, why = t.config_space:index_of(r.inp.config.entity)
      assert(idx, why)
      -- TVM's index is the same mixed-radix number
      assert(idx == r.inp.config.index, string.format("line %d: index %d, the log says %d", r.inp.line, idx, r.inp.config.index))
      local s, args = t:instantiate(idx)
      assert(#args == 3)
      assert(tostring(t:lower(idx)):find("^func default_function%(data: float32"))
    end
  end
end

-- ---- numerics: lowered kernels against a naive reference --------------------------------------
local function check_task(t, indices, ref_op, ref_shapes, ref_attrs)
  local inputs, want, oshape = util.reference(ref_op, ref_shapes, ref_attrs, 7)
  for _, idx in ipairs(indices) do
    local s, args, shapes = t:instantiate(idx)
    local f = tl.build(s, args, "c")
    local got = nd.empty(oshape, "float32")
    local c2 = { unpack(inputs) }
    -- conv2d_NCHWc.x86 is tuned and deployed with its weight pre-packed (5-D)
    c2[2] = executor.deploy_input(t.name, t.args, 2, inputs[2])
    assert(#c2[2]:shape() == #shapes[2], t.name .. ": the deployed weight has the task's kernel rank")
    c2[#c2 + 1] = got
    f(unpack(c2))
    testing.assert_allclose(got, want, { rtol = 1e-4, atol = 1e-4,
      err_msg = t.name .. " config " .. tostring(t.config_space:get(idx)) })
  end
end

do -- conv2d 3x3
  local args = { T { 1, 16, 14, 14 }, T { 32, 16, 3, 3 }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local t = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
  local sp = t.config_space
  local picks = { -1, math.floor(#sp / 2) + 1 }
  check_task(t, picks, "conv2d", { { 1, 16, 14, 14 }, { 32, 16, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } })
end

do -- conv2d 1x1 stride 2 (tile_oh knob)
  local args = { T { 1, 8, 8, 8 }, T { 16, 8, 1, 1 }, { 2, 2 }, { 0, 0, 0, 0 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local t = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm")
  assert(t.config_space:knobs()[4].name == "tile_oh" and t.config_space:knobs()[4].dim == 2)
  check_task(t, { -1, 37 }, "conv2d", { { 1, 8, 8, 8 }, { 16, 8, 1, 1 } },
             { strides = { 2, 2 }, padding = { 0, 0, 0, 0 } })
end

do -- depthwise
  local args = { T { 1, 16, 10, 10 }, T { 16, 1, 3, 3 }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "float32" }
  local t = autotvm.task.create("depthwise_conv2d_NCHWc.x86", args, "llvm")
  check_task(t, { -1, 11 }, "depthwise_conv2d", { { 1, 16, 10, 10 }, { 16, 1, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 } })
end

do -- dense_nopack and dense_pack, with and without bias
  local args = { T { 4, 32 }, T { 24, 32 }, record.null, "float32" }
  local t = autotvm.task.create("dense_nopack.x86", args, "llvm")
  assert(#t.config_space == 3 * 8 * 6, #t.config_space)   -- factors of 4, 24, 32
  check_task(t, { -1, 50 }, "dense", { { 4, 32 }, { 24, 32 } }, { units = 24 })
  -- with a bias: the template schedules the fused bias stage after the anchor
  local t1 = autotvm.task.create("dense_nopack.x86", { T { 4, 32 }, T { 24, 32 }, T { 24 }, "float32" }, "llvm")
  check_task(t1, { 77 }, "dense", { { 4, 32 }, { 24, 32 }, { 24 } }, { units = 24 })
  local t2 = autotvm.task.create("dense_pack.x86", { T { 4, 32 }, T { 24, 32 }, T { 24 }, "float32" }, "llvm")
  check_task(t2, { -1, 100 }, "dense", { { 4, 32 }, { 24, 32 }, { 24 } }, { units = 24 })
end

-- ---- a Lua template --------------------------------------------------------------------------
do
  autotvm.task.register("test_matmul.lua", function(cfg, N, L, M)
    local A = te.placeholder({ N, L }, "float32", "A")
    local B = te.placeholder({ L, M }, "float32", "B")
    local k = te.reduce_axis({ 0, L }, "k")
    local Cm = te.compute({ N, M }, function(i, j) return te.sum(A[{ i, k }] * B[{ k, j }], k) end, "C")
    local s = te.create_schedule(Cm.op)
    local y, x = Cm.op.axis[1], Cm.op.axis[2]
    cfg:define_split("tile_y", N, { num_outputs = 2 })
    cfg:define_split("tile_x", M, { num_outputs = 2, filter = function(e) return e.size[2] <= 16 end })
    cfg:define_knob("vec", { true, false })
    local yo, yi = cfg.tile_y:apply(s, Cm, y)
    local xo, xi = cfg.tile_x:apply(s, Cm, x)
    s[Cm]:reorder(yo, xo, k, yi, xi)
    if cfg.vec.val then s[Cm]:vectorize(xi) end
    return s, { A, B, Cm }
  end)
  local t = autotvm.task.create("test_matmul.lua", { 16, 8, 32 }, "llvm")
  assert(#t.config_space == 5 * 5 * 2, #t.config_space)   -- tile_x: 1, 2, 4, 8, 16 (filtered)
  assert(t.flop == 2 * 16 * 8 * 32, t.flop)
  assert(tostring(t.config_space:get(7)) == "[('tile_y', [-1, 4]), ('tile_x', [-1, 2]), ('vec', True)],None,7",
         tostring(t.config_space:get(7)))
  local a = nd.random_uniform({ 16, 8 }, { seed = 1 })
  local b = nd.random_uniform({ 8, 32 }, { seed = 2 })
  local want
  for _, idx in ipairs({ 0, 7 }) do
    local s, args = t:instantiate(idx)
    local f = tl.build(s, args, "c")
    local c = nd.empty({ 16, 32 }, "float32")
    f(a, b, c)
    if want then testing.assert_allclose(c, want, { rtol = 1e-5 }) else want = c end
  end
end

-- conv2d_NCHWc.x86's channel-blocked compute against topi's conv2d: the fallback and
-- random configs over shapes with stride 2, 1x1, C = 3, O not a multiple of 16, 7-wide outputs
do
  local te, topi = tl.te, tl.topi
  local rand_index = util.lcg(7)   -- the same configs on every run
  local shapes = { { 3, 12, 16, 7, 2, 3 }, { 8, 10, 48, 3, 1, 1 }, { 16, 9, 32, 1, 2, 0 },
                   { 6, 8, 12, 3, 2, 1 }, { 32, 7, 64, 3, 1, 1 }, { 4, 6, 24, 1, 1, 0 } }
  for _, L in ipairs(shapes) do
    local C, H, O, K, S, P = unpack(L)
    local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, K, K }, "float32" },
                   { S, S }, { P, P, P, P }, { 1, 1 }, "NCHW", "NCHW", "float32" }
    local task = autotvm.task.create("conv2d_NCHWc.x86", args, "llvm -mcpu=skylake-avx512")
    local A = te.placeholder({ 1, C, H, H }, "float32", "A")
    local W = te.placeholder({ O, C, K, K }, "float32", "W")
    local Y = topi.nn.conv2d(A, W, { strides = S, padding = { P, P, P, P }, dilation = 1 })
    local fr = tl.build(te.create_schedule(Y.op), { A, W, Y }, "c")
    local oh = math.floor((H + 2 * P - K) / S) + 1
    local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 1 })
    local w = tl.nd.random_uniform({ O, C, K, K }, { seed = 2 })
    local ref = tl.nd.empty({ 1, O, oh, oh })
    fr(a, w, ref)
    for i = 1, 3 do
      local idx = i == 1 and -1 or rand_index(#task.config_space)
      local s, targs, tshapes = task:instantiate(idx)
      local o = tl.nd.empty({ 1, O, oh, oh })
      assert(#tshapes[2] == 5, "conv2d_NCHWc.x86 float32: the task's kernel is the packed weight")
      tl.build(s, targs, "c")(a, executor.deploy_input(task.name, task.args, 2, w), o)
      testing.assert_allclose(o, ref, { rtol = 1e-4, atol = 1e-4 })
    end
  end
end

-- the deployed weight's layout, element by element: [O/B, C, KH, KW, B] with B = 16 for O = 32
do
  local args = { { "TENSOR", { 1, 3, 8, 8 }, "float32" }, { "TENSOR", { 32, 3, 3, 3 }, "float32" },
                 { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local w = tl.nd.random_uniform({ 32, 3, 3, 3 }, { seed = 3 })
  local p = executor.deploy_input("conv2d_NCHWc.x86", args, 2, w)
  local sh = p:shape()
  assert(#sh == 5 and sh[1] == 2 and sh[2] == 3 and sh[3] == 3 and sh[4] == 3 and sh[5] == 16,
         "packed shape " .. table.concat(sh, "x"))
  local ws, ps = ffi.cast("float *", w:data_ptr()), ffi.cast("float *", p:data_ptr())
  for o = 0, 31 do
    for c = 0, 2 do
      for k = 0, 8 do
        local want = ws[(o * 3 + c) * 9 + k]
        local got = ps[((math.floor(o / 16) * 3 + c) * 9 + k) * 16 + o % 16]
        assert(got == want, string.format("packed[o=%d c=%d k=%d] = %g, want %g", o, c, k, got, want))
      end
    end
  end
  assert(executor.deploy_input("conv2d_NCHWc.x86", args, 2, w) == p, "cached per array")
  -- the data input and templates without a deployed form pass the value as it is
  assert(executor.deploy_input("conv2d_NCHWc.x86", args, 1, w) == w)
  assert(executor.deployed_shape("conv2d_NCHWc.x86", args, 1) == nil)
  local ok, err = pcall(executor.deployed_shape, "conv2d_NCHWc.x86", args, 5)
  assert(not ok and err:find("input 4 out of range", 1, true), tostring(err))
  ok, err = pcall(executor.deployed_shape, "conv2d_NCHWc.nope", args, 2)
  assert(not ok and err:find("unknown template", 1, true), tostring(err))
end

print("test_autotvm_space: ok")
