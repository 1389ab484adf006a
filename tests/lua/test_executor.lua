-- Graph executor (tunelua.graph.executor, core/graph/executor.c, plan.c): the memory
-- plan on known lifetimes, small hand-built graphs and two networks at reduced image size
-- against the reference interpreter (networks.reference: the unfused, unoptimized graph
-- with naive kernels), fp32 relative error < 1e-4. More networks: test_executor_networks.lua.
local ffi = require "ffi"
local core = require "tunelua.core"
local nd = require "tunelua.nd"
local relay = require "tunelua.relay"
local reference = require "networks.reference"
local executor = require "tunelua.graph.executor"
local check = require "tests.lua.lib.executor_check"

local C, ctx = core.C, core.ctx

local eq = check.eq

-- ---- tl_graph_plan -----------------------------------------------------------------------

local function plan(sizes, first, last, align)
  local n = #sizes
  local s, f, l, o = ffi.new("int64_t[?]", n + 1), ffi.new("int[?]", n + 1), ffi.new("int[?]", n + 1),
                     ffi.new("int64_t[?]", n + 1)
  for i = 1, n do s[i - 1], f[i - 1], l[i - 1] = sizes[i], first[i], last[i] end
  local total = ffi.new("int64_t[1]")
  core.check(C.tl_graph_plan(ctx, n, s, f, l, align or 64, o, total))
  local offs = {}
  for i = 1, n do offs[i] = tonumber(o[i - 1]) end
  return offs, tonumber(total[0])
end

do
  -- a chain: A live [1,2], B [2,3], C [3,4]: A and C share, B sits beside them
  local offs, total = plan({ 100, 100, 100 }, { 1, 2, 3 }, { 2, 3, 4 })
  eq(total, 256, "chain arena")
  eq(offs[1], offs[3], "A and C share")
  assert(offs[2] ~= offs[1], "B does not overlap A")
  -- largest first; a small buffer fits in the gap left by a dead one
  offs, total = plan({ 1000, 64, 64, 512 }, { 1, 1, 3, 3 }, { 2, 4, 4, 4 }, 64)
  eq(offs[1], 0, "largest at 0")
  eq(total, 1088, "gap reuse arena")      -- 1024 (A, then D) + 64 (B)
  eq(offs[4], 0, "D reuses A's bytes")
  -- all overlapping: no sharing
  offs, total = plan({ 10, 20, 30 }, { 1, 1, 1 }, { 3, 3, 3 }, 16)
  eq(total, 16 + 32 + 32, "no sharing when all live")
  -- bad lifetimes are refused
  local ok, err = pcall(plan, { 10 }, { 3 }, { 2 })
  assert(not ok and tostring(err):find("lifetime", 1, true), tostring(err))
  offs, total = plan({}, {}, {})
  eq(total, 0, "empty plan")
end

-- ---- small graphs ----------------------------------------------------------------------

local function check_graph(mod, params, inputs, what)
  local lib, m = check.check_graph(mod, params, inputs, nil, what)
  assert(lib.planned_bytes <= lib.intermediate_bytes, what .. ": plan larger than the intermediates")
  return lib, m
end

local function rnd(shape, seed, lo, hi)
  return nd.random_uniform(shape, { seed = seed, low = lo or -1, high = hi or 1 })
end

