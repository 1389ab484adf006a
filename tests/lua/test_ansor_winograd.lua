-- Winograd in auto-scheduled networks (core/topi/winograd_nhwc.c, tunelua.auto_scheduler.winograd):
--   * conv2d_winograd_nhwc with F(2x2), F(4x4), F(6x6) on random data against the direct
--     conv2d NHWC: odd sizes, outputs that are not multiples of the tile, no padding, uneven
--     padding, batch 2 (tolerance as test_winograd_x86: eps32 * 9C * kappa(m) * max|x| * max|w|);
--     the FLOP count is the direct conv's; bad input is refused with a message;
--   * random states of the CPU sketch rules on a small Winograd DAG (with a fused bias and
--     relu) compute what the unscheduled DAG computes, and every sketch of resnet-18's
--     Winograd tasks (NHWC, 224x224) and random states of each lower (test_ansor_search.lua
--     lowers every sketch of resnet-18 NHWC under the CPU and the GPU rules too);
--   * extract_tasks: resnet-18 NHWC gets Winograd tasks where the x86 rule says so ("auto"),
--     none with "never", every 3x3 stride-1 conv with "always";
--   * a small NHWC network with 3x3 convs, tuned for a few trials and built through
--     ApplyHistoryBest (the records replayed on the Winograd DAGs), and built with no records
--     (the default schedules), matches the reference interpreter; with an OpenCL device, a
--     Winograd network ("always") on the default OpenCL schedules does too.
local tl = require "tunelua"
local te, topi, nd = tl.te, tl.topi, tl.nd
local core = require "tunelua.core"
local auto_scheduler = require "tunelua.auto_scheduler"
local search = require "tunelua.auto_scheduler.search"
local winograd = require "tunelua.auto_scheduler.winograd"
local util = require "tests.lua.lib.util"

local KAPPA = { [2] = 16, [4] = 64, [6] = 256 }
local EPS32 = 1.2e-7

local function maxabs(a)
  local m = 0
  for _, v in ipairs(a:flat()) do m = math.max(m, math.abs(v)) end
  return m
end

local function maxdiff(a, b)
  local fa, fb = a:flat(), b:flat()
  assert(#fa == #fb, "sizes differ")
  local d = 0
  for i = 1, #fa do d = math.max(d, math.abs(fa[i] - fb[i])) end
  return d
end

-- ---- the compute ---------------------------------------------------------------------------

local function check_compute(N, H, W, CI, CO, pad, m)
  local x = te.placeholder({ N, H, W, CI }, "float32", "x")
  local w = te.placeholder({ 3, 3, CI, CO }, "float32", "w")
  local ref = topi.nn.conv2d_nhwc(x, w, { strides = 1, padding = pad, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ ref }, "cpu"), { x, w, ref }, "c")
  local a = 2 + m
  local u = te.placeholder({ a, a, CI, CO }, "float32", "u")
  local y = topi.op("conv2d_winograd_nhwc", { x, u }, { padding = pad })[1]
  local ysh = y.shape
  local rsh = ref.shape
  assert(table.concat(ysh, ",") == table.concat(rsh, ","), "output shape " .. table.concat(ysh, ","))
  local f = tl.build(topi.default_schedule({ y }, "cpu"), { x, u, y }, "c")
  local xv = nd.random_uniform({ N, H, W, CI }, { seed = 3, low = -1, high = 1 })
  local wv = nd.random_uniform({ 3, 3, CI, CO }, { seed = 4, low = -1, high = 1 })
  local want, got = nd.empty(rsh), nd.empty(rsh)
  ref_f(xv, wv, want)
  f(xv, winograd.weight(wv, m), got)
  local tol = EPS32 * 9 * CI * KAPPA[m] * maxabs(xv) * maxabs(wv)
  local d = maxdiff(got, want)
  assert(d <= tol, string.format("F(%dx%d) %dx%dx%dx%d -> %d pad %s: max difference %g > %g", m, m, N, H, W,
                                 CI, CO, table.concat(type(pad) == "table" and pad or { pad }, ","), d, tol))
  return d
end

