-- The auto-scheduler's random states, checked numerically (tunelua.auto_scheduler over
-- core/ansor/sketch.c and annotate.c): for one small DAG per task type (conv2d NCHW and
-- NHWC with a fused bias/relu, NHWC conv2d and matmul whose last axis takes register tiles
-- of several vectors, depthwise conv2d, dense + bias, max pooling, global average
-- pooling, softmax), N random states from the CPU rules are built with the C backend and
-- run on random data; the output must match the unscheduled DAG built the same way. With
-- an OpenCL device (pocl in the suite) a few states per type from the GPU rules (thread
-- binding, shared-memory tiles, cooperative fetching with vector loads, split-K) run there
-- against the same reference.
--
--   TUNELUA_ANSOR_N=n      CPU states per task type (default 12; the property run uses 200)
--   TUNELUA_ANSOR_GPU_N=n  OpenCL states per task type (default 2)
--   TUNELUA_ANSOR_TYPES=a,b  only these task types
local te = require "tunelua.te"
local topi = require "tunelua.topi"
local nd = require "tunelua.nd"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"

local N = tonumber(os.getenv("TUNELUA_ANSOR_N") or "") or 12
local GPU_N = tonumber(os.getenv("TUNELUA_ANSOR_GPU_N") or "") or 2

local function ph(shape, name) return te.placeholder(shape, "float32", name) end

