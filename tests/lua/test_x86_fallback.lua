-- The x86 templates' fallback configs (the configs a layer runs on when no record covers it)
-- and the schedule choices around them, against the reference interpreter:
--  * conv2d_NCHWc.x86 on 32 registers: two vectors of output channels by up to 14 positions,
--    kw unrolled around rows of up to 8; a 17-wide output (no divisor of 7-14) takes two
--    vectors too, its rows in guarded tiles of 9 and 8 positions (3x3, 1x1 and stride-2 convs
--    to 17 and 19 wide match the reference);
--    on 16 registers (AVX2) one 8-lane vector, a 3x3 conv on rows of 7 positions with kw
--    unrolled where the width is a multiple of 7 (and its input not the 3-channel image);
--  * depthwise_conv2d_NCHWc.x86 in the same 32-channel block;
--  * widths with no divisor from 4 to the register budget (primes) run in guarded tiles of
--    8 positions: 3x3, 1x1 and strided convs of such widths match the reference;
--  * dense_nopack.x86's fallback is deployed (no default-schedule dense in a network);
--  * a 1x1 conv over a large input with a small weight runs its parallel loop over rows only
--    (the output-channel chunks inside it), others over chunks and rows; both match the
--    reference inside a network.
local tl = require "tunelua"
local autotvm = require "tunelua.autotvm"
local relay = require "tunelua.relay"
local executor = require "tunelua.graph.executor"
local reference = require "networks.reference"
local util = require "tests.lua.lib.util"

local function T(shape) return { "TENSOR", shape, "float32" } end
local function fallback(name, args, target)
  return tostring(autotvm.task.create(name, args, target).config_space:get(-1))
end
local function conv_args(C, H, O, K, S, P)
  return { T { 1, C, H, H }, T { O, C, K, K }, { S, S }, { P, P, P, P }, { 1, 1 }, "NCHW", "NCHW", "float32" }
end
local function has(s, pat) assert(s:find(pat, 1, true), s .. " lacks " .. pat) end

local AVX512, AVX2 = "llvm -mcpu=skylake-avx512", "llvm -mcpu=core-avx2"
do
  -- {conv args, target, what its fallback config holds}
  local cases = {
    { conv_args(64, 56, 64, 3, 1, 1), AVX512,
      "('tile_ic', [-1, 32]), ('tile_oc', [-1, 32]), ('tile_ow', [-1, 14]), ('unroll_kw', False)" },
    { conv_args(512, 7, 512, 3, 1, 1), AVX512, "('tile_oc', [-1, 32]), ('tile_ow', [-1, 7]), ('unroll_kw', True)" },
    { conv_args(64, 56, 128, 1, 2, 0), AVX512, "('tile_oc', [-1, 32]), ('tile_ow', [-1, 14]), ('tile_oh', 1)" },
    { conv_args(768, 17, 192, 1, 1, 0), AVX512, "('tile_oc', [-1, 32]), ('tile_ow', [-1, 17])" },
    { conv_args(64, 56, 64, 3, 1, 1), AVX2, "('tile_oc', [-1, 8]), ('tile_ow', [-1, 7]), ('unroll_kw', True)" },
    { conv_args(128, 28, 256, 3, 2, 1), AVX2, "('tile_oc', [-1, 8]), ('tile_ow', [-1, 7]), ('unroll_kw', True)" },
    -- widths without a factor of 7, the 3-channel stem and 1x1 convs keep 14-position rows
    { conv_args(192, 17, 320, 3, 2, 0), AVX2, "('tile_ow', [-1, 8]), ('unroll_kw', False)" },
    { conv_args(3, 224, 32, 3, 2, 1), AVX2, "('tile_ow', [-1, 14]), ('unroll_kw', False)" },
    { conv_args(256, 28, 256, 1, 1, 0), AVX2, "('tile_oc', [-1, 8]), ('tile_ow', [-1, 14]), ('tile_oh', 1)" },
  }
  for _, c in ipairs(cases) do has(fallback("conv2d_NCHWc.x86", c[1], c[2]), c[3]) end
  local d = fallback("depthwise_conv2d_NCHWc.x86",
                     { T { 1, 64, 56, 56 }, T { 64, 1, 3, 3 }, { 1, 1 }, { 1, 1, 1, 1 }, { 1, 1 }, "float32" }, AVX512)
  has(d, "('tile_oc', [-1, 32]), ('tile_ow', [-1, 8])")
end

-- a 1x1 conv (so the data arrives blocked, as inside a network), then the conv under test
-- with relu, and a dense head: the network against the reference interpreter
local function check(C, H, O, K, S, P, target)
  local dv = relay.var("data", { shape = { 1, C, H, H } })
  local w0 = relay.var("w0", { shape = { C, C, 1, 1 } })
  local wv = relay.var("w", { shape = { O, C, K, K } })
  local OH = math.floor((H + 2 * P - K) / S) + 1
  local wd = relay.var("wd", { shape = { 10, O * OH * OH } })
  local x = relay.nn.conv2d(dv, w0, { channels = C, kernel_size = { 1, 1 } })
  local y = relay.nn.relu(relay.nn.conv2d(x, wv, { strides = { S, S }, padding = { P, P, P, P }, channels = O,
                                                   kernel_size = { K, K } }))
  local z = relay.nn.dense(relay.nn.batch_flatten(y), wd)
  local mod = relay.Module(relay.Function({ dv, w0, wv, wd }, relay.tuple({ y, z })))
  local params = { w0 = tl.nd.random_uniform({ C, C, 1, 1 }, { seed = 3 }),
                   w = tl.nd.random_uniform({ O, C, K, K }, { seed = 2 }),
                   wd = tl.nd.random_uniform({ 10, O * OH * OH }, { seed = 4 }) }
  local lib = executor.build(mod, { target = target, params = params, tophub = false, quiet = true })
  local dense
  for _, k in ipairs(lib.kernels) do
    if k.name:find("dense", 1, true) then dense = k end
  end
  assert(dense and tostring(dense.tuned):find("dense_nopack.x86 fallback", 1, true),
         "the dense step does not run dense_nopack.x86's fallback: " .. tostring(dense and dense.tuned))
  local m = executor.GraphModule(lib)
  local a = tl.nd.random_uniform({ 1, C, H, H }, { seed = 1 })
  m:set_input("data", a)
  m:run()
  local ref = reference.run(mod, params, { data = a })
  reference.assert_close(m:get_output(0), ref[1], { rtol = 1e-4 })
  reference.assert_close(m:get_output(1), ref[2], { rtol = 1e-4 })
