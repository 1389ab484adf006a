-- conv2d_NCHWc_winograd.x86 (targets/x86/winograd.c, core/topi/winograd_nchwc.c) and the x86
-- graphs that run 3x3 stride-1 convs as Winograd (tunelua.graph.winograd_x86):
--   * random configs of F(2x2), F(4x4) and F(6x6) on random data against the reference conv,
--     including output sizes that are not multiples of the tile, a layer without padding, rows
--     of tiles that topi pads to a multiple of 8 (no divisor from 4 to 16) and AVX2 code
--     (8-lane blocks);
--     Winograd's float error grows with the tile and the reduction, so the tolerance is
--     eps32 * 9C * kappa(m) * max|x| * max|w| with kappa = 16, 64, 256 for m = 2, 4, 6 (the
--     measured errors sit 10-40x below it; a wrong coefficient is off by O(|y|));
--   * a short tuning run with check_correctness (blocked configs against references of their
--     own blocks and tile);
--   * a graph with the fused endings (bias, residual add, relu) and resnet-18 / vgg-16 at
--     32x32 with winograd = "always" against the reference interpreter;
--   * the choice: "auto" picks Winograd by the shape rule, "never" keeps the direct conv, the
--     first conv (reading the graph's NCHW input in place) stays direct; bad input errors.
local tl = require "tunelua"
local core = require "tunelua.core"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local winograd = require "tunelua.graph.winograd_x86"
local reference = require "networks.reference"
local networks = require "networks"

local TEMPLATE = "conv2d_NCHWc_winograd.x86"
local util = require "tests.lua.lib.util"
local f32, block_data = util.f32, util.block_data
local function numel(sh) local n = 1; for _, d in ipairs(sh) do n = n * d end; return n end

local KAPPA = { [2] = 16, [4] = 64, [6] = 256 }
local EPS32 = 1.2e-7

local function max_abs(a)
  local p, m = f32(a), 0
  for i = 0, numel(a:shape()) - 1 do m = math.max(m, math.abs(p[i])) end
  return m
end

-- random configs of each tile size of the task (C, H, O, padding P) against the reference conv
local function check_task(C, H, O, P, nconfigs, target)
  target = target or "llvm"
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, 3, 3 }, "float32" }, { 1, 1 },
                 { P, P, P, P }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create(TEMPLATE, args, target)
  assert(task:set_blocked(true) == true, "the winograd task has a blocked form")
  local OH = H + 2 * P - 2
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local Wt = te.placeholder({ O, C, 3, 3 }, "float32", "W")
  local Out = topi.nn.conv2d(A, Wt, { strides = 1, padding = { P, P, P, P }, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 11 })
  local w = tl.nd.random_uniform({ O, C, 3, 3 }, { seed = 12 })
  local ref = tl.nd.empty({ 1, O, OH, OH })
  ref_f(a, w, ref)
  local tol = EPS32 * 9 * C * max_abs(a) * max_abs(w)
  local sp = task.config_space
  local kt, ko
  for k, kb in ipairs(sp:knobs()) do
    if kb.name == "tile_size" then kt = k end
    if kb.name == "tile_order" then ko = k end
  end
  assert(kt and ko, "the space has tile_size and tile_order knobs")
  math.randomseed(C * 1000 + H)
  local seen = {}
  for ti = 0, 2 do
    -- the fallback with each tile size in each tile order (rows of a block, blocks of a row,
    -- a block's GEMM over the whole image, rows in parallel with their transforms), then
    -- random configs
    for c = -3, nconfigs do
      local digits = sp:point2knob(c <= 0 and sp:knob2point(sp:fallback_digits()) or math.random(0, #sp - 1))
      digits[kt] = ti
      if c <= 0 then digits[ko] = c + 3 end
      local idx = sp:knob2point(digits)
      local s, targs, shapes = task:instantiate(idx)
      local m = winograd.tile_size(task, idx)
      local ib, ob = shapes[1][5], shapes[3][5]
      assert(#shapes[1] == 5 and #shapes[2] == 5 and #shapes[3] == 5, "5-D args")
      assert(shapes[2][1] == m + 2 and shapes[2][2] == m + 2 and shapes[2][3] * ob == O and shapes[2][4] == C,
             "the transformed weight is [m+2, m+2, K/ob, C, ob]")
      local f = tl.build(s, targs, target)
      local ab = tl.nd.empty(shapes[1])
      block_data(a, 1, C, H, H, ib, ab)
      local u = winograd.weight(w, m, ob)
      local out = tl.nd.empty(shapes[3])
      f(ab, u, out)
      local want = tl.nd.empty(shapes[3])
      block_data(ref, 1, O, OH, OH, ob, want)
      local po, pw, err = f32(out), f32(want), 0
      for i = 0, numel(shapes[3]) - 1 do err = math.max(err, math.abs(po[i] - pw[i])) end
      assert(err <= tol * KAPPA[m], string.format("C=%d H=%d O=%d P=%d F(%d) config %d: max error %g > %g", C, H,
                                                   O, P, m, idx, err, tol * KAPPA[m]))
      seen[m] = true
    end
  end
  assert(seen[2] and seen[4] and seen[6], "every tile size ran")
  return task
end

local t16 = check_task(16, 9, 32, 1, 2)   -- 9x9 output: F(4), F(6) tiles run past the edge
check_task(32, 8, 48, 1, 2)               -- 3 blocks of 16 output channels
check_task(8, 12, 16, 0, 1)               -- no padding: 10x10 output
check_task(8, 74, 16, 1, 1)               -- rows of 37 (F(2)) and 19 (F(4)) tiles: padded to 40 and 24
check_task(16, 10, 24, 1, 1, "llvm -mcpu=core-avx2")   -- 8-lane vectors, 16 registers
check_task(16, 7, 32, 1, 1, "llvm -mcpu=core-avx2")    -- its fallback: two vectors by rows of 4 tiles

-- the fallback's tile order (blocked task, AVX-512 target: 16 lanes, 32 registers): the rows
-- of tiles in parallel with each row's input transform kept in cache (3) from 8 rows of tiles;
-- a block's GEMM over the whole image (2) on 2-7 rows where the blocks give at least 4
-- parallel chunks; else the rows of a block one after the other (0)
local function fallback_order(C, H, O, target)
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, 3, 3 }, "float32" }, { 1, 1 },
                 { 1, 1, 1, 1 }, { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create(TEMPLATE, args, target or "llvm -mcpu=skylake-avx512")
  assert(task:set_blocked(true) == true, "the winograd task has a blocked form")
  local sp = task.config_space
  return math.floor(task:config(sp:knob2point(sp:fallback_digits()))["tile_order"].val)
end
for _, c in ipairs({
  { 64, 224, 64, 3, "F(4x4), 224x224x64: 56 rows" },
  { 256, 56, 256, 3, "F(4x4), 56x56x256: 14 rows" },
  { 64, 56, 64, 3, "F(4x4), 56x56x64: 14 rows" },
  { 96, 35, 96, 3, "F(4x4), 35x35x96: 9 rows" },
  { 512, 28, 512, 2, "F(4x4), 28x28x512: 7 rows, 16 blocks" },
  { 128, 28, 128, 2, "F(4x4), 28x28x128: 7 rows, 4 blocks" },
  { 256, 14, 256, 2, "F(2x2), 14x14x256: 7 rows, 8 blocks" },
  { 64, 14, 64, 0, "F(2x2), 14x14x64: 7 rows, 2 blocks" },
  { 64, 2, 64, 0, "F(2x2), 2x2: 1 row" },
}) do
  local got = fallback_order(c[1], c[2], c[3])
  assert(got == c[4], string.format("fallback tile_order of %s: want %d, got %d", c[5], c[4], got))
end
assert(fallback_order(512, 7, 512, "llvm -mcpu=core-avx2") == 2, "AVX2, F(2x2), 7x7x512: 4 rows, 32 blocks of 16")

-- tuning: blocked configs measured and checked against references of their own blocks and tile
do
  local measure_option = autotvm.measure_option({
    builder = autotvm.LocalBuilder(),
    runner = autotvm.LocalRunner({ number = 1, ["repeat"] = 1, check_correctness = true }),
  })
  local results = {}
  autotvm.tuner.RandomTuner(t16):tune({ n_trial = 4, measure_option = measure_option,
    callbacks = { function(_, inputs, res) for i = 1, #inputs do results[#results + 1] = res[i] end end } })
  assert(#results == 4, "expected 4 measurements, got " .. #results)
  for _, r in ipairs(results) do
    assert(r.error_no == 0, "a winograd config failed its measurement: " .. tostring(r.error_msg))
  end
end

-- graphs: kernels of each step, the Winograd ones counted
local function winograd_steps(lib)
  local n = 0
  for _, st in ipairs(lib.steps) do
    if st.kernel and st.kernel.key and st.kernel.key:find(TEMPLATE, 1, true) then n = n + 1 end
  end
  return n
end

-- The graph's output against the reference interpreter: rtol 1e-4 and, for outputs that
-- cancel to near zero, atol = eps32 * 9C * kappa(4) * max|reference| (C the widest conv input).
local function check_graph(mod, params, inputs, opts, C, what)
  local o = { target = "llvm", params = params, quiet = true, tophub = false }
  for k, v in pairs(opts) do o[k] = v end
  local lib = executor.build(mod, o)
  local m = executor.GraphModule(lib)
  m:set_input(inputs)
  m:run()
  local ref = reference.run(mod, params, inputs)
  local dmax = 0
  for _, v in ipairs(ref[1]:flat()) do dmax = math.max(dmax, math.abs(v)) end
  local ok, msg = reference.compare(m:get_output(0), ref[1], { rtol = 1e-4, atol = EPS32 * 9 * C * KAPPA[4] * dmax })
  if not ok then error(what .. ": " .. msg, 2) end
  return lib
end

-- conv (in place, direct) -> conv + bias + residual add + relu, 32 channels at H x H
local function two_convs(Cin, C, H)
  local dv = relay.var("data", { shape = { 1, Cin, H, H } })
  local w1 = relay.var("w1", { shape = { C, Cin, 3, 3 } })
  local w2 = relay.var("w2", { shape = { C, C, 3, 3 } })
  local b = relay.var("b", { shape = { C } })
  local y = relay.nn.relu(relay.nn.conv2d(dv, w1, { padding = { 1, 1, 1, 1 }, channels = C, kernel_size = { 3, 3 } }))
  local z = relay.nn.bias_add(relay.nn.conv2d(y, w2, { padding = { 1, 1, 1, 1 }, channels = C, kernel_size = { 3, 3 } }), b)
  local mod = relay.Module(relay.Function({ dv, w1, w2, b }, relay.nn.relu(relay.add(z, y))))
  local params = { w1 = tl.nd.random_uniform({ C, Cin, 3, 3 }, { seed = 2, low = -1, high = 1 }),
                   w2 = tl.nd.random_uniform({ C, C, 3, 3 }, { seed = 3, low = -1, high = 1 }),
                   b = tl.nd.random_uniform({ C }, { seed = 4 }) }
  return mod, params, { data = tl.nd.random_uniform({ 1, Cin, H, H }, { seed = 1 }) }
end

do
  local mod, params, inputs = two_convs(16, 32, 14)
  -- the fused endings run after the output transform; the first conv reads the input in place: direct
  local lib = check_graph(mod, params, inputs, { winograd = "always" }, 32, "always")
  assert(winograd_steps(lib) == 1, "always: the second conv runs as winograd, got " .. winograd_steps(lib))
  lib = check_graph(mod, params, inputs, { winograd = "auto" }, 32, "auto")
  assert(winograd_steps(lib) == 1, "auto: 32 channels at 14x14 pick winograd")
  lib = check_graph(mod, params, inputs, { winograd = "never" }, 32, "never")
  assert(winograd_steps(lib) == 0, "never: no winograd")
  lib = check_graph(mod, params, inputs, { winograd = "always", layouts = false }, 32, "layouts = false")
  assert(winograd_steps(lib) == 0, "an NCHW graph (layouts = false) has no blocked data: direct")
  mod, params, inputs = two_convs(16, 32, 7)
  -- 7x7: direct on 32 vector registers (the host's target when it has AVX-512), Winograd on
  -- AVX2's 16 (the target's own count decides)
  local host_regs = require("tunelua.target").parse("llvm").registers
  lib = check_graph(mod, params, inputs, { winograd = "auto" }, 32, "auto 7x7")
  assert(winograd_steps(lib) == (host_regs < 32 and 1 or 0),
         string.format("auto 7x7 on the host's %d registers: got %d winograd convs", host_regs, winograd_steps(lib)))
  lib = check_graph(mod, params, inputs, { winograd = "auto", target = "llvm -mcpu=core-avx2" }, 32, "auto 7x7 avx2")
  assert(winograd_steps(lib) == 1, "auto: 7x7 on AVX2 (16 registers) picks winograd")
end

-- the rule and the order, by facts
do
  local f = winograd.conv_facts({ op = "nn.conv2d", attrs = { strides = { 1, 1 }, padding = { 1, 1 } },
    args = { { kind = "call", type = { shape = { 1, 64, 56, 56 }, dtype = "float32" } },
             { kind = "const", type = { shape = { 64, 64, 3, 3 }, dtype = "float32" } } } })
  assert(f and f.C == 64 and f.K == 64 and f.H == 56, "conv facts of a 3x3 conv")
  assert(winograd.use_winograd(f), "64x56x56 -> 64 uses winograd")
  assert(not winograd.use_winograd({ C = 512, K = 512, H = 7, W = 7 }), "7x7 stays direct")
  assert(not winograd.use_winograd({ C = 512, K = 512, H = 7, W = 7 }, 32), "7x7 direct on 32 registers")
  assert(winograd.use_winograd({ C = 512, K = 512, H = 7, W = 7 }, 16), "7x7 winograd on 16 registers")
  assert(not winograd.use_winograd({ C = 512, K = 512, H = 4, W = 4 }, 16), "4x4 direct on 16 registers")
  assert(not winograd.use_winograd({ C = 16, K = 512, H = 7, W = 7 }, 16), "few channels stay direct")
  -- the order follows the registers: a 7x7 conv gets the Winograd template first on 16 only
  local node = { op = "nn.conv2d", attrs = { strides = { 1, 1 }, padding = { 1, 1 } },
    args = { { kind = "call", type = { shape = { 1, 512, 7, 7 }, dtype = "float32" } },
             { kind = "const", type = { shape = { 512, 512, 3, 3 }, dtype = "float32" } } } }
  local impls = { { name = "conv2d_NCHWc.x86" }, { name = winograd.TEMPLATE } }
  local none = function() return false end
  assert(winograd.order(impls, node, "auto", none, 16)[1].name == winograd.TEMPLATE, "16 registers: winograd first")
  assert(winograd.order(impls, node, "auto", none, 32)[1].name == "conv2d_NCHWc.x86", "32 registers: direct first")
  assert(#winograd.order(impls, node, "auto", none, 32) == 1, "32 registers: winograd not offered on 7x7")
  assert(winograd.conv_facts({ op = "nn.conv2d", attrs = { strides = { 2, 2 } },
    args = { { type = { shape = { 1, 64, 56, 56 } } }, { type = { shape = { 64, 64, 3, 3 } } } } }) == nil,
    "stride 2 has no winograd")
end

-- bad input
do
  local ok, err = pcall(executor.build, relay.Module(relay.Function({}, relay.const(tl.nd.empty({ 1 })))),
                        { target = "llvm", winograd = "sometimes" })
  assert(not ok and tostring(err):find("winograd must be \"auto\", \"always\" or \"never\", got sometimes", 1, true),
         "a bad winograd mode is named: " .. tostring(err))
  ok, err = pcall(winograd.weight, tl.nd.empty({ 4, 4, 3, 3 }), 3, 4)
  assert(not ok and tostring(err):find("tile size must be 2, 4 or 6, got 3", 1, true), tostring(err))
  ok, err = pcall(winograd.weight, tl.nd.empty({ 4, 4, 5, 5 }), 4, 4)
  assert(not ok and tostring(err):find("expected a float32 3x3 kernel", 1, true), tostring(err))
  ok, err = pcall(winograd.weight, tl.nd.empty({ 6, 4, 3, 3 }), 4, 4)
  assert(not ok and tostring(err):find("must divide K = 6", 1, true), tostring(err))
end

-- networks at 32x32 with every 3x3 stride-1 conv that has blocked data as winograd
for _, net in ipairs({ { "resnet-18", 13 }, { "vgg-16", 12 } }) do
  local mod, params, ishape = networks.get_network(net[1], { layout = "NCHW", image_size = 32, num_classes = 10 })
  local lib = check_graph(mod, params, { data = tl.nd.random_uniform(ishape, { seed = 3 }) }, { winograd = "always" },
                          512, net[1])
  assert(winograd_steps(lib) == net[2], string.format("%s: expected %d winograd convs, got %d", net[1], net[2],
                                                        winograd_steps(lib)))
  print(string.format("%-10s 32x32: %d winograd convs, matches the reference", net[1], winograd_steps(lib)))
end

print("test_winograd_x86: ok")
