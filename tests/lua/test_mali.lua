-- The Mali templates (targets/mali) and the default OpenCL schedules
-- (core/topi/schedule_gpu.c): spaces with TVM's knobs for the resnet-18
-- tasks, every TopHub mali_v0.06.log record mapped to a config of ours (same
-- index), configs built with the OpenCL backend and run on the OpenCL device
-- (pocl in CI) against a naive host reference, and the default GPU
-- schedules of elementwise, pooling and softmax.
local autotvm = require "tunelua.autotvm"
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local tl = require "tunelua"
local nd = tl.nd
local ocl = require "tunelua.opencl"
local core = require "tunelua.core"
local testing = require "tunelua.testing"
local record = require "tunelua.autotvm.record"
local util = require "tests.lua.lib.util"
local ffi = core.ffi

local TARGET = "opencl -device=mali"
local function T(shape) return { "TENSOR", shape, "float32" } end
local function conv_args(d, k, st, pad) return { T(d), T(k), { st, st }, { pad, pad, pad, pad }, { 1, 1 }, "float32" } end

-- ---- spaces: TVM's knobs for the resnet-18 tasks (networks §9c) ---------------------------
local knob_names = {
  ["conv2d_nchw_spatial_pack.mali"] = "tile_co,tile_oh,tile_ow,reorder_0,ann_reduce,ann_spatial",
  ["conv2d_nchw_winograd.mali"] = "tile_bna,tile_bnb,tile_t1,tile_t2,c_unroll,yt",
  ["depthwise_conv2d_nchw.mali"] = "tile_c,tile_y,tile_x,ann_spatial",
  ["dense.mali"] = "tile_y,tile_x,c_unroll",
}
local names_of = util.knob_names