do
  -- conv + bias + relu, flatten, dense, softmax
  local x = relay.var("data", { shape = { 1, 3, 8, 8 } })
  local w = relay.var("w", { shape = { 4, 3, 3, 3 } })
  local b = relay.var("b", { shape = { 4 } })
  local w2 = relay.var("w2", { shape = { 10, 256 } })
  local c = relay.nn.conv2d(x, w, { padding = { 1, 1 }, channels = 4, kernel_size = { 3, 3 } })
  local y = relay.nn.relu(relay.nn.bias_add(c, b))
  local f = relay.nn.softmax(relay.nn.dense(relay.nn.batch_flatten(y), w2))
  local mod = relay.Module(relay.Function({ x, w, b, w2 }, f))
  local params = { w = rnd({ 4, 3, 3, 3 }, 1), b = rnd({ 4 }, 2), w2 = rnd({ 10, 256 }, 3, -0.1, 0.1) }
  local lib, m = check_graph(mod, params, { data = rnd({ 1, 3, 8, 8 }, 4) }, "conv-dense")
  eq(lib.num_groups, 4, "conv+bias+relu, flatten, dense, softmax groups")
  eq(m:get_num_outputs(), 1, "outputs")
  eq(m:get_num_inputs(), 1, "inputs")
  -- run again with another input: the output follows
  local x2 = rnd({ 1, 3, 8, 8 }, 5)
  m:set_input("data", x2)
  m:run()
  reference.assert_close(m:get_output(0), reference.run(mod, params, { data = x2 })[1], { rtol = 1e-4 })
  -- set_input by index (0-based, as TVM) and errors naming the inputs
  m:set_input(0, x2)
  local ok, err = pcall(m.set_input, m, "dat", x2)
  assert(not ok and tostring(err):find("no input named 'dat'", 1, true)
         and tostring(err):find("data", 1, true), tostring(err))
  ok, err = pcall(m.get_output, m, 1)
  assert(not ok and tostring(err):find("out of range", 1, true), tostring(err))
  -- benchmark: the TVM line, and numbers
  local r = m:benchmark({ number = 2, repeats = 2, quiet = true })
  assert(r.mean > 0 and #r.results == 2 and r.std >= 0, "benchmark results")
  -- TVM's spellings: lib["default"](dev), benchmark(dev, opts), module.time_evaluator
  local m2 = executor.GraphModule(lib["default"]("cpu"))
  m2:set_input("data", x2)
  local r2 = m2:benchmark("cpu", { number = 1, repeats = 2, quiet = true })
  eq(#r2.results, 2, "benchmark(dev, opts)")
  -- two modules timed in 3 interleaved rounds of floor(7 / 3) = 2 runs each
  local ri = executor.benchmark_interleaved({ m, m2 }, 7, 3)
  eq(#ri, 2, "benchmark_interleaved: a result per module")
  for i = 1, 2 do
    eq(#ri[i].results, 6, "benchmark_interleaved: runs of module " .. i)
    assert(ri[i].median > 0 and ri[i].mean > 0, "benchmark_interleaved: positive times")
  end
  assert(tostring(r2):find("^Mean inference time %(std dev%): [%d.]+ ms %([%d.]+ ms%)$"), tostring(r2))
  eq(#m2.module:time_evaluator("run", "cpu", { number = 1, ["repeat"] = 3 })().results, 3, "time_evaluator")
  reference.assert_close(m2:get_output(0), reference.run(mod, params, { data = x2 })[1], { rtol = 1e-4 })
  local prof = m:profile(1)
  eq(#prof, 4, "profile entries")
end

do
  -- residual block with a two-consumer value and a concatenation of two branches:
  -- relu(x) feeds conv1 and the add; concat(conv_a, conv_b) on channels; max pool; mean
  local x = relay.var("data", { shape = { 1, 4, 10, 10 } })
  local w1 = relay.var("w1", { shape = { 4, 4, 3, 3 } })
  local wa = relay.var("wa", { shape = { 3, 4, 1, 1 } })
  local wb = relay.var("wb", { shape = { 5, 4, 3, 3 } })
  local r = relay.nn.relu(x)
  local c1 = relay.nn.conv2d(r, w1, { padding = { 1, 1 }, channels = 4, kernel_size = { 3, 3 } })
  local s = relay.add(c1, r)
  local a = relay.nn.conv2d(s, wa, { channels = 3, kernel_size = { 1, 1 } })
  local b = relay.nn.conv2d(s, wb, { padding = { 1, 1 }, channels = 5, kernel_size = { 3, 3 } })
  local cat = relay.concatenate({ a, b }, 1)
  local p = relay.nn.max_pool2d(cat, { pool_size = { 2, 2 }, strides = { 2, 2 } })
  local g = relay.nn.global_avg_pool2d(relay.nn.relu(p))
  local mod = relay.Module(relay.Function({ x, w1, wa, wb }, g))
  local params = { w1 = rnd({ 4, 4, 3, 3 }, 11), wa = rnd({ 3, 4, 1, 1 }, 12), wb = rnd({ 5, 4, 3, 3 }, 13) }
  local lib = check_graph(mod, params, { data = rnd({ 1, 4, 10, 10 }, 14) }, "residual-concat")
  assert(lib.planned_bytes < lib.intermediate_bytes, "buffers are reused")
end

do
  -- NHWC conv + depthwise conv (HWOI) + batch_norm (SimplifyInference) + dense with bias
  local x = relay.var("data", { shape = { 1, 6, 6, 3 } })
  local w = relay.var("w", { shape = { 3, 3, 3, 8 } })
  local dw = relay.var("dw", { shape = { 3, 3, 8, 1 } })
  local gamma, beta = relay.var("gamma", { shape = { 8 } }), relay.var("beta", { shape = { 8 } })
  local mean, var = relay.var("mean", { shape = { 8 } }), relay.var("var", { shape = { 8 } })
  local fw, fb = relay.var("fw", { shape = { 5, 288 } }), relay.var("fb", { shape = { 5 } })
  local c = relay.nn.conv2d(x, w, { padding = { 1, 1 }, channels = 8, kernel_size = { 3, 3 },
                                    data_layout = "NHWC", kernel_layout = "HWIO" })
  local d = relay.nn.conv2d(c, dw, { padding = { 1, 1 }, channels = 8, groups = 8, kernel_size = { 3, 3 },
                                     data_layout = "NHWC", kernel_layout = "HWOI" })
  local bn = relay.nn.batch_norm(d, gamma, beta, mean, var, { axis = 3 })
  local y = relay.nn.relu(relay.tuple_get(bn, 0))
  local o = relay.nn.bias_add(relay.nn.dense(relay.nn.batch_flatten(y), fw), fb)
  local mod = relay.Module(relay.Function({ x, w, dw, gamma, beta, mean, var, fw, fb }, o))
  local params = { w = rnd({ 3, 3, 3, 8 }, 21), dw = rnd({ 3, 3, 8, 1 }, 22), gamma = rnd({ 8 }, 23, 0.5, 1.5),
                   beta = rnd({ 8 }, 24), mean = rnd({ 8 }, 25), var = rnd({ 8 }, 26, 0.5, 2),
                   fw = rnd({ 5, 288 }, 27, -0.1, 0.1), fb = rnd({ 5 }, 28) }
  check_graph(mod, params, { data = rnd({ 1, 6, 6, 3 }, 29) }, "nhwc-bn")
end

-- ---- the tuned path: a history log picks the AutoTVM template's config ------------------

do
  local record = require "tunelua.autotvm.record"
  local extract = require "tunelua.graph.extract"
  local x = relay.var("data", { shape = { 1, 8, 10, 10 } })
  local w = relay.var("w", { shape = { 16, 8, 3, 3 } })
  local b = relay.var("b", { shape = { 16 } })
  local y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, { padding = { 1, 1 }, channels = 16,
                                                                  kernel_size = { 3, 3 } }), b))
  local mod = relay.Module(relay.Function({ x, w, b }, y))
  local params = { w = rnd({ 16, 8, 3, 3 }, 31), b = rnd({ 16 }, 32) }
  local tasks = extract.autotvm(mod, { target = "llvm", params = params, ops = { "nn.conv2d" } })
  eq(#tasks, 2, "one conv2d task and its winograd task (3x3, stride 1)")
  eq(tasks[1].name, "conv2d_NCHWc.x86", "x86 conv template")
  eq(tasks[2].name, "conv2d_NCHWc_winograd.x86", "x86 winograd template")
  assert(tasks[1].config_space, "an AutoTVM task with a config space")
  do
    local t = tasks[1]
    local cfg = t.config_space:get(5)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(record.encode({ task = t, config = cfg },
                          { costs = { 0.001 }, error_no = 0, all_cost = 1, timestamp = 0 }), "\n")
    f:close()
    local lib = executor.build(mod, { target = "llvm", params = params, history = path, quiet = true })
    os.remove(path)
    eq(lib.num_tuned, 1, "tuned groups")
    eq(lib.kernels[1].tuned, "conv2d_NCHWc.x86 config 5", "the logged config is used")
    local m = executor.GraphModule(lib)
    local xi = rnd({ 1, 8, 10, 10 }, 33)
    m:set_input("data", xi)
    m:run()
    reference.assert_close(m:get_output(0), reference.run(mod, params, { data = xi })[1], { rtol = 1e-4 })
  end
end

-- ---- networks at reduced size ----------------------------------------------------------

local lib = check.check_network("mobilenet", "NHWC", 32, 7)
eq(lib.num_groups - lib.num_tuned, lib.num_groups, "no history: every group untuned")
check.check_network("resnet-18", "NCHW", 32, 7)

-- a network for another machine's triple with no cross toolchain is an error here, not an x86
-- build; an arm_cpu triple (a cross toolchain) builds a host twin and exports for the device
-- (tests/lua/test_arm_export.lua)
do
  local mod, params = require("networks").get_network("resnet-18", { image_size = 32 })
  local ok, err = pcall(relay.build, mod, { target = "llvm -mtriple=riscv64-linux-gnu",
                                            params = params, quiet = true })
  assert(not ok and tostring(err):match("is for riscv64%-linux%-gnu, but a network runs on this host only"),
         tostring(err))
end

print("test_executor: ok")
