-- The parallel loops of the x86 templates give every thread work on layers with few chunks
-- of channels (targets/x86/templates.c tl_x86_border_rows, targets/x86/winograd.c):
--   * conv2d_NCHWc.x86 on 32 registers cuts the output rows into chunks; where the rows
--     have no divisor giving enough chunks (inception's 17x17 on 5 blocks of 32 output
--     channels), a cut that does not divide them: 10 parallel iterations, not 5 (3 against
--     2 on two threads); an even count of channel blocks (6) keeps its loop of 6, and a
--     divisor that gives 8 chunks is still taken (56x56 on 2 blocks: 2 x 4 chunks of 14 rows);
--   * conv2d_NCHWc_winograd.x86 on one block of channels and a prime count of tile rows
--     (147x147: 37 rows of 4x4 tiles): the fallback runs the 37 rows in parallel; in
--     tile_order 0 the input transform cuts the tiles of a row too: a parallel loop of 8,
--     where it was one serial pass;
--   * numerics of both against topi's conv2d on random data (the cut's last chunk is short).
local tl = require "tunelua"
local te, topi = tl.te, tl.topi
local autotvm = require "tunelua.autotvm"
local winograd = require "tunelua.graph.winograd_x86"
local util = require "tests.lua.lib.util"
local f32, block_data, block_kernel = util.f32, util.block_data, util.block_kernel

local AVX512 = "llvm -mcpu=skylake-avx512"

local function task_of(tmpl, C, H, O, KH, KW, P)
  local args = { { "TENSOR", { 1, C, H, H }, "float32" }, { "TENSOR", { O, C, KH, KW }, "float32" }, { 1, 1 }, P,
                 { 1, 1 }, "NCHW", "NCHW", "float32" }
  local task = autotvm.task.create(tmpl, args, AVX512)
  assert(task:set_blocked(true) == true, tmpl .. ": expected a blocked form")
  return task
end