do
  local convs = {   -- data, kernel, stride, pad
    { { 1, 3, 224, 224 }, { 64, 3, 7, 7 }, 2, 3 }, { { 1, 64, 56, 56 }, { 64, 64, 3, 3 }, 1, 1 },
    { { 1, 64, 56, 56 }, { 64, 64, 1, 1 }, 1, 0 }, { { 1, 64, 56, 56 }, { 128, 64, 3, 3 }, 2, 1 },
    { { 1, 64, 56, 56 }, { 128, 64, 1, 1 }, 2, 0 }, { { 1, 128, 28, 28 }, { 128, 128, 3, 3 }, 1, 1 },
    { { 1, 128, 28, 28 }, { 256, 128, 3, 3 }, 2, 1 }, { { 1, 128, 28, 28 }, { 256, 128, 1, 1 }, 2, 0 },
    { { 1, 256, 14, 14 }, { 256, 256, 3, 3 }, 1, 1 }, { { 1, 256, 14, 14 }, { 512, 256, 3, 3 }, 2, 1 },
    { { 1, 256, 14, 14 }, { 512, 256, 1, 1 }, 2, 0 }, { { 1, 512, 7, 7 }, { 512, 512, 3, 3 }, 1, 1 },
  }
  local ntasks = 0
  for _, c in ipairs(convs) do
    local args = conv_args(c[1], c[2], c[3], c[4])
    local names = { "conv2d_nchw_spatial_pack.mali" }
    if c[2][3] == 3 and c[3] == 1 then names[2] = "conv2d_nchw_winograd.mali" end
    for _, name in ipairs(names) do
      local t = autotvm.task.create(name, args, TARGET)
      ntasks = ntasks + 1
      assert(names_of(t) == knob_names[name], names_of(t))
      local conv = 2 * c[2][1] * c[2][2] * c[2][3] * c[2][4] *
                   (math.floor((c[1][3] + 2 * c[4] - c[2][3]) / c[3]) + 1) ^ 2
      assert(t.flop >= conv and t.flop < conv * 1.2, name .. " flop " .. t.flop)
      t:instantiate(-1)
      for _, idx in ipairs({ 0, #t.config_space - 1, math.floor(#t.config_space / 3) }) do
        local ok, err = pcall(t.instantiate, t, idx)
        assert(ok or tostring(err):find("unrolling", 1, true) or tostring(err):find("lanes", 1, true), tostring(err))
      end
    end
  end
  assert(ntasks == 16, ntasks)
  -- the 17th task: dense (1,512)x(1000,512)
  local td = autotvm.task.create("dense.mali", { T { 1, 512 }, T { 1000, 512 }, record.null, "float32" }, TARGET)
  assert(names_of(td) == knob_names["dense.mali"])
  -- tile_y 1 (factors of 1, 3 outputs) x tile_x 3-way factorizations of 1000 (100) x c_unroll
  -- (factors of 512 up to 64: 7)
  assert(#td.config_space == 1 * 100 * 7, #td.config_space)
  td:instantiate(-1)
  -- spatial pack 3x3 64->64@56: tile_co 28 x tile_oh 30 x tile_ow 30 x reorder 2 x 4 x 20
  local t = autotvm.task.create("conv2d_nchw_spatial_pack.mali", conv_args({ 1, 64, 56, 56 }, { 64, 64, 3, 3 }, 1, 1), TARGET)
  assert(#t.config_space == 28 * 30 * 30 * 2 * 4 * 20, #t.config_space)
  -- winograd 512->512@7: bna 5 x bnb 5 x tile_t1 (factors of 512 <= 128: 8) x tile_t2 8 x
  -- c_unroll 4 x yt 6
  local tw = autotvm.task.create("conv2d_nchw_winograd.mali", conv_args({ 1, 512, 7, 7 }, { 512, 512, 3, 3 }, 1, 1), TARGET)
  assert(#tw.config_space == 5 * 5 * 8 * 8 * 4 * 6, #tw.config_space)
  assert(tostring(tw.config_space:get(-1)):find("('tile_bna', 4), ('tile_bnb', 4), ('tile_t1', [-1, 128]), ('tile_t2', [-1, 128]), ('c_unroll', [-1, 8]), ('yt', 8)", 1, true),
         tostring(tw.config_space:get(-1)))
  -- winograd refuses a strided or non-3x3 convolution
  local ok, err = pcall(autotvm.task.create, "conv2d_nchw_winograd.mali", conv_args({ 1, 8, 8, 8 }, { 8, 8, 3, 3 }, 2, 1), TARGET)
  assert(not ok and tostring(err):find("stride 1", 1, true), tostring(err))
end

-- ---- every TopHub mali record maps to a config of our space ---------------------------------
do
  local dir = require("tunelua.autotvm.tophub").dir()
  local path = dir and (dir .. "/mali_v0.06.log")
  local fh = path and io.open(path)
  if not fh then
    print("skip: no TopHub mali_v0.06.log")
  else
    fh:close()
    local recs = record.load_from_file(path)
    local tasks, n, same, inst = {}, 0, 0, 0
    for _, r in ipairs(recs) do
      if knob_names[r.inp.task_name] then
        local key = record.workload_key(r.inp.workload)
        tasks[key] = tasks[key] or autotvm.task.create(r.inp.task_name, r.inp.args, r.inp.target)
        local t = tasks[key]
        local idx, why = t.config_space:index_of(r.inp.config.entity)
        assert(idx, why)
        n = n + 1
        if idx == r.inp.config.index then same = same + 1 end
        if n % 8 == 1 then t:instantiate(idx); inst = inst + 1 end
      end
    end
    print(string.format("mali_v0.06.log: %d records mapped, %d with TVM's index, %d instantiated", n, same, inst))
    -- fallback configs from the reference log (formats §5.5): a workload of the log
    -- falls back to its own record (the first of its axis lengths)
    local t1 = autotvm.task.create("conv2d_nchw_spatial_pack.mali", conv_args({ 1, 992, 7, 7 }, { 128, 992, 1, 1 }, 1, 0), TARGET)
    assert(t1.config_space:get(-1).index == 36225, t1.config_space:get(-1).index)
    local t2 = autotvm.task.create("dense.mali", { T { 1, 512 }, T { 1000, 512 }, record.null, "float32" }, TARGET)
    assert(tostring(t2.config_space:get(-1)) == "[('tile_y', [-1, 1, 1]), ('tile_x', [-1, 25, 1]), ('c_unroll', [-1, 16])],None,407",
           tostring(t2.config_space:get(-1)))
    assert(n == 528, n)
    assert(same == n, same)
  end
end

if not ocl.available() then
  print("SKIP test_mali (OpenCL part): no OpenCL device (install pocl-opencl-icd; see docs/opencl.md)")
  print("test_mali: ok")
  return
end
local DEV = "opencl:0"

-- ---- numerics on the OpenCL device -----------------------------------------------------------
-- TUNELUA_MALI_SCALE=k multiplies the number of configs run per task (default 1).
local SCALE = tonumber(os.getenv("TUNELUA_MALI_SCALE") or "1") or 1
local rand_index = util.lcg(12345)

-- Build and run configs until `want` of them ran (instantiation errors,
-- e.g. "vec" of 3 lanes, and work-groups over the device limit skipped).
local function check_task(t, ref_op, ref_shapes, ref_attrs, want, tries)
  local inputs, expect, oshape = util.reference(ref_op, ref_shapes, ref_attrs, 7)
  local dev_in = {}
  for i, x in ipairs(inputs) do dev_in[i] = x:copyto(DEV) end
  local ran, skipped = 0, 0
  want, tries = want * SCALE, tries * SCALE
  local indices = { -1 }
  for _ = 1, tries do indices[#indices + 1] = rand_index(#t.config_space) end
  for _, idx in ipairs(indices) do
    if ran >= want then break end
    local ok, s, args = pcall(t.instantiate, t, idx)
    local f
    if ok then ok, f = pcall(tl.build, s, args, "opencl") end
    if not ok then
      local msg = tostring(s or f)
      if f then msg = tostring(f) end
      assert(idx >= 0, "the fallback config must build: " .. msg)
      assert(msg:find("unrolling", 1, true) or msg:find("lanes", 1, true) or msg:find("work-group", 1, true),
             t.name .. " config " .. idx .. ": " .. msg)
      skipped = skipped + 1
    else
      local got = nd.empty(oshape, "float32", DEV)
      local c2 = { unpack(dev_in) }
      c2[#c2 + 1] = got
      f(unpack(c2))
      testing.assert_allclose(got:copyto("cpu"), expect, { rtol = 1e-3, atol = 1e-3,
        err_msg = t.name .. " config " .. tostring(t.config_space:get(idx)) })
      ran = ran + 1
    end
  end
  assert(ran >= want, string.format("%s: only %d configs ran (%d skipped)", t.name, ran, skipped))
  if SCALE > 1 then print(string.format("%s: %d configs ran, %d skipped", t.name, ran, skipped)) end
  return ran, skipped
end

local t0 = os.clock()
do -- spatial pack, 3x3 with padding and a fused bias-free relu-free conv
  local t = autotvm.task.create("conv2d_nchw_spatial_pack.mali", conv_args({ 1, 8, 8, 8 }, { 16, 8, 3, 3 }, 1, 1), TARGET)
  check_task(t, "conv2d", { { 1, 8, 8, 8 }, { 16, 8, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } }, 3, 12)
  local t2 = autotvm.task.create("conv2d_nchw_spatial_pack.mali", conv_args({ 1, 4, 9, 9 }, { 8, 4, 1, 1 }, 2, 0), TARGET)
  check_task(t2, "conv2d", { { 1, 4, 9, 9 }, { 8, 4, 1, 1 } },
             { strides = { 2, 2 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 } }, 1, 6)
end
do -- winograd: tile 4 (H % 4 == 0) and tile 2
  local t = autotvm.task.create("conv2d_nchw_winograd.mali", conv_args({ 1, 8, 8, 8 }, { 16, 8, 3, 3 }, 1, 1), TARGET)
  check_task(t, "conv2d", { { 1, 8, 8, 8 }, { 16, 8, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } }, 2, 6)
  local t2 = autotvm.task.create("conv2d_nchw_winograd.mali", conv_args({ 1, 4, 7, 7 }, { 8, 4, 3, 3 }, 1, 1), TARGET)
  check_task(t2, "conv2d", { { 1, 4, 7, 7 }, { 8, 4, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } }, 1, 4)
end
do -- depthwise
  local t = autotvm.task.create("depthwise_conv2d_nchw.mali", conv_args({ 1, 8, 8, 8 }, { 8, 1, 3, 3 }, 1, 1), TARGET)
  check_task(t, "depthwise_conv2d", { { 1, 8, 8, 8 }, { 8, 1, 3, 3 } },
             { strides = { 1, 1 }, padding = { 1, 1, 1, 1 } }, 3, 12)
end
do -- dense, with a bias
  local t = autotvm.task.create("dense.mali", { T { 2, 32 }, T { 16, 32 }, T { 16 }, "float32" }, TARGET)
  check_task(t, "dense", { { 2, 32 }, { 16, 32 }, { 16 } }, { units = 16 }, 3, 8)
end
-- TopHub's own configs at their real shapes: per template, the float32 records of
-- the fewest FLOPs (1 each; TUNELUA_MALI_RECORDS=k: k each) built and run against the
-- reference (the float16 records need cl_khr_fp16, which pocl lacks)
do
  local NREC = tonumber(os.getenv("TUNELUA_MALI_RECORDS") or "1") or 1
  local dir = require("tunelua.autotvm.tophub").dir()
  local path = dir and (dir .. "/mali_v0.06.log")
  local fh = path and io.open(path)
  if fh then
    fh:close()
    local by = {}
    for _, r in ipairs(record.load_from_file(path)) do
      local name = r.inp.task_name
      local a = r.inp.args
      if knob_names[name] and a[1][3] == "float32" and a[2][3] == "float32" and
         (a[#a] == "float32" or a[#a] == record.null) then
        local t = autotvm.task.create(name, r.inp.args, r.inp.target)
        by[name] = by[name] or {}
        table.insert(by[name], { t = t, r = r })
      end
    end
    local nrun = 0
    for name, list in pairs(by) do
      table.sort(list, function(a, b) return a.t.flop < b.t.flop end)
      for i = 1, math.min(#list, NREC) do
        local t, r = list[i].t, list[i].r
        local a = r.inp.args
        local shapes = { a[1][2], a[2][2] }
        local op, attrs
        if name == "dense.mali" then
          op, attrs = "dense", { units = a[2][2][1] }
          if type(a[3]) == "table" and a[3][1] == "TENSOR" then shapes[3] = a[3][2] end
        else
          op = name == "depthwise_conv2d_nchw.mali" and "depthwise_conv2d" or "conv2d"
          attrs = { strides = a[3], padding = a[4], dilation = a[5] }
        end
        local host, want, oshape = util.reference(op, shapes, attrs, 20)
        local dev = {}
        for k, x in ipairs(host) do dev[k] = x:copyto(DEV) end
        local idx = assert(t.config_space:index_of(r.inp.config.entity))
        local s, args = t:instantiate(idx)
        local f = tl.build(s, args, "opencl")
        local got = nd.empty(oshape, "float32", DEV)
        dev[#dev + 1] = got
        f(unpack(dev))
        testing.assert_allclose(got:copyto("cpu"), want, { rtol = 1e-3, atol = 1e-3,
          err_msg = string.format("%s line %d", name, r.inp.line or -1) })
        nrun = nrun + 1
      end
    end
    print(string.format("mali_v0.06.log: %d records run at their shapes on %s", nrun, DEV))
  end
end
-- fused groups, as the graph executor makes them: the template's compute + bias + relu,
-- scheduled by the template (the fallback and one more config)
do
  local C = core.C
  local function fused(name, args, shapes, bias_shape, ref_op, ref_attrs, idx2)
    local t = autotvm.task.create(name, args, TARGET)
    local ins = {}
    for i, sh in ipairs(shapes) do ins[i] = te.placeholder(sh, "float32", "f_in" .. i) end
    local Bt = te.placeholder(bias_shape, "float32", "f_bias")
    local function group(anchor)
      local a = topi.op("add", { anchor, Bt })
      local r = topi.op("relu", { a[#a] })
      return r[#r]
    end
    local ids, outs, n = ffi.new("int[2]", ins[1].id, ins[2].id), ffi.new("int[8]"), ffi.new("int[1]")
    core.check(C.tl_atvm_template_compute(core.ctx, name, C.tl_atvm_task_args_json(t.handle), te.dag,
                                          ids, 2, outs, 8, n))
    local out = group(te.tensor_from_id(outs[n[0] - 1]))
    local rr = topi.op(ref_op, ins, ref_attrs)
    local ref_out = group(rr[#rr])
    local g = tl.build(te.create_schedule(ref_out.op), { ins[1], ins[2], Bt, ref_out }, "c")
    local host, dev = {}, {}
    local all = { shapes[1], shapes[2], bias_shape }
    for i, sh in ipairs(all) do
      host[i] = nd.random_uniform(sh, { seed = 40 + i, low = -1, high = 1 })
      dev[i] = host[i]:copyto(DEV)
    end
    local want = nd.empty(ref_out.shape, "float32")
    host[4] = want
    g(unpack(host))
    for _, idx in ipairs({ -1, idx2 }) do
      local s = te.create_schedule(out.op)
      core.check(C.tl_atvm_template_schedule(core.ctx, t.handle, idx, s.handle))
      local f = tl.build(s, { ins[1], ins[2], Bt, out }, "opencl")
      local got = nd.empty(out.shape, "float32", DEV)
      dev[4] = got
      f(unpack(dev))
      testing.assert_allclose(got:copyto("cpu"), want, { rtol = 1e-3, atol = 1e-3,
        err_msg = name .. " fused, config " .. idx })
    end
  end
  local cattrs = { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } }
  fused("conv2d_nchw_spatial_pack.mali", conv_args({ 1, 4, 6, 6 }, { 8, 4, 3, 3 }, 1, 1),
        { { 1, 4, 6, 6 }, { 8, 4, 3, 3 } }, { 8, 1, 1 }, "conv2d", cattrs, 100)
  fused("conv2d_nchw_winograd.mali", conv_args({ 1, 4, 6, 6 }, { 8, 4, 3, 3 }, 1, 1),
        { { 1, 4, 6, 6 }, { 8, 4, 3, 3 } }, { 8, 1, 1 }, "conv2d", cattrs, 77)
  fused("depthwise_conv2d_nchw.mali", conv_args({ 1, 4, 6, 6 }, { 4, 1, 3, 3 }, 1, 1),
        { { 1, 4, 6, 6 }, { 4, 1, 3, 3 } }, { 4, 1, 1 }, "depthwise_conv2d", cattrs, 33)
  fused("dense.mali", { T { 2, 16 }, T { 8, 16 }, record.null, "float32" },
        { { 2, 16 }, { 8, 16 } }, { 8 }, "dense", { units = 8 }, 20)
end
print(string.format("mali templates on %s: %.1f s", DEV, os.clock() - t0))

-- ---- default GPU schedules -------------------------------------------------------------------
pcall(ffi.cdef, "int tl_topi_default_schedule_gpu(tl_ctx *ctx, tl_sched *s);")
local function gpu_default(outs, ins, ref_fn_shapes)
  local schedule = require "tunelua.schedule"
  local out = outs[#outs]
  local s = te.create_schedule(out.op)
  core.check(core.C.tl_topi_default_schedule_gpu(core.ctx, s.handle))
  local args = {}
  for i, x in ipairs(ins) do args[i] = x end
  args[#args + 1] = out
  local f = tl.build(s, args, "opencl")
  local s2 = te.create_schedule(out.op)
  local g = tl.build(s2, args, "c")
  local host, dev = {}, {}
  for i, x in ipairs(ins) do
    host[i] = nd.random_uniform(x.shape, { seed = 3 + i, low = -2, high = 2 })
    dev[i] = host[i]:copyto(DEV)
  end
  local want = nd.empty(out.shape, "float32")
  local got = nd.empty(out.shape, "float32", DEV)
  host[#host + 1] = want
  dev[#dev + 1] = got
  g(unpack(host))
  f(unpack(dev))
  testing.assert_allclose(got:copyto("cpu"), want, { rtol = 1e-5, atol = 1e-5 })
  return f
end

do -- elementwise + broadcast, non-divisible extent
  local A = te.placeholder({ 3, 5, 37 }, "float32", "A")
  local B = te.placeholder({ 37 }, "float32", "B")
  local s1 = topi.op("add", { A, B })
  local r = topi.op("relu", { s1[#s1] })
  local f = gpu_default(r, { A, B })
  assert(#f:kernels() == 1, #f:kernels())
end
do -- max and avg pooling with padding
  local X = te.placeholder({ 1, 4, 9, 9 }, "float32", "X")
  gpu_default(topi.op("max_pool2d", { X }, { pool_size = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1, 1, 1 } }), { X })
  gpu_default(topi.op("avg_pool2d", { X }, { pool_size = { 2, 2 }, strides = { 2, 2 }, padding = { 0, 0, 0, 0 } }), { X })
  gpu_default(topi.op("global_pool", { X }, { pool_type = "avg" }), { X })
end
do -- softmax
  local X = te.placeholder({ 4, 100 }, "float32", "X")
  gpu_default(topi.op("softmax", { X }, { axis = -1 }), { X })
end
do -- conv2d + bias + relu and dense fallbacks
  local X = te.placeholder({ 1, 4, 6, 6 }, "float32", "X")
  local W = te.placeholder({ 8, 4, 3, 3 }, "float32", "W")
  local c = topi.op("conv2d", { X, W }, { strides = { 1, 1 }, padding = { 1, 1, 1, 1 }, dilation = { 1, 1 } })
  local r = topi.op("relu", { c[#c] })
  gpu_default(r, { X, W })
  local D = te.placeholder({ 3, 20 }, "float32", "D")
  local E = te.placeholder({ 7, 20 }, "float32", "E")
  gpu_default(topi.op("dense", { D, E }, { units = 7 }), { D, E })
end

print("test_mali: ok")