end

-- the extents of the parallel loops in a built kernel's C source
local function par_extents(f)
  local t = {}
  for n in f:get_source():gmatch("tlc_parallel%(%(int64_t%)%((%d+)%)") do t[#t + 1] = tonumber(n) end
  assert(#t > 0, "no parallel loop in the kernel")
  return t
end
-- every parallel loop of a blocked task's kernel (config index, -1: the fallback)
-- runs want iterations; returns the kernel and its argument shapes
local function expect_extents(task, index, want, what)
  local s, targs, shapes = task:instantiate(index)
  local f = tl.build(s, targs, "c")
  for _, n in ipairs(par_extents(f)) do assert(n == want, what .. ": expected " .. want .. ", got " .. n) end
  return f, shapes
end
local function task_1x1(C, H, O, target)
  local task = autotvm.task.create("conv2d_NCHWc.x86", conv_args(C, H, O, 1, 1, 0), target)
  assert(task:set_blocked(true), "a blocked form")
  return task
end
expect_extents(task_1x1(128, 56, 128, AVX512), -1, 56,          -- 1.6 MB in, 64 KB weight
               "128 -> 128 on 56x56: a parallel loop over the rows only")
expect_extents(task_1x1(512, 14, 512, AVX512), -1, 16 * 14,     -- 400 KB in
               "512 -> 512 on 14x14: a parallel loop over 16 chunks of 32 by 14 rows")
expect_extents(task_1x1(1024, 56, 512, AVX512), -1, 16 * 56,    -- 2 MB weight
               "1024 -> 512 on 56x56: a parallel loop over 16 chunks of 32 by 56 rows")

-- the row order on other configs of the same task (two rows per tile, other blocks): a
-- parallel loop over pairs of rows, the blocked kernel against the reference conv on random data
do
  local C, H, O = 64, 56, 128
  local task = task_1x1(C, H, O, "llvm")
  local ins, ref = util.reference("conv2d", { { 1, C, H, H }, { O, C, 1, 1 } },
                                  { strides = { 1, 1 }, padding = { 0, 0, 0, 0 }, dilation = { 1, 1 } }, 5)
  local n = 0
  for index = 0, #task.config_space - 1, 11 do
    local cfg = tostring(task:config(index))
    local ic = tonumber(cfg:match("%('tile_ic', %[%-1, (%d+)%]%)"))
    local oc = tonumber(cfg:match("%('tile_oc', %[%-1, (%d+)%]%)"))
    if cfg:find("('tile_oh', 2)", 1, true) and ic >= 8 and oc >= 8 and n < 4 then
      n = n + 1
      local f, shapes = expect_extents(task, index, H / 2, cfg .. ": a parallel loop over row pairs")
      local ab, wb, out, want = tl.nd.empty(shapes[1]), tl.nd.empty(shapes[2]), tl.nd.empty(shapes[3]),
                                tl.nd.empty(shapes[3])
      util.block_data(ins[1], 1, C, H, H, shapes[1][5], ab)
      util.block_kernel(ins[2], O, C, 1, 1, shapes[2][5], wb)
      f(ab, wb, out)
      util.block_data(ref, 1, O, H, H, shapes[3][5], want)
      tl.testing.assert_allclose(out, want, { rtol = 1e-4, atol = 1e-3 })
    end
  end
  assert(n == 4, "expected 4 configs with two rows per tile, found " .. n)
end

local target = "llvm"
check(64, 56, 128, 1, 1, 0, target)   -- 1x1 over 0.8 MB: rows outside the channel chunks
check(16, 39, 32, 3, 1, 0, target)    -- 37 wide: guarded tiles of 8
check(16, 73, 48, 1, 1, 0, target)    -- 1x1 on 73 wide
check(8, 141, 32, 3, 2, 1, target)    -- stride 2 to 71 wide
check(32, 14, 64, 3, 1, 1, target)    -- 14 wide, two vectors (where the host has 32 registers)
check(32, 17, 64, 1, 1, 0, target)    -- 1x1 on 17 wide: two vectors, tiles of 9 + 8 (32 registers)
check(32, 35, 64, 3, 2, 0, target)    -- stride 2 to 17 wide
check(32, 19, 64, 3, 1, 1, target)    -- 19 wide: tiles of 10 + 9
if require("tunelua.target").parse(AVX2):check_host() then
  check(16, 39, 32, 3, 1, 0, AVX2)
  check(16, 28, 32, 3, 2, 1, AVX2)    -- stride 2 to 14 wide: rows of 7, kw unrolled
  check(16, 14, 16, 3, 1, 1, AVX2)    -- 14 wide, stride 1
end
print("test_x86_fallback: ok")
