-- The auto-scheduler's GPU cross-thread reduction (core/ansor/sketch.c rule
-- "cross-thread-reduction", core/te/lower.c emit_xred; docs/auto_scheduler.md), on the
-- OpenCL device (pocl in the suite):
--   - random states of the rule's sketches for a batch-2 dense with bias and relu (the
--     reduction computed in the relu's kernel, or in a kernel of its own), a batch-1 matmul
--     without consumer, a global average pooling (the sum computed in the division's kernel or
--     not) and NHWC convs with a small output and a long reduction (a small one, and
--     resnet-18's 7x7x512 3x3 layer itself) are built and run against the unscheduled DAG on
--     random data, through the measurement path (check_correctness); their thread counts include
--     non-powers of two (the tree's tail) and counts that do not divide the reduction (guards);
--   - each state's printed steps, written as a record and read back (apply_best), give the
--     same steps and the same OpenCL source;
--   - a hand-written schedule binding a reduction axis to threadIdx.x (24 threads over 61) runs,
--     and one with a spatial loop inside the reduction is refused by name;
--   - the sketch listing of resnet-18's 7x7x512 conv on NVIDIA-like hardware params holds the
--     rule's sketch, and a 56x56 conv's policy trace says why it does not apply.
--
--   TUNELUA_XRED_N=n   states per task type (default 3; the property run uses many more)
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local am = require "tunelua.autotvm.measure"

local N = tonumber(os.getenv("TUNELUA_XRED_N") or "") or 3

local function ph(shape, name) return te.placeholder(shape, "float32", name) end
local function is_xred(st) return st:source("opencl"):find("_red%[") ~= nil end
local function thread_count(st)
  return tonumber(st:steps():match('%["SP", %d+, %d+, %d+, %[(%d+)%], 1%], %["AN", %d+, %d+, 6%]'))
end

-- sketch listing and trace: NVIDIA-like params, resnet-18's 7x7x512 and 56x56x64 convs
do
  local hw = auto_scheduler.HardwareParams(-1, 16, 64, 49152, 2147483647, 1024, 8, 32)
  local function conv(c, h, o)
    local y = topi.nn.conv2d_nhwc(ph({ 1, h, h, c }, "data"), ph({ 3, 3, c, o }, "kernel"),
                                  { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    return auto_scheduler.SketchPolicy(auto_scheduler.SearchTask{ compute_dag = y, target = "opencl",
                                                                  hardware_params = hw }, { seed = 1 })
  end
  local small, big = conv(512, 7, 512), conv(64, 56, 64)
  local found = 0
  for _, sk in ipairs(small:sketches()) do
    if tostring(sk):find("reduce threadIdx.x", 1, true) then found = found + 1 end
  end
  assert(found == 1, "7x7x512: " .. found .. " cross-thread sketches")
  for _, sk in ipairs(big:sketches()) do
    assert(not tostring(sk):find("reduce threadIdx.x", 1, true), "56x56x64: a cross-thread sketch")
  end
  assert(big:trace():find("cross-thread-reduction: stage 'conv2d_nhwc': output of 200704 elements", 1, true),
         big:trace())
  -- the 7x7x512 states lower (checked by the policy) and bind the reduction over the block
  local n = 0
  for _, st in ipairs(small:sample(16)) do
    if is_xred(st) then
      n = n + 1
      local t = thread_count(st)
      assert(t and t <= 1024 and t % 16 == 0, "7x7x512: thread count " .. tostring(t))
    end
  end
  assert(n >= 1, "7x7x512: no cross-thread state among 16")
end

local have_ocl = require("tunelua.autotvm.measure_opencl").device_info(0) ~= nil
if not have_ocl then
  print("test_ansor_xred: sketches checked; no OpenCL device, numerical checks skipped")
  return
end

local types = {
  { "dense_bias_relu", function()
      local x, w, b = ph({ 2, 300 }, "x"), ph({ 10, 300 }, "w"), ph({ 10 }, "b")
      return topi.nn.relu(topi.nn.dense(x, w, b))
    end, fused = true },
  { "matmul_m1", function()
      return topi.matmul(ph({ 1, 520 }, "a"), ph({ 520, 6 }, "b"))
    end },
  { "global_avg_pool", function()
      return topi.nn.global_pool(ph({ 1, 6, 7, 7 }, "x"), "avg", "NCHW")
    end, fused = true },
  { "conv2d_nhwc_small_out", function()   -- 3x3x8 outputs, a reduction of 3x3x40
      return topi.nn.conv2d_nhwc(ph({ 1, 3, 3, 40 }, "x"), ph({ 3, 3, 40, 8 }, "w"),
                                 { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "conv2d_resnet18_7x7x512", function()   -- the layer itself: 2 states (about 5 s each on pocl)
      return topi.nn.conv2d_nhwc(ph({ 1, 7, 7, 512 }, "x"), ph({ 3, 3, 512, 512 }, "w"),
                                 { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end, n = 2 },
}

local util = require "tests.lua.lib.util"
local file = require "tunelua.file"
local tmp = util.tmpdir("ansor-xred")
local total, counts = 0, {}
for ti, ty in ipairs(types) do
  local name, N = ty[1], ty.n or N
  local task = auto_scheduler.SearchTask{ compute_dag = ty[2](), target = "opencl" }
  local policy = auto_scheduler.SketchPolicy(task, { seed = 20 + ti })
  -- the two forms alternately where both exist (fused: one kernel with the consumer)
  local forms, picked = { {}, {} }, {}
  for _ = 1, 8 do
    for _, st in ipairs(policy:sample(4 * N)) do
      if is_xred(st) then
        local f = forms[st:source("opencl"):find("1 kernel", 1, true) and 1 or 2]
        f[#f + 1] = st
      end
    end
    if #forms[1] + #forms[2] >= 2 * N and (not ty.fused or #forms[1] >= N) then break end
  end
  for i = 1, N do
    local f = (ty.fused and i % 2 == 1) and forms[1] or forms[2]
    picked[#picked + 1] = table.remove(f, 1) or table.remove(forms[1], 1) or table.remove(forms[2], 1)
  end
  assert(#picked == N, name .. ": " .. #picked .. " cross-thread states sampled")
  if ty.fused then assert(picked[1]:source("opencl"):find("1 kernel", 1, true), name .. ": no fused state") end
  local mt = search.measure_task(task)
  local inputs = {}
  for i, st in ipairs(picked) do
    local src = st:source("opencl")
    local t = thread_count(st)
    counts[t] = true
    -- records: the printed steps read back give the same state
    local log = tmp .. "/" .. name .. i .. ".json"
    file.write_all(log, search.encode_record(task, st:steps(),
                                         { costs = { 1e-3 }, error_no = 0, all_cost = 1, timestamp = 1 }) .. "\n")
    local back = task:apply_best(log)
    assert(back:steps() == st:steps(), name .. ": steps differ after the record\n" .. st:steps() .. "\n" .. back:steps())
    assert(back:source("opencl") == src, name .. ": source differs after the record")
    mt.states[i] = st
    inputs[i] = am.MeasureInput(mt, i)
  end
  local batch = am.create_measure_batch(mt, am.measure_option({ builder = am.LocalBuilder({ timeout = 120 }),
    runner = am.LocalRunner({ number = 1, repeats = 1, timeout = 120, check_correctness = true }) }))
  for i, r in ipairs(batch(inputs)) do
    if r.error_no ~= 0 then
      error(string.format("%s state %d: %s: %s\nsteps: %s", name, i, am.error_name(r.error_no),
                          tostring(r.error_msg), mt.states[i]:steps()))
    end
    total = total + 1
  end
end
util.cleanup(tmp)
local odd = false
for t in pairs(counts) do odd = odd or require("bit").band(t, t - 1) ~= 0 end
assert(odd, "no thread count that is not a power of two")

-- a hand-written schedule: row max over 61 elements by 24 threads (a count that neither is a
-- power of two nor divides the row), built and run in this process (after the measurement
-- children above: OpenCL initialized here would be inherited by them)
do
  local tl = require "tunelua"
  local R, L = 5, 61
  local A = ph({ R, L }, "A")
  local k = te.reduce_axis({ 0, L }, "k")
  local Mx = te.compute({ R }, function(i) return te.max(A(i, k), k) end, "Mx")
  local s = te.create_schedule(Mx.op)
  s[Mx]:bind(Mx.op.axis[1], "blockIdx.x")
  local _, ki = s[Mx]:split(Mx.op.reduce_axis[1], { factor = 24 })
  s[Mx]:bind(ki, "threadIdx.x")
  local f = tl.build(s, { A, Mx }, "opencl")
  local a = tl.nd.random_uniform({ R, L }, { low = -3, high = 3, seed = 7 })
  local dm = tl.nd.empty({ R }, "float32", "opencl:0")
  f(a:copyto("opencl:0"), dm)
  local hm = dm:copyto("cpu")
  for i = 1, R do
    local mx = -math.huge
    for j = 1, L do mx = math.max(mx, a:get(i, j)) end
    assert(math.abs(hm:get(i) - mx) < 1e-6, string.format("row %d: max %g, expected %g", i, hm:get(i), mx))
  end
end
-- a form the lowering does not take: a clear error naming the stage and the iterator
do
  local tl = require "tunelua"
  local A = ph({ 4, 32 }, "A")
  local k = te.reduce_axis({ 0, 32 }, "k")
  local S = te.compute({ 4 }, function(i) return te.sum(A(i, k), k) end, "S")
  local s = te.create_schedule(S.op)
  local ko, ki = s[S]:split(S.op.reduce_axis[1], { factor = 8 })
  s[S]:reorder(ko, S.op.axis[1], ki)
  s[S]:bind(ki, "threadIdx.x")
  local ok, err = pcall(tl.lower, s, { A, S })
  assert(not ok and tostring(err):find("lower: stage 'S' reduces across threads but spatial iterator 'i' " ..
                                       "is inside its reduction", 1, true), tostring(err))
end
print(string.format("test_ansor_xred: %d cross-thread states and a hand-written row max match on OpenCL", total))