check_compute(1, 7, 9, 5, 6, { 1, 1, 1, 1 }, 2)
check_compute(1, 7, 9, 5, 6, { 1, 1, 1, 1 }, 4)
check_compute(2, 10, 11, 8, 4, { 1, 1, 1, 1 }, 4)
check_compute(1, 8, 8, 3, 5, { 0, 0, 0, 0 }, 4)
check_compute(1, 9, 6, 4, 3, { 2, 0, 1, 1 }, 2)
check_compute(1, 13, 13, 4, 8, { 1, 1, 1, 1 }, 6)


-- the FLOP count is the direct conv's; bad input is refused
do
  local x = te.placeholder({ 1, 7, 9, 5 }, "float32", "x")
  local u = te.placeholder({ 4, 4, 5, 6 }, "float32", "u")
  local y = topi.op("conv2d_winograd_nhwc", { x, u }, { padding = { 1, 1, 1, 1 } })[1]
  local t = auto_scheduler.SearchTask{ compute_dag = y, target = "llvm" }
  assert(t.flop == 2 * 7 * 9 * 6 * 5 * 9, "FLOP " .. t.flop)
  util.raises(function() topi.op("conv2d_winograd_nhwc", { x, te.placeholder({ 5, 5, 5, 6 }, "float32", "u5") }, {}) end,
              "kernel must be [a, a, 5, CO] with a = 4, 6 or 8")
  util.raises(function() topi.op("conv2d_winograd_nhwc", { x, te.placeholder({ 4, 4, 4, 6 }, "float32", "u4") }, {}) end,
              "kernel must be [a, a, 5, CO]")
  util.raises(function() topi.op("conv2d_winograd_nhwc", { x, u }, { padding = { -1, 0, 0, 0 } }) end,
              "padding must be non-negative")
  util.raises(function() winograd.weight(nd.empty({ 3, 3, 2, 2 }), 3) end, "tile size must be 2, 4 or 6")
  util.raises(function() winograd.weight(nd.empty({ 2, 3, 3, 3 }), 2) end, "expected a float32 HWIO kernel")
  util.raises(function() auto_scheduler.extract_tasks(tl.relay.Module(tl.relay.Function({}, tl.relay.const(nd.empty({ 1 })))),
                                                      {}, "llvm", { winograd = "sometimes" }) end,
              'winograd must be "auto", "always" or "never", got sometimes')
end

-- ---- random states of the CPU rules ----------------------------------------------------------

