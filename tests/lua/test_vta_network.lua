-- A packed network with its conv groups on VTA (targets/vta's IR route, vta-sim) and the rest
-- on the host CPU, one run loop: each group's own ending (bias, relu, the rounding shift,
-- the clip, a residual) run on VTA equals topi's CPU conv2d_packed with the same ending bit
-- for bit on random data for several layer shapes; resnet18_v1 (small input) run with all its
-- 19 packed conv groups on the simulator equals the plain CPU run of the same quantized graph
-- (unpacked), element for element, and
-- reports per-group simulated cycles.
local relay = require "tunelua.relay"
local nd = require "tunelua.nd"
local networks = require "networks"
local quantize = require "tunelua.relay.quantize"
local graph_pack = require "tunelua.relay.graph_pack"
local executor = require "tunelua.graph.executor"
local extract = require "tunelua.graph.extract"
local walk = require "tunelua.graph.walk"
local vta_groups = require "tunelua.graph.vta_groups"
local vta = require "tunelua.vta"

local env = vta.get_env()

local function same(a, b, what)
  local x, y = a:flat(), b:flat()
  assert(#x == #y, what .. ": sizes")
  for i = 1, #x do
    if x[i] ~= y[i] then error(string.format("%s: element %d: %s vs %s", what, i, x[i], y[i]), 2) end
  end
end

local function build(body, opts)
  opts.target, opts.quiet = "llvm", true
  local lib = executor.build(relay.Module(body), opts)
  return lib, executor.GraphModule(lib)
end

-- ---- one group: the conv and its ending on VTA against topi on the CPU --------------------
-- The group is a relay graph; the VTA executor finds it VTA-able (vta_groups.match) and runs
-- it on the simulator; the CPU executor runs topi conv2d_packed and the element-wise ops.
-- A config that fits the plain template but not with the residual's tile in the accumulator
-- too (the largest such index): the executor falls back to config 0 for that group.
local function overflowing(task, m)
  local sim = vta.simulator(env)
  for i = task:len() - 1, 0, -1 do
    if task:check(i) and not pcall(vta.group, sim, task, i, m.epilogue) then return i, "given" end
  end
  error("no config overflows the accumulator with the ending")
end

for ci, case in ipairs {
  { c = 2, o = 2, h = 8, k = 3, s = 1, p = 1, res = false, shift = 9 },
  { c = 2, o = 4, h = 9, k = 3, s = 2, p = 1, res = false, shift = 10 },
  { c = 3, o = 2, h = 6, k = 1, s = 2, p = 0, res = false, shift = 7 },
  { c = 2, o = 2, h = 7, k = 3, s = 1, p = 1, res = true, shift = 10 },
  { c = 4, o = 4, h = 14, k = 3, s = 1, p = 1, res = true, shift = 11, config = overflowing },
} do
  local B = 16
  local oh = math.floor((case.h + 2 * case.p - case.k) / case.s) + 1
  local x = nd.random_uniform({ 1, case.c, case.h, case.h, 1, B }, { seed = 10 + ci, low = -128, high = 128 }):astype("int8")
  local w = nd.random_uniform({ case.o, case.c, case.k, case.k, B, B }, { seed = 20 + ci, low = -128, high = 128 }):astype("int8")
  local bias = nd.random_uniform({ case.o, 1, 1, 1, B }, { seed = 30 + ci, low = -30000, high = 30000 }):astype("int32")
  local data = relay.var("data", { shape = x:shape(), dtype = "int8" })
  local e = relay.nn.conv2d(data, relay.const(w), { channels = case.o * B, kernel_size = case.k,
    strides = case.s, padding = case.p, out_dtype = "int32", data_layout = "NCHW1n16c",
    kernel_layout = "OIHW16o16i" })
  e = relay.add(e, relay.const(bias))
  local inputs = { data = x }
  if case.res then
    local r = nd.random_uniform({ 1, case.o, oh, oh, 1, B }, { seed = 40 + ci, low = -200000, high = 200000 }):astype("int32")
    e = relay.add(e, relay.var("res", { shape = r:shape(), dtype = "int32" }))
    inputs.res = r
  end
  e = relay.nn.relu(e)
  e = relay.add(e, relay.const(2 ^ (case.shift - 1), "int32"))
  e = relay.right_shift(e, relay.const(case.shift, "int32"))
  e = relay.cast(relay.clip(e, -127, 127), "int8")
  local _, cpu = build(e, {})
  local lib, dev = build(e, { vta = { env = env, config = case.config } })
  for _, m in ipairs { cpu, dev } do
    m:set_input(inputs)
    m:run()
  end
  local rows, total = lib:vta_cycles()
  assert(#rows == 1 and total > 0, string.format("case %d: the group runs on VTA (%d VTA groups)", ci, #rows))
  if case.config then
    -- the overflowing config is replaced by a smaller neighbour (fewer threads, smaller
    -- spatial tiles), not by config 0
    local task = vta.task(env, rows[1].args)
    local first = case.config(task, { epilogue = rows[1].epilogue })
    local near = vta_groups.smaller_configs(task, rows[1].args, first)
    assert(#near > 0 and rows[1].index ~= first and rows[1].index ~= 0 and rows[1].source == "given-fit",
           string.format("case %d: config %d (%s) after %d", ci, rows[1].index, rows[1].source, first))
    local listed = false
    for _, i in ipairs(near) do if i == rows[1].index then listed = true end end
    assert(listed, "case " .. ci .. ": the config is one of smaller_configs'")
  end
  same(cpu:get_output(0), dev:get_output(0), string.format("case %d: VTA vs topi", ci))
  -- the output is not trivially zero
  local nz = 0
  for _, v in ipairs(dev:get_output(0):flat()) do if v ~= 0 then nz = nz + 1 end end
  assert(nz > 0, "case " .. ci .. ": an all-zero output checks nothing")
end

-- the same endings through task:run_fused against the C reference, at several configs
do
  local t = vta.task(env, { { "TENSOR", { 1, 2, 8, 8, 1, 16 }, "int8" }, { "TENSOR", { 2, 2, 3, 3, 16, 16 }, "int8" },
                            { 1, 1 }, { 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" })
  for _, i in ipairs { 0, 5, t:len() - 1 } do
    if t:check(i) then
      local s = t:run_fused(i, { { "bias" }, { "res", 2 }, { "max", 0 }, { "add", 512 }, { "shr", 10 },
                                 { "max", -127 }, { "min", 127 } }, { seed = i })
      assert(s.cycles > 0 and s.alu_counter > 0)
    end
  end
  local ok, err = pcall(t.run_fused, t, 0, { { "sqrt" } })
  assert(not ok and tostring(err):find("sqrt", 1, true), tostring(err))
end

-- ---- resnet18_v1: VTA groups on the simulator, the rest on the CPU ------------------------
do
  local mod, params = networks.get_network("resnet18_v1", { image_size = 32 })
  local qmod = quantize.quantize(mod, params)
  local pmod = graph_pack.graph_pack(qmod, { env = env,
    start_name = "nn.max_pool2d", stop_name = "nn.global_avg_pool2d" })
  -- which groups VTA runs: every packed conv's (store_lowbit_output stores each block's
  -- output and each downsample conv's as int8, so every group ends in an int8 cast)
  local nvta, npacked = 0, 0
  for _, n in ipairs(walk.postorder(walk.main(extract.optimize(pmod, { target = "llvm" })).body)) do
    if walk.is_fused_call(n) then
      local has = false
      walk.each_op_call(n.op.body, function(c)
        if c.op == "nn.conv2d" and c.attrs.data_layout == "NCHW1n16c" then has = true end
      end)
      if has then npacked = npacked + 1 end
      if vta_groups.match(n) then nvta = nvta + 1 end
    end
  end
  assert(npacked == 19 and nvta == 19, string.format("%d packed conv groups, %d on VTA", npacked, nvta))
  -- the plain CPU run of the same quantized graph, unpacked
  local cpu = executor.GraphModule(executor.build(qmod, { target = "llvm", quiet = true }))
  local lib = executor.build(pmod, { target = "llvm", quiet = true, vta = { env = env } })
  local m = executor.GraphModule(lib)
  for s = 1, 2 do
    local x = nd.random_uniform({ 1, 3, 32, 32 }, { seed = 50 + s, low = -1, high = 1 })
    cpu:set_input("data", x)
    cpu:run()
    m:set_input("data", x)
    m:run()
    same(cpu:get_output(0), m:get_output(0), "resnet18_v1: VTA + CPU vs CPU")
  end
  local rows, total, secs = lib:vta_cycles()
  assert(#rows == 19)
  local sum = 0
  for _, r in ipairs(rows) do
    assert(r.cycles > 0, r.name)
    sum = sum + r.cycles
  end
  assert(sum == total and math.abs(secs - total / (env.CLOCK_MHZ * 1e6)) < 1e-12)
end

-- ---- the config picker: tuned log, then TopHub, then config 0 ------------------------------
do
  local json = require "tunelua.json"
  local args = { { "TENSOR", { 1, 4, 56, 56, 1, 16 }, "int8" }, { "TENSOR", { 4, 4, 3, 3, 16, 16 }, "int8" },
                 { 1, 1 }, { 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" }
  local task = vta.task(env, args)
  local idx = 7
  assert(task:check(idx))
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  for _, r in ipairs { { idx, 1e-3, 0 }, { 3, 5e-3, 0 }, { 11, 1e-4, 4 } } do   -- the last failed
    f:write(json.encode { input = { env.target, "conv2d_packed.vta", args, {} },
      config = { index = r[1], code_hash = json.null, entity = task:entity(r[1]) },
      result = { { r[2] }, r[3], 0.1, 0 }, version = 0.2, tvm_version = "0.8.0" }, "\n")
  end
  f:close()
  local tophub = require("tunelua.autotvm.tophub").dir() .. "/vta_v0.10.log"
  local pick = vta_groups.config_picker { log = path, tophub = tophub }
  local i, src = pick(task, { args = args })
  assert(i == idx and src == "tuned", string.format("%s %s", i, src))
  os.remove(path)
  -- no log: TopHub has this resnet18_v1 layer
  i, src = vta_groups.config_picker { tophub = tophub } (task, { args = args })
  assert(src == "tophub" and i > 0 and task:check(i), src)
  -- neither: config 0
  local small = { { "TENSOR", { 1, 2, 8, 8, 1, 16 }, "int8" }, { "TENSOR", { 2, 2, 3, 3, 16, 16 }, "int8" },
                  { 1, 1 }, { 1, 1 }, { 1, 1 }, "NCHW1n16c", "int32" }
  i, src = pick(vta.task(env, small), { args = small })
  assert(i == 0 and src == "default")
end

-- ---- bad input ----------------------------------------------------------------------------
do
  local ok, err = pcall(executor.build, relay.Module(relay.var("x", { shape = { 1 }, dtype = "int8" })),
                        { target = "llvm", quiet = true, vta = { env = "pynq" } })
  assert(not ok and tostring(err):find("opts.vta must be", 1, true), tostring(err))
  -- a VTA configuration the network does not fit: a weight buffer of one 16x16 matrix holds
  -- no 3x3 kernel tile, even at config 0; the error names the group's layer and the buffer
  local json = require "tunelua.json"
  local f = assert(io.open(vta.config_path()))
  local cfg = json.decode(f:read("*a"))
  f:close()
  cfg.LOG_WGT_BUFF_SIZE = 8
  local small = vta.get_env { text = json.encode(cfg), name = "small_wgt.json" }
  local mod, params = networks.get_network("resnet18_v1", { image_size = 32 })
  local pmod = graph_pack.graph_pack(quantize.quantize(mod, params), { env = small })
  ok, err = pcall(executor.build, pmod, { target = "llvm", quiet = true, vta = { env = small } })
  assert(not ok and tostring(err):find("VTA group 0 (nn.conv2d layer resnetv10_stage1_conv0, data " ..
    "1x4x8x8x1x16, kernel 4x4x3x3x16x16, config 0): conv2d_packed.vta: the tile needs 9 weight " ..
    "elements x 1 threads, more than the 1 of the weight buffer", 1, true), tostring(err))
  -- a config index the layer's space lacks: named with the layer too
  ok, err = pcall(executor.build, pmod, { target = "llvm", quiet = true,
                                          vta = { env = env, config = function() return 99999999, "given" end } })
  assert(not ok and tostring(err):find("nn.conv2d layer resnetv10_stage1_conv0", 1, true), tostring(err))
end
print("test_vta_network: ok")
