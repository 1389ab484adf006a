-- The x86 conv tasks measure the kernel the network runs: a task set blocked
-- (task:set_blocked, on for every task extraction finds where the graph runs blocked)
-- instantiates each config on NCHW[ib]c data and an OIHW[ob]o kernel with the config's
-- blocks and computes NCHW[ob]c, with no packing or unpacking stage. Random configs of a
-- conv2d and a depthwise task are checked against the reference conv on random data (the
-- blocked inputs and output converted in Lua); a short tuning run with check_correctness
-- measures blocked configs against references of their own blocks; extraction sets the
-- tasks blocked unless layouts = false.
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"

local util = require "tests.lua.lib.util"
local block_data, block_kernel = util.block_data, util.block_kernel

local function check_task(name, C, H, O, K, S, P, depthwise, nconfigs)
  local args = { { "TENSOR", { 1, C, H, H }, "float32" },
                 { "TENSOR", depthwise and { C, 1, K, K } or { O, C, K, K }, "float32" }, { S, S }, { P, P, P, P },
                 { 1, 1 } }
  if depthwise then args[6] = "float32" else args[6], args[7], args[8] = "NCHW", "NCHW", "float32" end
  local task = autotvm.task.create(name, args, "llvm")
  assert(task:set_blocked(true) == true, name .. ": expected a blocked form")
  local OH = math.floor((H + 2 * P - K) / S) + 1
  local I = depthwise and 1 or C
  -- the reference on NCHW data
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local Wt = te.placeholder({ O, I, K, K }, "float32", "W")
  local Out = (depthwise and topi.nn.depthwise_conv2d or topi.nn.conv2d)(A, Wt,
    { strides = S, padding = { P, P, P, P }, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 11 })
  local w = tl.nd.random_uniform({ O, I, K, K }, { seed = 12 })
  local ref = tl.nd.empty({ 1, O, OH, OH })
  ref_f(a, w, ref)
  local n = #task.config_space
  local idx = { -1 }
  math.randomseed(7)
  for _ = 1, nconfigs do idx[#idx + 1] = math.random(0, n - 1) end
  local seen = {}
  for _, i in ipairs(idx) do
    local s, targs, shapes = task:instantiate(i)
    local ib, ob = shapes[1][5], shapes[2][5]
    assert(#shapes[1] == 5 and #shapes[2] == 5 and #shapes[3] == 5,
           string.format("%s config %d: expected 5-D args, got %d-D, %d-D, %d-D", name, i, #shapes[1],
                         #shapes[2], #shapes[3]))
    assert(shapes[1][2] * ib == C and shapes[2][1] * ob == O and shapes[3][5] == ob and shapes[3][2] * ob == O,
           name .. ": the blocked shapes disagree with the channels")
    seen[ib .. "/" .. ob] = true
    local f = tl.build(s, targs, "c")
    local ab = tl.nd.empty(shapes[1])
    local wb = tl.nd.empty(shapes[2])
    block_data(a, 1, C, H, H, ib, ab)
    block_kernel(w, O, I, K, K, ob, wb)
    local ob_out = tl.nd.empty(shapes[3])
    f(ab, wb, ob_out)
    local want = tl.nd.empty(shapes[3])
    block_data(ref, 1, O, OH, OH, ob, want)
    tl.testing.assert_allclose(ob_out, want, { rtol = 1e-4, atol = 1e-4 })
  end
  local nseen = 0
  for _ in pairs(seen) do nseen = nseen + 1 end
  assert(nseen >= 2, name .. ": the random configs should cover more than one channel block")
  return task
end

local conv = check_task("conv2d_NCHWc.x86", 16, 9, 32, 3, 1, 1, false, 6)
check_task("conv2d_NCHWc.x86", 8, 8, 16, 1, 2, 0, false, 4)
check_task("depthwise_conv2d_NCHWc.x86", 32, 10, 32, 3, 2, 1, true, 5)

-- a 1x1 conv over 7-wide rows: on 32 vector registers its fallback tile takes two chunks of
-- output channels (targets/x86/templates.c, paired tiles; the second chunk's last kernel
-- vector read at each use), checked here against the reference where the host runs it
do
  local paired = check_task("conv2d_NCHWc.x86", 64, 7, 128, 1, 1, 0, false, 3)
  local src = require("tunelua.autotvm.measure").source_of(paired:lower(-1))
  local regs = require("tunelua.target").parse("llvm").registers
  assert((src:find("__asm__ __volatile__", 1, true) ~= nil) == (regs >= 32),
         string.format("a 1x1 conv over 7-wide rows on %d vector registers: the paired tile's reread %s", regs,
                       regs >= 32 and "is missing" or "should not be there"))
end

-- a dtype the blocked form does not take keeps the NCHW form
do
  local t = autotvm.task.create("conv2d_NCHWc.x86", { { "TENSOR", { 1, 8, 6, 6 }, "float32" },
    { "TENSOR", { 8, 8, 3, 3 }, "float32" }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float64" }, "llvm")
  assert(t:set_blocked(true) == false, "an out_dtype other than float32 has no blocked form")
  local _, _, shapes = t:instantiate(-1)
  assert(#shapes[1] == 4, "the NCHW form stays")
end

-- tuning measures blocked configs, each checked against a reference of its own blocks
do
  local measure_option = autotvm.measure_option({
    builder = autotvm.LocalBuilder(),
    runner = autotvm.LocalRunner({ number = 1, ["repeat"] = 1, check_correctness = true }),
  })
  local results = {}
  local tuner = autotvm.tuner.RandomTuner(conv)
  tuner:tune({ n_trial = 4, measure_option = measure_option,
               callbacks = { function(_, inputs, res)
                 for i = 1, #inputs do results[#results + 1] = res[i] end
               end } })
  assert(#results == 4, "expected 4 measurements, got " .. #results)
  for _, r in ipairs(results) do
    assert(r.error_no == 0, "a blocked config failed its measurement: " .. tostring(r.error_msg))
  end
end

-- extraction sets the x86 conv tasks blocked where the graph runs blocked
do
  local dv = relay.var("data", { shape = { 1, 8, 8, 8 } })
  local wv = relay.var("w", { shape = { 16, 8, 3, 3 } })
  local y = relay.nn.conv2d(dv, wv, { padding = { 1, 1, 1, 1 }, channels = 16, kernel_size = { 3, 3 } })
  local mod = relay.Module(relay.Function({ dv, wv }, y))
  local params = { w = tl.nd.random_uniform({ 16, 8, 3, 3 }, { seed = 3 }) }
  local tasks = autotvm.task.extract_from_program(mod, { target = "llvm", params = params, ops = { "nn.conv2d" } })
  assert(#tasks >= 1 and tasks[1].blocked == true, "extracted x86 conv tasks measure the blocked kernel")
  tasks = autotvm.task.extract_from_program(mod, { target = "llvm", params = params, ops = { "nn.conv2d" },
                                                   layouts = false })
  assert(#tasks >= 1 and not tasks[1].blocked, "layouts = false keeps the NCHW form")
end

print("test_x86_blocked_task: ok")