local types = {
  { "conv2d_nchw_bias_relu", function()
      local x, w, b = ph({ 1, 4, 9, 9 }, "x"), ph({ 8, 4, 3, 3 }, "w"), ph({ 1, 8, 1, 1 }, "b")
      local y = topi.nn.conv2d_nchw(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
      return topi.nn.relu(topi.add(y, b))
    end },
  { "conv2d_nhwc_stride2", function()
      local x, w = ph({ 1, 10, 10, 4 }, "x"), ph({ 3, 3, 4, 6 }, "w")
      return topi.nn.conv2d_nhwc(x, w, { strides = 2, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "conv2d_nhwc_split_k", function()   -- small output, long reduction: GPU split-K sketches
      local x, w = ph({ 1, 3, 3, 32 }, "x"), ph({ 3, 3, 32, 8 }, "w")
      return topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end, gpu_rf = true },
  { "conv2d_nhwc_lanes", function()   -- 32 output channels: register-tile draws (lanes multiples)
      local x, w = ph({ 1, 8, 8, 8 }, "x"), ph({ 3, 3, 8, 32 }, "w")
      return topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "matmul_lanes", function()
      return topi.matmul(ph({ 12, 16 }, "a"), ph({ 16, 64 }, "b"))
    end },
  { "depthwise_conv2d", function()
      local x, w = ph({ 1, 6, 8, 8 }, "x"), ph({ 6, 1, 3, 3 }, "w")
      return topi.nn.depthwise_conv2d_nchw(x, w, { strides = 1, padding = { 1, 1, 1, 1 }, dilation = 1 })
    end },
  { "dense_bias", function()
      local x, w, b = ph({ 4, 24 }, "x"), ph({ 20, 24 }, "w"), ph({ 20 }, "b")
      return topi.nn.dense(x, w, b)
    end },
  { "dense_split_k", function()   -- batch 1, long reduction: GPU split-K over threads
      local x, w = ph({ 1, 256 }, "x"), ph({ 16, 256 }, "w")
      return topi.nn.dense(x, w)
    end, gpu_rf = true },
  { "max_pool2d", function()
      local x = ph({ 1, 4, 9, 9 }, "x")
      return topi.nn.max_pool2d(x, { pool_size = { 3, 3 }, strides = { 2, 2 }, padding = { 1, 1, 1, 1 } })
    end },
  { "global_avg_pool", function()
      local x = ph({ 1, 8, 7, 7 }, "x")
      return topi.nn.global_pool(x, "avg", "NCHW")
    end },
  { "softmax", function()
      local x = ph({ 3, 40 }, "x")
      return topi.nn.softmax(x, { axis = -1 })
    end },
}

local function close(a, b, what)
  local fa, fb = a:flat(), b:flat()
  assert(#fa == #fb, what .. ": sizes differ")
  local maxd, maxv = 0, 0
  for i = 1, #fa do
    maxd = math.max(maxd, math.abs(fa[i] - fb[i]))
    maxv = math.max(maxv, math.abs(fb[i]))
  end
  if maxd > 1e-4 * math.max(1, maxv) then error(string.format("%s: max difference %g", what, maxd), 2) end
end

local function run(f, args, device)
  local dev = {}
  for i, a in ipairs(args) do dev[i] = device and a:copyto(device) or a:copyto("cpu") end
  f(unpack(dev))
  return dev[#dev]:copyto("cpu")
end

local total, gpu_total, gpu_failed = 0, 0, {}
local am = require "tunelua.autotvm.measure"
-- asked in a child: OpenCL initialized in this process would hang the measurement children
local have_ocl = require("tunelua.autotvm.measure_opencl").device_info(0) ~= nil
local only = os.getenv("TUNELUA_ANSOR_TYPES")   -- e.g. "dense_split_k,conv2d_nhwc_split_k"
for _, ty in ipairs(types) do
  local name, make = ty[1], ty[2]
  if only and not ("," .. only .. ","):find("," .. name .. ",", 1, true) then goto next_type end
  local cpu = auto_scheduler.SearchTask{ compute_dag = make(), target = "llvm" }
  local args = search.random_args(cpu, nil, 11)
  local init = require("ffi").cast("tl_sched *", require("tunelua.core").C.tl_ansor_policy_init_state(cpu:policy_handle()))
  local ref_state = setmetatable({ handle = init, task = cpu }, search.State_mt)
  local ref = run(ref_state:build(), args)
  local policy = auto_scheduler.SketchPolicy(cpu, { seed = 5 })
  local states = policy:sample(N)
  assert(#states == N, name .. ": sampled " .. #states)
  local distinct = {}
  for i, st in ipairs(states) do
    local ok, err = pcall(function() close(run(st:build(nil, { cflags = "-O1" }), args), ref, name .. " state " .. i) end)
    if not ok then error(tostring(err) .. "\nsteps: " .. st:steps()) end
    distinct[st:steps()] = true
    total = total + 1
  end
  local nd_ = 0
  for _ in pairs(distinct) do nd_ = nd_ + 1 end
  assert(nd_ > math.min(N, 3) / 2, name .. ": too few distinct states")
  if have_ocl and GPU_N > 0 then
    -- through the measurement path: each state built and run in a child against the
    -- unscheduled DAG on the device (a device compiler that crashes takes only that child)
    local gpu = auto_scheduler.SearchTask{ compute_dag = cpu.compute_dag, target = "opencl" }
    local gp = auto_scheduler.SketchPolicy(gpu, { seed = 9 })
    local mt = search.measure_task(gpu)
    local inputs = {}
    local sampled = gp:sample(ty.gpu_rf and math.max(GPU_N, 4) or GPU_N)
    if ty.gpu_rf then   -- the split-K sketches' states are among them (an "RF" step)
      local rf = 0
      for _, st in ipairs(sampled) do rf = rf + (st:steps():find('"RF"', 1, true) and 1 or 0) end
      assert(rf >= 1 and rf < #sampled, name .. ": " .. rf .. " of " .. #sampled .. " GPU states are split-K")
    end
    for i, st in ipairs(sampled) do
      mt.states[i] = st
      inputs[i] = am.MeasureInput(mt, i)
    end
    local batch = am.create_measure_batch(mt, am.measure_option({ builder = am.LocalBuilder({ timeout = 120 }),
      runner = am.LocalRunner({ number = 1, repeats = 1, timeout = 120, check_correctness = true }) }))
    local ok_n = 0
    for i, r in ipairs(batch(inputs)) do
      if r.error_no == am.MeasureErrorNo.WRONG_ANSWER then
        error(name .. " opencl state " .. i .. ": " .. tostring(r.error_msg) .. "\nsteps: " .. mt.states[i]:steps())
      elseif r.error_no == 0 then
        ok_n = ok_n + 1
      else
        gpu_failed[#gpu_failed + 1] = string.format("%s opencl state %d: %s: %s", name, i,
          am.error_name(r.error_no), tostring(r.error_msg):sub(1, 200))
      end
    end
    assert(ok_n >= 1, name .. ": no OpenCL state ran\n" .. table.concat(gpu_failed, "\n"))
    gpu_total = gpu_total + ok_n
  end
  ::next_type::
end
-- the device compiler may crash on a kernel (pocl's barrier regions): the state is an error
-- record, as in tuning; most must run
for _, m in ipairs(gpu_failed) do io.stderr:write("note: ", m, "\n") end
assert(#gpu_failed <= math.max(1, math.floor(gpu_total / 4)), #gpu_failed .. " OpenCL states failed")
print(string.format("test_ansor_states: %d CPU states and %d OpenCL states match the unscheduled DAGs",
                    total, gpu_total))