-- the extents of the lowered function's parallel loops, in order
local function parallel_extents(task, index)
  local s, targs = task:instantiate(index or -1)
  local text = tl.lower(s, targs):text()
  local ext = {}
  for e in text:gmatch("parallel %([^,]+, 0, (%d+)%)") do ext[#ext + 1] = tonumber(e) end
  return ext, text
end

local function numel(sh) local n = 1; for _, d in ipairs(sh) do n = n * d end; return n end

-- [O, C, KH, KW] -> [O/ob, C, KH, KW, ob]

-- the task's config index (nil: the fallback) on random data against topi's conv2d; max |error| <= tol
local function check_numerics(task, what, C, H, O, KH, KW, P, wino, index)
  index = index or -1
  local OH, OW = H + P[1] + P[3] - KH + 1, H + P[2] + P[4] - KW + 1
  local A = te.placeholder({ 1, C, H, H }, "float32", "A")
  local Wt = te.placeholder({ O, C, KH, KW }, "float32", "W")
  local Out = topi.nn.conv2d(A, Wt, { strides = 1, padding = P, dilation = 1 })
  local ref_f = tl.build(topi.default_schedule({ Out }, "cpu"), { A, Wt, Out }, "c")
  local a = tl.nd.random_uniform({ 1, C, H, H }, { low = -1, high = 1, seed = 11 })
  local w = tl.nd.random_uniform({ O, C, KH, KW }, { low = -1, high = 1, seed = 12 })
  local ref = tl.nd.empty({ 1, O, OH, OW })
  ref_f(a, w, ref)
  local s, targs, shapes = task:instantiate(index)
  local f = tl.build(s, targs, AVX512)
  local ib, ob = shapes[1][5], shapes[#shapes][5]
  local ab = tl.nd.empty(shapes[1])
  block_data(a, 1, C, H, H, ib, ab)
  local wb
  if wino then
    wb = winograd.weight(w, winograd.tile_size(task, index), ob)
  else
    wb = tl.nd.empty(shapes[2])
    block_kernel(w, O, C, KH, KW, ob, wb)
  end
  local out = tl.nd.empty(shapes[#shapes])
  f(ab, wb, out)
  local want = tl.nd.empty(shapes[#shapes])
  block_data(ref, 1, O, OH, OW, ob, want)
  local po, pw, err = f32(out), f32(want), 0
  for i = 0, numel(shapes[#shapes]) - 1 do err = math.max(err, math.abs(po[i] - pw[i])) end
  -- float32 sums of C*KH*KW products of values in [-1, 1] (Winograd: its transforms' growth)
  local tol = 1.2e-7 * C * KH * KW * (wino and 64 or 4)
  assert(err <= tol, string.format("%s: max error %g > %g", what, err, tol))
end

-- 160 -> 160, 7x1, 17x17 (inception_v3): 5 blocks of 32 output channels by 2 row chunks
do
  local P = { 3, 0, 3, 0 }
  local task = task_of("conv2d_NCHWc.x86", 160, 17, 160, 7, 1, P)
  local ext, text = parallel_extents(task)
  assert(#ext == 1 and ext[1] == 10,
         "160 -> 160 7x1 on 17x17: expected one parallel loop of 10 (5 channel blocks x 2 row chunks), got {" ..
         table.concat(ext, ", ") .. "}:\n" .. text)
  check_numerics(task, "160 -> 160 7x1 17x17", 160, 17, 160, 7, 1, P)
  -- 1x7 on 17x17 into 5 blocks as well, checked the same way
  P = { 0, 3, 0, 3 }
  task = task_of("conv2d_NCHWc.x86", 160, 17, 160, 1, 7, P)
  check_numerics(task, "160 -> 160 1x7 17x17", 160, 17, 160, 1, 7, P)
end

-- 192 -> 192, 7x1, 17x17: 6 blocks, an even count: one chunk of rows per block, as before
do
  local ext = parallel_extents(task_of("conv2d_NCHWc.x86", 192, 17, 192, 7, 1, { 3, 0, 3, 0 }))
  assert(#ext == 1 and ext[1] == 6, "192 -> 192 7x1 on 17x17: expected a parallel loop of 6, got {" ..
         table.concat(ext, ", ") .. "}")
end

-- 64 -> 64, 3x3, 56x56 (direct, not Winograd: the conv template itself): 2 blocks x 4 chunks of 14 rows
do
  local ext = parallel_extents(task_of("conv2d_NCHWc.x86", 64, 56, 64, 3, 3, { 1, 1, 1, 1 }))
  assert(#ext == 1 and ext[1] == 8, "64 -> 64 3x3 on 56x56: expected a parallel loop of 8, got {" ..
         table.concat(ext, ", ") .. "}")
end

-- Winograd 32 -> 32 on 147x147 (inception_v3): 37 rows of 4x4 tiles, a prime, on one block.
-- The fallback (tile_order 3) runs the rows in parallel, each with its input transform: one
-- loop of 37. In tile_order 0 the input transform runs at root and cuts the tiles of a row
-- too: its parallel loop is 8 wide, then the output's.
do
  local P = { 1, 1, 1, 1 }
  local task = task_of("conv2d_NCHWc_winograd.x86", 32, 147, 32, 3, 3, P)
  local ext, text = parallel_extents(task)
  assert(#ext == 1 and ext[1] == 37,
         "Winograd 32 -> 32 on 147x147, fallback: expected one parallel loop of 37 rows of tiles, got {" ..
         table.concat(ext, ", ") .. "}:\n" .. text)
  check_numerics(task, "Winograd 32 -> 32 147x147", 32, 147, 32, 3, 3, P, true)
  local sp, ko = task.config_space
  for k, kb in ipairs(sp:knobs()) do if kb.name == "tile_order" then ko = k end end
  local digits = sp:fallback_digits()
  digits[ko] = 0
  local index = sp:knob2point(digits)
  assert(math.floor(task:config(index)["tile_order"].val) == 0, "the config runs tile_order 0")
  ext, text = parallel_extents(task, index)
  assert(#ext == 2 and ext[1] == 8,
         "Winograd 32 -> 32 on 147x147, tile_order 0: expected the input transform's parallel loop of 8 and the " ..
         "output's, got {" .. table.concat(ext, ", ") .. "}:\n" .. text)
  check_numerics(task, "Winograd 32 -> 32 147x147, tile_order 0", 32, 147, 32, 3, 3, P, true, index)
end

print("test_x86_parallel_chunks: ok")