do
  local x, u, b = te.placeholder({ 1, 9, 11, 8 }, "float32", "x"), te.placeholder({ 4, 4, 8, 16 }, "float32", "u"),
                  te.placeholder({ 16 }, "float32", "b")
  local y = topi.op("conv2d_winograd_nhwc", { x, u }, { padding = { 1, 1, 1, 1 } })[1]
  local out = topi.nn.relu(topi.add(y, b))
  local task = auto_scheduler.SearchTask{ compute_dag = out, target = "llvm" }
  local args = search.random_args(task, nil, 7)
  local init = require("ffi").cast("tl_sched *", core.C.tl_ansor_policy_init_state(task:policy_handle()))
  local function run(f)
    local dev = {}
    for i, a in ipairs(args) do dev[i] = a:copyto("cpu") end
    f(unpack(dev))
    return dev[#dev]
  end
  local ref = run(setmetatable({ handle = init, task = task }, search.State_mt):build())
  assert(maxabs(ref) > 0.1, "the reference output is not trivial")
  local n = tonumber(os.getenv("TUNELUA_ANSOR_N") or "") or 10
  local states = auto_scheduler.SketchPolicy(task, { seed = 3 }):sample(n)
  assert(#states == n, "sampled " .. #states)
  for i, st in ipairs(states) do
    local d = maxdiff(run(st:build(nil, { cflags = "-O1" })), ref)
    if d > 1e-4 * maxabs(ref) then error(string.format("state %d: max difference %g\nsteps: %s", i, d, st:steps())) end
  end
  print(string.format("test_ansor_winograd: %d random states of a Winograd DAG match", n))
end

-- ---- extract_tasks on resnet-18 NHWC: the modes -----------------------------------------------

do
  local networks = require "networks"
  local mod, params = networks.get_network("resnet-18", { layout = "NHWC", batch_size = 1 })
  local function count(mode)
    local tasks = auto_scheduler.extract_tasks(mod, params, "llvm", { winograd = mode })
    local n = 0
    for _, t in ipairs(tasks) do
      if tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true) then
        n = n + 1
        -- the weight enters transformed: [a, a, CI, CO]
        assert(tostring(t.compute_dag):find("kernel_pack = PLACEHOLDER %[[46], [46], %d+, %d+%]"), "kernel_pack")
      end
    end
    return #tasks, n
  end
  local na, wa = count("auto")
  -- every sketch and a few random states of each Winograd task lower under the CPU rules
  local nsk, nst = 0, 0
  for _, t in ipairs(auto_scheduler.extract_tasks(mod, params, "llvm")) do
    if tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true) then
      for _, sk in ipairs(t:sketches()) do
        local ok, err = pcall(sk.lower, sk)
        if not ok then error(t.desc[1] .. ": a sketch does not lower: " .. tostring(err) .. "\n" .. sk:steps()) end
        nsk = nsk + 1
      end
      for _, st in ipairs(t:sample(4)) do
        local ok, err = pcall(st.lower, st)
        if not ok then error(t.desc[1] .. ": a state does not lower: " .. tostring(err) .. "\n" .. st:steps()) end
        nst = nst + 1
      end
    end
  end
  assert(nsk >= 2 * wa and nst == 4 * wa, nsk .. " sketches, " .. nst .. " states")
  local nn_, wn = count("never")
  local nw, ww = count("always")
  assert(na == nn_ and nw == nn_, "the modes change tasks, not their number")
  -- 3x3 stride-1 groups: 56x56x64, 28x28x128, 14x14x256 (Winograd by the rule) and 7x7x512 (direct),
  -- each as conv + bias + relu and conv + bias + add + relu, the first of each stage's second conv too
  assert(wn == 0, "never: no Winograd task, got " .. wn)
  assert(wa > 0 and wa < ww, string.format("auto: %d Winograd tasks of the %d that always gives", wa, ww))
  local tasks = auto_scheduler.extract_tasks(mod, params, "opencl")
  for _, t in ipairs(tasks) do
    assert(not tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true), "auto on OpenCL: direct convs")
  end
  print(string.format("test_ansor_winograd: resnet-18 NHWC: %d of %d tasks Winograd (auto), %d (always)", wa, na, ww))
end

-- ---- the transforms' loops in the CPU sketches and states ---------------------------------------
-- Every CPU sketch of a resnet-18 Winograd task inlines data_pack_rows into data_pack and runs
-- data_pack and inverse_rows as [p, channel.outer, the two positions unrolled, channel.inner]
-- (simplify-const-tensor); sampled states draw the channel's inner length as a multiple of the
-- vector lanes.

do
  local networks = require "networks"
  local mod, params = networks.get_network("resnet-18", { layout = "NHWC", batch_size = 1 })
  local task
  for _, t in ipairs(auto_scheduler.extract_tasks(mod, params, "llvm")) do
    if not task and tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true) then task = t end
  end
  assert(task, "resnet-18 NHWC has a Winograd task on llvm")
  local function stage(text, name)   -- the stage's line and its leaves
    return text:match("\n  %d+ " .. name:gsub("%.", "%%.") .. ": (.-)\n  %d+ ") or ""
  end
  local function leaves(body)
    local out = {}
    for name, ext, ann in body:gmatch("\n      %d+ ([%w_%.]+) %((%d+)%) ?([%w_$]*)") do
      out[#out + 1] = { name = name, ext = tonumber(ext), ann = ann }
    end
    return out
  end
  local function names(ls)
    local t = {}
    for _, l in ipairs(ls) do t[#t + 1] = l.name .. (l.ann == "unroll" and "!" or "") end
    return table.concat(t, " ")
  end
  local sketches = task:sketches()
  for _, sk in ipairs(sketches) do
    local text = tostring(sk)
    assert(stage(text, "data_pack_rows"):find("^inlined"), "data_pack_rows inlined into data_pack:\n" .. text)
    assert(names(leaves(stage(text, "data_pack"))) == "p ci.outer eps! nu! ci.inner",
           "data_pack's loops: " .. names(leaves(stage(text, "data_pack"))))
    assert(names(leaves(stage(text, "inverse_rows"))) == "p co.outer vh! r_b! co.inner",
           "inverse_rows' loops: " .. names(leaves(stage(text, "inverse_rows"))))
  end
  local lanes = task.hardware_params.vector_unit_bytes / 4
  assert(lanes >= 4 and 64 % lanes == 0, "vector lanes " .. lanes)
  local nvec = 0
  local states = task:sample(40)
  for _, st in ipairs(states) do
    for _, l in ipairs(leaves(stage(tostring(st), "data_pack"))) do
      if l.name == "ci.inner" and l.ext % lanes == 0 then nvec = nvec + 1 end
    end
  end
  assert(nvec == #states, string.format("data_pack's channel tile a multiple of %d lanes in %d of %d states", lanes,
                                        nvec, #states))
  print(string.format("test_ansor_winograd: %d sketches run the transforms unrolled; %d states tile their channels " ..
                      "by the lanes", #sketches, #states))
end

-- ---- a small NHWC network: tuned through ApplyHistoryBest, and with no records ---------------

do
  local relay = tl.relay
  local executor = require "tunelua.graph.executor"
  local reference = require "networks.reference"
  local dir = util.tmpdir("ansor-winograd")
  local C1 = 8
  local dv = relay.var("data", { shape = { 1, 28, 29, 4 } })
  local w1 = relay.var("w1", { shape = { 3, 3, 4, C1 } })
  local w2 = relay.var("w2", { shape = { 3, 3, C1, C1 } })
  local w3 = relay.var("w3", { shape = { 3, 3, C1, C1 } })
  local b = relay.var("b", { shape = { C1 } })
  local conv = function(x, w, pad)
    return relay.nn.conv2d(x, w, { padding = pad, channels = C1, kernel_size = { 3, 3 }, data_layout = "NHWC",
                                   kernel_layout = "HWIO" })
  end
  local y = relay.nn.relu(conv(dv, w1, { 1, 1, 1, 1 }))                            -- 28x29: F(4x4)
  local z = relay.nn.relu(relay.add(relay.nn.bias_add(conv(y, w2, { 1, 1, 1, 1 }), b, { axis = 3 }), y))
  local o = conv(z, w3, { 0, 0, 0, 0 })                                            -- 26x27: F(2x2)
  local mod = relay.Module(relay.Function({ dv, w1, w2, w3, b }, o))
  local params = {
    w1 = nd.random_uniform({ 3, 3, 4, C1 }, { seed = 21, low = -1, high = 1 }),
    w2 = nd.random_uniform({ 3, 3, C1, C1 }, { seed = 22, low = -1, high = 1 }),
    w3 = nd.random_uniform({ 3, 3, C1, C1 }, { seed = 23, low = -1, high = 1 }),
    b = nd.random_uniform({ C1 }, { seed = 24 }),
  }
  local inputs = { data = nd.random_uniform({ 1, 28, 29, 4 }, { seed = 25, low = -1, high = 1 }) }
  local ref = reference.run(mod, params, inputs)
  local dmax = maxabs(ref[1])
  local function check(lib, what)
    local m = executor.GraphModule(lib)
    m:set_input(inputs)
    m:run()
    local ok, msg = reference.compare(m:get_output(0), ref[1], { rtol = 1e-4, atol = EPS32 * 9 * C1 * KAPPA[4] * dmax })
    if not ok then error(what .. ": " .. msg, 2) end
  end
  local tasks = auto_scheduler.extract_tasks(mod, params, "llvm", { winograd = "always" })
  assert(#tasks == 3, "3 tasks, got " .. #tasks)
  local log = dir .. "/wg.json"
  for _, t in ipairs(tasks) do
    assert(tostring(t.compute_dag):find("conv2d_winograd_nhwc", 1, true), "a Winograd task: " .. t.desc[1])
    local policy = auto_scheduler.SketchPolicy(t, { seed = 2, program_cost_model = auto_scheduler.RandomModel(),
      params = { evolutionary_search_population = 16, sample_init_min_population = 4 } })
    local r = t:tune(auto_scheduler.TuningOptions{ num_measure_trials = 2, num_measures_per_round = 2, verbose = 0,
      builder = auto_scheduler.LocalBuilder({ timeout = 60 }),
      runner = auto_scheduler.LocalRunner({ number = 1, timeout = 60, check_correctness = true }),
      measure_callbacks = { auto_scheduler.RecordToFile(log) } }, policy)
    assert(r.best_cost < math.huge, "a measured state of " .. t.desc[1])
  end
  local tuned = executor.build(mod, { target = "llvm", params = params, quiet = true, winograd = "always",
                                      history = auto_scheduler.ApplyHistoryBest(log) })
  local keys, nansor = {}, 0
  for _, t in ipairs(tasks) do keys[t.workload_key] = true end
  for _, k in ipairs(tuned.kernels) do
    if k.tuned == "ansor" then
      nansor = nansor + 1
      assert(keys[k.record.workload_key], "a replayed record is one of the Winograd tasks'")
    end
  end
  assert(nansor == 3, "the 3 Winograd groups replay their records, got " .. nansor)
  check(tuned, "tuned Winograd network")
  -- no records: the default schedules of the Winograd DAGs
  local untuned = executor.build(mod, { target = "llvm", params = params, quiet = true, winograd = "always",
                                        history = auto_scheduler.ApplyHistoryBest({}) })
  check(untuned, "default-schedule Winograd network")
  -- with "never" the records of the Winograd tasks do not apply: every group is direct
  local direct = executor.build(mod, { target = "llvm", params = params, quiet = true, winograd = "never",
                                       history = auto_scheduler.ApplyHistoryBest(log) })
  for _, k in ipairs(direct.kernels) do assert(k.tuned ~= "ansor", "never: no Winograd record replays") end
  check(direct, "direct network")
  util.cleanup(dir)
  print("test_ansor_winograd: a tuned and an untuned Winograd network match the reference interpreter")
end

-- ---- OpenCL (when there is a device; last: this process then holds an OpenCL context) --------

if require("tunelua.autotvm.measure_opencl").device_info(0) ~= nil then
  local relay = tl.relay
  local executor = require "tunelua.graph.executor"
  local reference = require "networks.reference"
  local dv = relay.var("data", { shape = { 1, 14, 15, 8 } })
  local w1 = relay.var("w1", { shape = { 3, 3, 8, 8 } })
  local mod = relay.Module(relay.Function({ dv, w1 }, relay.nn.relu(relay.nn.conv2d(dv, w1, {
    padding = { 1, 1, 1, 1 }, channels = 8, kernel_size = { 3, 3 }, data_layout = "NHWC", kernel_layout = "HWIO" }))))
  local params = { w1 = nd.random_uniform({ 3, 3, 8, 8 }, { seed = 31, low = -1, high = 1 }) }
  local inputs = { data = nd.random_uniform({ 1, 14, 15, 8 }, { seed = 32, low = -1, high = 1 }) }
  local tasks = auto_scheduler.extract_tasks(mod, params, "opencl", { winograd = "always" })
  assert(#tasks == 1 and tostring(tasks[1].compute_dag):find("conv2d_winograd_nhwc", 1, true), "always on OpenCL")
  local lib = executor.build(mod, { target = "opencl", params = params, quiet = true, winograd = "always",
                                    history = auto_scheduler.ApplyHistoryBest({}) })
  local m = executor.GraphModule(lib)
  m:set_input(inputs)
  m:run()
  local ref = reference.run(mod, params, inputs)
  local ok, msg = reference.compare(m:get_output(0), ref[1], { rtol = 1e-4, atol = EPS32 * 9 * 8 * KAPPA[2] * maxabs(ref[1]) })
  assert(ok, "OpenCL Winograd network: " .. tostring(msg))
  print("test_ansor_winograd: the OpenCL default schedules of a Winograd network match the reference interpreter")
end
